// Our own DAT consumer tests, through libdat2 and dat.conf (DAT_OVERRIDE is set by ctest).
// The IA `softrnic_loopback` runs the RNIC over the in-process loopback netdev, so one process
// can hold both ends of a connection.
#include <arpa/inet.h>
#include <dat2/udat.h>
#include <fcntl.h>
#include <poll.h>

#include <map>
// after udat.h: the provider table, for calls libdat2 does not export
#include <dat2/dat_registry.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "dat_helpers.hpp"

using namespace dattest;

TEST(DatApi, UnknownProviderIsNotFound) {
  DAT_IA_HANDLE ia;
  DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
  EXPECT_EQ(type_of(dat_ia_open(const_cast<char*>("no_such_ia"), 8, &async, &ia)), DAT_PROVIDER_NOT_FOUND);
}

TEST(DatApi, QueryReportsWhatTheRnicEnforces) {
  Ia ia;
  DAT_IA_ATTR a;
  // DAT_PROVIDER_ATTR has a const array member: no default constructor in C++.
  alignas(DAT_PROVIDER_ATTR) unsigned char raw[sizeof(DAT_PROVIDER_ATTR)] = {};
  auto& p = *reinterpret_cast<DAT_PROVIDER_ATTR*>(raw);
  ASSERT_EQ(dat_ia_query(ia.ia, nullptr, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p), DAT_SUCCESS);
  EXPECT_EQ(p.dapl_version_major, 2u);
  EXPECT_EQ(p.dapl_version_minor, 0u);
  EXPECT_EQ(p.is_thread_safe, DAT_FALSE);
  EXPECT_GE(p.max_private_data_size, 64);
  EXPECT_EQ(256 % p.optimal_buffer_alignment, 0u);
  EXPECT_STREQ(p.provider_name, "softrnic_loopback");
  const auto* sa = reinterpret_cast<const sockaddr_in*>(a.ia_address_ptr);
  EXPECT_EQ(sa->sin_family, AF_INET);
  EXPECT_EQ(ntohl(sa->sin_addr.s_addr), 0x7F000001u) << "a real address, not 0.0.0.0";
  EXPECT_NE(sa->sin_port, 0);
  EXPECT_GT(a.max_eps, 0);
  // Provider-specific attributes: the wire, and the IB MTU of the link (the in-process loopback
  // netdev has none: 4096, the largest).
  std::map<std::string, std::string> attrs;
  for (DAT_COUNT i = 0; i < p.num_provider_specific_attr; ++i)
    attrs[p.provider_specific_attr[i].name] = p.provider_specific_attr[i].value;
  EXPECT_EQ(attrs["DAT_IB_RDMA_READ"], "TRUE");
  EXPECT_EQ(attrs["DAT_IB_TRANSPORT_MTU"], "4096");
  EXPECT_EQ(attrs["SOFTRNIC_TRANSPORT"], "iwarp-udp");
}

TEST(DatApi, EndToEndSendRecvWriteDisconnect) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  // Receives posted before the connection.
  for (int i = 0; i < 2; ++i) {
    DAT_LMR_TRIPLET t = b.iov(static_cast<std::size_t>(i) * 100, 100);
    DAT_DTO_COOKIE c;
    c.as_64 = static_cast<DAT_UINT64>(10 + i);
    ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  }
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);

  std::strcpy(a.buf.data(), "hello over DAT");
  DAT_LMR_TRIPLET s = a.iov(0, 15);
  DAT_DTO_COOKIE c;
  c.as_64 = 0xAAAA;
  ASSERT_EQ(dat_ep_post_send(a.ep, 1, &s, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  DAT_EVENT e = wait_event(a.req);
  ASSERT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
  EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
  EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 15u);
  EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 0xAAAAu);
  EXPECT_EQ(e.event_data.dto_completion_event_data.ep_handle, a.ep);
  e = wait_event(b.rcv);
  EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 10u);
  EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 15u);
  EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
  EXPECT_STREQ(b.buf.data(), "hello over DAT");

  // RDMA Write, suppressed, then a signaled one: only the signaled one completes.
  std::memset(a.buf.data() + 1000, 'w', 5000);
  DAT_LMR_TRIPLET w = a.iov(1000, 5000);
  DAT_RMR_TRIPLET r;
  r.rmr_context = b.rctx;
  r.virtual_address = reinterpret_cast<DAT_VADDR>(b.buf.data() + 20000);
  r.segment_length = 5000;
  c.as_64 = 1;
  ASSERT_EQ(dat_ep_post_rdma_write(a.ep, 1, &w, c, &r, DAT_COMPLETION_SUPPRESS_FLAG), DAT_SUCCESS);
  c.as_64 = 2;
  ASSERT_EQ(dat_ep_post_rdma_write(a.ep, 1, &w, c, &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  e = wait_event(a.req);
  EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 2u);
  EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RDMA_WRITE);
  EXPECT_EQ(std::string(b.buf.data() + 20000, 5000), std::string(5000, 'w'));
  DAT_EVENT none;
  EXPECT_EQ(dat_evd_dequeue(a.req, &none), DAT_QUEUE_EMPTY) << "plain DAT_QUEUE_EMPTY, and no suppressed event";

  DAT_EP_PARAM ep;
  ASSERT_EQ(dat_ep_query(a.ep, DAT_EP_FIELD_ALL, &ep), DAT_SUCCESS);
  EXPECT_EQ(ep.ep_state, DAT_EP_STATE_CONNECTED);
  EXPECT_EQ(ep.remote_port_qual, kQual);
  ASSERT_NE(ep.remote_ia_address_ptr, nullptr);
  ASSERT_NE(ep.local_ia_address_ptr, nullptr);
  // The port qualifiers as OFA dapl reports them: the active side's own port, and on the passive
  // side the conn_qual it listened on and the active side's port.
  EXPECT_NE(ep.local_port_qual, 0u);
  DAT_EP_PARAM pep;
  ASSERT_EQ(dat_ep_query(b.ep, DAT_EP_FIELD_ALL, &pep), DAT_SUCCESS);
  EXPECT_EQ(pep.local_port_qual, kQual);
  EXPECT_EQ(pep.remote_port_qual, ep.local_port_qual);

  ASSERT_EQ(dat_ep_disconnect(a.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.conn).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
  EXPECT_EQ(wait_event(b.conn).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
  e = wait_event(b.rcv);
  EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 11u);
  EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
  DAT_LMR_TRIPLET t = a.iov(0, 8);
  EXPECT_EQ(type_of(dat_ep_post_send(a.ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_STATE);
}

TEST(DatApi, RejectReachesTheActiveSide) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  DAT_EVD_HANDLE cr_evd;
  DAT_PSP_HANDLE psp;
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
  ASSERT_EQ(dat_psp_create(ia.ia, kQual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
  DAT_PSP_HANDLE psp2;
  EXPECT_EQ(type_of(dat_psp_create(ia.ia, kQual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2)), DAT_CONN_QUAL_IN_USE);
  sockaddr_in to = ia_address(ia.ia);
  ASSERT_EQ(dat_ep_connect(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), kQual, kWait, 0, nullptr,
                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
            DAT_SUCCESS);
  const DAT_EVENT cr = wait_event(cr_evd);
  ASSERT_EQ(dat_cr_reject(cr.event_data.cr_arrival_event_data.cr_handle, 0, nullptr), DAT_SUCCESS);
  EXPECT_EQ(type_of(dat_cr_accept(cr.event_data.cr_arrival_event_data.cr_handle, b.ep, 0, nullptr)), DAT_INVALID_HANDLE)
      << "the CR is gone after reject";
  EXPECT_EQ(wait_event(a.conn).event_number, DAT_CONNECTION_EVENT_PEER_REJECTED);
}

TEST(DatApi, BadInputGetsAClearReturn) {
  Ia ia;
  End a;
  a.make(ia);
  DAT_LMR_TRIPLET t = a.iov(0, 8);
  DAT_DTO_COOKIE c;
  c.as_64 = 0;
  DAT_EVENT ev;
  DAT_COUNT nmore;
  // NULL handles.
  EXPECT_EQ(type_of(dat_ep_post_send(DAT_HANDLE_NULL, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_HANDLE);
  EXPECT_EQ(type_of(dat_evd_dequeue(DAT_HANDLE_NULL, &ev)), DAT_INVALID_HANDLE);
  EXPECT_EQ(type_of(dat_pz_free(DAT_HANDLE_NULL)), DAT_INVALID_HANDLE);
  // An EVD passed as an EP, an EP as an EVD, an LMR as a PZ.
  EXPECT_EQ(type_of(dat_ep_post_send(a.req, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_HANDLE);
  EXPECT_EQ(type_of(dat_ep_free(a.rcv)), DAT_INVALID_HANDLE);
  EXPECT_EQ(type_of(dat_evd_wait(a.ep, kWait, 1, &ev, &nmore)), DAT_INVALID_HANDLE);
  EXPECT_EQ(type_of(dat_pz_free(a.lmr)), DAT_INVALID_HANDLE);
  // Stale handles: freed objects.
  DAT_PZ_HANDLE pz2;
  ASSERT_EQ(dat_pz_create(ia.ia, &pz2), DAT_SUCCESS);
  ASSERT_EQ(dat_pz_free(pz2), DAT_SUCCESS);
  EXPECT_EQ(type_of(dat_pz_free(pz2)), DAT_INVALID_HANDLE);
  DAT_EVD_HANDLE e2;
  ASSERT_EQ(dat_evd_create(ia.ia, 4, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &e2), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_free(e2), DAT_SUCCESS);
  EXPECT_EQ(type_of(dat_evd_dequeue(e2, &ev)), DAT_INVALID_HANDLE);
  // In use.
  EXPECT_EQ(type_of(dat_pz_free(ia.pz)), DAT_INVALID_STATE);
  EXPECT_EQ(type_of(dat_evd_free(a.req)), DAT_INVALID_STATE);
  // Posting on an unconnected EP.
  EXPECT_EQ(type_of(dat_ep_post_send(a.ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_STATE);
  DAT_RMR_TRIPLET r{};
  EXPECT_EQ(type_of(dat_ep_post_rdma_write(a.ep, 1, &t, c, &r, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_STATE);
  // Out-of-range arguments.
  EXPECT_EQ(type_of(dat_ep_post_recv(a.ep, -1, &t, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_PARAMETER);
  EXPECT_EQ(type_of(dat_ep_post_recv(a.ep, 1000, &t, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_PARAMETER);
  EXPECT_EQ(type_of(dat_ep_post_recv(a.ep, 1, nullptr, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_PARAMETER);
  DAT_LMR_TRIPLET bad = t;
  // The pages' classes (dat_srq_post_recv, dat_ep_post_recv): an invalid LMR is a privileges
  // violation, a segment outside its LMR an invalid parameter.
  bad.lmr_context ^= 0x1;
  EXPECT_EQ(type_of(dat_ep_post_recv(a.ep, 1, &bad, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_PRIVILEGES_VIOLATION);
  bad = t;
  bad.segment_length = static_cast<DAT_SEG_LENGTH>(a.buf.size() + 1);
  EXPECT_EQ(type_of(dat_ep_post_recv(a.ep, 1, &bad, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_PARAMETER);
  EXPECT_EQ(type_of(dat_evd_wait(a.req, kWait, 0, &ev, &nmore)), DAT_INVALID_PARAMETER);
  EXPECT_EQ(type_of(dat_evd_wait(a.req, kWait, 65, &ev, &nmore)), DAT_INVALID_PARAMETER) << "threshold > qlen";
  EXPECT_EQ(type_of(dat_evd_wait(a.req, 1000, 1, &ev, &nmore)), DAT_TIMEOUT_EXPIRED);
  EXPECT_EQ(nmore, 0);
  EXPECT_EQ(type_of(dat_evd_create(ia.ia, 0, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &e2)), DAT_INVALID_PARAMETER);
  // Private data over the limit, and other bad connect arguments.
  std::vector<char> big(257);
  sockaddr_in to = ia_address(ia.ia);
  EXPECT_EQ(type_of(dat_ep_connect(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), kQual, kWait, 257, big.data(),
                                   DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
            DAT_INVALID_PARAMETER);
  EXPECT_EQ(
      type_of(dat_ep_connect(a.ep, nullptr, kQual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
      DAT_INVALID_ADDRESS);
  EXPECT_EQ(type_of(dat_cr_handoff(a.ep, 5)), DAT_INVALID_HANDLE) << "an EP is no CR";
  EXPECT_EQ(type_of(dat_ep_modify(a.ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, nullptr)), DAT_INVALID_PARAMETER);
  // Still unimplemented calls say so.
  // (libdat2 does not export dat_ep_common_connect: through the provider table)
  EXPECT_EQ(type_of(DAT_HANDLE_TO_PROVIDER(a.ep)->ep_common_connect_func(
                a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), kWait, 0, nullptr)),
            DAT_NOT_IMPLEMENTED);
}

TEST(DatApi, GracefulCloseRefusedWhileObjectsLive) {
  DAT_IA_HANDLE ia;
  DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
  ASSERT_EQ(dat_ia_open(const_cast<char*>("softrnic_loopback"), 8, &async, &ia), DAT_SUCCESS);
  DAT_PZ_HANDLE pz;
  ASSERT_EQ(dat_pz_create(ia, &pz), DAT_SUCCESS);
  EXPECT_EQ(type_of(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG)), DAT_INVALID_STATE);
  ASSERT_EQ(dat_pz_free(pz), DAT_SUCCESS);
  EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

TEST(DatApi, CnoIsTriggeredByDtoEvents) {
  Ia ia;
  DAT_CNO_HANDLE cno;
  ASSERT_EQ(dat_cno_create(ia.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS);
  DAT_EVD_HANDLE evd;
  ASSERT_EQ(dat_evd_create(ia.ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
  DAT_EVD_HANDLE which = DAT_HANDLE_NULL;
  EXPECT_EQ(type_of(dat_cno_wait(cno, 1000, &which)), DAT_TIMEOUT_EXPIRED);
  DAT_EVENT se;
  std::memset(&se, 0, sizeof se);
  se.event_number = DAT_SOFTWARE_EVENT;
  int marker = 0;
  se.event_data.software_event_data.pointer = &marker;
  ASSERT_EQ(dat_evd_post_se(evd, &se), DAT_SUCCESS);
  ASSERT_EQ(dat_cno_wait(cno, kWait, &which), DAT_SUCCESS) << "the trigger stays set until a wait takes it";
  EXPECT_EQ(which, evd);
  DAT_EVENT got;
  ASSERT_EQ(dat_evd_dequeue(evd, &got), DAT_SUCCESS);
  EXPECT_EQ(got.event_data.software_event_data.pointer, &marker);
  EXPECT_EQ(type_of(dat_cno_free(cno)), DAT_INVALID_STATE) << "an EVD still uses it";
  ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
  EXPECT_EQ(dat_cno_free(cno), DAT_SUCCESS);
}

namespace {

DAT_EVENT wait_async(DAT_EVD_HANDLE async) {
  DAT_EVENT ev;
  std::memset(&ev, 0, sizeof ev);
  DAT_COUNT nmore;
  EXPECT_EQ(dat_evd_wait(async, kWait, 1, &ev, &nmore), DAT_SUCCESS);
  return ev;
}

}  // namespace

TEST(DatApi, ProviderAdvertisesSrqAndQueries) {
  Ia ia;
  alignas(DAT_PROVIDER_ATTR) unsigned char raw[sizeof(DAT_PROVIDER_ATTR)] = {};
  auto& p = *reinterpret_cast<DAT_PROVIDER_ATTR*>(raw);
  DAT_IA_ATTR a;
  ASSERT_EQ(dat_ia_query(ia.ia, nullptr, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p), DAT_SUCCESS);
  EXPECT_EQ(p.srq_supported, DAT_TRUE);
  EXPECT_NE(p.srq_watermarks_supported, 0);
  EXPECT_NE(p.srq_info_supported, 0);
  EXPECT_NE(p.ep_recv_info_supported, 0);
  EXPECT_GT(a.max_srqs, 0);
  EXPECT_GT(a.max_recv_per_srq, 0);
}

TEST(DatApi, SrqCountsWatermarksAndBrokenEvent) {
  Ia ia;
  End a, b;
  a.make(ia);
  // b's EP takes its receives from a 10-entry SRQ.
  DAT_SRQ_HANDLE srq;
  DAT_SRQ_ATTR bad{0, 1, 0};
  EXPECT_EQ(type_of(dat_srq_create(ia.ia, ia.pz, &bad, &srq)), DAT_INVALID_PARAMETER);
  DAT_SRQ_ATTR sa{10, 1, 0};
  ASSERT_EQ(dat_srq_create(ia.ia, ia.pz, &sa, &srq), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &b.req), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &b.rcv), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &b.conn), DAT_SUCCESS);
  ASSERT_EQ(dat_ep_create_with_srq(ia.ia, ia.pz, b.rcv, b.req, b.conn, srq, nullptr, &b.ep), DAT_SUCCESS);
  DAT_REGION_DESCRIPTION r;
  r.for_va = b.buf.data();
  ASSERT_EQ(dat_lmr_create(ia.ia, DAT_MEM_TYPE_VIRTUAL, r, b.buf.size(), ia.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                           &b.lmr, &b.lctx, &b.rctx, nullptr, nullptr),
            DAT_SUCCESS);
  for (int i = 0; i < 3; ++i) {
    DAT_LMR_TRIPLET t = b.iov(static_cast<std::size_t>(i) * 256, 256);
    DAT_DTO_COOKIE c;
    c.as_64 = static_cast<DAT_UINT64>(i);
    ASSERT_EQ(dat_srq_post_recv(srq, 1, &t, c), DAT_SUCCESS);
  }
  DAT_SRQ_PARAM sp = srq_param(srq);
  EXPECT_EQ(sp.max_recv_dtos, 10);
  EXPECT_EQ(sp.available_dto_count, 3);
  EXPECT_EQ(sp.outstanding_dto_count, 3);
  DAT_LMR_TRIPLET t = b.iov(0, 8);
  DAT_DTO_COOKIE c;
  c.as_64 = 0;
  EXPECT_EQ(type_of(dat_ep_post_recv(b.ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_INVALID_STATE)
      << "an SRQ EP takes its receives from the SRQ";
  EXPECT_EQ(type_of(dat_srq_free(srq)), DAT_INVALID_STATE) << "an EP uses it";
  EXPECT_EQ(type_of(dat_srq_resize(srq, 2)), DAT_INVALID_STATE) << "below the 3 outstanding";
  ASSERT_EQ(dat_srq_resize(srq, 12), DAT_SUCCESS);
  EXPECT_EQ(srq_param(srq).max_recv_dtos, 12);
  DAT_COUNT n = -1, span = -1;
  ASSERT_EQ(dat_ep_recv_query(b.ep, &n, &span), DAT_SUCCESS);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(span, 0);
  ASSERT_EQ(dat_ep_set_watermark(b.ep, 0, DAT_WATERMARK_INFINITE), DAT_SUCCESS);

  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  // One Send arrives: its buffer is taken (2 available), its completion not yet reaped (3).
  DAT_LMR_TRIPLET s = a.iov(0, 100);
  c.as_64 = 7;
  ASSERT_EQ(dat_ep_post_send(a.ep, 1, &s, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.req).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
  sp = srq_param(srq);
  EXPECT_EQ(sp.available_dto_count, 2);
  EXPECT_EQ(sp.outstanding_dto_count, 3);
  // The soft high watermark (0) was exceeded by that allocation: one async event.
  DAT_EVENT ae = wait_async(ia.async);
  EXPECT_EQ(ae.event_data.asynch_error_event_data.reason, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
  EXPECT_EQ(ae.event_data.asynch_error_event_data.dat_handle, b.ep);
  const DAT_EVENT got = wait_event(b.rcv);
  EXPECT_EQ(got.event_data.dto_completion_event_data.transfered_length, 100u);
  EXPECT_EQ(got.event_data.dto_completion_event_data.user_cookie.as_64, 0u) << "the SRQ's first buffer";
  sp = srq_param(srq);
  EXPECT_EQ(sp.available_dto_count, 2);
  EXPECT_EQ(sp.outstanding_dto_count, 2) << "reaped";
  // Low watermark above the available count: the event at once, once per arming.
  ASSERT_EQ(dat_srq_set_lw(srq, 3), DAT_SUCCESS);
  ae = wait_async(ia.async);
  EXPECT_EQ(ae.event_data.asynch_error_event_data.reason, DAT_SRQ_LOW_WATERMARK_EVENT);
  EXPECT_EQ(ae.event_data.asynch_error_event_data.dat_handle, srq);
  EXPECT_EQ(type_of(dat_srq_set_lw(srq, 13)), DAT_INVALID_PARAMETER) << "above max_recv_dtos";
  // The SRQ EP's disconnect also reaches the async EVD as EP_BROKEN (dtestsrq waits for it).
  ASSERT_EQ(dat_ep_disconnect(a.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(wait_event(b.conn).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
  ae = wait_async(ia.async);
  EXPECT_EQ(ae.event_number, DAT_ASYNC_ERROR_EP_BROKEN);
  EXPECT_EQ(ae.event_data.asynch_error_event_data.dat_handle, b.ep);
  ASSERT_EQ(dat_ep_free(b.ep), DAT_SUCCESS);
  b.ep = DAT_HANDLE_NULL;
  EXPECT_EQ(dat_srq_free(srq), DAT_SUCCESS);
}

TEST(DatEvdWait, ThresholdTimeoutAndNmore) {
  Ia ia;
  DAT_EVD_HANDLE evd;
  ASSERT_EQ(dat_evd_create(ia.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
  int x = 0;
  DAT_EVENT se = software_event(&x);
  ASSERT_EQ(dat_evd_post_se(evd, &se), DAT_SUCCESS);
  DAT_EVENT ev;
  DAT_COUNT nmore = -1;
  EXPECT_EQ(type_of(dat_evd_wait(evd, 2000, 2, &ev, &nmore)), DAT_TIMEOUT_EXPIRED);
  EXPECT_EQ(nmore, 1) << "defined on timeout: the events waiting";
  ASSERT_EQ(dat_evd_post_se(evd, &se), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_wait(evd, kWait, 2, &ev, &nmore), DAT_SUCCESS);
  EXPECT_EQ(nmore, 1) << "at least threshold - 1";
  EXPECT_EQ(ev.event_number, DAT_SOFTWARE_EVENT);
  EXPECT_EQ(type_of(dat_evd_wait(evd, kWait, 5, &ev, &nmore)), DAT_INVALID_PARAMETER) << "threshold above qlen";
  EXPECT_EQ(type_of(dat_evd_wait(evd, kWait, -1, &ev, &nmore)), DAT_INVALID_PARAMETER);
  EXPECT_EQ(type_of(dat_evd_resize(evd, 0)), DAT_INVALID_PARAMETER);
  ASSERT_EQ(dat_evd_resize(evd, 8), DAT_SUCCESS);
  DAT_EVD_PARAM p;
  ASSERT_EQ(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p), DAT_SUCCESS);
  EXPECT_EQ(p.evd_qlen, 8);
  EXPECT_EQ(dat_evd_wait(evd, kWait, 1, &ev, &nmore), DAT_SUCCESS);
  EXPECT_EQ(nmore, 0);
}

TEST(DatEvdWait, CnoNotTriggeredWhileAWaiterBlocks) {
  Ia ia;
  DAT_CNO_HANDLE cno;
  ASSERT_EQ(dat_cno_create(ia.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS);
  DAT_EVD_HANDLE evd;
  ASSERT_EQ(dat_evd_create(ia.ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
  std::atomic<DAT_RETURN> r{0xFFFFFFFF};
  std::thread t([&] {
    DAT_EVENT ev;
    DAT_COUNT nmore;
    r = dat_evd_wait(evd, kWait, 1, &ev, &nmore);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int x = 0;
  DAT_EVENT se = software_event(&x);
  ASSERT_EQ(dat_evd_post_se(evd, &se), DAT_SUCCESS);
  t.join();
  EXPECT_EQ(r.load(), DAT_SUCCESS);
  DAT_EVD_HANDLE which;
  EXPECT_EQ(type_of(dat_cno_wait(cno, 1000, &which)), DAT_TIMEOUT_EXPIRED) << "the waiter took it, not the CNO";
  ASSERT_EQ(dat_evd_modify_cno(evd, DAT_HANDLE_NULL), DAT_SUCCESS);
  EXPECT_EQ(dat_cno_free(cno), DAT_SUCCESS) << "no EVD uses it any more";
  ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
}

// dat_cno_wait drives the engine itself while it blocks (as dat_evd_wait does): a trigger from
// another thread, and dat_cno_free, must still reach a waiter blocked in the netdev.
TEST(DatCnoWait, AWaiterInTheNetdevHearsAnotherThreadsTriggerAndTheFree) {
  Ia ia;
  DAT_CNO_HANDLE cno;
  ASSERT_EQ(dat_cno_create(ia.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS);
  DAT_EVD_HANDLE evd;
  ASSERT_EQ(dat_evd_create(ia.ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
  std::atomic<DAT_RETURN> r{0xFFFFFFFF};
  DAT_EVD_HANDLE which = DAT_HANDLE_NULL;
  std::thread t([&] { r = dat_cno_wait(cno, DAT_TIMEOUT_INFINITE, &which); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int x = 0;
  DAT_EVENT se = software_event(&x);
  ASSERT_EQ(dat_evd_post_se(evd, &se), DAT_SUCCESS);
  t.join();  // an infinite wait: returns only if the trigger reached it
  EXPECT_EQ(r.load(), DAT_SUCCESS);
  EXPECT_EQ(which, evd);
  DAT_EVENT got;
  ASSERT_EQ(dat_evd_dequeue(evd, &got), DAT_SUCCESS);
  EXPECT_EQ(got.event_data.software_event_data.pointer, &x);
  ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
  // A CNO no EVD uses, freed under an infinite waiter: the waiter returns DAT_ABORT.
  r = 0xFFFFFFFF;
  std::thread t2([&] { r = dat_cno_wait(cno, DAT_TIMEOUT_INFINITE, &which); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(dat_cno_free(cno), DAT_SUCCESS);
  t2.join();
  EXPECT_EQ(type_of(r.load()), DAT_ABORT);
}

// The event-driven consumer: dequeue, and when the EVD is empty block in dat_cno_wait. Both ends
// of a connection in one IA, each in its own thread, so one drives the engine while the other
// sleeps until a trigger: every message and every reply must arrive, in order.
TEST(DatCnoWait, EventDrivenPingPongOverOneIa) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  DAT_CNO_HANDLE cno_a, cno_b;
  ASSERT_EQ(dat_cno_create(ia.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno_a), DAT_SUCCESS);
  ASSERT_EQ(dat_cno_create(ia.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno_b), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_modify_cno(a.rcv, cno_a), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_modify_cno(b.rcv, cno_b), DAT_SUCCESS);
  constexpr int kRounds = 300;
  // The next receive completion of `evd`: its cookie, or -1.
  auto next = [](DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno) -> long {
    DAT_EVENT ev;
    for (;;) {
      const DAT_RETURN r = dat_evd_dequeue(evd, &ev);
      if (r == DAT_SUCCESS) break;
      if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY) return -1;
      DAT_EVD_HANDLE which;
      if (dat_cno_wait(cno, kWait, &which) != DAT_SUCCESS) return -1;
    }
    if (ev.event_number != DAT_DTO_COMPLETION_EVENT) return -1;
    const auto& d = ev.event_data.dto_completion_event_data;
    return d.status == DAT_DTO_SUCCESS ? static_cast<long>(d.user_cookie.as_64) : -1;
  };
  auto post = [](End& e, int i, bool recv) {
    DAT_LMR_TRIPLET t = e.iov(static_cast<std::size_t>(recv ? 1024 : 0), 64);
    DAT_DTO_COOKIE c;
    c.as_64 = static_cast<DAT_UINT64>(i);
    return recv ? dat_ep_post_recv(e.ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG)
                : dat_ep_post_send(e.ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG);
  };
  // A send's buffer is the RNIC's until the send completes (a resend reads it): its completion,
  // from the request EVD (no CNO: dat_evd_wait), before the buffer is written again.
  auto sent = [](End& e, int i) {
    DAT_EVENT ev;
    DAT_COUNT nmore;
    return dat_evd_wait(e.req, kWait, 1, &ev, &nmore) == DAT_SUCCESS && ev.event_number == DAT_DTO_COMPLETION_EVENT &&
           ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS &&
           ev.event_data.dto_completion_event_data.user_cookie.as_64 == static_cast<DAT_UINT64>(i);
  };
  ASSERT_EQ(post(a, 0, true), DAT_SUCCESS);
  ASSERT_EQ(post(b, 0, true), DAT_SUCCESS);
  std::atomic<int> b_fail{-2};
  std::thread tb([&] {
    for (int i = 0; i < kRounds; ++i) {
      if (next(b.rcv, cno_b) != i || post(b, i + 1, true) != DAT_SUCCESS) {
        b_fail = i;
        return;
      }
      std::memcpy(b.buf.data(), b.buf.data() + 1024, 64);  // the reply carries what came
      if (post(b, i, false) != DAT_SUCCESS || !sent(b, i)) {
        b_fail = i;
        return;
      }
    }
    b_fail = -1;
  });
  int done = 0;
  for (int i = 0; i < kRounds; ++i) {
    std::memset(a.buf.data(), i & 0xff, 64);
    ASSERT_EQ(post(a, i, false), DAT_SUCCESS);
    ASSERT_EQ(next(a.rcv, cno_a), i) << "reply " << i;
    ASSERT_EQ(static_cast<unsigned char>(a.buf[1024]), i & 0xff) << "reply " << i << " carries message " << i;
    ASSERT_EQ(post(a, i + 1, true), DAT_SUCCESS);
    ASSERT_TRUE(sent(a, i)) << "message " << i;
    ++done;
  }
  tb.join();
  EXPECT_EQ(b_fail.load(), -1) << "b failed at message " << b_fail.load();
  EXPECT_EQ(done, kRounds);
  ASSERT_EQ(dat_evd_modify_cno(a.rcv, DAT_HANDLE_NULL), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_modify_cno(b.rcv, DAT_HANDLE_NULL), DAT_SUCCESS);
  EXPECT_EQ(dat_cno_free(cno_a), DAT_SUCCESS);
  EXPECT_EQ(dat_cno_free(cno_b), DAT_SUCCESS);
}

TEST(DatEvdWait, ThresholdOneForConsumerControlledNotification) {
  Ia ia;
  End a;
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &a.req), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &a.rcv), DAT_SUCCESS);
  DAT_EP_ATTR attr{};
  attr.service_type = DAT_SERVICE_TYPE_RC;
  attr.recv_completion_flags = DAT_COMPLETION_SOLICITED_WAIT_FLAG;
  ASSERT_EQ(dat_ep_create(ia.ia, ia.pz, a.rcv, a.req, DAT_HANDLE_NULL, &attr, &a.ep), DAT_SUCCESS);
  DAT_EVENT ev;
  DAT_COUNT nmore;
  EXPECT_EQ(type_of(dat_evd_wait(a.rcv, 1000, 2, &ev, &nmore)), DAT_INVALID_STATE);
  EXPECT_EQ(type_of(dat_evd_wait(a.rcv, 1000, 1, &ev, &nmore)), DAT_TIMEOUT_EXPIRED);
  EXPECT_EQ(type_of(dat_evd_wait(a.req, 1000, 2, &ev, &nmore)), DAT_TIMEOUT_EXPIRED) << "requests not configured so";
  DAT_EP_STATE st;
  DAT_BOOLEAN rx, tx;
  ASSERT_EQ(dat_ep_get_status(a.ep, &st, &rx, &tx), DAT_SUCCESS);
  EXPECT_EQ(st, DAT_EP_STATE_UNCONNECTED);
  EXPECT_EQ(rx, DAT_TRUE);
  EXPECT_EQ(tx, DAT_TRUE);
}

// Several threads block in dat_evd_wait on EVDs of one IA while messages go back and forth: one
// of them at a time drives the engine from inside its wait, the others sleep on their EVDs. No
// event may be lost between the two ways of waiting. (One was: a completion that came while a
// waiter found another driver and had let go of its EVD's lock was never seen. The window is a
// few hundred nanoseconds; dapltest -T T with 4 threads, in the conformance label, hit it about
// once in nine runs, this test not in 30: it guards the rest of the hand-over.)
namespace {
// 4 connected pairs in one IA, each end in a thread of its own: a ping-pong of 500 rounds per
// pair, all at once. `poll`: the threads spin in dat_evd_dequeue, else they block in
// dat_evd_wait. (The data path shares the API lock: objects.hpp, "Locking".)
void ping_pong_in_threads(bool poll) {
  // Kernel UDP, but not on the dat.conf line's port 5041: the conformance tests run beside this
  // one (ctest -j2), and a dtest client whose server found 5041 taken by this IA reached this IA
  // instead (a harness clash that made dtestcm fail now and then, issue 13).
  setenv("SOFTRNIC_NETDEV", "netdev=udp port=25041", 1);
  Ia ia("softrnic_iwarp");
  unsetenv("SOFTRNIC_NETDEV");
  EXPECT_NE(ntohs(ia_address(ia.ia).sin_port), 5041);
  constexpr int kPairs = 4, kRounds = 500, kSlots = 8;
  std::vector<End> a(kPairs), b(kPairs);
  std::vector<DAT_PSP_HANDLE> psp(kPairs);
  std::vector<DAT_EVD_HANDLE> cr(kPairs);
  for (int k = 0; k < kPairs; ++k) {
    a[k].make(ia);
    b[k].make(ia);
    for (End* e : {&a[k], &b[k]})
      for (int i = 0; i < kSlots; ++i) {
        DAT_LMR_TRIPLET t = e->iov(static_cast<std::size_t>(i) * 64, 64);
        DAT_DTO_COOKIE c;
        c.as_64 = static_cast<DAT_UINT64>(i);
        ASSERT_EQ(dat_ep_post_recv(e->ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
      }
    connect(ia, a[k], b[k], psp[k], cr[k]);
    ASSERT_EQ(dat_psp_free(psp[k]), DAT_SUCCESS);  // the next pair listens on the same qualifier
  }
  std::atomic<int> failures{0};
  // Waits for one receive on `e`, reposts its buffer, and optionally sends a reply.
  auto round = [&](End& e, bool reply) {
    DAT_EVENT ev;
    DAT_COUNT nmore;
    DAT_RETURN r = DAT_QUEUE_EMPTY;
    if (poll) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while ((r = dat_evd_dequeue(e.rcv, &ev)) == DAT_QUEUE_EMPTY && std::chrono::steady_clock::now() < until) {
      }
    } else {
      r = dat_evd_wait(e.rcv, kWait, 1, &ev, &nmore);
    }
    if (r != DAT_SUCCESS || ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
      failures++;
      return false;
    }
    const auto slot = ev.event_data.dto_completion_event_data.user_cookie;
    DAT_LMR_TRIPLET t = e.iov(static_cast<std::size_t>(slot.as_64) * 64, 64);
    if (dat_ep_post_recv(e.ep, 1, &t, slot, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS) failures++;
    if (reply) {
      DAT_LMR_TRIPLET s = e.iov(4096, 16);
      if (dat_ep_post_send(e.ep, 1, &s, slot, DAT_COMPLETION_SUPPRESS_FLAG) != DAT_SUCCESS) failures++;
    }
    return true;
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < kPairs; ++k) {
    threads.emplace_back([&, k] {  // ping
      for (int i = 0; i < kRounds; ++i) {
        DAT_LMR_TRIPLET s = a[k].iov(4096, 16);
        DAT_DTO_COOKIE c;
        c.as_64 = 0;
        if (dat_ep_post_send(a[k].ep, 1, &s, c, DAT_COMPLETION_SUPPRESS_FLAG) != DAT_SUCCESS) failures++;
        if (!round(a[k], false)) return;
      }
    });
    threads.emplace_back([&, k] {  // pong
      for (int i = 0; i < kRounds; ++i)
        if (!round(b[k], true)) return;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << "a wait timed out or a call failed";
  for (int k = 0; k < kPairs; ++k) {
    EXPECT_EQ(dat_ep_disconnect(a[k].ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    EXPECT_EQ(wait_event(a[k].conn).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    EXPECT_EQ(wait_event(b[k].conn).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
  }
}
}  // namespace

TEST(DatEvdWait, SeveralWaitersOnOneIaLoseNoEvent) {
  ping_pong_in_threads(false);
}

TEST(DatEvdDequeue, SeveralPollingThreadsOnOneIaLoseNoEvent) {
  ping_pong_in_threads(true);
}

TEST(DatApi, ResetPspAnyAndLmrSync) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  EXPECT_EQ(type_of(dat_ep_reset(a.ep)), DAT_INVALID_STATE) << "connected";
  ASSERT_EQ(dat_ep_disconnect(a.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.conn).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
  ASSERT_EQ(dat_ep_reset(a.ep), DAT_SUCCESS);
  DAT_EP_STATE st;
  ASSERT_EQ(dat_ep_get_status(a.ep, &st, nullptr, nullptr), DAT_SUCCESS);
  EXPECT_EQ(st, DAT_EP_STATE_UNCONNECTED);
  DAT_CONN_QUAL q = 0;
  DAT_PSP_HANDLE any;
  ASSERT_EQ(dat_psp_create_any(ia.ia, &q, cr_evd, DAT_PSP_CONSUMER_FLAG, &any), DAT_SUCCESS);
  EXPECT_NE(q, kQual);
  DAT_PSP_PARAM pp;
  ASSERT_EQ(dat_psp_query(any, DAT_PSP_FIELD_ALL, &pp), DAT_SUCCESS);
  EXPECT_EQ(pp.conn_qual, q);
  DAT_LMR_TRIPLET ok = a.iov(0, 100), bad = a.iov(0, 100);
  bad.lmr_context ^= 0x77;
  EXPECT_EQ(dat_lmr_sync_rdma_read(ia.ia, &ok, 1), DAT_SUCCESS);
  EXPECT_EQ(dat_lmr_sync_rdma_write(ia.ia, &ok, 1), DAT_SUCCESS);
  EXPECT_EQ(type_of(dat_lmr_sync_rdma_write(ia.ia, &bad, 1)), DAT_INVALID_PARAMETER);
}

TEST(DatEvdWait, OverflowIsReportedOnTheAsyncEvd) {
  Ia ia;
  DAT_EVD_HANDLE evd;
  ASSERT_EQ(dat_evd_create(ia.ia, 2, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
  int x = 0;
  DAT_EVENT se = software_event(&x);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(dat_evd_post_se(evd, &se), DAT_SUCCESS);
  const DAT_EVENT ae = wait_async(ia.async);
  EXPECT_EQ(ae.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
  EXPECT_EQ(ae.event_data.asynch_error_event_data.dat_handle, evd);
  DAT_EVENT more;
  EXPECT_EQ(dat_evd_dequeue(ia.async, &more), DAT_QUEUE_EMPTY) << "one event per overflow, not per extra event";
  DAT_EVENT ev;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(dat_evd_dequeue(evd, &ev), DAT_SUCCESS) << "nothing lost";
}

TEST(DatApi, RmrBindRemoteAccessAndSendWithInvalidate) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  DAT_LMR_TRIPLET rt = b.iov(60000, 64);
  DAT_DTO_COOKIE c;
  c.as_64 = 9;
  ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &rt, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  DAT_RMR_HANDLE rmr;
  ASSERT_EQ(dat_rmr_create(ia.pz, &rmr), DAT_SUCCESS);
  DAT_LMR_TRIPLET win = b.iov(4096, 1024);
  DAT_RMR_COOKIE rc;
  rc.as_64 = 0xB1D;
  DAT_RMR_CONTEXT ctx = 0;
  ASSERT_EQ(dat_rmr_bind(rmr, b.lmr, &win, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b.ep, rc,
                         DAT_COMPLETION_DEFAULT_FLAG, &ctx),
            DAT_SUCCESS);
  EXPECT_NE(ctx, 0u);
  EXPECT_NE(ctx, b.rctx) << "the window has its own context";
  DAT_EVENT e = wait_event(b.req);
  ASSERT_EQ(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
  EXPECT_EQ(e.event_data.rmr_completion_event_data.rmr_handle, rmr);
  EXPECT_EQ(e.event_data.rmr_completion_event_data.user_cookie.as_64, 0xB1Du);
  EXPECT_EQ(e.event_data.rmr_completion_event_data.status, DAT_DTO_SUCCESS);
  DAT_RMR_PARAM rp;
  ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rp), DAT_SUCCESS);
  EXPECT_EQ(rp.rmr_context, ctx);
  EXPECT_EQ(type_of(dat_lmr_free(b.lmr)), DAT_INVALID_STATE) << "LMR in use by an RMR";
  // a writes through the window.
  std::memset(a.buf.data(), 'r', 1024);
  DAT_LMR_TRIPLET w = a.iov(0, 1024);
  DAT_RMR_TRIPLET r{};
  r.rmr_context = ctx;
  r.virtual_address = reinterpret_cast<DAT_VADDR>(b.buf.data() + 4096);
  r.segment_length = 1024;
  c.as_64 = 1;
  ASSERT_EQ(dat_ep_post_rdma_write(a.ep, 1, &w, c, &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.req).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
  EXPECT_EQ(std::string(b.buf.data() + 4096, 1024), std::string(1024, 'r'));
  // ... then invalidates it with its Send.
  DAT_LMR_TRIPLET s = a.iov(0, 8);
  c.as_64 = 2;
  // libdat2 2.1.10 does not export dat_ep_post_send_with_invalidate: call the provider's slot, as
  // the DAT_EP_POST_SEND_WITH_INVALIDATE redirection does.
  ASSERT_EQ(DAT_HANDLE_TO_PROVIDER(a.ep)->ep_post_send_with_invalidate_func(a.ep, 1, &s, c, DAT_COMPLETION_DEFAULT_FLAG,
                                                                            DAT_TRUE, ctx),
            DAT_SUCCESS);
  e = wait_event(b.rcv);
  EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 9u);
  EXPECT_EQ(e.event_data.dto_completion_event_data.rmr_context, ctx) << "the window it invalidated";
  EXPECT_EQ(dat_lmr_free(b.lmr), DAT_SUCCESS) << "no window bound any more";
  b.lmr = DAT_HANDLE_NULL;
  EXPECT_EQ(dat_rmr_free(rmr), DAT_SUCCESS);
}

TEST(DatApi, CrHandoffAndDupConnect) {
  Ia ia;
  End a, b, c;
  a.make(ia);
  b.make(ia);
  c.make(ia);
  DAT_EVD_HANDLE cr1, cr2;
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr1), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr2), DAT_SUCCESS);
  DAT_PSP_HANDLE p1, p2;
  ASSERT_EQ(dat_psp_create(ia.ia, kQual, cr1, DAT_PSP_CONSUMER_FLAG, &p1), DAT_SUCCESS);
  ASSERT_EQ(dat_psp_create(ia.ia, kQual + 1, cr2, DAT_PSP_CONSUMER_FLAG, &p2), DAT_SUCCESS);
  sockaddr_in to = ia_address(ia.ia);
  const char pd[] = "handoff me";
  ASSERT_EQ(dat_ep_connect(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), kQual, kWait, sizeof pd,
                           const_cast<char*>(pd), DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
            DAT_SUCCESS);
  DAT_EVENT e = wait_event(cr1);
  EXPECT_EQ(type_of(dat_cr_handoff(e.event_data.cr_arrival_event_data.cr_handle, 999)), DAT_INVALID_PARAMETER)
      << "no PSP there";
  ASSERT_EQ(dat_cr_handoff(e.event_data.cr_arrival_event_data.cr_handle, kQual + 1), DAT_SUCCESS);
  e = wait_event(cr2);
  ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
  EXPECT_EQ(e.event_data.cr_arrival_event_data.sp_handle.psp_handle, p2);
  DAT_CR_PARAM cp;
  ASSERT_EQ(dat_cr_query(e.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS);
  EXPECT_STREQ(static_cast<const char*>(cp.private_data), "handoff me") << "the request travels whole";
  ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b.ep, 0, nullptr), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
  EXPECT_EQ(wait_event(b.conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
  // dup_connect: c connects where a is connected (same address and conn_qual: PSP p1).
  DAT_EP_HANDLE d;
  ASSERT_EQ(dat_ep_create(ia.ia, ia.pz, c.rcv, c.req, c.conn, nullptr, &d), DAT_SUCCESS);
  ASSERT_EQ(dat_ep_dup_connect(d, a.ep, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT), DAT_SUCCESS);
  e = wait_event(cr1);
  ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
  EXPECT_EQ(e.event_data.cr_arrival_event_data.conn_qual, kQual);
  ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, c.ep, 0, nullptr), DAT_SUCCESS);
  EXPECT_EQ(wait_event(c.conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
  EXPECT_EQ(wait_event(c.conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
  EXPECT_EQ(type_of(dat_ep_dup_connect(d, b.ep, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT)), DAT_INVALID_STATE)
      << "d is connected already";
}

TEST(DatApi, EpModifyChangesEvdsAttributesAndPz) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  DAT_EVD_HANDLE rcv2 = DAT_HANDLE_NULL, conn_only = DAT_HANDLE_NULL;
  ASSERT_EQ(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv2), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_only), DAT_SUCCESS);
  DAT_EP_PARAM p;
  std::memset(&p, 0, sizeof p);
  // Bad input: fields that cannot change, handles of the wrong kind, limits beyond the RNIC's.
  EXPECT_EQ(type_of(dat_ep_modify(b.ep, DAT_EP_FIELD_IA_HANDLE, &p)), DAT_INVALID_PARAMETER);
  EXPECT_EQ(type_of(dat_ep_modify(b.ep, DAT_EP_FIELD_RECV_EVD_HANDLE, nullptr)), DAT_INVALID_PARAMETER);
  p.recv_evd_handle = conn_only;
  EXPECT_EQ(type_of(dat_ep_modify(b.ep, DAT_EP_FIELD_RECV_EVD_HANDLE, &p)), DAT_INVALID_HANDLE)
      << "a receive EVD must take DTO events";
  p.ep_attr.max_recv_dtos = 1 << 30;
  EXPECT_EQ(type_of(dat_ep_modify(b.ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p)), DAT_INVALID_PARAMETER);
  // A good change: b's receives complete on rcv2, with a smaller receive queue.
  p.recv_evd_handle = rcv2;
  p.ep_attr.max_recv_dtos = 2;
  ASSERT_EQ(dat_ep_modify(b.ep, DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), DAT_SUCCESS);
  DAT_EP_PARAM q;
  ASSERT_EQ(dat_ep_query(b.ep, DAT_EP_FIELD_ALL, &q), DAT_SUCCESS);
  EXPECT_EQ(q.recv_evd_handle, rcv2);
  EXPECT_EQ(q.ep_attr.max_recv_dtos, 2);
  EXPECT_EQ(type_of(dat_evd_free(rcv2)), DAT_INVALID_STATE) << "the EP uses it now";
  EXPECT_EQ(dat_evd_free(b.rcv), DAT_SUCCESS) << "and no longer uses the old one";
  b.rcv = rcv2;
  DAT_LMR_TRIPLET r0 = b.iov(0, 64), r1 = b.iov(64, 64), r2 = b.iov(128, 64);
  ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &r0, DAT_DTO_COOKIE{.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &r1, DAT_DTO_COOKIE{.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(type_of(dat_ep_post_recv(b.ep, 1, &r2, DAT_DTO_COOKIE{.as_64 = 3}, DAT_COMPLETION_DEFAULT_FLAG)),
            DAT_INSUFFICIENT_RESOURCES)
      << "max_recv_dtos 2 is enforced";
  // With receives posted, a change that needs a new queue pair is refused; nothing is lost.
  p.ep_attr.max_recv_dtos = 8;
  EXPECT_EQ(type_of(dat_ep_modify(b.ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p)), DAT_INVALID_STATE);
  // The connection EVD alone can change.
  p.connect_evd_handle = conn_only;
  ASSERT_EQ(dat_ep_modify(b.ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p), DAT_SUCCESS);
  b.conn = conn_only;
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  EXPECT_EQ(type_of(dat_ep_modify(b.ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p)), DAT_INVALID_STATE)
      << "not while connected";
  std::strcpy(a.buf.data(), "to rcv2");
  DAT_LMR_TRIPLET s = a.iov(0, 8);
  ASSERT_EQ(dat_ep_post_send(a.ep, 1, &s, DAT_DTO_COOKIE{.as_64 = 9}, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  const DAT_EVENT ev = wait_event(rcv2);
  ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
  EXPECT_EQ(ev.event_data.dto_completion_event_data.user_cookie.as_64, 1u);
  EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
  EXPECT_STREQ(b.buf.data(), "to rcv2");
}

TEST(DatApi, ProviderFlagPspCreatesTheEp) {
  Ia ia;
  End a;
  a.make(ia);
  alignas(DAT_PROVIDER_ATTR) unsigned char raw[sizeof(DAT_PROVIDER_ATTR)] = {};
  auto& pa = *reinterpret_cast<DAT_PROVIDER_ATTR*>(raw);
  ASSERT_EQ(dat_ia_query(ia.ia, nullptr, 0, nullptr, DAT_PROVIDER_FIELD_ALL, &pa), DAT_SUCCESS);
  EXPECT_EQ(pa.ep_creator, DAT_PSP_CREATES_EP_IFASKED);
  DAT_EVD_HANDLE cr_evd, rcv, req, conn;
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS);
  DAT_PSP_HANDLE psp;
  ASSERT_EQ(dat_psp_create(ia.ia, kQual, cr_evd, DAT_PSP_PROVIDER_FLAG, &psp), DAT_SUCCESS);
  DAT_PSP_PARAM pp;
  ASSERT_EQ(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &pp), DAT_SUCCESS);
  EXPECT_EQ(pp.psp_flags, DAT_PSP_PROVIDER_FLAG);
  sockaddr_in to = ia_address(ia.ia);
  const auto connect_a = [&] {
    ASSERT_EQ(dat_ep_connect(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), kQual, kWait, 0, nullptr,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              DAT_SUCCESS);
  };
  // First request: rejected; the provider's EP goes with it.
  connect_a();
  DAT_EVENT cr = wait_event(cr_evd);
  ASSERT_EQ(cr.event_number, DAT_CONNECTION_REQUEST_EVENT);
  DAT_CR_PARAM crp;
  ASSERT_EQ(dat_cr_query(cr.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &crp), DAT_SUCCESS);
  DAT_EP_HANDLE pep = crp.local_ep_handle;
  ASSERT_NE(pep, DAT_HANDLE_NULL) << "the provider made an EP for the request";
  DAT_EP_PARAM ep;
  ASSERT_EQ(dat_ep_query(pep, DAT_EP_FIELD_ALL, &ep), DAT_SUCCESS);
  EXPECT_EQ(ep.ep_state, DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
  EXPECT_EQ(ep.pz_handle, DAT_HANDLE_NULL);
  EXPECT_EQ(ep.recv_evd_handle, DAT_HANDLE_NULL);
  ASSERT_EQ(dat_cr_reject(cr.event_data.cr_arrival_event_data.cr_handle, 0, nullptr), DAT_SUCCESS);
  EXPECT_EQ(type_of(dat_ep_query(pep, DAT_EP_FIELD_ALL, &ep)), DAT_INVALID_HANDLE) << "freed with the reject";
  EXPECT_EQ(wait_event(a.conn).event_number, DAT_CONNECTION_EVENT_PEER_REJECTED);
  ASSERT_EQ(dat_ep_reset(a.ep), DAT_SUCCESS);
  // Second request: accepting before the EP has a PZ and EVDs is refused; after dat_ep_modify it works.
  connect_a();
  cr = wait_event(cr_evd);
  DAT_CR_HANDLE crh = cr.event_data.cr_arrival_event_data.cr_handle;
  ASSERT_EQ(dat_cr_query(crh, DAT_CR_FIELD_ALL, &crp), DAT_SUCCESS);
  pep = crp.local_ep_handle;
  ASSERT_NE(pep, DAT_HANDLE_NULL);
  EXPECT_EQ(type_of(dat_cr_accept(crh, DAT_HANDLE_NULL, 0, nullptr)), DAT_INVALID_STATE);
  std::memset(&ep, 0, sizeof ep);
  ep.pz_handle = ia.pz;
  ep.recv_evd_handle = rcv;
  ep.request_evd_handle = req;
  ep.connect_evd_handle = conn;
  ASSERT_EQ(dat_ep_modify(pep,
                          DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_REQUEST_EVD_HANDLE |
                              DAT_EP_FIELD_CONNECT_EVD_HANDLE,
                          &ep),
            DAT_SUCCESS);
  ASSERT_EQ(dat_cr_accept(crh, DAT_HANDLE_NULL, 0, nullptr), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
  EXPECT_EQ(wait_event(conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
  // Data flows to the provider's EP.
  std::vector<char> buf(64);
  DAT_REGION_DESCRIPTION r;
  r.for_va = buf.data();
  DAT_LMR_HANDLE lmr;
  DAT_LMR_CONTEXT lctx;
  DAT_RMR_CONTEXT rctx;
  DAT_VLEN len;
  DAT_VADDR addr;
  ASSERT_EQ(dat_lmr_create(ia.ia, DAT_MEM_TYPE_VIRTUAL, r, buf.size(), ia.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                           &lmr, &lctx, &rctx, &len, &addr),
            DAT_SUCCESS);
  DAT_LMR_TRIPLET t{reinterpret_cast<DAT_VADDR>(buf.data()), 64, lctx};
  ASSERT_EQ(dat_ep_post_recv(pep, 1, &t, DAT_DTO_COOKIE{.as_64 = 5}, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  std::strcpy(a.buf.data(), "provider ep");
  DAT_LMR_TRIPLET s = a.iov(0, 12);
  ASSERT_EQ(dat_ep_post_send(a.ep, 1, &s, DAT_DTO_COOKIE{.as_64 = 6}, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  const DAT_EVENT got = wait_event(rcv);
  ASSERT_EQ(got.event_number, DAT_DTO_COMPLETION_EVENT);
  EXPECT_EQ(got.event_data.dto_completion_event_data.user_cookie.as_64, 5u);
  EXPECT_STREQ(buf.data(), "provider ep");
}

namespace {
struct AgentLog {
  std::atomic<int> calls{0};
  std::atomic<DAT_EVD_HANDLE> evd{DAT_HANDLE_NULL};
};
void agent_fn(DAT_PVOID data, DAT_EVD_HANDLE evd) {
  auto* log = static_cast<AgentLog*>(data);
  log->evd = evd;
  log->calls++;
}
extern "C" DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE* ia_handle_p);  // libdat2
bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}
}  // namespace

TEST(DatApi, CnoFileDescriptorTriggerAndAgent) {
  Ia ia;
  // dat_cno_fd_create and dat_cno_trigger are not exported by libdat2: through the provider table.
  DAT_PROVIDER* prov = DAT_HANDLE_TO_PROVIDER(ia.async);
  DAT_IA_HANDLE pia = DAT_HANDLE_NULL;  // the provider's IA handle (libdat2 maps the consumer's)
  ASSERT_EQ(dats_get_ia_handle(ia.ia, &pia), DAT_SUCCESS);
  DAT_FD fd = -1;
  DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
  EXPECT_EQ(type_of(prov->cno_fd_create_func(pia, nullptr, &cno)), DAT_INVALID_PARAMETER);
  ASSERT_EQ(prov->cno_fd_create_func(pia, &fd, &cno), DAT_SUCCESS);
  ASSERT_GE(fd, 0);
  DAT_CNO_PARAM cp;
  ASSERT_EQ(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), DAT_SUCCESS);
  EXPECT_EQ(cp.proxy_type, DAT_PROXY_TYPE_FD);
  EXPECT_EQ(cp.proxy.fd, fd);
  AgentLog log;
  ASSERT_EQ(dat_cno_modify_agent(cno, DAT_OS_WAIT_PROXY_AGENT{&log, &agent_fn}), DAT_SUCCESS);
  DAT_EVD_HANDLE evd;
  ASSERT_EQ(dat_evd_create(ia.ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
  DAT_EVD_HANDLE which = evd;
  ASSERT_EQ(prov->cno_trigger_func(cno, &which), DAT_SUCCESS);
  EXPECT_EQ(which, DAT_HANDLE_NULL) << "not triggered yet";
  EXPECT_FALSE(readable(fd, 0));
  DAT_EVENT se;
  std::memset(&se, 0, sizeof se);
  se.event_number = DAT_SOFTWARE_EVENT;
  ASSERT_EQ(dat_evd_post_se(evd, &se), DAT_SUCCESS);
  EXPECT_TRUE(readable(fd, 5000)) << "the descriptor is readable once the CNO is triggered";
  EXPECT_EQ(log.calls.load(), 1) << "the wait proxy agent heard of the trigger";
  EXPECT_EQ(log.evd.load(), evd);
  ASSERT_EQ(prov->cno_trigger_func(cno, &which), DAT_SUCCESS);
  EXPECT_EQ(which, evd);
  EXPECT_FALSE(readable(fd, 0)) << "taking the trigger clears the descriptor";
  EXPECT_EQ(type_of(prov->cno_trigger_func(evd, &which)), DAT_INVALID_HANDLE);
  ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
  EXPECT_EQ(dat_cno_free(cno), DAT_SUCCESS);
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the descriptor is closed with the CNO";
}

TEST(DatApi, RdmaReadIntoAMemoryWindow) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  // a's window over a.buf[8192, 8192+512), once with remote write and once without.
  DAT_RMR_HANDLE rmr;
  ASSERT_EQ(dat_rmr_create(ia.pz, &rmr), DAT_SUCCESS);
  DAT_LMR_TRIPLET win = a.iov(8192, 512);
  DAT_RMR_CONTEXT ctx = 0;
  DAT_RMR_COOKIE rc;
  rc.as_64 = 1;
  ASSERT_EQ(dat_rmr_bind(rmr, a.lmr, &win, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, a.ep, rc,
                         DAT_COMPLETION_SUPPRESS_FLAG, &ctx),
            DAT_SUCCESS);
  std::memset(b.buf.data(), 'q', 512);
  DAT_RMR_TRIPLET src{reinterpret_cast<DAT_VADDR>(b.buf.data()), 512, b.rctx};
  DAT_RMR_TRIPLET sink{reinterpret_cast<DAT_VADDR>(a.buf.data() + 8192), 512, ctx};
  DAT_PROVIDER* prov = DAT_HANDLE_TO_PROVIDER(a.ep);  // not exported by libdat2
  DAT_DTO_COOKIE c;
  c.as_64 = 7;
  EXPECT_EQ(type_of(prov->ep_post_rdma_read_to_rmr_func(a.ep, &sink, c, &src, DAT_COMPLETION_DEFAULT_FLAG)),
            DAT_PRIVILEGES_VIOLATION)
      << "the window does not grant remote write";
  ASSERT_EQ(dat_rmr_bind(rmr, a.lmr, &win, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, a.ep, rc,
                         DAT_COMPLETION_SUPPRESS_FLAG, &ctx),
            DAT_SUCCESS);
  sink.rmr_context = ctx;
  DAT_RMR_TRIPLET too_long = sink;
  too_long.segment_length = 513;
  EXPECT_EQ(type_of(prov->ep_post_rdma_read_to_rmr_func(a.ep, &too_long, c, &src, DAT_COMPLETION_DEFAULT_FLAG)),
            DAT_LENGTH_ERROR);
  EXPECT_EQ(type_of(prov->ep_post_rdma_read_to_rmr_func(a.ep, nullptr, c, &src, DAT_COMPLETION_DEFAULT_FLAG)),
            DAT_INVALID_PARAMETER);
  ASSERT_EQ(prov->ep_post_rdma_read_to_rmr_func(a.ep, &sink, c, &src, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  const DAT_EVENT e = wait_event(a.req);
  ASSERT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
  EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 7u);
  EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
  EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 512u);
  EXPECT_EQ(std::string(a.buf.data() + 8192, 512), std::string(512, 'q'));
  EXPECT_EQ(a.buf[8192 + 512], 0) << "nothing beyond the window";
}

// dat_ia_query's attributes, each against what the provider accepts at and refuses beyond it.
TEST(DatIaQuery, EveryLimitIsWhatTheProviderEnforces) {
  Ia ia;
  DAT_IA_ATTR a;
  alignas(DAT_PROVIDER_ATTR) unsigned char raw[sizeof(DAT_PROVIDER_ATTR)] = {};
  auto& p = *reinterpret_cast<DAT_PROVIDER_ATTR*>(raw);
  ASSERT_EQ(dat_ia_query(ia.ia, nullptr, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p), DAT_SUCCESS);
  // The async EVD it reports is the one ia_open made.
  DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
  ASSERT_EQ(dat_ia_query(ia.ia, &async, 0, nullptr, 0, nullptr), DAT_SUCCESS);
  EXPECT_EQ(async, ia.async);
  EXPECT_EQ(type_of(dat_ia_query(ia.ia, nullptr, DAT_IA_FIELD_ALL, nullptr, 0, nullptr)), DAT_INVALID_PARAMETER);
  EXPECT_GT(std::strlen(a.adapter_name), 0u);
  EXPECT_GT(std::strlen(a.vendor_name), 0u);
  DAT_EVD_HANDLE dto, conn;
  // max_evd_qlen
  EXPECT_EQ(type_of(dat_evd_create(ia.ia, a.max_evd_qlen + 1, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto)),
            DAT_INVALID_PARAMETER);
  ASSERT_EQ(dat_evd_create(ia.ia, a.max_evd_qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto), DAT_SUCCESS);
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS);
  // Per-EP limits: max_dto_per_ep, max_iov_segments_per_dto, max_rdma_read_per_ep_in/out, max_message_size.
  const auto ep_with = [&](auto edit) {
    DAT_EP_ATTR at{};
    at.service_type = DAT_SERVICE_TYPE_RC;
    at.max_recv_dtos = at.max_request_dtos = 8;
    at.max_recv_iov = at.max_request_iov = 1;
    edit(at);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    const DAT_RETURN r = dat_ep_create(ia.ia, ia.pz, dto, dto, conn, &at, &ep);
    if (r == DAT_SUCCESS) {
      EXPECT_EQ(dat_ep_free(ep), DAT_SUCCESS);
    }
    return type_of(r);
  };
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_recv_dtos = a.max_dto_per_ep; }), DAT_SUCCESS);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_recv_dtos = a.max_dto_per_ep + 1; }), DAT_INVALID_PARAMETER);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_request_dtos = a.max_dto_per_ep + 1; }), DAT_INVALID_PARAMETER);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_recv_iov = a.max_iov_segments_per_dto; }), DAT_SUCCESS);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_recv_iov = a.max_iov_segments_per_dto + 1; }), DAT_INVALID_PARAMETER);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_rdma_read_in = a.max_rdma_read_per_ep_in; }), DAT_SUCCESS);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_rdma_read_in = a.max_rdma_read_per_ep_in + 1; }),
            DAT_INVALID_PARAMETER);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_rdma_read_out = a.max_rdma_read_per_ep_out + 1; }),
            DAT_INVALID_PARAMETER);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_message_size = a.max_message_size; }), DAT_SUCCESS);
  EXPECT_EQ(ep_with([&](DAT_EP_ATTR& x) { x.max_message_size = a.max_message_size + 1; }), DAT_INVALID_PARAMETER);
  // max_lmr_block_size: one byte more is a length error (the check comes before the memory is touched).
  std::vector<char> small(64);
  DAT_REGION_DESCRIPTION r;
  r.for_va = small.data();
  DAT_LMR_HANDLE lmr;
  DAT_LMR_CONTEXT lctx;
  DAT_RMR_CONTEXT rctx;
  DAT_VLEN len;
  DAT_VADDR addr;
  EXPECT_EQ(type_of(dat_lmr_create(ia.ia, DAT_MEM_TYPE_VIRTUAL, r, DAT_VLEN{a.max_lmr_block_size} + 1, ia.pz,
                                   DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, &len, &addr)),
            DAT_LENGTH_ERROR);
  EXPECT_GT(a.max_lmrs, 0);
  EXPECT_GT(a.max_rmrs, 0) << "memory windows are supported";
  DAT_RMR_HANDLE rmr;
  ASSERT_EQ(dat_rmr_create(ia.pz, &rmr), DAT_SUCCESS);
  EXPECT_EQ(dat_rmr_free(rmr), DAT_SUCCESS);
  // max_pzs: the IA already holds one.
  std::vector<DAT_PZ_HANDLE> pzs;
  for (DAT_COUNT i = 1; i < a.max_pzs; ++i) {
    DAT_PZ_HANDLE pz;
    ASSERT_EQ(dat_pz_create(ia.ia, &pz), DAT_SUCCESS) << "PZ " << i + 1 << " of " << a.max_pzs;
    pzs.push_back(pz);
  }
  DAT_PZ_HANDLE extra;
  EXPECT_EQ(type_of(dat_pz_create(ia.ia, &extra)), DAT_INSUFFICIENT_RESOURCES) << "beyond max_pzs";
  for (DAT_PZ_HANDLE pz : pzs) ASSERT_EQ(dat_pz_free(pz), DAT_SUCCESS);
  // max_evds: the IA holds the async EVD and the two above.
  std::vector<DAT_EVD_HANDLE> evds;
  for (DAT_COUNT i = 3; i < a.max_evds; ++i) {
    DAT_EVD_HANDLE e;
    ASSERT_EQ(dat_evd_create(ia.ia, 1, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS) << i;
    evds.push_back(e);
  }
  DAT_EVD_HANDLE e_extra;
  EXPECT_EQ(type_of(dat_evd_create(ia.ia, 1, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e_extra)),
            DAT_INSUFFICIENT_RESOURCES)
      << "beyond max_evds";
  for (DAT_EVD_HANDLE e : evds) ASSERT_EQ(dat_evd_free(e), DAT_SUCCESS);
  // Provider attributes.
  EXPECT_EQ(p.max_private_data_size, 256) << "what dat_ep_connect takes (the BadInput test refuses 257)";
  EXPECT_EQ(256 % p.optimal_buffer_alignment, 0u);
  EXPECT_EQ(p.lmr_mem_types_supported, DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL)
      << "the three every provider must support (dat_ia_query(3DAT))";
  EXPECT_EQ(p.dat_qos_supported, DAT_QOS_BEST_EFFORT);
  for (DAT_COMPLETION_FLAGS f : {DAT_COMPLETION_SUPPRESS_FLAG, DAT_COMPLETION_SOLICITED_WAIT_FLAG,
                                 DAT_COMPLETION_UNSIGNALLED_FLAG, DAT_COMPLETION_BARRIER_FENCE_FLAG})
    EXPECT_TRUE(p.completion_flags_supported & f) << "flag " << f << " is implemented";
  EXPECT_EQ(p.ep_creator, DAT_PSP_CREATES_EP_IFASKED);
  EXPECT_EQ(p.pz_support, DAT_PZ_UNIQUE);
  EXPECT_EQ(a.max_iov_segments_per_rdma_read, a.max_iov_segments_per_dto) << "a read scatters into a list";
  // The EVD stream merging matrix says every stream can share one EVD: one EVD takes all six.
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(p.evd_stream_merging_supported[i][j], DAT_TRUE) << i << "," << j;
  DAT_EVD_HANDLE all;
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL,
                           static_cast<DAT_EVD_FLAGS>(DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG |
                                                      DAT_EVD_CONNECTION_FLAG | DAT_EVD_RMR_BIND_FLAG),
                           &all),
            DAT_SUCCESS);
  DAT_EP_HANDLE ep;
  ASSERT_EQ(dat_ep_create(ia.ia, ia.pz, all, all, all, nullptr, &ep), DAT_SUCCESS);
  bool rdma_read = false;
  for (DAT_COUNT i = 0; i < p.num_provider_specific_attr; ++i)
    if (std::strcmp(p.provider_specific_attr[i].name, "DAT_IB_RDMA_READ") == 0)
      rdma_read = std::strcmp(p.provider_specific_attr[i].value, "TRUE") == 0;
  EXPECT_TRUE(rdma_read) << "dtest runs its RDMA Read tests on this attribute";
}

// Issue 13: a Send beyond the EP's max_message_size (as dat_ep_query reports it) was accepted.
TEST(DatApi, ASendBeyondTheEpsMaxMessageSizeIsALengthError) {
  Ia ia;
  End a, b;
  a.make(ia);
  DAT_EP_PARAM p;
  ASSERT_EQ(dat_ep_query(a.ep, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS);
  DAT_EP_ATTR attr = p.ep_attr;
  attr.max_message_size = 4096;
  ASSERT_EQ(dat_ep_free(a.ep), DAT_SUCCESS);
  ASSERT_EQ(dat_ep_create(ia.ia, ia.pz, a.rcv, a.req, a.conn, &attr, &a.ep), DAT_SUCCESS);
  ASSERT_EQ(dat_ep_query(a.ep, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS);
  ASSERT_EQ(p.ep_attr.max_message_size, 4096u);
  b.make(ia);
  DAT_LMR_TRIPLET r = b.iov(0, 8192);
  DAT_DTO_COOKIE c;
  c.as_64 = 1;
  ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &r, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  DAT_LMR_TRIPLET big = a.iov(0, 4097);
  EXPECT_EQ(type_of(dat_ep_post_send(a.ep, 1, &big, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_LENGTH_ERROR);
  DAT_LMR_TRIPLET two[2] = {a.iov(0, 4000), a.iov(8000, 97)};
  EXPECT_EQ(type_of(dat_ep_post_send(a.ep, 2, two, c, DAT_COMPLETION_DEFAULT_FLAG)), DAT_LENGTH_ERROR)
      << "the total of the segments counts";
  DAT_LMR_TRIPLET fits = a.iov(0, 4096);
  ASSERT_EQ(dat_ep_post_send(a.ep, 1, &fits, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.req).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
  EXPECT_EQ(wait_event(b.rcv).event_data.dto_completion_event_data.transfered_length, 4096u);
}

// Issue 13: after the receiver refused a Send with a Terminate (its buffer too small), the
// sender's DTO completed with DAT_DTO_SUCCESS after the BROKEN event. It completes in error.
TEST(DatApi, ASendTheReceiverRefusedCompletesInError) {
  Ia ia;
  End a, b;
  a.make(ia);
  b.make(ia);
  DAT_LMR_TRIPLET r = b.iov(0, 10);
  DAT_DTO_COOKIE c;
  c.as_64 = 5;
  ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &r, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  DAT_PSP_HANDLE psp;
  DAT_EVD_HANDLE cr_evd;
  connect(ia, a, b, psp, cr_evd);
  DAT_LMR_TRIPLET s = a.iov(0, 11);
  c.as_64 = 6;
  ASSERT_EQ(dat_ep_post_send(a.ep, 1, &s, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
  EXPECT_EQ(wait_event(a.conn).event_number, DAT_CONNECTION_EVENT_BROKEN);
  const DAT_EVENT e = wait_event(a.req);
  ASSERT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
  EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 6u);
  EXPECT_NE(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
  EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_REMOTE_RESPONDER);
}

// Issue 13: dat_lmr_create succeeded on unmapped and PROT_NONE memory.
TEST(DatApi, LmrCreateProvesTheMemoryIsThere) {
  Ia ia;
  const std::size_t len = 4 * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto lmr = [&](void* p, DAT_MEM_PRIV_FLAGS priv) {
    DAT_REGION_DESCRIPTION r;
    r.for_va = p;
    DAT_LMR_HANDLE h = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    DAT_VLEN rl;
    DAT_VADDR ra;
    const DAT_RETURN ret =
        dat_lmr_create(ia.ia, DAT_MEM_TYPE_VIRTUAL, r, len, ia.pz, priv, DAT_VA_TYPE_VA, &h, &lc, &rc, &rl, &ra);
    if (ret == DAT_SUCCESS) {
      EXPECT_EQ(dat_lmr_free(h), DAT_SUCCESS);
    }
    return ret;
  };
  void* none = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* ro = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(none, MAP_FAILED);
  ASSERT_NE(ro, MAP_FAILED);
  // Memory unmapped: a range just given back, unless another thread's allocation (ASan's
  // allocator maps its own) took it again meanwhile, which mincore tells after the call.
  const auto unmapped = [&](void* p) {
    unsigned char v[4];
    return mincore(p, len, v) != 0 && errno == ENOMEM;
  };
  bool checked = false;
  for (int attempt = 0; attempt < 8 && !checked; ++attempt) {
    void* gone = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    munmap(gone, len);
    const DAT_RETURN r = lmr(gone, DAT_MEM_PRIV_LOCAL_READ_FLAG);
    if (!unmapped(gone)) continue;
    EXPECT_EQ(type_of(r), DAT_INVALID_PARAMETER);
    checked = true;
  }
  EXPECT_TRUE(checked) << "every unmapped range was mapped again during the call";
  EXPECT_EQ(type_of(lmr(none, DAT_MEM_PRIV_LOCAL_READ_FLAG)), DAT_PROTECTION_VIOLATION);
  EXPECT_EQ(type_of(lmr(ro, DAT_MEM_PRIV_REMOTE_WRITE_FLAG)), DAT_PROTECTION_VIOLATION);
  EXPECT_EQ(lmr(ro, static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG)),
            DAT_SUCCESS);
  munmap(none, len);
  munmap(ro, len);
}
