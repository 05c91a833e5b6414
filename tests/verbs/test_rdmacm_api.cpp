// softrnic's librdmacm.so.1 through its own API, in one process with two RoCEv2 devices
// (SOFTRNIC_VERBS, set by ctest): connections with private data both ways, a reject, and what
// rdma_cm promises about bad input and faults (docs/verbs.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;

constexpr const char* kServerIp = "127.0.9.1";  // device 0
constexpr const char* kClientIp = "127.0.9.2";  // device 1

sockaddr_in addr(const char* ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

// The next event on `ch` within `t`, which must be `want` (else the test fails and nullptr).
rdma_cm_event* next_event(rdma_event_channel* ch, rdma_cm_event_type want, std::chrono::milliseconds t = 5000ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(t.count())) != 1) {
    ADD_FAILURE() << "no event within " << t.count() << " ms (wanted " << rdma_event_str(want) << ")";
    return nullptr;
  }
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) {
    ADD_FAILURE() << "rdma_get_cm_event: " << std::strerror(errno);
    return nullptr;
  }
  EXPECT_EQ(ev->event, want) << rdma_event_str(ev->event) << " status " << ev->status;
  return ev;
}

std::uint16_t next_port() {
  static std::uint16_t p = 30000 + static_cast<std::uint16_t>(::getpid() % 20000);
  return ++p;
}

class RdmaCm : public ::testing::Test {
 protected:
  void SetUp() override {
    ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr);
  }
  void TearDown() override {
    for (rdma_cm_id* id : ids) {
      if (id->qp) rdma_destroy_qp(id);
      rdma_destroy_id(id);
    }
    rdma_destroy_event_channel(ch);
  }
  rdma_cm_id* new_id() {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    if (id) ids.push_back(id);
    return id;
  }
  // A listening id on the server's device, at `port`.
  rdma_cm_id* listener(std::uint16_t port) {
    rdma_cm_id* l = new_id();
    auto a = addr(kServerIp, port);
    EXPECT_EQ(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
    EXPECT_EQ(rdma_listen(l, 4), 0) << std::strerror(errno);
    return l;
  }
  // A client id resolved to the server's `port`, with a QP (its own CQs, made by rdma_create_qp).
  rdma_cm_id* client(std::uint16_t port) {
    rdma_cm_id* c = new_id();
    auto src = addr(kClientIp, 0), dst = addr(kServerIp, port);
    EXPECT_EQ(rdma_resolve_addr(c, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    if (auto* e = next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED)) rdma_ack_cm_event(e);
    EXPECT_EQ(rdma_resolve_route(c, 2000), 0);
    if (auto* e = next_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) rdma_ack_cm_event(e);
    with_qp(c);
    return c;
  }
  void with_qp(rdma_cm_id* id) {
    ibv_qp_init_attr a{};
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.qp_type = IBV_QPT_RC;
    ASSERT_EQ(rdma_create_qp(id, nullptr, &a), 0) << std::strerror(errno);
    ASSERT_NE(id->qp, nullptr);
    EXPECT_NE(id->send_cq_channel, nullptr) << "rdma_create_qp made the CQs, with their channels";
  }
  // `c` disconnects: both ends hear DISCONNECTED once.
  void disconnect_both(rdma_cm_id* c, rdma_cm_id* s) {
    ASSERT_EQ(rdma_disconnect(c), 0);
    int disconnected = 0;
    for (int i = 0; i < 2; ++i) {
      rdma_cm_event* e = next_event(ch, RDMA_CM_EVENT_DISCONNECTED);
      ASSERT_NE(e, nullptr);
      disconnected += e->id == c ? 1 : e->id == s ? 2 : 0;
      rdma_ack_cm_event(e);
    }
    EXPECT_EQ(disconnected, 3);
  }
  // A client's connect to `port` reaches the listener `l` (its request left unanswered).
  void expect_request(rdma_cm_id* l, std::uint16_t port) {
    rdma_cm_id* c = client(port);
    ASSERT_EQ(rdma_connect(c, nullptr), 0);
    rdma_cm_event* req = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NE(req, nullptr);
    EXPECT_EQ(req->listen_id, l);
    ids.push_back(req->id);
    rdma_ack_cm_event(req);
  }
  rdma_event_channel* ch = nullptr;
  std::vector<rdma_cm_id*> ids;
};

TEST_F(RdmaCm, ConnectsWithPrivateDataBothWaysAndDisconnects) {
  const std::uint16_t port = next_port();
  rdma_cm_id* l = listener(port);
  rdma_cm_id* c = client(port);
  rdma_conn_param p{};
  const char hello[] = "hello";
  p.private_data = hello;
  p.private_data_len = sizeof hello;
  p.responder_resources = p.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(c, &p), 0) << std::strerror(errno);
  rdma_cm_event* req = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->listen_id, l);
  ASSERT_GE(req->param.conn.private_data_len, sizeof hello);
  EXPECT_STREQ(static_cast<const char*>(req->param.conn.private_data), hello);
  rdma_cm_id* s = req->id;
  ids.push_back(s);
  EXPECT_EQ(reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(s))->sin_addr.s_addr, addr(kClientIp, 0).sin_addr.s_addr);
  rdma_ack_cm_event(req);
  with_qp(s);
  const char world[] = "world";
  rdma_conn_param a{};
  a.private_data = world;
  a.private_data_len = sizeof world;
  a.responder_resources = a.initiator_depth = 1;
  ASSERT_EQ(rdma_accept(s, &a), 0) << std::strerror(errno);
  // Both ends hear ESTABLISHED (in either order); the client's carries the server's data.
  int established = 0;
  for (int i = 0; i < 2; ++i) {
    rdma_cm_event* e = next_event(ch, RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_NE(e, nullptr);
    if (e->id == c) {
      ASSERT_GE(e->param.conn.private_data_len, sizeof world);
      EXPECT_STREQ(static_cast<const char*>(e->param.conn.private_data), world);
    }
    established += e->id == c ? 1 : e->id == s ? 2 : 0;
    rdma_ack_cm_event(e);
  }
  EXPECT_EQ(established, 3);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(c->qp, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
  disconnect_both(c, s);
}

// A connection without a QP on either id (UCX's rdmacm wire-up: conn_param.qp_num names a QP the
// consumer connects itself): private data both ways, CONNECT_RESPONSE then rdma_establish on the
// active side, ESTABLISHED on the passive one, the path from rdma_init_qp_attr, DISCONNECTED.
TEST_F(RdmaCm, AConnectionWithoutAQpCarriesPrivateDataAndThePath) {
  const std::uint16_t port = next_port();
  listener(port);
  rdma_cm_id* c = new_id();
  auto src = addr(kClientIp, 0), dst = addr(kServerIp, port);
  ASSERT_EQ(rdma_resolve_addr(c, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  if (auto* e = next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED)) rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_resolve_route(c, 2000), 0);
  if (auto* e = next_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) rdma_ack_cm_event(e);
  EXPECT_EQ(rdma_establish(c), -1) << "nothing to establish yet";
  rdma_conn_param p{};
  const char hi[] = "hi";
  p.private_data = hi;
  p.private_data_len = sizeof hi;
  p.qp_num = 1234;
  ASSERT_EQ(rdma_connect(c, &p), 0) << std::strerror(errno);
  EXPECT_EQ(c->qp, nullptr);
  rdma_cm_event* req = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  ASSERT_GE(req->param.conn.private_data_len, sizeof hi);
  EXPECT_STREQ(static_cast<const char*>(req->param.conn.private_data), hi);
  rdma_cm_id* s = req->id;
  ids.push_back(s);
  rdma_ack_cm_event(req);
  const char yo[] = "yo";
  rdma_conn_param a{};
  a.private_data = yo;
  a.private_data_len = sizeof yo;
  a.qp_num = 5678;
  ASSERT_EQ(rdma_accept(s, &a), 0) << std::strerror(errno);
  // The client's CONNECT_RESPONSE (with the server's data) and the server's ESTABLISHED, in
  // either order (softrnic's CM sends the RTU without waiting for rdma_establish).
  int got = 0;
  for (int i = 0; i < 2; ++i) {
    pollfd pf{ch->fd, POLLIN, 0};
    ASSERT_EQ(::poll(&pf, 1, 5000), 1) << "no event within 5 s";
    rdma_cm_event* e = nullptr;
    ASSERT_EQ(rdma_get_cm_event(ch, &e), 0);
    if (e->id == c) {
      EXPECT_EQ(e->event, RDMA_CM_EVENT_CONNECT_RESPONSE) << rdma_event_str(e->event);
      EXPECT_GE(e->param.conn.private_data_len, sizeof yo);
      if (e->param.conn.private_data) {
        EXPECT_STREQ(static_cast<const char*>(e->param.conn.private_data), yo);
      }
      got |= 1;
    } else {
      EXPECT_EQ(e->id, s);
      EXPECT_EQ(e->event, RDMA_CM_EVENT_ESTABLISHED) << rdma_event_str(e->event);
      got |= 2;
    }
    rdma_ack_cm_event(e);
  }
  EXPECT_EQ(got, 3);
  EXPECT_EQ(rdma_establish(c), 0);
  ibv_qp_attr qa{};
  int mask = 0;
  qa.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(rdma_init_qp_attr(c, &qa, &mask), 0);
  EXPECT_TRUE(mask & IBV_QP_AV);
  EXPECT_TRUE(qa.ah_attr.is_global);
  EXPECT_EQ(qa.ah_attr.grh.sgid_index, 1);
  EXPECT_EQ(std::memcmp(&qa.ah_attr.grh.dgid.raw[12], &dst.sin_addr.s_addr, 4), 0) << "the server's address";
  EXPECT_EQ(qa.path_mtu, IBV_MTU_4096);
  disconnect_both(c, s);
}

TEST_F(RdmaCm, ARejectCarriesItsPrivateData) {
  const std::uint16_t port = next_port();
  listener(port);
  rdma_cm_id* c = client(port);
  ASSERT_EQ(rdma_connect(c, nullptr), 0);
  rdma_cm_event* req = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* s = req->id;
  ids.push_back(s);
  rdma_ack_cm_event(req);
  const char no[] = "busy";
  ASSERT_EQ(rdma_reject(s, no, sizeof no), 0);
  EXPECT_EQ(rdma_reject(s, nullptr, 0), -1) << "answered already";
  rdma_cm_event* e = next_event(ch, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, c);
  EXPECT_EQ(e->status, 28) << "IB_CM_REJ_CONSUMER_DEFINED, as Linux rdma_cm reports it on RoCE";
  ASSERT_GE(e->param.conn.private_data_len, sizeof no);
  EXPECT_STREQ(static_cast<const char*>(e->param.conn.private_data), no);
  rdma_ack_cm_event(e);
}

// Nothing listens: REJECTED (invalid service ID) at once, not after the connect timeout (20 s).
TEST_F(RdmaCm, ANobodyListeningPortIsRejectedAtOnce) {
  rdma_cm_id* c = client(next_port());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(rdma_connect(c, nullptr), 0);
  rdma_cm_event* e = next_event(ch, RDMA_CM_EVENT_REJECTED, 5000ms);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 8) << "IB_CM_REJ_INVALID_SERVICE_ID";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  rdma_ack_cm_event(e);
}

TEST_F(RdmaCm, ASecondListenOnATakenPortFails) {
  const std::uint16_t port = next_port();
  listener(port);
  rdma_cm_id* two = new_id();
  auto a = addr(kServerIp, port);
  ASSERT_EQ(rdma_bind_addr(two, reinterpret_cast<sockaddr*>(&a)), 0);
  EXPECT_EQ(rdma_listen(two, 1), -1);
  EXPECT_EQ(errno, EADDRINUSE);
}

// Bound to port 0 on any address: the port is there at once (qperf sends it to its client
// before it listens), the listen keeps it, and a client reaches the listener there.
TEST_F(RdmaCm, ABindToPortZeroPicksThePortAtOnce) {
  rdma_cm_id* l = new_id();
  auto any = addr("0.0.0.0", 0);
  ASSERT_EQ(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&any)), 0);
  const std::uint16_t port = ntohs(rdma_get_src_port(l));
  ASSERT_NE(port, 0);
  rdma_cm_id* other = new_id();
  ASSERT_EQ(rdma_bind_addr(other, reinterpret_cast<sockaddr*>(&any)), 0);
  EXPECT_NE(ntohs(rdma_get_src_port(other)), port) << "two ids, two ports";
  ASSERT_EQ(rdma_listen(l, 1), 0);
  EXPECT_EQ(ntohs(rdma_get_src_port(l)), port);
  expect_request(l, port);
}

// A loopback address no device has: bound without a device, as rdma_cm binds one (libfabric's
// verbs provider binds "localhost"), and a listen there listens on every device.
TEST_F(RdmaCm, ALoopbackAddressWithoutADeviceBindsToNoneAndListensOnAll) {
  rdma_cm_id* l = new_id();
  auto lo = addr("127.0.9.99", 0);
  ASSERT_EQ(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&lo)), 0) << std::strerror(errno);
  EXPECT_EQ(l->verbs, nullptr);
  ASSERT_EQ(rdma_listen(l, 1), 0);
  expect_request(l, ntohs(rdma_get_src_port(l)));
}

TEST_F(RdmaCm, BadAddressesAreRefused) {
  rdma_cm_id* id = new_id();
  auto nowhere = addr("10.255.9.99", 1);  // no softrnic device has it
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&nowhere)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  sockaddr_in6 six{};
  six.sin6_family = AF_INET6;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&six)), -1);
  EXPECT_EQ(errno, EAFNOSUPPORT);
  EXPECT_EQ(rdma_connect(id, nullptr), -1) << "no route resolved";
  EXPECT_EQ(errno, EINVAL);
  rdma_cm_id* udp = nullptr;
  EXPECT_EQ(rdma_create_id(ch, &udp, nullptr, RDMA_PS_UDP), -1) << "no UD QPs";
}

TEST_F(RdmaCm, ANonBlockingChannelSaysEagainAndItsFdPolls) {
  ASSERT_EQ(::fcntl(ch->fd, F_SETFL, ::fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
  rdma_cm_id* id = new_id();
  auto src = addr(kClientIp, 0), dst = addr(kServerIp, 1);
  ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 100), 0);
  pollfd p{ch->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 1000), 1);
  ASSERT_EQ(rdma_get_cm_event(ch, &e), 0);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(e->id, id);
  rdma_ack_cm_event(e);
  EXPECT_EQ(rdma_get_cm_event(ch, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(RdmaCm, ADestroyedIdTakesItsPendingEventsWithIt) {
  ASSERT_EQ(::fcntl(ch->fd, F_SETFL, ::fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  auto src = addr(kClientIp, 0), dst = addr(kServerIp, 1);
  ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 100), 0);
  ASSERT_EQ(rdma_destroy_id(id), 0);  // ADDR_RESOLVED not taken
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &e), -1) << "an event of a destroyed id came";
  EXPECT_EQ(errno, EAGAIN);
}

// rping's event thread is still in rdma_get_cm_event when its main thread destroys its id and
// then the channel, and the byte of an event dropped with the id may wake it: it stays blocked,
// as on rdma_cm's device file, and reports nothing (rping exits 255 on an error there). Each
// round leaves its reader blocked for good.
TEST_F(RdmaCm, AReaderStaysBlockedWhenItsChannelIsDestroyed) {
  auto failed = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < 10; ++i) {
    rdma_event_channel* c = rdma_create_event_channel();
    ASSERT_NE(c, nullptr);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(c, &id, nullptr, RDMA_PS_TCP), 0);
    // One call (a second, after the channel is gone, would be the caller's use of freed memory,
    // as with rdma-core): an event taken is acked (rdma_destroy_id waits for that) and ends it.
    std::thread([c, failed] {
      rdma_cm_event* e = nullptr;
      if (rdma_get_cm_event(c, &e) != 0) {
        failed->fetch_add(1);
        return;
      }
      rdma_ack_cm_event(e);
    }).detach();
    std::this_thread::sleep_for(20ms);  // (blocked in it by now)
    // The event comes while the id and then the channel are destroyed (ADDR_RESOLVED is raised
    // at once: its byte wakes the reader, which mostly finds the event gone with the id).
    auto src = addr(kClientIp, 0), dst = addr(kServerIp, 1);
    ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 100), 0);
    ASSERT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(c);
    std::this_thread::sleep_for(20ms);
    ASSERT_EQ(failed->load(), 0) << "a reader returned an error from its destroyed channel, round " << i;
  }
}

// Events a program does not take fill the channel's pipe (a flood of connection requests to a
// listener that does not take them): posting them must not block (softrnic's engine posts most
// events), and each is still delivered, in order, once the program reads. The pipe is shrunk to
// a page here so that a few thousand events fill it.
TEST_F(RdmaCm, EventsBeyondAFullPipeAreKeptAndDelivered) {
  ASSERT_GE(::fcntl(ch->fd, F_SETPIPE_SZ, 4096), 4096);
  const int n = ::fcntl(ch->fd, F_GETPIPE_SZ) + 300;
  std::vector<rdma_cm_id*> made;
  auto src = addr(kClientIp, 0), dst = addr(kServerIp, 1);
  for (int i = 0; i < n; ++i) {
    rdma_cm_id* id = new_id();  // (the fixture destroys it)
    ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 100), 0);
    made.push_back(id);
  }
  for (rdma_cm_id* id : made) {
    rdma_cm_event* e = next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000ms);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->id, id);
    rdma_ack_cm_event(e);
  }
}

TEST(RdmaCmChannel, AClosedChannelSaysEbadf) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  const int fd = ch->fd;
  ::close(fd);
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &e), -1);
  EXPECT_EQ(errno, EBADF);
  rdma_destroy_event_channel(ch);
}

TEST(RdmaCmDevices, EveryDeviceIsListedOpen) {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(n, 2);
  for (int i = 0; i < n; ++i)
    EXPECT_STREQ(ibv_get_device_name(list[i]->device), i ? "softrnic_roce1" : "softrnic_roce0");
  EXPECT_EQ(list[n], nullptr);
  rdma_free_devices(list);
  rdma_addrinfo hints{}, *res = nullptr;
  hints.ai_flags = RAI_PASSIVE;
  ASSERT_EQ(rdma_getaddrinfo(kServerIp, "7471", &hints, &res), 0);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(reinterpret_cast<sockaddr_in*>(res->ai_src_addr)->sin_port, htons(7471));
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  rdma_freeaddrinfo(res);
  EXPECT_STREQ(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED");
}

}  // namespace
