// Endpoints: creation, connection, data transfer operations.
#include <arpa/inet.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "api.hpp"
#include "softrnic/log.hpp"

namespace softrnic::dat {
namespace {

constexpr DAT_COUNT kDefaultDtos = 256;
constexpr DAT_COUNT kDefaultIov = 4;
constexpr DAT_COUNT kDefaultRd = 4;

// A post or connection call on an endpoint: an invalid state is the endpoint's not being ready.
DAT_RETURN map(Status s) {
  return to_dat(s, {.state = DAT_INVALID_STATE_EP_NOTREADY});
}

DAT_RETURN to_sgl(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, DAT_COUNT max, SgeList& out) {
  if (n < 0 || n > max) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (n > 0 && !iov) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  (void)ep;
  out.clear();
  for (DAT_COUNT i = 0; i < n; ++i)
    out.push_back(Sge{iov[i].lmr_context, iov[i].virtual_address, iov[i].segment_length});
  return DAT_SUCCESS;
}

Ep* live_ep(DAT_EP_HANDLE h) {
  return get<Ep>(h, Kind::ep);
}

}  // namespace

void on_cm_event(Ep* ep, const CmEvent& ev) {
  if (log::enabled(log::Level::debug)) {
    char who[32];
    std::snprintf(who, sizeof who, "EP %p", static_cast<void*>(ep));
    log::line(log::Level::debug, ep->ia->name + " " + who,
              "connection event " + std::string(to_string(ev.type)) + (ev.reason.empty() ? "" : ": " + ev.reason));
  }
  DAT_EVENT e;
  std::memset(&e, 0, sizeof e);
  e.evd_handle = ep->conn_evd;
  switch (ev.type) {
    case CmEventType::established:
      e.event_number = DAT_CONNECTION_EVENT_ESTABLISHED;
      ep->conn_private = ev.private_data;
      ep->state = DAT_EP_STATE_CONNECTED;
      break;
    case CmEventType::rejected: e.event_number = DAT_CONNECTION_EVENT_PEER_REJECTED; break;
    case CmEventType::no_listener: e.event_number = DAT_CONNECTION_EVENT_NON_PEER_REJECTED; break;
    case CmEventType::unreachable: e.event_number = DAT_CONNECTION_EVENT_TIMED_OUT; break;
    case CmEventType::host_unreachable: e.event_number = DAT_CONNECTION_EVENT_UNREACHABLE; break;
    case CmEventType::disconnected: e.event_number = DAT_CONNECTION_EVENT_DISCONNECTED; break;
    case CmEventType::broken: e.event_number = DAT_CONNECTION_EVENT_BROKEN; break;
  }
  const bool ended = ev.type != CmEventType::established;
  if (ended) {
    ep->state = DAT_EP_STATE_DISCONNECTED;
    ep->conn_private = ev.private_data;
  }
  auto& d = e.event_data.connect_event_data;
  d.ep_handle = ep;
  d.private_data_size = static_cast<DAT_COUNT>(ep->conn_private.size());
  d.private_data = ep->conn_private.empty() ? nullptr : ep->conn_private.data();
  if (ep->conn_evd) ep->conn_evd->post(e);
  // An SRQ EP also reports the end of its connection on the async EVD (as the OFA providers do;
  // dtestsrq waits for it): its SRQ buffers are all flushed by then.
  // A broken connection (Terminate, retry limit) is reported there for every EP.
  if ((ended && ep->srq && ev.type == CmEventType::disconnected) || ev.type == CmEventType::broken)
    post_async(ep->ia, DAT_ASYNC_ERROR_EP_BROKEN, ep, DAT_EP_OTHER_ERROR);
}

namespace {

// Fills the defaults of an EP's attributes and checks them against the RNIC's limits.
DAT_RETURN normalize_attr(const Limits& l, const DAT_EP_ATTR* attr, DAT_EP_ATTR& a) {
  a = DAT_EP_ATTR{};
  if (attr) {
    a = *attr;
  } else {
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_recv_dtos = a.max_request_dtos = kDefaultDtos;
    a.max_recv_iov = a.max_request_iov = kDefaultIov;
    a.max_rdma_read_in = a.max_rdma_read_out = kDefaultRd;
  }
  if (a.service_type != DAT_SERVICE_TYPE_RC) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
  if (a.max_message_size == 0) a.max_message_size = l.max_msg_size;
  if (a.max_rdma_size == 0) a.max_rdma_size = l.max_msg_size;
  if (a.max_recv_dtos == 0) a.max_recv_dtos = kDefaultDtos;
  if (a.max_request_dtos == 0) a.max_request_dtos = kDefaultDtos;
  if (a.max_recv_iov == 0) a.max_recv_iov = kDefaultIov;
  if (a.max_request_iov == 0) a.max_request_iov = kDefaultIov;
  if (a.max_recv_dtos < 0 || a.max_request_dtos < 0 || a.max_recv_dtos > static_cast<DAT_COUNT>(l.max_qp_wr) ||
      a.max_request_dtos > static_cast<DAT_COUNT>(l.max_qp_wr) || a.max_recv_iov < 0 || a.max_request_iov < 0 ||
      a.max_recv_iov > static_cast<DAT_COUNT>(l.max_sge) || a.max_request_iov > static_cast<DAT_COUNT>(l.max_sge) ||
      a.max_message_size > l.max_msg_size || a.max_rdma_read_in < 0 || a.max_rdma_read_out < 0 ||
      a.max_rdma_read_in > static_cast<DAT_COUNT>(l.max_rd) || a.max_rdma_read_out > static_cast<DAT_COUNT>(l.max_rd))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
  return DAT_SUCCESS;
}

// Makes a QP for `ep` from a PZ, DTO EVDs and attributes (the EP's own, or those it is about to
// take), with the EP's SRQ.
Status build_qp(Ep* ep, Pz* pz, Evd* recv, Evd* req, const DAT_EP_ATTR& a, Qp*& out) {
  QpInit init;
  init.pd = pz->pd;
  init.send_cq = req->cq;
  init.recv_cq = recv->cq;
  init.max_send_wr = static_cast<std::uint32_t>(a.max_request_dtos);
  init.max_recv_wr = static_cast<std::uint32_t>(a.max_recv_dtos);
  init.max_sge = static_cast<std::uint32_t>(std::max(a.max_recv_iov, a.max_request_iov));
  init.context = ep;
  init.ord = static_cast<std::uint32_t>(a.max_rdma_read_out);
  init.ird = static_cast<std::uint32_t>(a.max_rdma_read_in);
  init.on_event = [ep](Qp*, const CmEvent& ev) { on_cm_event(ep, ev); };
  init.srq = ep->srq ? ep->srq->srq : nullptr;
  init.on_soft_watermark = [ep](Qp*) {
    post_async(ep->ia, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, ep, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
  };
  return ep->ia->dev->create_qp(init, out);
}

// The references an EP holds on the objects it names (they cannot be freed meanwhile).
void attach_refs(Ep* ep) {
  // Consumer-controlled notification makes threshold 1 mandatory on that EVD (dat_evd_wait).
  ep->notify_recv = ep->recv_evd && (ep->attr.recv_completion_flags &
                                     (DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG)) != 0;
  ep->notify_req = ep->req_evd && (ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG) != 0;
  if (ep->pz) ep->pz->users++;
  if (ep->recv_evd) ep->recv_evd->ep_refs++;
  if (ep->req_evd) ep->req_evd->ep_refs++;
  if (ep->notify_recv) ep->recv_evd->notify_refs++;
  if (ep->notify_req) ep->req_evd->notify_refs++;
  if (ep->conn_evd) ep->conn_evd->ep_refs++;
  if (ep->srq) ep->srq->ep_refs++;
}

void detach_refs(Ep* ep) {
  if (ep->pz) ep->pz->users--;
  if (ep->recv_evd) ep->recv_evd->ep_refs--;
  if (ep->req_evd) ep->req_evd->ep_refs--;
  if (ep->notify_recv) ep->recv_evd->notify_refs--;
  if (ep->notify_req) ep->req_evd->notify_refs--;
  if (ep->conn_evd) ep->conn_evd->ep_refs--;
  if (ep->srq) ep->srq->ep_refs--;
  ep->notify_recv = ep->notify_req = false;
}

DAT_RETURN create_ep(DAT_IA_HANDLE h, DAT_PZ_HANDLE pz_h, DAT_EVD_HANDLE recv_h, DAT_EVD_HANDLE req_h,
                     DAT_EVD_HANDLE conn_h, DAT_SRQ_HANDLE srq_h, const DAT_EP_ATTR* attr, DAT_EP_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  Pz* pz = get<Pz>(pz_h, Kind::pz);
  if (!pz || pz->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
  Evd* recv = get<Evd>(recv_h, Kind::evd);
  if (!recv || recv->ia != ia || !(recv->flags & DAT_EVD_DTO_FLAG))
    return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
  Evd* req = get<Evd>(req_h, Kind::evd);
  if (!req || req->ia != ia || !(req->flags & DAT_EVD_DTO_FLAG))
    return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  Evd* conn = nullptr;
  if (conn_h != DAT_HANDLE_NULL) {
    conn = get<Evd>(conn_h, Kind::evd);
    // A connection EVD carries no CQ: one of another IA of this provider is accepted too
    // (dapltest's limit tests share one across IAs).
    if (!conn || !(conn->flags & DAT_EVD_CONNECTION_FLAG)) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
  }
  SrqObj* so = nullptr;
  if (srq_h != DAT_HANDLE_NULL) {
    so = get<SrqObj>(srq_h, Kind::srq);
    if (!so || so->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
  }
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
  DAT_EP_ATTR a;
  if (DAT_RETURN r = normalize_attr(ia->dev->limits(), attr, a); r != DAT_SUCCESS) return r;
  Ep* ep = make<Ep>(ia, ia->provider);
  ep->pz = pz;
  ep->recv_evd = recv;
  ep->req_evd = req;
  ep->conn_evd = conn;
  ep->srq = so;
  ep->attr = a;
  const Status s = build_qp(ep, pz, recv, req, a, ep->qp);
  if (s != Status::ok) {
    destroy(ep);
    return to_dat(s, {.resource = DAT_RESOURCE_TEP, .state = DAT_INVALID_STATE_EP_NOTREADY});
  }
  attach_refs(ep);
  *out = ep;
  return DAT_SUCCESS;
}

}  // namespace

// An EP the provider makes for a connection request on a PSP created with DAT_PSP_PROVIDER_FLAG:
// TENTATIVE_CONNECTION_PENDING, default attributes, no PZ and no EVDs (and so no QP) until the
// consumer sets them with dat_ep_modify; dat_cr_accept needs them.
Ep* new_provider_ep(Ia* ia) {
  Ep* ep = make<Ep>(ia, ia->provider);
  normalize_attr(ia->dev->limits(), nullptr, ep->attr);
  ep->state = DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
  ep->provider_created = true;
  return ep;
}

// Gives a provider-created EP its QP once the consumer named a PZ and both DTO EVDs.
DAT_RETURN ready_provider_ep(Ep* ep) {
  if (ep->qp) return DAT_SUCCESS;
  if (!ep->pz || !ep->recv_evd || !ep->req_evd) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
  const Status s = build_qp(ep, ep->pz, ep->recv_evd, ep->req_evd, ep->attr, ep->qp);
  if (s != Status::ok) return map(s);
  return DAT_SUCCESS;
}

namespace {

// The PZ and EVDs an EP is bound to.
struct EpBinding {
  Pz* pz = nullptr;
  Evd* recv = nullptr;
  Evd* req = nullptr;
  Evd* conn = nullptr;
};

// Whether dat_ep_modify may change these fields of the EP in its present state.
DAT_RETURN check_modifiable(const Ep* ep, DAT_EP_PARAM_MASK mask) {
  constexpr DAT_EP_PARAM_MASK kFixed = DAT_EP_FIELD_IA_HANDLE | DAT_EP_FIELD_EP_STATE | DAT_EP_FIELD_COMM |
                                       DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR | DAT_EP_FIELD_LOCAL_PORT_QUAL |
                                       DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR | DAT_EP_FIELD_REMOTE_PORT_QUAL |
                                       DAT_EP_FIELD_SRQ_HANDLE;
  if (mask & kFixed) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (mask & ~DAT_EP_PARAM_MASK{DAT_EP_FIELD_ALL}) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  const DAT_EP_STATE st = ep->state;
  if (st != DAT_EP_STATE_UNCONNECTED && st != DAT_EP_STATE_RESERVED && st != DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
  if ((mask & DAT_EP_FIELD_PZ_HANDLE) && st == DAT_EP_STATE_RESERVED)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
  return DAT_SUCCESS;
}

// The EP's binding with the handles the mask names replaced by those in `p`.
DAT_RETURN modified_binding(const Ep* ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM* p, EpBinding& b) {
  Ia* ia = ep->ia;
  b = {.pz = ep->pz, .recv = ep->recv_evd, .req = ep->req_evd, .conn = ep->conn_evd};
  if (mask & DAT_EP_FIELD_PZ_HANDLE) {
    b.pz = get<Pz>(p->pz_handle, Kind::pz);
    if (!b.pz || b.pz->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
  }
  if (mask & DAT_EP_FIELD_RECV_EVD_HANDLE) {
    b.recv = get<Evd>(p->recv_evd_handle, Kind::evd);
    if (!b.recv || b.recv->ia != ia || !(b.recv->flags & DAT_EVD_DTO_FLAG))
      return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
  }
  if (mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE) {
    b.req = get<Evd>(p->request_evd_handle, Kind::evd);
    if (!b.req || b.req->ia != ia || !(b.req->flags & DAT_EVD_DTO_FLAG))
      return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  }
  if (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE) {
    b.conn = nullptr;
    if (p->connect_evd_handle != DAT_HANDLE_NULL) {
      b.conn = get<Evd>(p->connect_evd_handle, Kind::evd);
      if (!b.conn || !(b.conn->flags & DAT_EVD_CONNECTION_FLAG))
        return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
    }
  }
  return DAT_SUCCESS;
}

void copy_masked_attr(DAT_EP_PARAM_MASK mask, const DAT_EP_ATTR& in, DAT_EP_ATTR& want) {
  if (mask & DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE) want.service_type = in.service_type;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE) want.max_message_size = in.max_message_size;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE) want.max_rdma_size = in.max_rdma_size;
  if (mask & DAT_EP_FIELD_EP_ATTR_QOS) want.qos = in.qos;
  if (mask & DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS) want.recv_completion_flags = in.recv_completion_flags;
  if (mask & DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS) want.request_completion_flags = in.request_completion_flags;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS) want.max_recv_dtos = in.max_recv_dtos;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS) want.max_request_dtos = in.max_request_dtos;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV) want.max_recv_iov = in.max_recv_iov;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV) want.max_request_iov = in.max_request_iov;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN) want.max_rdma_read_in = in.max_rdma_read_in;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT) want.max_rdma_read_out = in.max_rdma_read_out;
  if (mask & DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW) want.srq_soft_hw = in.srq_soft_hw;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV) want.max_rdma_read_iov = in.max_rdma_read_iov;
  if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV) want.max_rdma_write_iov = in.max_rdma_write_iov;
}

// The EP's attributes with the fields the mask names taken from `in`, checked and normalised.
DAT_RETURN modified_attr(const Ep* ep, DAT_EP_PARAM_MASK mask, const DAT_EP_ATTR& in, DAT_EP_ATTR& a) {
  const Limits& l = ep->ia->dev->limits();
  DAT_EP_ATTR want = ep->attr;
  copy_masked_attr(mask, in, want);
  if (mask & (DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR | DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR |
              DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR | DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR)) {
    // No transport- or provider-specific EP attributes are defined: only an empty list is accepted.
    if (in.ep_transport_specific_count != 0 || in.ep_provider_specific_count != 0)
      return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  }
  if (want.max_rdma_read_iov > static_cast<DAT_COUNT>(l.max_sge) ||
      want.max_rdma_write_iov > static_cast<DAT_COUNT>(l.max_sge))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (DAT_RETURN r = normalize_attr(l, &want, a); r != DAT_SUCCESS) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (a.qos != DAT_QOS_BEST_EFFORT) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  return DAT_SUCCESS;
}

// Binds the EP to `b` with attributes `a`, on a new QP when any of the QP's inputs changed.
DAT_RETURN rebind_ep(Ep* ep, const EpBinding& b, const DAT_EP_ATTR& a) {
  const bool new_qp =
      b.pz != ep->pz || b.recv != ep->recv_evd || b.req != ep->req_evd || std::memcmp(&a, &ep->attr, sizeof a) != 0;
  if (new_qp && ep->qp && !ep->ia->dev->qp_idle(ep->qp).first)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);  // receives are posted on the old QP
  // Make the new QP first, so a failure leaves the EP as it was.
  Qp* qp = ep->qp;
  if (new_qp && b.pz && b.recv && b.req) {
    const Status s = build_qp(ep, b.pz, b.recv, b.req, a, qp);
    if (s != Status::ok) return map(s);
    if (ep->qp) ep->ia->dev->destroy_qp(ep->qp);
  }
  detach_refs(ep);
  ep->pz = b.pz;
  ep->recv_evd = b.recv;
  ep->req_evd = b.req;
  ep->conn_evd = b.conn;
  ep->attr = a;
  ep->qp = qp;
  attach_refs(ep);
  return DAT_SUCCESS;
}

}  // namespace

// Changes an EP that is not connected: its PZ, EVDs and attributes. The QP is made anew (it holds
// no work then); a change that needs that while receives are posted is refused.
DAT_RETURN ep_modify(DAT_EP_HANDLE h, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (DAT_RETURN r = check_modifiable(ep, mask); r != DAT_SUCCESS) return r;
  EpBinding b;
  if (DAT_RETURN r = modified_binding(ep, mask, p, b); r != DAT_SUCCESS) return r;
  DAT_EP_ATTR a;
  if (DAT_RETURN r = modified_attr(ep, mask, p->ep_attr, a); r != DAT_SUCCESS) return r;
  return rebind_ep(ep, b, a);
}

DAT_RETURN ep_create(DAT_IA_HANDLE h, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd, DAT_EVD_HANDLE req_evd,
                     DAT_EVD_HANDLE conn_evd, const DAT_EP_ATTR* attr, DAT_EP_HANDLE* out) {
  return create_ep(h, pz, recv_evd, req_evd, conn_evd, DAT_HANDLE_NULL, attr, out);
}

DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE h, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd, DAT_EVD_HANDLE req_evd,
                              DAT_EVD_HANDLE conn_evd, DAT_SRQ_HANDLE srq, const DAT_EP_ATTR* attr,
                              DAT_EP_HANDLE* out) {
  if (srq == DAT_HANDLE_NULL) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
  return create_ep(h, pz, recv_evd, req_evd, conn_evd, srq, attr, out);
}

DAT_RETURN ep_query(DAT_EP_HANDLE h, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (mask_outside(mask, DAT_EP_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  std::memset(p, 0, sizeof *p);
  p->ia_handle = consumer_ia_handle(ep->ia);
  p->ep_state = ep->state;
  p->local_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ep->ia->addr);
  p->local_port_qual = ep->passive ? ep->local_qual : (ep->qp ? ep->ia->dev->qp_local(ep->qp).port : 0);
  p->remote_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ep->remote);
  p->remote_port_qual = ep->remote_qual;
  p->pz_handle = ep->pz;
  p->recv_evd_handle = ep->recv_evd;
  p->request_evd_handle = ep->req_evd;
  p->connect_evd_handle = ep->conn_evd;
  p->srq_handle = ep->srq ? static_cast<DAT_SRQ_HANDLE>(ep->srq) : DAT_HANDLE_NULL;
  p->ep_attr = ep->attr;
  return DAT_SUCCESS;
}

namespace {

DAT_RETURN connect_locked(Ep* ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout, DAT_COUNT pd_size,
                          const DAT_PVOID pd, DAT_QOS qos, DAT_CONNECT_FLAGS flags);

}  // namespace

DAT_RETURN ep_connect(DAT_EP_HANDLE h, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                      DAT_COUNT pd_size, const DAT_PVOID pd, DAT_QOS qos, DAT_CONNECT_FLAGS flags) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  return connect_locked(ep, addr, qual, timeout, pd_size, pd, qos, flags);
}

// Connects `h` to the same remote address and conn_qual as the connection of `dup`.
DAT_RETURN ep_dup_connect(DAT_EP_HANDLE h, DAT_EP_HANDLE dup_h, DAT_TIMEOUT timeout, DAT_COUNT pd_size,
                          const DAT_PVOID pd, DAT_QOS qos) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  Ep* dup = live_ep(dup_h);
  if (!dup) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (dup->state != DAT_EP_STATE_CONNECTED) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED);
  sockaddr_in remote = dup->remote;
  return connect_locked(ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&remote), dup->remote_qual, timeout, pd_size, pd, qos,
                        DAT_CONNECT_DEFAULT_FLAG);
}

namespace {

DAT_RETURN connect_locked(Ep* ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout, DAT_COUNT pd_size,
                          const DAT_PVOID pd, DAT_QOS qos, DAT_CONNECT_FLAGS flags) {
  if (!addr || addr->sa_family != AF_INET) return err(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
  if (pd_size < 0 || pd_size > static_cast<DAT_COUNT>(ep->ia->dev->limits().max_private_data))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  if (pd_size > 0 && !pd) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
  if (qos != DAT_QOS_BEST_EFFORT) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
  if (flags != DAT_CONNECT_DEFAULT_FLAG && flags != DAT_CONNECT_MULTIPATH_FLAG)
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
  if (ep->state != DAT_EP_STATE_UNCONNECTED) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
  if (!ep->qp) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
  std::memcpy(&ep->remote, addr, sizeof ep->remote);
  ep->remote_qual = qual;
  ep->passive = false;
  ep->local_qual = 0;
  NetAddr remote{ntohl(ep->remote.sin_addr.s_addr), ntohs(ep->remote.sin_port)};
  if (remote.port == 0) remote.port = ep->ia->base_port;
  const auto ms = timeout == DAT_TIMEOUT_INFINITE ? std::chrono::milliseconds(0)
                                                  : std::chrono::milliseconds(std::max<DAT_TIMEOUT>(1, timeout / 1000));
  ep->state = DAT_EP_STATE_ACTIVE_CONNECTION_PENDING;
  const auto* bytes = static_cast<const std::uint8_t*>(pd);
  const Status s = ep->ia->dev->connect(ep->qp, remote, qual, {bytes, static_cast<std::size_t>(pd_size)}, ms);
  if (s != Status::ok) {
    ep->state = DAT_EP_STATE_UNCONNECTED;
    return map(s);
  }
  return DAT_SUCCESS;
}

}  // namespace

DAT_RETURN ep_disconnect(DAT_EP_HANDLE h, DAT_CLOSE_FLAGS flags) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  const DAT_EP_STATE st = ep->state;
  if (st == DAT_EP_STATE_DISCONNECTED) return DAT_SUCCESS;
  if (st == DAT_EP_STATE_UNCONNECTED) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED);
  // A provider-created EP whose request is still pending: dat_cr_reject ends it.
  if (!ep->qp || st == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
  ep->state = DAT_EP_STATE_DISCONNECT_PENDING;
  const Status s = ep->ia->dev->disconnect(ep->qp, flags == DAT_CLOSE_GRACEFUL_FLAG);
  if (s != Status::ok) {
    // The peer closed the connection between our look at the state and the RNIC's (its event
    // set DISCONNECTED meanwhile): the EP is disconnected, as asked. (dapltest -T T with 4
    // threads saw DAT_INVALID_STATE here once in ~25 parallel suite runs.)
    if (ep->state == DAT_EP_STATE_DISCONNECTED) return DAT_SUCCESS;
    ep->state = st;
    return map(s);
  }
  return DAT_SUCCESS;
}

DAT_RETURN ep_post_recv(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
  std::shared_lock lk(api_mutex());  // (the data path: objects.hpp, "Locking")
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (flags & ~(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
                DAT_COMPLETION_BARRIER_FENCE_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  SgeList sgl;
  if (DAT_RETURN r = to_sgl(ep, n, iov, ep->attr.max_recv_iov, sgl); r != DAT_SUCCESS) return r;
  if (ep->state == DAT_EP_STATE_DISCONNECTED || ep->state == DAT_EP_STATE_DISCONNECT_PENDING)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED);
  if (ep->srq) return err(DAT_INVALID_STATE);  // its receives come from the SRQ
  if (!ep->qp)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);  // a provider-created EP without PZ and EVDs yet
  return map(ep->ia->dev->post_recv(ep->qp, RecvWr{cookie.as_64, {sgl.data(), sgl.size()}}));
}

namespace {

DAT_RETURN post_request(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags, SendOpcode op,
                        std::uint32_t invalidate_stag = 0, bool sink_is_window = false, std::uint32_t imm = 0,
                        std::uint64_t compare_add = 0, std::uint64_t swap = 0) {
  std::shared_lock lk(api_mutex());  // (the data path: objects.hpp, "Locking")
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (flags & ~(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
                DAT_COMPLETION_BARRIER_FENCE_FLAG))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  SgeList sgl;
  if (DAT_RETURN r = to_sgl(ep, n, iov, ep->attr.max_request_iov, sgl); r != DAT_SUCCESS) return r;
  if (ep->state != DAT_EP_STATE_CONNECTED || !ep->qp) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
  SendWr wr;
  wr.wr_id = cookie.as_64;
  wr.opcode = op;
  wr.sgl = {sgl.data(), sgl.size()};
  wr.signaled = !(flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG));
  wr.invalidate_stag = invalidate_stag;
  wr.fence = (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG) != 0;
  wr.sink_is_window = sink_is_window;  // waits for earlier RDMA Reads
  wr.imm = imm;
  wr.compare_add = compare_add;
  wr.swap = swap;
  if (op == SendOpcode::send && (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)) wr.opcode = SendOpcode::send_solicited;
  // A Send is bounded by the EP's max_message_size, as dat_ep_query reports it (DAT_LENGTH_ERROR
  // beyond). max_rdma_size is not enforced, as OFA dapl does not: dtest sets it to 64 KiB and
  // writes 4 MiB (docs/dat-coverage.md).
  if (op == SendOpcode::send || op == SendOpcode::send_invalidate) {
    std::uint64_t total = 0;
    for (const Sge& s : sgl) total += s.length;
    if (total > ep->attr.max_message_size) return err(DAT_LENGTH_ERROR);
  }
  if (op == SendOpcode::rdma_write || op == SendOpcode::rdma_read || op == SendOpcode::rdma_write_imm ||
      op == SendOpcode::cmp_swap || op == SendOpcode::fetch_add) {
    if (!remote) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    std::uint64_t total = 0;
    for (const Sge& s : sgl) total += s.length;
    if (total > remote->segment_length) return err(DAT_LENGTH_ERROR);
    wr.rkey = remote->rmr_context;
    wr.remote_addr = remote->virtual_address;
  }
  return map(ep->ia->dev->post_send(ep->qp, wr));
}

}  // namespace

DAT_RETURN ep_post_send(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
  return post_request(h, n, iov, cookie, nullptr, flags, SendOpcode::send);
}

DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                                        DAT_COMPLETION_FLAGS flags, DAT_BOOLEAN invalidate, DAT_RMR_CONTEXT ctx) {
  if (!invalidate) return post_request(h, n, iov, cookie, nullptr, flags, SendOpcode::send);
  return post_request(h, n, iov, cookie, nullptr, flags, SendOpcode::send_invalidate, ctx);
}

DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                             const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags) {
  return post_request(h, n, iov, cookie, remote, flags, SendOpcode::rdma_read);
}

// An RDMA Read whose sink is a memory window of this EP's PZ (bound with remote write: iWARP
// places the Read Response as tagged data into the window).
DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE h, const DAT_RMR_TRIPLET* local, DAT_DTO_COOKIE cookie,
                                    const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags) {
  if (!is_live(h, Kind::ep)) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (!local) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  // The window's STag travels as the sink's key; the RNIC checks it as a window (remote write).
  DAT_LMR_TRIPLET sink{local->virtual_address, local->segment_length, local->rmr_context};
  return post_request(h, 1, &sink, cookie, remote, flags, SendOpcode::rdma_read, 0, true);
}

DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                              const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags) {
  return post_request(h, n, iov, cookie, remote, flags, SendOpcode::rdma_write);
}

// The DAT IB extensions (dat_ib_extensions.h) libdat2 hands over through dat_extension_op: RDMA
// Write with Immediate, CmpSwap and FetchAdd, with their va_list arguments in the order of the
// dat_ib_post_* macros. RoCEv2 only (ia_query advertises them there).
DAT_RETURN extension_op(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list args) {
  if (!is_live(h, Kind::ep)) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  switch (static_cast<int>(op)) {
    case DAT_IB_RDMA_WRITE_IMMED_OP: {
      const DAT_COUNT n = va_arg(args, DAT_COUNT);
      auto* iov = va_arg(args, DAT_LMR_TRIPLET*);
      const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
      const auto* remote = va_arg(args, const DAT_RMR_TRIPLET*);
      const DAT_UINT32 idata = va_arg(args, DAT_UINT32);
      const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
      return post_request(h, n, iov, cookie, remote, flags, SendOpcode::rdma_write_imm, 0, false, idata);
    }
    case DAT_IB_CMP_AND_SWAP_OP: {
      const DAT_UINT64 cmp = va_arg(args, DAT_UINT64);
      const DAT_UINT64 swap = va_arg(args, DAT_UINT64);
      auto* iov = va_arg(args, DAT_LMR_TRIPLET*);
      const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
      const auto* remote = va_arg(args, const DAT_RMR_TRIPLET*);
      const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
      return post_request(h, 1, iov, cookie, remote, flags, SendOpcode::cmp_swap, 0, false, 0, cmp, swap);
    }
    case DAT_IB_FETCH_AND_ADD_OP: {
      const DAT_UINT64 add = va_arg(args, DAT_UINT64);
      auto* iov = va_arg(args, DAT_LMR_TRIPLET*);
      const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
      const auto* remote = va_arg(args, const DAT_RMR_TRIPLET*);
      const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
      return post_request(h, 1, iov, cookie, remote, flags, SendOpcode::fetch_add, 0, false, 0, add);
    }
    default: return err(DAT_NOT_IMPLEMENTED);  // UD and the query operations (docs/dat-coverage.md)
  }
}

DAT_RETURN ep_get_status(DAT_EP_HANDLE h, DAT_EP_STATE* state, DAT_BOOLEAN* recv_idle, DAT_BOOLEAN* req_idle) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  const auto [rx, tx] = ep->qp ? ep->ia->dev->qp_idle(ep->qp) : std::pair<bool, bool>{true, true};
  if (state) *state = ep->state;
  if (recv_idle) *recv_idle = rx ? DAT_TRUE : DAT_FALSE;
  if (req_idle) *req_idle = tx ? DAT_TRUE : DAT_FALSE;
  return DAT_SUCCESS;
}

DAT_RETURN ep_reset(DAT_EP_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  const DAT_EP_STATE st = ep->state;
  if (st != DAT_EP_STATE_DISCONNECTED && st != DAT_EP_STATE_UNCONNECTED)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
  if (ep->qp && ep->ia->dev->reset_qp(ep->qp) != Status::ok) return err(DAT_INVALID_STATE);
  ep->state = DAT_EP_STATE_UNCONNECTED;
  ep->conn_private.clear();
  return DAT_SUCCESS;
}

void free_ep(Ep* ep) {
  if (ep->qp) ep->ia->dev->destroy_qp(ep->qp);
  detach_refs(ep);
  destroy(ep);
}

DAT_RETURN ep_free(DAT_EP_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Ep* ep = live_ep(h);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (ep->rsp_refs > 0) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);  // an RSP reserves it
  free_ep(ep);
  return DAT_SUCCESS;
}

}  // namespace softrnic::dat
