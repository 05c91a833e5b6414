// The engine's device-wide transmit budget: room, first come first served, a QP new to it
// queues behind the waiters, serving stops when the head's next unit does not fit, QPs gone
// or left are skipped, and something always moves when nothing is in flight.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "tx_budget.hpp"

using softrnic::engine::TxBudget;

namespace {

// A QP as the budget sees it: its waiting flag and the units it still has to send.
struct FakeQp {
  bool waiting = false;
  std::vector<std::size_t> units;
};

struct Harness {
  TxBudget b;
  std::map<std::uint32_t, FakeQp> qps;
  std::vector<std::uint32_t> sent;  // qpn of each unit sent, in order

  // What a transport's pump does: send while the budget allows, else wait.
  void pump(std::uint32_t qpn) {
    FakeQp& q = qps[qpn];
    while (!q.units.empty()) {
      if (!b.allows(qpn, q.units.front())) {
        b.wait(qpn, q.waiting);
        return;
      }
      b.charge(q.units.front());
      q.units.erase(q.units.begin());
      sent.push_back(qpn);
    }
  }
  void serve() {
    b.serve(
        [&](std::uint32_t qpn) {
          auto it = qps.find(qpn);
          return it == qps.end() ? nullptr : &it->second.waiting;
        },
        [&](std::uint32_t qpn) { return qps[qpn].units.empty() ? std::size_t{0} : qps[qpn].units.front(); },
        [&](std::uint32_t qpn) { pump(qpn); });
  }
};

TEST(TxBudget, WaitersAreServedInTheOrderTheyCame) {
  Harness h;
  h.b.set_limit(100);
  h.qps[1].units = {60, 60};
  h.qps[2].units = {30};
  h.qps[3].units = {30};
  h.pump(1);  // 60 goes, the next 60 would make 120: waits
  h.pump(2);  // 30 fits (90), but a waiter is ahead: waits
  h.pump(3);
  EXPECT_EQ(h.sent, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(h.b.in_flight(), 60u);
  EXPECT_TRUE(h.qps[1].waiting && h.qps[2].waiting && h.qps[3].waiting);
  h.b.release(60);  // acknowledged
  h.serve();        // 1's 60, then 2's 30 (90); 3's 30 would make 120: stays first in line
  EXPECT_EQ(h.sent, (std::vector<std::uint32_t>{1, 1, 2}));
  EXPECT_TRUE(h.qps[3].waiting);
  h.qps[4].units = {10};
  h.pump(4);  // a newcomer: 10 would fit (100 of 100), but 3 waits ahead of it
  EXPECT_TRUE(h.qps[4].waiting);
  EXPECT_EQ(h.sent.back(), 2u);
  h.b.release(90);
  h.serve();  // 3 first, then 4
  EXPECT_EQ(h.sent, (std::vector<std::uint32_t>{1, 1, 2, 3, 4}));
  EXPECT_FALSE(h.qps[3].waiting);
  EXPECT_FALSE(h.qps[4].waiting);
}

TEST(TxBudget, AUnitLargerThanTheBudgetGoesAloneInItsTurn) {
  Harness h;
  h.b.set_limit(100);
  h.qps[1].units = {50};
  h.qps[2].units = {500};  // (a RoCEv2 Read's whole response)
  h.qps[3].units = {10};
  h.pump(1);
  h.pump(2);  // waits: it needs everything
  h.pump(3);  // behind 2, although 10 would fit
  EXPECT_EQ(h.sent, (std::vector<std::uint32_t>{1}));
  h.serve();  // nothing freed: 2 stays first
  EXPECT_EQ(h.sent.size(), 1u);
  h.b.release(50);
  h.serve();  // nothing in flight: 2 goes, alone; 3 waits for it
  EXPECT_EQ(h.sent, (std::vector<std::uint32_t>{1, 2}));
  EXPECT_TRUE(h.qps[3].waiting);
}

TEST(TxBudget, NothingInFlightAlwaysAllowsOne) {
  TxBudget b;
  b.set_limit(10);
  EXPECT_TRUE(b.allows(7, 1000)) << "a unit larger than the whole budget still goes alone";
  bool waiting = false;
  b.wait(5, waiting);
  EXPECT_TRUE(b.allows(7, 1)) << "nothing in flight: even with a waiter ahead";
  EXPECT_FALSE(b.fits(7, 1)) << "fits() has no such exception: the waiter is ahead";
  b.leave(5, waiting);
  b.charge(1000);
  EXPECT_FALSE(b.allows(7, 1));
  b.release(5000);  // more than was charged: clamps at zero
  EXPECT_EQ(b.in_flight(), 0u);
}

TEST(TxBudget, QpsGoneOrLeftAreSkipped) {
  Harness h;
  h.b.set_limit(100);
  h.qps[1].units = {100, 10};
  h.qps[2].units = {10};
  h.qps[3].units = {10};
  h.pump(1);
  h.pump(2);
  h.pump(3);
  h.b.leave(1, h.qps[1].waiting);  // flushed
  h.qps.erase(2);                  // destroyed without leaving
  h.b.release(100);
  h.serve();
  EXPECT_EQ(h.sent, (std::vector<std::uint32_t>{1, 3}));
  EXPECT_FALSE(h.b.room()) << "no one waits";
}

}  // namespace
