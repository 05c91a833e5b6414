// The QP state machine: every (from, to) pair against the RDMAC verbs table.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "softrnic/rnic.hpp"

using softrnic::QpState;

TEST(QpState, EveryTransitionPair) {
  using enum QpState;
  const std::set<std::pair<QpState, QpState>> allowed = {
      {idle, rts},     {idle, error},    {rts, closing},     {rts, terminate}, {rts, error},
      {closing, idle}, {closing, error}, {terminate, error}, {error, idle},
  };
  int checked = 0;
  for (int f = 0; f < softrnic::kQpStateCount; ++f) {
    for (int t = 0; t < softrnic::kQpStateCount; ++t) {
      const auto from = static_cast<QpState>(f), to = static_cast<QpState>(t);
      EXPECT_EQ(softrnic::qp_transition_allowed(from, to), allowed.count({from, to}) == 1)
          << to_string(from) << " -> " << to_string(to);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 25);
}
