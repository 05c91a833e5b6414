// The synchronous endpoint calls over the ids: rdma_getaddrinfo, rdma_create_ep,
// rdma_get_request, rdma_destroy_ep (rdma_server, rdma_client and the librdmacm examples).
#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdmacm.hpp"

using namespace softrnic::verbs;
using namespace softrnic::verbs::cm;

namespace {

sockaddr* copy_addr(const sockaddr* a, socklen_t len) {
  auto* c = static_cast<sockaddr*>(std::malloc(len));
  if (c) std::memcpy(c, a, len);
  return c;
}

// The getaddrinfo error as rdma_getaddrinfo's (it returns getaddrinfo's codes, errno set).
int gai_fail(int r) {
  errno = r == EAI_SYSTEM ? errno : r == EAI_NONAME ? ENOENT : EINVAL;
  return r;
}

// getaddrinfo of node and service into ri: its source address when passive, else its
// destination. 0, or getaddrinfo's code with errno set.
int lookup(const char* node, const char* service, int flags, rdma_addrinfo* ri) {
  addrinfo h{};
  h.ai_family = AF_INET;
  h.ai_socktype = SOCK_STREAM;
  if (flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
  if (flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  if (const int r = getaddrinfo(node, service, &h, &ai)) return gai_fail(r);
  sockaddr* a = copy_addr(ai->ai_addr, ai->ai_addrlen);
  const socklen_t len = ai->ai_addrlen;
  freeaddrinfo(ai);
  if (!a) return gai_fail(EAI_MEMORY);
  ((flags & RAI_PASSIVE) ? ri->ai_src_addr : ri->ai_dst_addr) = a;
  ((flags & RAI_PASSIVE) ? ri->ai_src_len : ri->ai_dst_len) = len;
  return 0;
}

}  // namespace

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
  if (!res || (!node && !service && !hints)) return gai_fail(EAI_NONAME);
  const int flags = hints ? hints->ai_flags : 0;
  if (hints && hints->ai_family != AF_UNSPEC && hints->ai_family != AF_INET) {
    errno = EAFNOSUPPORT;  // (softrnic has no IPv6 path; AF_IB is InfiniBand's)
    return EAI_FAMILY;
  }
  auto* ri = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!ri) return gai_fail(EAI_MEMORY);
  ri->ai_flags = flags;
  ri->ai_family = AF_INET;
  ri->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
  ri->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  // As rdma-core's: a node or service is looked up (the source address when passive, else the
  // destination); without either, the hints' destination is the result's. The hints' source
  // fills a source still empty.
  if (node || service) {
    if (const int r = lookup(node, service, flags, ri)) {
      rdma_freeaddrinfo(ri);
      return r;
    }
  } else if (hints->ai_dst_addr && hints->ai_dst_len) {
    ri->ai_dst_len = hints->ai_dst_len;
    if (!(ri->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len))) {
      rdma_freeaddrinfo(ri);
      return gai_fail(EAI_MEMORY);
    }
  }
  if (!ri->ai_src_addr && hints && hints->ai_src_addr && hints->ai_src_len) {
    ri->ai_src_len = hints->ai_src_len;
    if (!(ri->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len))) {
      rdma_freeaddrinfo(ri);
      return gai_fail(EAI_MEMORY);
    }
  }
  *res = ri;
  return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!id || !res) return fail(EINVAL);
  rdma_cm_id* cid = nullptr;
  if (rdma_create_id(nullptr, &cid, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) != 0) return -1;
  Id* d = id_of(cid);
  int r = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    r = rdma_bind_addr(cid, res->ai_src_addr);
    if (r == 0 && qp_init_attr) {  // each request's id gets a QP like this (rdma_get_request)
      d->child_attr = *qp_init_attr;
      d->child_pd = pd;
    }
  } else {
    r = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (r == 0) r = rdma_resolve_route(cid, 2000);
    if (r == 0 && qp_init_attr) r = rdma_create_qp(cid, pd, qp_init_attr);
  }
  if (r != 0) {
    const int e = errno;
    rdma_destroy_ep(cid);
    return fail(e);
  }
  *id = cid;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (!listen || !id) return fail(EINVAL);
  Id* l = id_of(listen);
  if (!l->sync) return fail(EINVAL);
  rdma_cm_event* ev = nullptr;
  for (;;) {
    if (rdma_get_cm_event(listen->channel, &ev) != 0) return -1;
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) break;
    rdma_ack_cm_event(ev);  // (nothing else happens to a listening id)
  }
  rdma_cm_id* n = ev->id;
  n->event = ev;  // (its private data stays readable until the id's next call: complete)
  // The new id is synchronous too, on a channel of its own (its ESTABLISHED goes there).
  if (rdma_migrate_id(n, nullptr) != 0 || (l->child_attr && rdma_create_qp(n, l->child_pd, &*l->child_attr) != 0)) {
    const int e = errno;
    rdma_reject(n, nullptr, 0);
    rdma_destroy_ep(n);
    return fail(e);
  }
  *id = n;
  return 0;
}

}  // extern "C"
