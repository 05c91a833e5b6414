// The QP state machine (core/qp_state.cpp): the flows each wire drives through it, the consumer's
// verbs-style flow, and properties of the whole table walked triple by triple.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "objects.hpp"

using namespace softrnic;
using E = QpEvent;

namespace {

constexpr int kCmPhaseCount = 6;

struct Walk {
  QpState state = QpState::idle;
  CmPhase cm = CmPhase::none;
  // Applies the events in order; each must apply.
  void through(std::initializer_list<QpEvent> es) {
    for (QpEvent e : es) {
      const auto next = qp_next(state, cm, e);
      ASSERT_TRUE(next) << to_string(e) << " refused in " << to_string(state);
      state = next->state;
      cm = next->cm;
    }
  }
};

std::string name(QpState s, CmPhase cm, QpEvent e) {
  return std::string(to_string(s)) + "/" + std::to_string(static_cast<int>(cm)) + " " + std::string(to_string(e));
}

}  // namespace

TEST(QpState, AnActiveConnectionOpensAndClosesGracefully) {
  Walk w;
  w.through({E::connect});
  EXPECT_EQ(w.state, QpState::idle);
  EXPECT_EQ(w.cm, CmPhase::connecting);
  w.through({E::established});
  EXPECT_EQ(w.state, QpState::rts);
  EXPECT_EQ(w.cm, CmPhase::connected);
  w.through({E::disconnect, E::close, E::closed});
  EXPECT_EQ(w.state, QpState::idle);
  EXPECT_EQ(w.cm, CmPhase::closed);
  w.through({E::reset});
  EXPECT_EQ(w.cm, CmPhase::none);
}

TEST(QpState, APassiveConnectionTakesPacketsBeforeItIsEstablished) {
  Walk w;
  w.through({E::accept});
  EXPECT_TRUE(qp_receives(w.state));
  EXPECT_EQ(w.cm, CmPhase::accepting);
  w.through({E::established});
  EXPECT_EQ(w.cm, CmPhase::connected);
}

TEST(QpState, TheVerbsFlowResetRtrRtsErr) {
  Walk w;  // RESET/INIT
  w.through({E::path_set});
  EXPECT_EQ(w.state, QpState::rtr);
  EXPECT_TRUE(qp_receives(w.state));
  EXPECT_FALSE(qp_sends(w.state));
  w.through({E::established});
  EXPECT_EQ(w.state, QpState::rts);
  EXPECT_TRUE(qp_sends(w.state));
  w.through({E::broken});
  EXPECT_EQ(w.state, QpState::error);
  w.through({E::reset});
  EXPECT_EQ(w.state, QpState::idle);
}

TEST(QpState, ATerminateEndsInErrorOnceItHasLeft) {
  Walk w;
  w.through({E::connect, E::established, E::terminate});
  EXPECT_EQ(w.state, QpState::terminate);
  EXPECT_EQ(w.cm, CmPhase::closed);
  EXPECT_FALSE(qp_receives(w.state));
  w.through({E::terminate_out});
  EXPECT_EQ(w.state, QpState::error);
}

TEST(QpState, AConnectionThatEndsWithoutClosingIsAnError) {
  Walk w;
  w.through({E::connect, E::established, E::closed});
  EXPECT_EQ(w.state, QpState::error);
}

// Over every (state, phase, event): what may never happen, whatever the table says elsewhere.
TEST(QpState, TheWholeTable) {
  int applies = 0;
  for (int s = 0; s < kQpStateCount; ++s) {
    for (int c = 0; c < kCmPhaseCount; ++c) {
      for (int e = 0; e < kQpEventCount; ++e) {
        const auto st = static_cast<QpState>(s);
        const auto cm = static_cast<CmPhase>(c);
        const auto ev = static_cast<QpEvent>(e);
        const auto next = qp_next(st, cm, ev);
        if (!next) continue;
        ++applies;
        const std::string at = name(st, cm, ev);
        // Out of error only by reset, and a live connection is never reset.
        if (st == QpState::error) {
          EXPECT_TRUE(ev == E::reset || next->state == QpState::error) << at;
        }
        if (ev == E::reset) {
          EXPECT_TRUE(cm == CmPhase::none || cm == CmPhase::closed) << at;
        }
        // A connection that closed is only ever reset, never reopened.
        if (cm == CmPhase::closed && ev != E::reset) {
          EXPECT_EQ(next->cm, CmPhase::closed) << at;
        }
        // Only a connection exchange or the consumer's RTS makes a QP send.
        if (qp_sends(next->state) && !qp_sends(st)) {
          EXPECT_TRUE(ev == E::accept || ev == E::established) << at;
        }
        // Every end of a connection flushes into idle (graceful) or error.
        if (ev == E::closed || ev == E::broken) {
          EXPECT_TRUE(next->state == QpState::error || (ev == E::closed && st == QpState::closing)) << at;
        }
      }
    }
  }
  // The table's size: a row added or widened is a decision, made here too.
  EXPECT_EQ(applies, 123);
}

TEST(QpState, QpEventMovesTheQpAndRefusesWhatDoesNotApply) {
  Qp qp;
  EXPECT_FALSE(qp_event(qp, E::established));  // no connection under way
  EXPECT_EQ(qp.state, QpState::idle);
  EXPECT_TRUE(qp_event(qp, E::connect));
  EXPECT_FALSE(qp_event(qp, E::reset));  // a connection under way is not reset
  EXPECT_EQ(qp.cm, CmPhase::connecting);
  EXPECT_TRUE(qp_event(qp, E::broken));
  EXPECT_EQ(qp.state, QpState::error);
  EXPECT_EQ(to_string(QpEvent::terminate_out), "terminate_out");
}

TEST(QpState, WhatADisconnectDoesInEachPhase) {
  using A = DisconnectAction;
  EXPECT_EQ(disconnect_action(QpState::idle, CmPhase::connecting, true), A::cancel_connect);
  EXPECT_EQ(disconnect_action(QpState::rts, CmPhase::connected, true), A::close_gracefully);
  EXPECT_EQ(disconnect_action(QpState::rts, CmPhase::accepting, true), A::close_gracefully);
  EXPECT_EQ(disconnect_action(QpState::rts, CmPhase::connected, false), A::close_now);
  EXPECT_EQ(disconnect_action(QpState::closing, CmPhase::connected, true), A::close_now) << "not in RTS";
  EXPECT_EQ(disconnect_action(QpState::rts, CmPhase::disconnecting, true), A::nothing);
  EXPECT_EQ(disconnect_action(QpState::rts, CmPhase::disconnecting, false), A::close_now);
  EXPECT_EQ(disconnect_action(QpState::idle, CmPhase::none, true), A::refuse);
  EXPECT_EQ(disconnect_action(QpState::error, CmPhase::closed, false), A::refuse);
}
