// softrnic's libibverbs.so.1 through the verbs API a program sees (Debian's <infiniband/verbs.h>,
// its inline verbs included), in one process: two RC QPs of one RoCEv2 device connected to each
// other out of band. What rxe does is the reference for every errno and error completion.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// Two devices: the default RoCEv2 one and an iWARP one (before the library reads the list).
// (ctest's verbs_api_spin runs some tests again with its own SOFTRNIC_VERBS: a long wait_spin_us)
const bool kEnv = setenv("SOFTRNIC_VERBS", "wire=roce ip=127.0.0.1|wire=tcp ip=127.0.0.1", 0) == 0;

ibv_device* find_device(const char* name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* found = nullptr;
  for (int i = 0; list && i < n; ++i)
    if (std::string(ibv_get_device_name(list[i])) == name) found = list[i];
  ibv_free_device_list(list);  // (the devices themselves stay)
  return found;
}

constexpr int kAllAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

struct Verbs : ::testing::Test {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  std::vector<char> buf = std::vector<char>(1 << 16);
  ibv_mr* mr = nullptr;
  ibv_gid gid{};

  void SetUp() override {
    ASSERT_TRUE(kEnv);
    ibv_device* dev = find_device("softrnic_roce0");
    ASSERT_NE(dev, nullptr);
    ctx = ibv_open_device(dev);
    ASSERT_NE(ctx, nullptr);
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), kAllAccess);
    ASSERT_TRUE(pd && cq && mr);
    ASSERT_EQ(ibv_query_gid(ctx, 1, 1, &gid), 0);
    a = make_qp();
    b = make_qp();
  }
  void TearDown() override {
    for (ibv_qp* q : {a, b}) {
      if (q) {
        EXPECT_EQ(ibv_destroy_qp(q), 0);
      }
    }
    if (mr) {
      EXPECT_EQ(ibv_dereg_mr(mr), 0);
    }
    if (cq) {
      EXPECT_EQ(ibv_destroy_cq(cq), 0);
    }
    if (pd) {
      EXPECT_EQ(ibv_dealloc_pd(pd), 0);
    }
    if (ctx) {
      EXPECT_EQ(ibv_close_device(ctx), 0);
    }
  }

  ibv_qp* make_qp(ibv_srq* srq = nullptr, ibv_cq* send_cq = nullptr, ibv_cq* recv_cq = nullptr) {
    ibv_qp_init_attr ia{};
    ia.send_cq = send_cq ? send_cq : cq;
    ia.recv_cq = recv_cq ? recv_cq : cq;
    ia.srq = srq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
    ia.cap.max_inline_data = 64;
    ia.qp_type = IBV_QPT_RC;
    return ibv_create_qp(pd, &ia);
  }

  int to_init(ibv_qp* q) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    return ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }
  int to_rtr(ibv_qp* q, ibv_qp* peer) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = IBV_MTU_1024;
    at.dest_qp_num = peer->qp_num;
    at.rq_psn = 100 + peer->qp_num % 1000;
    at.max_dest_rd_atomic = 4;
    at.min_rnr_timer = 1;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = gid;
    at.ah_attr.grh.sgid_index = 1;
    at.ah_attr.port_num = 1;
    return ibv_modify_qp(q, &at,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  }
  int to_rts(ibv_qp* q) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 100 + q->qp_num % 1000;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 4;
    return ibv_modify_qp(
        q, &at,
        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }
  void connect() {
    ASSERT_EQ(to_init(a), 0);
    ASSERT_EQ(to_init(b), 0);
    ASSERT_EQ(to_rtr(a, b), 0);
    ASSERT_EQ(to_rtr(b, a), 0);
    ASSERT_EQ(to_rts(a), 0);
    ASSERT_EQ(to_rts(b), 0);
  }

  ibv_sge sge(std::size_t off, std::uint32_t len) const {
    return ibv_sge{reinterpret_cast<std::uintptr_t>(buf.data() + off), len, mr->lkey};
  }
  int post_recv(ibv_qp* q, std::uint64_t id, std::size_t off, std::uint32_t len) {
    ibv_sge g = sge(off, len);
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &g;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(q, &wr, &bad);
  }
  int post(ibv_qp* q, ibv_send_wr& wr) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(q, &wr, &bad);
  }
  // Waits (5 s at most) for n completions of the CQ.
  std::vector<ibv_wc> wait(int n, ibv_cq* on = nullptr) {
    std::vector<ibv_wc> got;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (static_cast<int>(got.size()) < n && std::chrono::steady_clock::now() < end) {
      ibv_wc wc[8];
      const int k = ibv_poll_cq(on ? on : cq, 8, wc);
      EXPECT_GE(k, 0);
      got.insert(got.end(), wc, wc + std::max(k, 0));
    }
    return got;
  }
  // A CQ on `ch` (its context this fixture) that takes a's send completions: a made again on it
  // and connected.
  ibv_cq* channel_cq_for_a(ibv_comp_channel* ch) {
    ibv_cq* ecq = ibv_create_cq(ctx, 16, this, ch, 0);
    EXPECT_NE(ecq, nullptr);
    EXPECT_EQ(ibv_destroy_qp(a), 0);
    a = make_qp(nullptr, ecq);
    connect();
    return ecq;
  }
  // A new completion channel `ch` and, on it, a CQ taking a's send completions, armed; nullptr
  // when a step fails.
  ibv_cq* armed_channel_cq_for_a(ibv_comp_channel*& ch) {
    ch = ibv_create_comp_channel(ctx);
    if (!ch) return nullptr;
    ibv_cq* ecq = channel_cq_for_a(ch);
    return ecq && ibv_req_notify_cq(ecq, 0) == 0 ? ecq : nullptr;
  }
  // A 16-byte Send from a (signaled) into a receive b posts for it.
  void send_a_to_b(std::uint64_t id) {
    ASSERT_EQ(post_recv(b, 1, 0, 64), 0);
    ibv_sge g = sge(128, 16);
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &g;
    wr.num_sge = 1;
    ASSERT_EQ(post(a, wr), 0);
  }
  // Takes the one completion of a's Send `id` off `ecq` and b's receive, then frees a, `ecq` and
  // the channel.
  void finish_channel_test(ibv_cq* ecq, ibv_comp_channel* ch, std::uint64_t id) {
    auto wc = wait(1, ecq);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, id);
    wait(1);  // (b's receive)
    ASSERT_EQ(ibv_destroy_qp(a), 0);
    a = nullptr;
    EXPECT_EQ(ibv_destroy_cq(ecq), 0);
    EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
  }
  ibv_qp_state state(ibv_qp* q) {
    ibv_qp_attr at{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(q, &at, IBV_QP_STATE, &ia), 0);
    return at.qp_state;
  }
};

TEST_F(Verbs, DeviceAndPortAsProgramsQueryThem) {
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx, &da), 0);
  EXPECT_EQ(da.phys_port_cnt, 1);
  EXPECT_EQ(da.atomic_cap, IBV_ATOMIC_HCA);
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(ctx, nullptr, &dx), 0);  // (through verbs_context's query_device_ex)
  EXPECT_EQ(dx.orig_attr.max_qp_wr, da.max_qp_wr);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(pa.gid_tbl_len, 2);
  EXPECT_NE(ibv_query_port(ctx, 2, &pa), 0);
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(ctx, 1, 1, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(std::memcmp(e.gid.raw, gid.raw, 16), 0);
  EXPECT_EQ(gid.raw[10], 0xFF);
  EXPECT_EQ(gid.raw[12], 127);
  EXPECT_NE(ibv_query_gid_ex(ctx, 1, 2, &e, 0), 0);
  EXPECT_EQ(a->state, IBV_QPS_RESET);
  EXPECT_NE(a->qp_num, b->qp_num);
}

TEST_F(Verbs, SendWithImmediateAndInlineDataArrive) {
  connect();
  ASSERT_EQ(post_recv(b, 7, 1024, 256), 0);
  std::strcpy(buf.data(), "inline payload");
  ibv_sge g = sge(0, 15);
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(0xA1B2C3D4);
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  ASSERT_EQ(post(a, wr), 0);
  std::strcpy(buf.data(), "CHANGED AFTERWARDS");  // inline: the data was taken at the post
  auto wc = wait(2);
  ASSERT_EQ(wc.size(), 2u);
  for (const ibv_wc& w : wc) {
    EXPECT_EQ(w.status, IBV_WC_SUCCESS) << ibv_wc_status_str(w.status);
    if (w.wr_id != 7) continue;
    EXPECT_EQ(w.opcode, IBV_WC_RECV);
    EXPECT_EQ(w.byte_len, 15u);
    EXPECT_EQ(w.qp_num, b->qp_num);
    EXPECT_TRUE(w.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(w.imm_data), 0xA1B2C3D4u);
  }
  EXPECT_STREQ(buf.data() + 1024, "inline payload");
}

TEST_F(Verbs, WriteReadAndAtomicsReachTheRemoteMemory) {
  connect();
  std::memset(buf.data(), 'w', 4096);
  ibv_sge g = sge(0, 4096);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(buf.data() + 8192);
  wr.wr.rdma.rkey = mr->rkey;
  ASSERT_EQ(post(a, wr), 0);
  ASSERT_EQ(wait(1).at(0).status, IBV_WC_SUCCESS);
  EXPECT_EQ(buf[8192 + 4095], 'w');
  // Read it back elsewhere.
  g = sge(16384, 4096);
  wr.opcode = IBV_WR_RDMA_READ;
  ASSERT_EQ(post(a, wr), 0);
  auto r = wait(1);
  ASSERT_EQ(r.at(0).status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(buf[16384 + 4095], 'w');
  // CmpSwap then FetchAdd on 8 aligned bytes; each returns what it found.
  auto* target = reinterpret_cast<std::uint64_t*>(buf.data() + 32768);
  *target = 5;
  g = sge(32776, 8);
  wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  wr.wr.atomic.remote_addr = reinterpret_cast<std::uintptr_t>(target);
  wr.wr.atomic.rkey = mr->rkey;
  wr.wr.atomic.compare_add = 5;
  wr.wr.atomic.swap = 40;
  ASSERT_EQ(post(a, wr), 0);
  ASSERT_EQ(wait(1).at(0).opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(*target, 40u);
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.wr.atomic.compare_add = 2;
  ASSERT_EQ(post(a, wr), 0);
  ASSERT_EQ(wait(1).at(0).opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(*target, 42u);
  EXPECT_EQ(*reinterpret_cast<std::uint64_t*>(buf.data() + 32776), 40u);
}

TEST_F(Verbs, APostInTheWrongStateIsEinvalAndNamesTheRequest) {
  ibv_sge g = sge(0, 8);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &g;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a, &wr, &bad), EINVAL);  // RESET
  EXPECT_EQ(bad, &wr);
  EXPECT_EQ(post_recv(a, 1, 0, 8), EINVAL);  // RESET takes no receive
  ASSERT_EQ(to_init(a), 0);
  EXPECT_EQ(post_recv(a, 1, 0, 8), 0);  // INIT does
  EXPECT_EQ(ibv_post_send(a, &wr, &bad), EINVAL);
  ASSERT_EQ(to_init(b), 0);
  ASSERT_EQ(to_rtr(a, b), 0);
  EXPECT_EQ(ibv_post_send(a, &wr, &bad), EINVAL);  // RTR sends nothing
  EXPECT_EQ(state(a), IBV_QPS_RTR);
  // Out of order: RTS from INIT, RTR from RESET.
  EXPECT_EQ(to_rts(b), EINVAL);
  ibv_qp* c = make_qp();
  EXPECT_EQ(to_rtr(c, a), EINVAL);
  EXPECT_EQ(ibv_destroy_qp(c), 0);
}

TEST_F(Verbs, MoreSgesThanTheQpTakesIsEinval) {
  connect();
  ibv_sge g[3] = {sge(0, 8), sge(8, 8), sge(16, 8)};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = g;
  wr.num_sge = 3;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  ibv_recv_wr rw{};
  rw.sg_list = g;
  rw.num_sge = 3;
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(ibv_post_recv(a, &rw, &rbad), EINVAL);
  EXPECT_EQ(state(a), IBV_QPS_RTS);  // nothing else happened
}

// As on rxe: the post is taken, completes with a local protection error, and the QP is in error
// with its receives flushed.
TEST_F(Verbs, ABadLkeyCompletesInErrorAndTheQpGoesToError) {
  connect();
  ASSERT_EQ(post_recv(a, 50, 0, 64), 0);
  ibv_sge g = sge(0, 8);
  g.lkey ^= 0x55;
  ibv_send_wr wr{};
  wr.wr_id = 9;
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &g;
  wr.num_sge = 1;
  ASSERT_EQ(post(a, wr), 0);
  auto wc = wait(2);
  ASSERT_EQ(wc.size(), 2u);
  bool saw_send = false, saw_flush = false;
  for (const ibv_wc& w : wc) {
    if (w.wr_id == 9) saw_send = w.status == IBV_WC_LOC_PROT_ERR;
    if (w.wr_id == 50) saw_flush = w.status == IBV_WC_WR_FLUSH_ERR;
  }
  EXPECT_TRUE(saw_send);
  EXPECT_TRUE(saw_flush);
  EXPECT_EQ(state(a), IBV_QPS_ERR);
}

TEST_F(Verbs, ABadRkeyCompletesWithARemoteAccessError) {
  connect();
  ibv_sge g = sge(0, 64);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(buf.data());
  wr.wr.rdma.rkey = mr->rkey ^ 0x55;
  ASSERT_EQ(post(a, wr), 0);
  auto wc = wait(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(state(a), IBV_QPS_ERR);
}

// rxe's check_op_valid: the responder QP's own qp_access_flags come first.
TEST_F(Verbs, AWriteTheResponderQpDoesNotAllowIsAnInvalidRequest) {
  connect();
  ibv_qp_attr at{};
  at.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(ibv_modify_qp(b, &at, IBV_QP_ACCESS_FLAGS), 0);
  ibv_sge g = sge(0, 64);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_READ;
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(buf.data() + 4096);
  wr.wr.rdma.rkey = mr->rkey;
  ASSERT_EQ(post(a, wr), 0);  // allowed
  ASSERT_EQ(wait(1).at(0).status, IBV_WC_SUCCESS);
  wr.opcode = IBV_WR_RDMA_WRITE;
  ASSERT_EQ(post(a, wr), 0);  // not allowed, though the region would take it
  auto wc = wait(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(wc[0].status);
}

TEST_F(Verbs, ErrFlushesInOrderAndResetStartsAgain) {
  connect();
  for (std::uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(post_recv(b, id, id * 64, 64), 0);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b, &at, IBV_QP_STATE), 0);
  auto wc = wait(3);
  ASSERT_EQ(wc.size(), 3u);
  for (std::uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(wc[i].wr_id, i + 1);
    EXPECT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
  }
  // Posts in ERR are taken and flushed (how a consumer drains a QP), as on rxe.
  ASSERT_EQ(post_recv(b, 8, 0, 64), 0);
  ibv_sge dg = sge(0, 8);
  ibv_send_wr drain{};
  drain.wr_id = 9;
  drain.opcode = IBV_WR_SEND;
  drain.sg_list = &dg;
  drain.num_sge = 1;
  ibv_send_wr* dbad = nullptr;
  ASSERT_EQ(ibv_post_send(b, &drain, &dbad), 0);  // (unsignaled: flushed all the same)
  wc = wait(2);
  ASSERT_EQ(wc.size(), 2u);
  for (const ibv_wc& w : wc) {
    EXPECT_EQ(w.status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_TRUE(w.wr_id == 8 || w.wr_id == 9);
  }
  // Both back to RESET, connected again: a Send goes through.
  at.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(b, &at, IBV_QP_STATE), 0);
  ASSERT_EQ(ibv_modify_qp(a, &at, IBV_QP_STATE), 0);
  EXPECT_EQ(state(a), IBV_QPS_RESET);
  connect();
  ASSERT_EQ(post_recv(b, 4, 0, 64), 0);
  ibv_sge g = sge(128, 16);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &g;
  wr.num_sge = 1;
  ASSERT_EQ(post(a, wr), 0);
  wc = wait(2);
  ASSERT_EQ(wc.size(), 2u);
  for (const ibv_wc& w : wc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
}

TEST_F(Verbs, AnIwarpQpCannotGoToRtrWithoutAConnection) {
  ibv_device* dev = find_device("softrnic_iwarp0");
  ASSERT_NE(dev, nullptr);
  ibv_context* ic = ibv_open_device(dev);
  ASSERT_NE(ic, nullptr);
  EXPECT_EQ(ic->device->transport_type, IBV_TRANSPORT_IWARP);
  ibv_pd* ipd = ibv_alloc_pd(ic);
  ibv_cq* icq = ibv_create_cq(ic, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = icq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.qp_type = IBV_QPT_RC;
  ibv_qp* q = ibv_create_qp(ipd, &ia);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(to_init(q), 0);
  EXPECT_EQ(to_rtr(q, a), EINVAL);
  EXPECT_EQ(state(q), IBV_QPS_INIT);
  EXPECT_EQ(ibv_destroy_qp(q), 0);
  EXPECT_EQ(ibv_destroy_cq(icq), 0);
  EXPECT_EQ(ibv_dealloc_pd(ipd), 0);
  EXPECT_EQ(ibv_close_device(ic), 0);
}

TEST_F(Verbs, ACompletionChannelIsAPollableFdThatMayBeNonBlocking) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* ecq = channel_cq_for_a(ch);
  ASSERT_NE(ecq, nullptr);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);  // a CQ still uses it
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  ibv_cq* got = nullptr;
  void* got_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(ibv_req_notify_cq(ecq, 0), 0);
  send_a_to_b(77);
  pollfd p{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), 0);
  EXPECT_EQ(got, ecq);
  EXPECT_EQ(got_ctx, this);
  ibv_ack_cq_events(ecq, 1);
  EXPECT_EQ(ecq->comp_events_completed, 1u);
  // Not armed again: no second event.
  EXPECT_EQ(poll(&p, 1, 50), 0);
  finish_channel_test(ecq, ch, 77);
}

void on_alarm(int) {}

// SIGALRM to on_alarm without SA_RESTART (a blocking call it interrupts fails with EINTR), the
// previous action in `old`.
bool catch_sigalrm(struct sigaction& old) {
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  return sigaction(SIGALRM, &sa, &old) == 0;
}

// A blocking ibv_get_cq_event drives the engine while it waits; like the read() of rdma-core's
// it ends with EINTR on a signal (qperf ends each test with SIGALRM), and the library's own
// threads do not take the application's signals. Then it returns the event when it comes.
TEST_F(Verbs, ABlockingGetCqEventEndsOnASignalAndReturnsTheEvent) {
  ibv_comp_channel* ch = nullptr;
  ibv_cq* ecq = armed_channel_cq_for_a(ch);
  ASSERT_NE(ecq, nullptr);
  struct sigaction old {};
  ASSERT_TRUE(catch_sigalrm(old));
  itimerval t{};
  t.it_value.tv_usec = 100000;
  t.it_interval.tv_usec = 200000;  // again, should one come while this thread was not blocked
  ASSERT_EQ(setitimer(ITIMER_REAL, &t, nullptr), 0);
  ibv_cq* got = nullptr;
  void* got_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), -1);
  EXPECT_EQ(errno, EINTR);
  t = {};
  ASSERT_EQ(setitimer(ITIMER_REAL, &t, nullptr), 0);
  sigaction(SIGALRM, &old, nullptr);
  send_a_to_b(78);
  ASSERT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), 0);
  EXPECT_EQ(got, ecq);
  EXPECT_EQ(got_ctx, this);
  ibv_ack_cq_events(ecq, 1);
  finish_channel_test(ecq, ch, 78);
}

// Whether thread `tid` of this process blocks SIGALRM now (its SigBlk in /proc): the waiter
// holds signals off while it spins before it sleeps.
bool blocks_sigalrm(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("SigBlk:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGALRM - 1)) & 1;
  return false;
}

// A blocking ibv_get_cq_event first polls for a while (wait_spin_us) with signals held off, and
// sleeps only then: a signal that comes during the spin must still end the wait with EINTR, or
// qperf's SIGALRM would be spent and its server wait forever. A helper thread signals the waiter
// whenever it sees it spinning (SIGALRM in its SigBlk); with the default short spin, which it
// rarely sees, also every 100 ms after 0.5 s whatever the waiter does (ThreadSanitizer's runtime
// blocks signals for moments of its own, and delivers a handler late). A peer's Send comes only
// after 2 s: signals that were all lost show as that event. With a long spin (ctest
// verbs_api_spin) every signal comes during a spin.
TEST_F(Verbs, ASignalDuringTheSpinBeforeTheSleepEndsTheWaitToo) {
  const char* spec = std::getenv("SOFTRNIC_VERBS");
  const bool long_spin = spec && std::string(spec).find("wait_spin_us=") != std::string::npos;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* ecq = armed_channel_cq_for_a(ch);
  ASSERT_NE(ecq, nullptr);
  struct sigaction old {};
  ASSERT_TRUE(catch_sigalrm(old));
  const pid_t me = static_cast<pid_t>(syscall(SYS_gettid));
  const pthread_t self = pthread_self();
  std::atomic<bool> returned{false};
  std::atomic<int> while_spinning{0};
  std::thread helper([&] {
    using C = std::chrono::steady_clock;
    const auto start = C::now();
    auto next_blind = start + std::chrono::milliseconds(500);
    while (!returned) {
      if (blocks_sigalrm(me)) {
        while_spinning++;
        pthread_kill(self, SIGALRM);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } else if (!long_spin && C::now() >= next_blind) {  // (a long spin must be seen)
        pthread_kill(self, SIGALRM);
        next_blind += std::chrono::milliseconds(100);
      }
    }
  });
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    send_a_to_b(79);
  });
  ibv_cq* got = nullptr;
  void* got_ctx = nullptr;
  errno = 0;
  const int rc = ibv_get_cq_event(ch, &got, &got_ctx);
  const int err = errno;
  returned = true;
  helper.join();
  peer.join();
  sigaction(SIGALRM, &old, nullptr);
  EXPECT_EQ(rc, -1);
  EXPECT_EQ(err, EINTR);
  if (long_spin) {
    EXPECT_GT(while_spinning.load(), 0) << "the signal was to come during the spin";
  }
  if (rc != 0) {
    ASSERT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), 0);  // (else it was this event)
  }
  EXPECT_EQ(got, ecq);
  ibv_ack_cq_events(ecq, 1);
  finish_channel_test(ecq, ch, 79);
}

// A completion raised in the waiter's own round before it sleeps: another thread's post that the
// waiter's spin took in (the post found the device lock held) and that completed at once, as a UD
// Send does and every request over MPA/TCP. The wait ends at once; it slept its whole 100 ms
// chunk on it (rping over MPA/TCP took 15-20 s for 1000 pings). Under verbs_api_spin's 10 ms
// spin nearly every post here is taken in so; a wait that took 50 ms counts as asleep on it.
TEST_F(Verbs, AChannelWaitEndsOnACompletionItsOwnSpinRaised) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* ecq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  ASSERT_NE(ecq, nullptr);
  ibv_qp_init_attr ia{};
  ia.send_cq = ecq;
  ia.recv_cq = cq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.qp_type = IBV_QPT_UD;
  ibv_qp* u = ibv_create_qp(pd, &ia);
  ASSERT_NE(u, nullptr);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qkey = 0x11111111;
  ASSERT_EQ(ibv_modify_qp(u, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  at.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(ibv_modify_qp(u, &at, IBV_QP_STATE), 0);
  at.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(u, &at, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.grh.dgid = gid;
  aa.grh.dgid.raw[15] = 77;  // 127.0.0.77: nothing answers, no frame comes back to end the spin
  aa.grh.sgid_index = 1;
  aa.port_num = 1;
  ibv_ah* ah = ibv_create_ah(pd, &aa);
  ASSERT_NE(ah, nullptr);
  int slow = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(ibv_req_notify_cq(ecq, 0), 0);
    std::thread waiter([&] {
      ibv_cq* got = nullptr;
      void* cq_ctx = nullptr;
      if (ibv_get_cq_event(ch, &got, &cq_ctx) == 0) ibv_ack_cq_events(got, 1);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // (the waiter spins, or sleeps in the netdev)
    ibv_sge g = sge(0, 8);
    ibv_send_wr wr{};
    wr.wr_id = 100 + static_cast<std::uint64_t>(i);
    wr.sg_list = &g;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = 0x123;
    wr.wr.ud.remote_qkey = 0x11111111;
    const auto t0 = std::chrono::steady_clock::now();
    if (const int rc = post(u, wr); rc != 0) {
      waiter.detach();  // (blocked for good: nothing completes)
      FAIL() << "the UD Send was refused: " << std::strerror(rc);
    }
    waiter.join();
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(50)) ++slow;
    auto wc = wait(1, ecq);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, wr.wr_id);
  }
  EXPECT_LE(slow, 2) << "waits slept on a completion their own round raised";
  EXPECT_EQ(ibv_destroy_qp(u), 0);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(ibv_destroy_cq(ecq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(Verbs, ASolicitedOnlyArmingWakesForASolicitedSendOnly) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* rcq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  ASSERT_NE(rcq, nullptr);
  ASSERT_EQ(ibv_destroy_qp(b), 0);
  b = make_qp(nullptr, nullptr, rcq);  // b's receives complete on the channel's CQ
  ASSERT_NE(b, nullptr);
  connect();
  ASSERT_EQ(post_recv(b, 1, 0, 64), 0);
  ASSERT_EQ(post_recv(b, 2, 64, 64), 0);
  ASSERT_EQ(ibv_req_notify_cq(rcq, 1), 0);
  ibv_sge g = sge(256, 16);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &g;
  wr.num_sge = 1;
  ASSERT_EQ(post(a, wr), 0);  // not solicited
  ASSERT_EQ(wait(1).size(), 1u);
  ASSERT_EQ(wait(1, rcq).size(), 1u);  // it arrived ...
  pollfd p{ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 100), 0);  // ... and woke nobody
  wr.send_flags = IBV_SEND_SOLICITED;
  ASSERT_EQ(post(a, wr), 0);
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ibv_cq* got = nullptr;
  void* got_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), 0);
  EXPECT_EQ(got, rcq);
  ibv_ack_cq_events(rcq, 1);
  EXPECT_EQ(wait(1, rcq).size(), 1u);
  wait(1);
  ASSERT_EQ(ibv_destroy_qp(b), 0);
  b = nullptr;
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// Reads one async event (2 s at most).
bool async_event(ibv_context* c, ibv_async_event& ev) {
  pollfd p{c->async_fd, POLLIN, 0};
  if (poll(&p, 1, 2000) != 1) return false;
  if (ibv_get_async_event(c, &ev) != 0) return false;
  ibv_ack_async_event(&ev);
  return true;
}

TEST_F(Verbs, AnSrqRaisesItsLimitAndAQpLeavingItItsLastWqe) {
  ibv_srq_init_attr si{};
  si.attr.max_wr = 16;
  si.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &si);
  ASSERT_NE(srq, nullptr);
  ASSERT_EQ(ibv_destroy_qp(b), 0);
  b = make_qp(srq);
  ASSERT_NE(b, nullptr);
  connect();
  for (std::uint64_t id = 1; id <= 4; ++id) {
    ibv_sge g = sge(id * 256, 256);
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &g;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  }
  ibv_srq_attr sa{};
  sa.srq_limit = 3;
  ASSERT_EQ(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0);
  ASSERT_EQ(ibv_query_srq(srq, &sa), 0);
  EXPECT_EQ(sa.srq_limit, 3u);
  EXPECT_EQ(sa.max_wr, 16u);
  ibv_sge g = sge(0, 32);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &g;
  wr.num_sge = 1;
  for (int i = 0; i < 2; ++i) ASSERT_EQ(post(a, wr), 0);
  EXPECT_EQ(wait(4).size(), 4u);
  ibv_async_event ev{};
  ASSERT_TRUE(async_event(ctx, ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  ASSERT_EQ(ibv_query_srq(srq, &sa), 0);
  EXPECT_EQ(sa.srq_limit, 0u);  // (fired: disarmed)
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b, &at, IBV_QP_STATE), 0);
  ASSERT_TRUE(async_event(ctx, ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, b);
  EXPECT_EQ(ibv_destroy_srq(srq), EBUSY);  // b still uses it
  ASSERT_EQ(ibv_destroy_qp(b), 0);
  b = nullptr;
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(Verbs, WhatSoftrnicDoesNotOfferAnswersAsRdmaCoreDoes) {
  errno = 0;
  ibv_cq_init_attr_ex cx{};
  cx.cqe = 16;
  EXPECT_EQ(ibv_create_cq_ex(ctx, &cx), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd, IBV_MW_TYPE_1), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.qp_type = IBV_QPT_UC;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd, &ia), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(ibv_qp_to_qp_ex(a), nullptr);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr_iova2(pd, buf.data(), 64, 4096, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(ibv_fork_init(), 0);
  EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

TEST_F(Verbs, RegistrationChecksAccessAndMemory) {
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), 64, IBV_ACCESS_REMOTE_WRITE), nullptr);  // without local write
  EXPECT_EQ(errno, EINVAL);
  void* gone = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ASSERT_EQ(munmap(gone, 8192), 0);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, gone, 8192, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EFAULT);
  ibv_mr* m = ibv_reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->lkey, m->rkey);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // its regions first
  EXPECT_EQ(ibv_dereg_mr(m), 0);
}

}  // namespace

// UD on RoCEv2 (as UCX's ud_verbs and ibv_ud_pingpong use it): a datagram reaches the QP its
// AH and QPN name, behind the 40-byte GRH (an IPv4 header in its second half), with the
// sender's QPN; one with another Q_Key is dropped; one larger than the buffer completes with a
// length error; one larger than the MTU is refused at the post; iWARP has no UD.
TEST_F(Verbs, UdDatagramsCarryTheGrhAndTheSendersQpn) {
  ibv_qp* u[2] = {nullptr, nullptr};
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.qp_type = IBV_QPT_UD;
  for (ibv_qp*& q : u) {
    q = ibv_create_qp(pd, &ia);
    ASSERT_NE(q, nullptr) << std::strerror(errno);
    EXPECT_EQ(q->qp_type, IBV_QPT_UD);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = 0x11111111;
    EXPECT_NE(ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), 0) << "INIT needs the Q_Key";
    ASSERT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    at.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE), 0);
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 5;
    ASSERT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.grh.dgid = gid;
  aa.grh.sgid_index = 1;
  aa.port_num = 1;
  ibv_ah* ah = ibv_create_ah(pd, &aa);
  ASSERT_NE(ah, nullptr);
  ASSERT_EQ(post_recv(u[1], 1, 0, 40 + 100), 0);
  ASSERT_EQ(post_recv(u[1], 2, 4096, 40 + 8), 0);
  std::memcpy(buf.data() + 8192, "datagram", 8);
  const auto send = [&](std::uint32_t len, std::uint32_t qkey) {
    ibv_sge g = sge(8192, len);
    ibv_send_wr wr{};
    wr.wr_id = 9;
    wr.sg_list = &g;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = u[1]->qp_num;
    wr.wr.ud.remote_qkey = qkey;
    return post(u[0], wr);
  };
  ASSERT_EQ(send(8, 0x22222222), 0);     // another Q_Key: dropped, its send completes
  ASSERT_EQ(send(8, 0x80000000), 0);     // the QP's own Q_Key (high bit)
  ASSERT_EQ(send(100, 0x11111111), 0);   // 100 bytes into a 48-byte buffer
  ASSERT_EQ(send(4097, 0x11111111), 0);  // beyond the MTU: a local length error (as rxe), the sender's QP in error
  auto wcs = wait(6);
  ASSERT_EQ(wcs.size(), 6u);
  int sends = 0, too_long = 0;
  for (const ibv_wc& w : wcs) {
    if (w.wr_id == 9) {
      if (w.status == IBV_WC_SUCCESS) ++sends;
      if (w.status == IBV_WC_LOC_LEN_ERR) ++too_long;
    } else if (w.wr_id == 1) {
      ASSERT_EQ(w.status, IBV_WC_SUCCESS);
      EXPECT_EQ(w.byte_len, 40u + 8);
      EXPECT_EQ(w.src_qp, u[0]->qp_num);
      EXPECT_TRUE(w.wc_flags & IBV_WC_GRH);
      EXPECT_EQ(std::memcmp(buf.data() + 40, "datagram", 8), 0);
      const auto* ip = reinterpret_cast<const unsigned char*>(buf.data() + 20);
      EXPECT_EQ(ip[0], 0x45);
      EXPECT_EQ(ip[9], 17);
      EXPECT_EQ(std::memcmp(ip + 16, gid.raw + 12, 4), 0) << "the destination address";
    } else {
      EXPECT_EQ(w.wr_id, 2u);
      EXPECT_EQ(w.status, IBV_WC_LOC_LEN_ERR);
    }
  }
  EXPECT_EQ(sends, 3);
  EXPECT_EQ(too_long, 1);
  EXPECT_EQ(state(u[1]), IBV_QPS_RTS) << "a receive's length error leaves the UD QP as it was";
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  for (ibv_qp* q : u) EXPECT_EQ(ibv_destroy_qp(q), 0);
  ibv_context* iw = ibv_open_device(find_device("softrnic_iwarp0"));
  ASSERT_NE(iw, nullptr);
  ibv_pd* ipd = ibv_alloc_pd(iw);
  ibv_cq* icq = ibv_create_cq(iw, 4, nullptr, nullptr, 0);
  ia.send_cq = ia.recv_cq = icq;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(ipd, &ia), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP) << "iWARP has no UD (as siw)";
  ibv_destroy_cq(icq);
  ibv_dealloc_pd(ipd);
  ibv_close_device(iw);
}

// CQs as deep as mlx5's: libfabric's rxm asks for 262144 entries (the ring holds 65536; the rest
// wait in memory, in order: PostPath.ACqThatOverflowsKeepsEveryCompletionInOrder).
TEST_F(Verbs, CqsAsDeepAsMlx5sAreTaken) {
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx, &da), 0);
  EXPECT_EQ(da.max_cqe, 4194303);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx, da.max_cqe + 1, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_cq* deep = ibv_create_cq(ctx, 262144, nullptr, nullptr, 0);
  ASSERT_NE(deep, nullptr);
  EXPECT_GE(deep->cqe, 262144);
  EXPECT_EQ(ibv_destroy_cq(deep), 0);
}
