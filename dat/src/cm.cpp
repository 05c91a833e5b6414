// Public service points and connection requests.
#include <arpa/inet.h>

#include <cstring>

#include "api.hpp"

namespace softrnic::dat {
namespace {

// A connection request for a service point (progress thread, device lock held): a CR object and
// its event on the service point's EVD.
void connection_request(Ia* ia, Evd* evd, DAT_SP_HANDLE sp, Ep* local_ep, ConnRequest* req,
                        const ConnRequestInfo& info) {
  Cr* cr = make<Cr>(ia, ia->provider);
  cr->req = req;
  cr->local_ep = local_ep;
  cr->provider_ep = local_ep && local_ep->provider_created && local_ep->qp == nullptr;
  cr->qual = info.conn_qual;
  cr->remote.sin_family = AF_INET;
  cr->remote.sin_addr.s_addr = htonl(info.remote.ip);
  cr->remote.sin_port = htons(info.remote.port);
  cr->private_data = info.private_data;
  DAT_EVENT e;
  std::memset(&e, 0, sizeof e);
  e.event_number = DAT_CONNECTION_REQUEST_EVENT;
  e.evd_handle = evd;
  auto& d = e.event_data.cr_arrival_event_data;
  d.sp_handle = sp;
  d.local_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ia->addr);
  d.conn_qual = info.conn_qual;
  d.cr_handle = cr;
  d.truncate_flag = DAT_FALSE;
  evd->post(e);
}

// The EP the provider made for a request that was rejected, handed off or accepted on another EP.
void drop_provider_ep(Cr* cr) {
  if (cr->provider_ep && is_live(cr->local_ep, Kind::ep) &&
      cr->local_ep->state == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING)
    free_ep(cr->local_ep);
  cr->local_ep = nullptr;
}

}  // namespace

DAT_RETURN psp_create(DAT_IA_HANDLE h, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd_h, DAT_PSP_FLAGS flags,
                      DAT_PSP_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  Evd* evd = get<Evd>(evd_h, Kind::evd);
  if (!evd || evd->ia != ia || !(evd->flags & DAT_EVD_CR_FLAG))
    return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
  // ep_creator is DAT_PSP_CREATES_EP_IFASKED: with DAT_PSP_PROVIDER_FLAG each request comes with
  // an EP the provider made (in the CR's local_ep_handle).
  if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG)
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  Psp* psp = make<Psp>(ia, ia->provider);
  psp->qual = qual;
  psp->evd = evd;
  psp->flags = flags;
  const Status s = ia->dev->listen(qual, [psp](ConnRequest* req, const ConnRequestInfo& info) {
    DAT_SP_HANDLE sp;
    sp.psp_handle = psp;
    Ep* ep = psp->flags == DAT_PSP_PROVIDER_FLAG ? new_provider_ep(psp->ia) : nullptr;
    connection_request(psp->ia, psp->evd, sp, ep, req, info);
  });
  if (s != Status::ok) {
    destroy(psp);
    return err(DAT_CONN_QUAL_IN_USE);
  }
  *out = psp;
  return DAT_SUCCESS;
}

// A PSP on a free conn_qual of the range reserved for it.
DAT_RETURN psp_create_any(DAT_IA_HANDLE h, DAT_CONN_QUAL* qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                          DAT_PSP_HANDLE* out) {
  if (!is_live(h, Kind::ia)) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  if (!qual) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  // Over MPA/TCP a conn_qual is the TCP port a PSP listens on: the dynamic range (RFC 6335).
  DAT_CONN_QUAL first = 0x10000, count = 0x10000;
  {
    std::lock_guard lk(api_mutex());
    Ia* ia = get<Ia>(h, Kind::ia);
    // (RoCEv2: an rdma_cm port in the service ID, the same range.)
    if (ia && ia->dev->wire() != Wire::udp) first = 0xC000, count = 0x4000;
  }
  for (DAT_CONN_QUAL q = first; q < first + count; ++q) {
    const DAT_RETURN r = psp_create(h, q, evd, flags, out);
    if (DAT_GET_TYPE(r) == DAT_CONN_QUAL_IN_USE) continue;
    if (r == DAT_SUCCESS) *qual = q;
    return r;
  }
  return err(DAT_CONN_QUAL_UNAVAILABLE);
}

DAT_RETURN psp_query(DAT_PSP_HANDLE h, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Psp* psp = get<Psp>(h, Kind::psp);
  if (!psp) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
  if (mask_outside(mask, DAT_PSP_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  p->ia_handle = consumer_ia_handle(psp->ia);
  p->conn_qual = psp->qual;
  p->evd_handle = psp->evd;
  p->psp_flags = psp->flags;
  return DAT_SUCCESS;
}

void free_psp(Psp* psp) {
  psp->ia->dev->stop_listen(psp->qual);
  destroy(psp);
}

DAT_RETURN psp_free(DAT_PSP_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Psp* psp = get<Psp>(h, Kind::psp);
  if (!psp) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
  free_psp(psp);
  return DAT_SUCCESS;
}

DAT_RETURN cr_query(DAT_CR_HANDLE h, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Cr* cr = get<Cr>(h, Kind::cr);
  if (!cr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
  if (mask_outside(mask, DAT_CR_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  p->remote_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&cr->remote);
  p->remote_port_qual = cr->qual;
  p->private_data_size = static_cast<DAT_COUNT>(cr->private_data.size());
  p->private_data = cr->private_data.empty() ? nullptr : cr->private_data.data();
  p->local_ep_handle = is_live(cr->local_ep, Kind::ep) ? static_cast<DAT_EP_HANDLE>(cr->local_ep) : DAT_HANDLE_NULL;
  return DAT_SUCCESS;
}

DAT_RETURN rsp_create(DAT_IA_HANDLE h, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep_h, DAT_EVD_HANDLE evd_h,
                      DAT_RSP_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  Ep* ep = get<Ep>(ep_h, Kind::ep);
  if (!ep || ep->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  Evd* evd = get<Evd>(evd_h, Kind::evd);
  if (!evd || evd->ia != ia || !(evd->flags & DAT_EVD_CR_FLAG))
    return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  if (ep->state != DAT_EP_STATE_UNCONNECTED) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
  Rsp* rsp = make<Rsp>(ia, ia->provider);
  rsp->qual = qual;
  rsp->evd = evd;
  rsp->ep = ep;
  const Status s = ia->dev->listen(qual, [rsp](ConnRequest* req, const ConnRequestInfo& info) {
    DAT_SP_HANDLE sp;
    sp.rsp_handle = rsp;
    connection_request(rsp->ia, rsp->evd, sp, rsp->ep, req, info);
  });
  if (s != Status::ok) {
    destroy(rsp);
    return err(DAT_CONN_QUAL_IN_USE);
  }
  ep->state = DAT_EP_STATE_RESERVED;
  ep->rsp_refs++;
  evd->ep_refs++;
  *out = rsp;
  return DAT_SUCCESS;
}

DAT_RETURN rsp_query(DAT_RSP_HANDLE h, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Rsp* rsp = get<Rsp>(h, Kind::rsp);
  if (!rsp) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
  if (mask_outside(mask, DAT_RSP_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  p->ia_handle = consumer_ia_handle(rsp->ia);
  p->conn_qual = rsp->qual;
  p->evd_handle = rsp->evd;
  p->ep_handle = rsp->ep;
  return DAT_SUCCESS;
}

void free_rsp(Rsp* rsp) {
  rsp->ia->dev->stop_listen(rsp->qual);
  if (rsp->ep->state == DAT_EP_STATE_RESERVED) rsp->ep->state = DAT_EP_STATE_UNCONNECTED;
  rsp->ep->rsp_refs--;
  rsp->evd->ep_refs--;
  destroy(rsp);
}

DAT_RETURN rsp_free(DAT_RSP_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Rsp* rsp = get<Rsp>(h, Kind::rsp);
  if (!rsp) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
  free_rsp(rsp);
  return DAT_SUCCESS;
}

// Hands a connection request to the PSP of `qual` on the same IA: a new CR and its event there;
// this CR is gone.
DAT_RETURN cr_handoff(DAT_CR_HANDLE h, DAT_CONN_QUAL qual) {
  std::lock_guard lk(api_mutex());
  Cr* cr = get<Cr>(h, Kind::cr);
  if (!cr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
  Psp* to = nullptr;
  for (Obj* o : children_of(cr->ia))
    if (o->kind == Kind::psp && static_cast<Psp*>(o)->qual == qual) to = static_cast<Psp*>(o);
  if (!to) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  DAT_SP_HANDLE sp;
  sp.psp_handle = to;
  const ConnRequestInfo info{NetAddr{ntohl(cr->remote.sin_addr.s_addr), ntohs(cr->remote.sin_port)}, cr->qual,
                             cr->private_data};
  Ep* ep = to->flags == DAT_PSP_PROVIDER_FLAG ? new_provider_ep(cr->ia) : nullptr;
  connection_request(cr->ia, to->evd, sp, ep, cr->req, info);
  drop_provider_ep(cr);
  destroy(cr);
  return DAT_SUCCESS;
}

void free_cr(Cr* cr) {
  cr->ia->dev->reject(cr->req, {});
  drop_provider_ep(cr);
  destroy(cr);
}

DAT_RETURN cr_accept(DAT_CR_HANDLE h, DAT_EP_HANDLE ep_h, DAT_COUNT pd_size, const DAT_PVOID pd) {
  std::lock_guard lk(api_mutex());
  Cr* cr = get<Cr>(h, Kind::cr);
  if (!cr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
  // A request on an RSP goes to the RSP's EP, one on a provider-flag PSP to the EP the provider
  // made (the consumer may pass it or DAT_HANDLE_NULL; for the latter also an EP of its own).
  if (cr->local_ep && !is_live(cr->local_ep, Kind::ep)) cr->local_ep = nullptr;  // the consumer freed it
  Ep* ep = ep_h == DAT_HANDLE_NULL && cr->local_ep ? cr->local_ep : get<Ep>(ep_h, Kind::ep);
  if (!ep || ep->ia != cr->ia || (cr->local_ep && !cr->provider_ep && ep != cr->local_ep))
    return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (pd_size < 0 || pd_size > static_cast<DAT_COUNT>(cr->ia->dev->limits().max_private_data))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (pd_size > 0 && !pd) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
  const bool reserved_for_it = cr->local_ep == ep && (ep->state == DAT_EP_STATE_RESERVED ||
                                                      ep->state == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
  if (ep->state != DAT_EP_STATE_UNCONNECTED && !reserved_for_it)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
  // The provider's EP needs the PZ and EVDs the consumer gave it with dat_ep_modify.
  if (DAT_RETURN r = ready_provider_ep(ep); r != DAT_SUCCESS) return r;
  // Copy first: consumers may pass the CR's own private data buffer.
  const auto* b = static_cast<const std::uint8_t*>(pd);
  const std::vector<std::uint8_t> reply(b, b + pd_size);
  ep->state = DAT_EP_STATE_COMPLETION_PENDING;
  ep->remote = cr->remote;
  ep->passive = true;
  ep->local_qual = cr->qual;
  ep->remote_qual = ntohs(cr->remote.sin_port);
  const DAT_EP_STATE before = ep->state;
  const Status s = cr->ia->dev->accept(cr->req, ep->qp, reply);
  if (s != Status::ok) {
    ep->state = before == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING ? before : DAT_EP_STATE_UNCONNECTED;
    // Private data longer than the wire carries is an invalid private_data_size (argument 3),
    // not DAT_LENGTH_ERROR, in dat_cr_accept's page.
    if (s == Status::length_error) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    return to_dat(s);
  }
  if (cr->local_ep == ep) cr->local_ep = nullptr;  // it is the consumer's now
  drop_provider_ep(cr);
  destroy(cr);
  return DAT_SUCCESS;
}

DAT_RETURN cr_reject(DAT_CR_HANDLE h, DAT_COUNT pd_size, const DAT_PVOID pd) {
  std::lock_guard lk(api_mutex());
  Cr* cr = get<Cr>(h, Kind::cr);
  if (!cr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
  if (pd_size < 0 || pd_size > static_cast<DAT_COUNT>(cr->ia->dev->limits().max_private_data))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (pd_size > 0 && !pd) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  const auto* b = static_cast<const std::uint8_t*>(pd);
  const std::vector<std::uint8_t> reply(b, b + pd_size);
  cr->ia->dev->reject(cr->req, reply);
  drop_provider_ep(cr);  // the provider's EP for it goes too (as in the OFA providers)
  destroy(cr);
  return DAT_SUCCESS;
}

}  // namespace softrnic::dat
