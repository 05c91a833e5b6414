// The QP state machine. A QP's state (QpState, the RDMAC verbs states siw uses) and its
// connection phase (CmPhase) change in one place: a transport, the device or the consumer reports
// an event, and the table in qp_state.cpp decides what the QP becomes. Nothing else writes them.
//
// A verbs consumer's RESET/INIT → RTR → RTS → ERR is this machine too (siw's mapping): RESET and
// INIT are idle, RTR is rtr (the path is set: packets are taken, none sent), RTS is rts, SQD is
// closing, SQE is terminate, ERR is error.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "softrnic/rnic.hpp"

namespace softrnic {

struct Qp;
enum class CmPhase : std::uint8_t;

enum class QpEvent : std::uint8_t {
  connect,        // the active side starts a connection
  accept,         // the passive side accepted a request: it takes packets, the peer's first word establishes
  path_set,       // the peer is known without a connection exchange (out of band, a verbs RTR)
  established,    // the connection is up: its reply, RTU or first frame came, or the consumer moved to RTS
  disconnect,     // the consumer asked for a graceful close: what is posted goes first
  close,          // the close begins: ours all sent or acknowledged, or the peer's close arrived
  terminate,      // a Terminate (or fatal NAK) is going out: no more work is taken
  terminate_out,  // that Terminate has left
  closed,         // the connection ended: gracefully from closing, else in error
  broken,         // the connection ended on an error, or the consumer moved the QP to error
  reset,          // back to idle, ready for a new connection (a connection no longer live)
};
inline constexpr int kQpEventCount = 11;
std::string_view to_string(QpEvent e);
std::string_view to_string(CmPhase p);

// What an event makes of a QP in (state, cm); nullopt where the event does not apply there.
struct QpStep {
  QpState state;
  CmPhase cm;
};
std::optional<QpStep> qp_next(QpState state, CmPhase cm, QpEvent e);

// Applies an event to the QP (under the device lock). False, and the QP unchanged, where the
// event does not apply in its state.
bool qp_event(Qp& qp, QpEvent e);

// What a consumer's disconnect does in the QP's state (the iWARP wires; RoCEv2's IB CM orders its
// own): cancel a connect under way, nothing (a graceful close is already under way), close at
// once (abrupt, or the QP is not in RTS), begin a graceful close, or refuse (no connection).
enum class DisconnectAction : std::uint8_t { cancel_connect, nothing, close_now, close_gracefully, refuse };
DisconnectAction disconnect_action(QpState state, CmPhase cm, bool graceful);

// The states in which a QP takes packets from its peer, and the one in which it sends.
inline bool qp_receives(QpState s) {
  return s == QpState::rtr || s == QpState::rts || s == QpState::closing;
}
inline bool qp_sends(QpState s) {
  return s == QpState::rts;
}

}  // namespace softrnic
