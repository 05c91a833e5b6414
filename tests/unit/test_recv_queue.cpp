// The receive queue (core/recv_queue.cpp) on its own, the cases of DESIGN.md's receive-side
// semantics: untagged segments matched to buffers by MSN, placement in any order and completion in
// MSN order once delivered, SRQ buffers taken on arrival (or with the gap below, gap_fill), the
// faults a bad segment maps to, nothing placed by a refused segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "objects.hpp"
#include "queues.hpp"

using namespace softrnic;

namespace {

constexpr std::uint32_t kBuf = 1024;  // each receive buffer's size

struct RecvQueue : ::testing::Test {
  Ctx ctx{DeviceConfig{}, Limits{}};
  Pd pd;
  Cq cq{64};
  Qp qp;
  Srq srq;
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(16 * kBuf);
  Mr* mr = nullptr;

  void SetUp() override {
    ASSERT_EQ(ctx.mrs.reg(&pd, addr(0), mem.size(), Access::local_write, mr), Status::ok);
    qp.init.pd = &pd;
    qp.init.recv_cq = &cq;
    qp.state = QpState::rts;
    srq.pd = &pd;
    srq.max_wr = 16;
  }
  std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uintptr_t>(mem.data()) + off; }
  RecvWqe wqe(std::uint64_t id, std::size_t slot) {
    const Sge g{mr->stag, addr(slot * kBuf), kBuf};
    RecvWqe r;
    EXPECT_EQ(make_recv(ctx, &pd, RecvWr{id, {&g, 1}}, r), Status::ok);
    return r;
  }
  // A receive posted to the QP, its buffer at mem[slot * kBuf].
  void post(std::uint64_t id, std::size_t slot) {
    qp.rq_used++;
    ASSERT_TRUE(take_receive(qp, wqe(id, slot)));
  }
  void post_srq(std::uint64_t id, std::size_t slot) {
    srq.q.push_back(wqe(id, slot));
    srq.q.back().srq = &srq;
    srq.outstanding++;
  }
  void use_srq(AllocPolicy policy) {
    qp.init.srq = &srq;
    qp.init.alloc_policy = policy;
  }
  // One segment of message `msn` at offset `mo`, `n` bytes of `fill`, at stream position `pos`.
  std::optional<Fault> place(std::uint32_t msn, std::uint64_t mo, std::size_t n, std::uint8_t fill, bool last,
                             Pos pos) {
    const std::vector<std::uint8_t> payload(n, fill);
    return place_untagged(ctx, qp, msn, mo, payload, last, 0, false, pos);
  }
  std::vector<Wc> reap() {
    std::vector<Wc> out;
    while (Wc* w = cq.ring.consumer_slot()) {
      out.push_back(*w);
      cq.ring.consume();
    }
    return out;
  }
  bool filled(std::size_t slot, std::size_t n, std::uint8_t v) const {
    return std::all_of(mem.begin() + static_cast<std::ptrdiff_t>(slot * kBuf),
                       mem.begin() + static_cast<std::ptrdiff_t>(slot * kBuf + n), [v](auto b) { return b == v; });
  }
};

std::vector<std::uint64_t> ids(const std::vector<Wc>& wcs) {
  std::vector<std::uint64_t> v;
  for (const Wc& w : wcs) v.push_back(w.wr_id);
  return v;
}

}  // namespace

// Placement in any order, completion in MSN order, and only once everything up to the message's
// last segment was delivered.
TEST_F(RecvQueue, MessagesPlacedOutOfOrderCompleteInMsnOrderOnceDelivered) {
  for (std::uint64_t i = 0; i < 3; ++i) post(100 + i, i);
  ASSERT_FALSE(place(3, 0, 30, 0x33, true, 30));
  ASSERT_FALSE(place(1, 0, 10, 0x11, true, 10));
  ASSERT_FALSE(place(2, 0, 20, 0x22, true, 20));
  EXPECT_TRUE(filled(0, 10, 0x11) && filled(1, 20, 0x22) && filled(2, 30, 0x33));
  complete_receives(ctx, qp, 10);  // MSN 1's last segment (position 10) not delivered yet
  EXPECT_TRUE(reap().empty());
  complete_receives(ctx, qp, 21);  // through MSN 2's
  auto wcs = reap();
  EXPECT_EQ(ids(wcs), (std::vector<std::uint64_t>{100, 101}));
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].byte_len, 10u);
  EXPECT_EQ(wcs[1].byte_len, 20u);
  EXPECT_EQ(wcs[1].status, WcStatus::success);
  complete_receives(ctx, qp, 31);
  EXPECT_EQ(ids(reap()), (std::vector<std::uint64_t>{102}));
  EXPECT_EQ(qp.recv_msn, 4u);
  EXPECT_TRUE(qp.rq.empty());
}

// A message whose segments arrive last one first is done when every byte up to its length is in.
TEST_F(RecvQueue, AMessageCompletesWhenItsSegmentsAreAllIn) {
  post(7, 0);
  ASSERT_FALSE(place(1, 500, 100, 0xBB, true, 2));  // the last segment first: the length is known
  complete_receives(ctx, qp, 100);
  EXPECT_TRUE(reap().empty());
  ASSERT_FALSE(place(1, 0, 500, 0xAA, false, 1));
  complete_receives(ctx, qp, 100);
  const auto wcs = reap();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].byte_len, 600u);
  EXPECT_TRUE(filled(0, 500, 0xAA));
  EXPECT_TRUE(std::all_of(mem.begin() + 500, mem.begin() + 600, [](auto b) { return b == 0xBB; }));
}

// What a segment that cannot be placed maps to; none of them touches a buffer.
TEST_F(RecvQueue, BadSegmentsAreRefusedWithTheirErrorAndPlaceNothing) {
  post(1, 0);
  auto f = place(2, 0, 8, 0xEE, true, 5);  // one buffer posted: none for MSN 2
  ASSERT_TRUE(f);
  EXPECT_EQ(f->error, Error::no_buffer);
  f = place(1, 0, kBuf + 1, 0xEE, true, 5);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->error, Error::message_too_long);
  f = place(1, kBuf - 4, 8, 0xEE, false, 5);  // the end beyond the buffer, at an offset
  ASSERT_TRUE(f);
  EXPECT_EQ(f->error, Error::message_too_long);
  ASSERT_FALSE(place(1, 90, 10, 0x11, true, 6));  // the message is 100 bytes long
  f = place(1, 95, 10, 0xEE, false, 7);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->error, Error::bad_offset);
  EXPECT_EQ(std::count(mem.begin(), mem.end(), 0xEE), 0);
  ASSERT_FALSE(place(1, 0, 90, 0x11, false, 5));
  complete_receives(ctx, qp, 10);
  EXPECT_EQ(ids(reap()), (std::vector<std::uint64_t>{1}));
  f = place(1, 0, 8, 0xEE, true, 11);  // MSN 1 is completed
  ASSERT_TRUE(f);
  EXPECT_EQ(f->error, Error::msn_range);
  EXPECT_EQ(std::count(mem.begin(), mem.end(), 0xEE), 0);
}

// DESIGN.md: after 18 completed, MSNs 19, 22, 23 arrive first: three buffers allocated, span 5;
// each message in the buffer it took on arrival, completions in MSN order.
TEST_F(RecvQueue, SrqBuffersAreTakenInArrivalOrder) {
  use_srq(AllocPolicy::arrival);
  qp.recv_msn = 19;
  for (std::uint64_t i = 0; i < 6; ++i) post_srq(200 + i, i);
  ASSERT_FALSE(place(19, 0, 19, 19, true, 19));
  ASSERT_FALSE(place(23, 0, 23, 23, true, 23));
  ASSERT_FALSE(place(22, 0, 22, 22, true, 22));
  EXPECT_EQ(qp.rq_allocated, 3u);
  EXPECT_EQ(qp.rq.size(), 5u);  // the span: 19..23
  EXPECT_EQ(srq.q.size(), 3u);
  EXPECT_EQ(srq.allocated, 3u);
  // 19 took buffer 0, 23 buffer 1, 22 buffer 2.
  EXPECT_TRUE(filled(0, 19, 19) && filled(1, 23, 23) && filled(2, 22, 22));
  ASSERT_FALSE(place(21, 0, 21, 21, true, 21));  // buffer 3
  ASSERT_FALSE(place(20, 0, 20, 20, true, 20));  // buffer 4
  complete_receives(ctx, qp, 100);
  const auto wcs = reap();
  EXPECT_EQ(ids(wcs), (std::vector<std::uint64_t>{200, 204, 203, 202, 201}));
  for (const Wc& w : wcs) EXPECT_EQ(w.srq, &srq);
  EXPECT_EQ(srq.allocated, 0u);
  EXPECT_EQ(srq.completed, 5u);
}

TEST_F(RecvQueue, GapFillTakesBuffersForTheGapBelowAnArrivingMessage) {
  use_srq(AllocPolicy::gap_fill);
  qp.recv_msn = 19;
  for (std::uint64_t i = 0; i < 6; ++i) post_srq(300 + i, i);
  ASSERT_FALSE(place(19, 0, 19, 19, true, 19));
  ASSERT_FALSE(place(22, 0, 22, 22, true, 22));
  EXPECT_EQ(qp.rq_allocated, 4u);  // 19, and 20..22 in MSN order
  EXPECT_TRUE(filled(0, 19, 19) && filled(3, 22, 22));
  ASSERT_FALSE(place(23, 0, 23, 23, true, 23));
  EXPECT_EQ(qp.rq_allocated, 5u);
  EXPECT_EQ(srq.q.size(), 1u);
}

TEST_F(RecvQueue, AnEmptySrqOrAMessageTooFarAheadHasNoBuffer) {
  use_srq(AllocPolicy::arrival);
  EXPECT_FALSE(recv_buffer_ready(qp, 1));
  auto f = place(1, 0, 8, 0xEE, true, 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->error, Error::no_buffer);
  post_srq(1, 0);
  EXPECT_TRUE(recv_buffer_ready(qp, 1));
  EXPECT_FALSE(recv_buffer_ready(qp, 1 + static_cast<std::uint32_t>(kMaxMsnAhead)));
  f = place(1 + static_cast<std::uint32_t>(kMaxMsnAhead), 0, 8, 0xEE, true, 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->error, Error::msn_range);
  EXPECT_EQ(srq.q.size(), 1u);  // nothing taken
  EXPECT_EQ(std::count(mem.begin(), mem.end(), 0xEE), 0);
}

// A receive taken in after the QP broke is flushed at once, behind everything before it.
TEST_F(RecvQueue, AReceiveTakenInAfterTheQpBrokeIsFlushed) {
  qp.state = QpState::error;
  post(9, 0);
  const auto wcs = reap();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 9u);
  EXPECT_EQ(wcs[0].status, WcStatus::flushed);
  EXPECT_TRUE(qp.rq.empty());
}
