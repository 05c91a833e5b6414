// CM ids: address and route resolution, listen, connect, accept, reject, disconnect, and the
// QP an id carries (rdma_create_qp moves it to INIT; the connection moves it on).
//
// An id finds its device by address (bind) or by destination (resolve_addr): softrnic's devices
// each have one IPv4 address and one link. Resolution needs no exchange on the wire, so
// ADDR_RESOLVED and ROUTE_RESOLVED are queued at once. A connection is softrnic's CM with the
// QP: Device::connect to the peer's device with the port as connection qualifier (rdma_cm's
// port space on RoCEv2: the CMA header; the TCP port on iWARP), Device::listen on the port,
// Device::accept and reject of the request.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <set>
#include <utility>

#include "rdmacm.hpp"

namespace softrnic::verbs::cm {

std::uint32_t ip_of(const sockaddr* a) {
  if (!a || a->sa_family != AF_INET) return 0;
  return ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr);
}

std::uint16_t port_of(const sockaddr* a) {
  if (!a || a->sa_family != AF_INET) return 0;
  return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
}

namespace {

struct Devices {
  std::mutex mu;
  bool opened = false;
  std::vector<Context*> ctxs;
  std::vector<std::pair<Context*, ibv_pd*>> pds;
};

Devices& devs() {
  static auto* d = new Devices;  // (never destroyed: ids may outlive static destruction)
  return *d;
}

void set_sin(sockaddr_in& s, std::uint32_t ip, std::uint16_t port) {
  std::memset(&s, 0, sizeof s);
  s.sin_family = AF_INET;
  s.sin_addr.s_addr = htonl(ip);
  s.sin_port = htons(port);
}

void queue(Id* d, rdma_cm_event_type type, int status = 0) {
  auto* e = new Event;
  e->ev.id = &d->id;
  e->ev.event = type;
  e->ev.status = status;
  std::lock_guard lk(d->sink->mu);
  post(d->ch, e);
}

// The id takes its device: id.verbs, the port number rdma_cm reports (1), and the device's PD,
// which librdmacm gives every id with a device (UCX makes its dummy QP in id->pd).
// A request's id is attached by the progress thread, under the device lock: it is given the PD
// its listener took (listen_on), as neither default_pd's lock nor an allocation may be taken there.
void attach(Id* d, Context* c, ibv_pd* pd = nullptr) {
  d->ctx = c;
  d->id.verbs = &c->vctx.context;
  d->id.port_num = 1;
  if (!d->id.pd) d->id.pd = pd ? pd : default_pd(c);
}

VQp* vqp_of(Id* d) {
  ibv_qp* q = d->id.qp ? d->id.qp : d->carrier;
  return q ? reinterpret_cast<VQp*>(q) : nullptr;
}

// The carrier QP of a connection without a QP (Id::carrier), in INIT; -1 with errno.
int make_carrier(Id* d) {
  ibv_pd* pd = default_pd(d->ctx);
  if (!pd) return -1;
  if (!(d->carrier_cq = ibv_create_cq(&d->ctx->vctx.context, 1, nullptr, nullptr, 0))) return -1;
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = d->carrier_cq;
  a.cap.max_send_wr = a.cap.max_recv_wr = a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.qp_type = IBV_QPT_RC;
  ibv_qp_attr init{};
  int mask = 0;
  init.qp_state = IBV_QPS_INIT;
  if ((d->carrier = ibv_create_qp(pd, &a))) reinterpret_cast<VQp*>(d->carrier)->carrier = true;
  if (d->carrier && rdma_init_qp_attr(&d->id, &init, &mask) == 0 && ibv_modify_qp(d->carrier, &init, mask) == 0)
    return 0;
  const int e = errno;
  if (d->carrier) ibv_destroy_qp(std::exchange(d->carrier, nullptr));
  ibv_destroy_cq(std::exchange(d->carrier_cq, nullptr));
  return fail(e);
}

void free_carrier(Id* d) {
  if (d->carrier) ibv_destroy_qp(std::exchange(d->carrier, nullptr));
  if (d->carrier_cq) ibv_destroy_cq(std::exchange(d->carrier_cq, nullptr));
}

// The QP's connection events go to this id from now on.
void hook(Id* d) {
  VQp* v = vqp_of(d);
  std::lock_guard lk(v->cm_mu);
  v->cm = d->sink;
}

void unhook(Id* d) {
  if (VQp* v = vqp_of(d)) {
    std::lock_guard lk(v->cm_mu);
    if (v->cm == d->sink) v->cm.reset();
  }
}

// rdma_cm's conn_param on the QP: ord its initiator_depth, ird its responder_resources; without
// one, what the device allows (the peer's answer negotiates them down, as rdma_cm's defaults).
int apply_param(Id* d, const rdma_conn_param* p) {
  const std::uint32_t max = d->ctx->dev->limits().max_rd;
  const std::uint32_t ord = p ? std::min<std::uint32_t>(p->initiator_depth, max) : max;
  const std::uint32_t ird = p ? std::min<std::uint32_t>(p->responder_resources, max) : max;
  const Status s = d->ctx->dev->set_qp_rd_atomic(vqp_of(d)->q, ord, ird);
  return s == Status::ok ? 0 : fail(to_errno(s));
}

std::span<const std::uint8_t> pd_of(const rdma_conn_param* p) {
  if (!p || !p->private_data) return {};
  return {static_cast<const std::uint8_t*>(p->private_data), p->private_data_len};
}

// A connection request on a device `d` listens on: a new id for it, and CONNECT_REQUEST.
void on_request(const std::shared_ptr<Sink>& sink, Context* c, ibv_pd* pd, std::uint16_t port, ConnRequest* r,
                const ConnRequestInfo& info) {
  std::lock_guard lk(sink->mu);
  Id* l = sink->id;
  if (!l) return;  // (destroyed while its listen ended: the peer's request times out)
  auto* n = new Id;
  n->sink->id = n;
  n->ch = l->ch;
  n->id.channel = l->id.channel;
  n->id.context = l->id.context;
  n->id.ps = l->id.ps;
  n->id.qp_type = l->id.qp_type;
  attach(n, c, pd);
  n->bound = n->routed = true;
  n->req = r;
  set_sin(n->id.route.addr.src_sin, c->dev->address().ip, port);
  set_sin(n->id.route.addr.dst_sin, info.remote.ip, info.remote.port);
  auto* e = new Event;
  e->ev.id = &n->id;
  e->ev.listen_id = &l->id;
  e->ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
  e->pd = info.private_data;
  // (softrnic's request does not carry the peer's depths: what this device offers at most.)
  const auto depth = static_cast<std::uint8_t>(std::min<std::uint32_t>(c->dev->limits().max_rd, 255));
  e->ev.param.conn.responder_resources = depth;
  e->ev.param.conn.initiator_depth = depth;
  e->ev.param.conn.retry_count = 7;
  e->ev.param.conn.rnr_retry_count = 7;
  post(l->ch, e);
}

int listen_on(Id* d, Context* c, std::uint16_t port) {
  ibv_pd* pd = default_pd(c);  // (for its requests' ids: attach)
  if (!pd) return -1;
  auto sink = d->sink;
  const Status s = c->dev->listen(port, [sink, c, pd, port](ConnRequest* r, const ConnRequestInfo& info) {
    on_request(sink, c, pd, port, r, info);
  });
  if (s == Status::in_use) return fail(EADDRINUSE);
  if (s != Status::ok) return fail(to_errno(s));
  d->listens.emplace_back(c, port);
  return 0;
}

// The ports rdma_bind_addr picked for ids bound to port 0, while they live. rdma_cm gives such an
// id its port at bind, and programs read it before they listen (qperf sends it to its client).
struct Picked {
  std::mutex mu;
  std::set<std::uint16_t> ports;
  std::minstd_rand rng{std::random_device{}()};
};

Picked& picked() {
  static auto* p = new Picked;  // (never destroyed, as devs())
  return *p;
}

std::uint16_t pick_port() {
  Picked& p = picked();
  std::lock_guard lk(p.mu);
  for (;;) {
    const auto port = static_cast<std::uint16_t>(32768 + p.rng() % 28232);
    if (p.ports.insert(port).second) return port;
  }
}

void release_port(std::uint16_t port) {
  Picked& p = picked();
  std::lock_guard lk(p.mu);
  p.ports.erase(port);
}

void stop_listening(Id* d) {
  for (auto& [c, port] : d->listens) c->dev->stop_listen(port);
  d->listens.clear();
}

}  // namespace

std::vector<Context*> contexts() {
  Devices& s = devs();
  std::lock_guard lk(s.mu);
  if (!s.opened) {
    s.opened = true;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    for (int i = 0; i < n; ++i)
      if (ibv_context* c = ibv_open_device(list[i])) s.ctxs.push_back(ctx_of(c));
    if (list) ibv_free_device_list(list);
  }
  return s.ctxs;
}

Context* context_at(std::uint32_t ip) {
  for (Context* c : contexts())
    if (c->dev->address().ip == ip) return c;
  return nullptr;
}

Context* route_to(std::uint32_t dst) {
  const auto all = contexts();
  for (Context* c : all)
    if (c->dev->address().ip == dst) return c;
  return all.empty() ? nullptr : all.front();
}

ibv_pd* default_pd(Context* c) {
  Devices& s = devs();
  std::lock_guard lk(s.mu);
  for (auto& [ctx, pd] : s.pds)
    if (ctx == c) return pd;
  ibv_pd* pd = ibv_alloc_pd(&c->vctx.context);
  if (pd) s.pds.emplace_back(c, pd);
  return pd;
}

}  // namespace softrnic::verbs::cm

using namespace softrnic;
using namespace softrnic::verbs;
using namespace softrnic::verbs::cm;

extern "C" {

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
  if (!id) return fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB) return fail(EPROTONOSUPPORT);  // (UDP, IPoIB: no UD QPs)
  auto* d = new Id;
  d->sink->id = d;
  d->id.context = context;
  d->id.ps = ps;
  d->id.qp_type = IBV_QPT_RC;
  if (channel) {
    d->ch = reinterpret_cast<EventChannel*>(channel);
  } else {
    if (!(d->own = new_channel())) {
      delete d;
      return -1;
    }
    d->ch = d->own;
    d->sync = true;
  }
  d->id.channel = &d->ch->ch;
  *id = &d->id;
  return 0;
}

int rdma_destroy_id(rdma_cm_id* id) {
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  stop_listening(d);
  unhook(d);
  if (d->req) d->ctx->dev->reject(d->req, {});  // a request nobody answered
  {
    std::lock_guard lk(d->sink->mu);
    d->sink->id = nullptr;
  }
  if (id->event) rdma_ack_cm_event(std::exchange(id->event, nullptr));  // (a sync id's last)
  drop_events_of(d->ch, id);
  {
    std::unique_lock lk(d->ev_mu);
    d->ev_cv.wait(lk, [d] { return d->unacked == 0; });
  }
  free_carrier(d);
  if (d->own) free_channel(d->own);
  if (d->picked) release_port(d->picked);
  delete d;
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (!id || !addr) return fail(EINVAL);
  if (addr->sa_family != AF_INET) return fail(EAFNOSUPPORT);  // (no IPv6 path in softrnic)
  Id* d = id_of(id);
  if (d->bound) return fail(EINVAL);
  const std::uint32_t ip = ip_of(addr);
  if (ip != INADDR_ANY) {
    // A loopback address no device has binds as rdma_cm binds it: without a device (id->verbs
    // NULL), listening on every device. libfabric's verbs provider binds "localhost" so, and
    // takes the addresses of its interfaces instead when the id has no device.
    Context* c = context_at(ip);
    if (!c && (ip >> 24) != 127) return fail(EADDRNOTAVAIL);
    if (c) attach(d, c);
  }
  std::memcpy(&id->route.addr.src_sin, addr, sizeof(sockaddr_in));
  if (port_of(addr) == 0) id->route.addr.src_sin.sin_port = htons(d->picked = pick_port());
  d->bound = true;
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int) {
  if (!id || !dst) return fail(EINVAL);
  if (dst->sa_family != AF_INET || (src && src->sa_family != AF_INET)) return fail(EAFNOSUPPORT);
  Id* d = id_of(id);
  if (src && !d->bound && rdma_bind_addr(id, src) != 0) return -1;
  if (!d->ctx) {
    Context* c = route_to(ip_of(dst));
    if (!c) return fail(ENODEV);
    attach(d, c);
  }
  const std::uint16_t port = port_of(&id->route.addr.src_addr);
  set_sin(id->route.addr.src_sin, d->ctx->dev->address().ip, port);
  std::memcpy(&id->route.addr.dst_sin, dst, sizeof(sockaddr_in));
  d->bound = true;
  queue(d, RDMA_CM_EVENT_ADDR_RESOLVED);
  return complete(d);
}

int rdma_resolve_route(rdma_cm_id* id, int) {
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  if (!d->ctx || id->route.addr.dst_addr.sa_family != AF_INET) return fail(EINVAL);
  d->routed = true;
  queue(d, RDMA_CM_EVENT_ROUTE_RESOLVED);
  return complete(d);
}

int rdma_listen(rdma_cm_id* id, int) {
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  if (!d->bound) return fail(EINVAL);
  if (!d->listens.empty()) return 0;
  std::vector<Context*> on = d->ctx ? std::vector<Context*>{d->ctx} : contexts();
  if (on.empty()) return fail(ENODEV);
  std::uint16_t port = port_of(&id->route.addr.src_addr);
  const bool pick = port == 0;  // an ephemeral port, as rdma_cm picks one
  std::minstd_rand rng(std::random_device{}());
  for (int attempt = 0; attempt < 64; ++attempt) {
    if (pick) port = static_cast<std::uint16_t>(32768 + rng() % 28232);
    int r = 0;
    for (Context* c : on)
      if ((r = listen_on(d, c, port)) != 0) break;
    if (r == 0) {
      id->route.addr.src_sin.sin_port = htons(port);
      return 0;
    }
    const int e = errno;
    stop_listening(d);
    if (!pick || e != EADDRINUSE) return fail(e);
  }
  return fail(EADDRINUSE);
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* param) {
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  if (!d->routed || d->req || d->carrier) return fail(EINVAL);
  if (!id->qp && make_carrier(d) != 0) return -1;
  d->active = true;
  if (apply_param(d, param) != 0) return -1;
  hook(d);
  const NetAddr remote{ip_of(&id->route.addr.dst_addr), d->ctx->dev->address().port};
  const Status s = d->ctx->dev->connect(vqp_of(d)->q, remote, port_of(&id->route.addr.dst_addr), pd_of(param),
                                        std::chrono::milliseconds(0));
  if (s != Status::ok) {
    unhook(d);
    return fail(s == Status::invalid_param ? EINVAL : to_errno(s));
  }
  const NetAddr local = d->ctx->dev->qp_local(vqp_of(d)->q);
  if (local.port) id->route.addr.src_sin.sin_port = htons(local.port);
  return complete(d);
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* param) {
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  if (!d->req || d->carrier) return fail(EINVAL);
  if (!id->qp && make_carrier(d) != 0) return -1;
  if (apply_param(d, param) != 0) return -1;
  hook(d);
  const Status s = d->ctx->dev->accept(std::exchange(d->req, nullptr), vqp_of(d)->q, pd_of(param));
  if (s != Status::ok) {
    unhook(d);
    return fail(to_errno(s));
  }
  return complete(d);
}

int rdma_reject(rdma_cm_id* id, const void* private_data, std::uint8_t len) {
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  if (!d->req) return fail(EINVAL);
  const Status s =
      d->ctx->dev->reject(std::exchange(d->req, nullptr), {static_cast<const std::uint8_t*>(private_data), len});
  return s == Status::ok ? 0 : fail(to_errno(s));
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, std::uint8_t len) {
  return rdma_reject(id, private_data, len);
}

int rdma_disconnect(rdma_cm_id* id) {
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  VQp* v = vqp_of(d);
  if (!v) return fail(EINVAL);
  // rdma_cm's: the QP goes to error (what is outstanding is flushed) and the peer hears a DREQ.
  // After the peer's own disconnect (or a broken connection) there is nothing left to end, and
  // rdma_cm answers 0 (iw_cm_disconnect in CLOSING, a DREP for the IB CM's DREQ); an id whose QP
  // never connected gets EINVAL.
  Device* dev = d->ctx->dev;
  const Status s = dev->disconnect(v->q, false);
  if (s == Status::invalid_state) {
    bool ended;
    {
      std::lock_guard lk(d->sink->mu);  // (Sink::on_event sets it)
      ended = d->ended;
    }
    if (dev->qp_state(v->q) == QpState::idle && !ended) return fail(EINVAL);
    if (dev->qp_state(v->q) != QpState::error) dev->modify_qp(v->q, QpState::error);
    return 0;
  }
  return s == Status::ok ? 0 : fail(to_errno(s));
}

int rdma_establish(rdma_cm_id* id) {
  // After CONNECT_RESPONSE of a connection without a QP: softrnic's CM sent its RTU already
  // (the carrier QP is connected), so there is nothing left to send.
  if (!id) return fail(EINVAL);
  Id* d = id_of(id);
  return d->carrier && d->active ? 0 : fail(EINVAL);
}

int rdma_notify(rdma_cm_id* id, ibv_event_type) {
  // (softrnic's CM reports a connection established on its first packet already.)
  return id ? 0 : fail(EINVAL);
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!id || !attr) return fail(EINVAL);
  Id* d = id_of(id);
  if (!d->ctx || id->qp) return fail(EINVAL);
  if (!pd && !(pd = default_pd(d->ctx))) return -1;
  if (pd->context != id->verbs) return fail(EINVAL);
  ibv_qp_init_attr a = *attr;
  a.qp_type = id->qp_type;         // (the port space's: RC; rdma_cm ignores the caller's)
  if (!a.send_cq || !a.recv_cq) {  // rdma_cm makes them, each with a completion channel
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    const int ssz = static_cast<int>(std::max<std::uint32_t>(a.cap.max_send_wr, 1));
    const int rsz = static_cast<int>(std::max<std::uint32_t>(a.cap.max_recv_wr, 1));
    if (id->send_cq_channel && id->recv_cq_channel) {
      id->send_cq = ibv_create_cq(id->verbs, ssz, id, id->send_cq_channel, 0);
      id->recv_cq = ibv_create_cq(id->verbs, rsz, id, id->recv_cq_channel, 0);
    }
    d->own_cqs = true;
    if (!id->send_cq || !id->recv_cq) {
      const int e = errno;
      rdma_destroy_qp(id);
      return fail(e ? e : ENOMEM);
    }
    a.send_cq = id->send_cq;
    a.recv_cq = id->recv_cq;
  }
  ibv_qp* qp = ibv_create_qp(pd, &a);
  if (!qp) {
    const int e = errno;
    rdma_destroy_qp(id);
    return fail(e);
  }
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  int mask = 0;
  rdma_init_qp_attr(id, &init, &mask);  // (what rdma_cm gives a QP it moves to INIT itself)
  if (const int e = ibv_modify_qp(qp, &init, mask)) {
    ibv_destroy_qp(qp);
    rdma_destroy_qp(id);
    return fail(e);
  }
  attr->cap = a.cap;  // (the caps as created, as ibv_create_qp leaves them)
  id->qp = qp;
  id->pd = pd;
  id->send_cq = a.send_cq;
  id->recv_cq = a.recv_cq;
  return 0;
}

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!id || !attr) return fail(EINVAL);
  // Only what ibv_qp_init_attr says (and its PD): the extended attributes are ibv_create_qp_ex's.
  if (attr->comp_mask & ~static_cast<std::uint32_t>(IBV_QP_INIT_ATTR_PD)) return fail(EOPNOTSUPP);
  ibv_qp_init_attr a{};
  a.qp_context = attr->qp_context;
  a.send_cq = attr->send_cq;
  a.recv_cq = attr->recv_cq;
  a.srq = attr->srq;
  a.cap = attr->cap;
  a.qp_type = attr->qp_type;
  a.sq_sig_all = attr->sq_sig_all;
  const int r = rdma_create_qp(id, (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr, &a);
  if (r == 0) attr->cap = a.cap;
  return r;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (!id) return;
  Id* d = id_of(id);
  unhook(d);
  if (id->qp) ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  if (d->own_cqs) {
    if (id->send_cq) ibv_destroy_cq(id->send_cq);
    if (id->recv_cq) ibv_destroy_cq(id->recv_cq);
    if (id->send_cq_channel) ibv_destroy_comp_channel(id->send_cq_channel);
    if (id->recv_cq_channel) ibv_destroy_comp_channel(id->recv_cq_channel);
    id->send_cq = id->recv_cq = nullptr;
    id->send_cq_channel = id->recv_cq_channel = nullptr;
    d->own_cqs = false;
  }
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!id || !attr || !id->verbs) return fail(EINVAL);
  if (!pd && !(pd = default_pd(id_of(id)->ctx))) return -1;
  ibv_srq* srq = ibv_create_srq(pd, attr);
  if (!srq) return -1;
  id->srq = srq;
  id->pd = pd;
  return 0;
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (!id || !attr) return fail(EINVAL);
  if (attr->comp_mask & ~static_cast<std::uint32_t>(IBV_SRQ_INIT_ATTR_PD)) return fail(EOPNOTSUPP);
  ibv_srq_init_attr a{};
  a.srq_context = attr->srq_context;
  a.attr = attr->attr;
  return rdma_create_srq(id, (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : nullptr, &a);
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (!id || !id->srq) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
}

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* attr, int* mask) {
  if (!id || !attr || !mask) return fail(EINVAL);
  Id* d = id_of(id);
  switch (attr->qp_state) {
    case IBV_QPS_INIT:
      attr->pkey_index = 0;
      attr->port_num = 1;
      attr->qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      return 0;
    case IBV_QPS_RTR:
    case IBV_QPS_RTS:
      // RoCEv2's path to the peer (its address as GID, index 1 ours, the device's MTU), as UCX
      // packs it for its peer. The peer's QPN and first PSN are not known here: softrnic's CM
      // connects the id's own (or carrier) QP and keeps them there; a consumer that connects a
      // QP of its own trades them in its private data (docs/verbs.md).
      if (!d->ctx || !d->routed || d->ctx->dev->wire() != Wire::roce) return fail(EINVAL);
      if (attr->qp_state == IBV_QPS_RTR) {
        attr->ah_attr = ibv_ah_attr{};
        attr->ah_attr.is_global = 1;
        attr->ah_attr.port_num = 1;
        attr->ah_attr.grh.sgid_index = 1;
        attr->ah_attr.grh.hop_limit = 64;
        const std::uint32_t ip = htonl(ip_of(&id->route.addr.dst_addr));
        attr->ah_attr.grh.dgid.raw[10] = attr->ah_attr.grh.dgid.raw[11] = 0xFF;
        std::memcpy(&attr->ah_attr.grh.dgid.raw[12], &ip, 4);
        attr->path_mtu = mtu_enum(d->ctx->dev->path_mtu());
        attr->dest_qp_num = 0;
        attr->rq_psn = 0;
        attr->max_dest_rd_atomic = static_cast<std::uint8_t>(d->ctx->dev->limits().max_rd);
        attr->min_rnr_timer = 12;
        *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      } else {
        attr->timeout = 14;
        attr->retry_cnt = attr->rnr_retry = 7;
        attr->sq_psn = 0;
        attr->max_rd_atomic = static_cast<std::uint8_t>(d->ctx->dev->limits().max_rd);
        *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                IBV_QP_MAX_QP_RD_ATOMIC;
      }
      return 0;
    default: return fail(EINVAL);
  }
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, std::size_t optlen) {
  if (!id || (optlen && !optval)) return fail(EINVAL);
  // Accepted and kept by softrnic's defaults: the TOS byte, address reuse (ports are per device
  // and per process), AF_INET only, the ACK timeout (ibv_modify_qp sets it for verbs QPs).
  if (level == RDMA_OPTION_ID && optname >= RDMA_OPTION_ID_TOS && optname <= RDMA_OPTION_ID_ACK_TIMEOUT) return 0;
  if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) return fail(EOPNOTSUPP);  // (no SA paths)
  return fail(ENOSYS);
}

int rdma_set_local_ece(rdma_cm_id* id, ibv_ece*) {
  return fail(id ? EOPNOTSUPP : EINVAL);  // (as ibv_set_ece: no ECE)
}

int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece*) {
  return fail(id ? EOPNOTSUPP : EINVAL);
}

std::uint16_t rdma_get_src_port(rdma_cm_id* id) {
  return id && id->route.addr.src_addr.sa_family == AF_INET ? id->route.addr.src_sin.sin_port : 0;
}

std::uint16_t rdma_get_dst_port(rdma_cm_id* id) {
  return id && id->route.addr.dst_addr.sa_family == AF_INET ? id->route.addr.dst_sin.sin_port : 0;
}

ibv_context** rdma_get_devices(int* num) {
  const auto all = contexts();
  auto** list = static_cast<ibv_context**>(std::calloc(all.size() + 1, sizeof(ibv_context*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (std::size_t i = 0; i < all.size(); ++i) list[i] = &all[i]->vctx.context;
  if (num) *num = static_cast<int>(all.size());
  return list;
}

void rdma_free_devices(ibv_context** list) {
  std::free(list);
}

int rdma_join_multicast(rdma_cm_id* id, sockaddr*, void*) {
  return fail(id ? EOPNOTSUPP : EINVAL);  // (no UD QPs: docs/verbs.md)
}

int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex*, void*) {
  return fail(id ? EOPNOTSUPP : EINVAL);
}

int rdma_leave_multicast(rdma_cm_id* id, sockaddr*) {
  return fail(id ? EADDRNOTAVAIL : EINVAL);  // (never joined)
}

}  // extern "C"
