// The QP state machine's one table (qp_state.hpp): events in, (state, connection phase) out.
#include "qp_state.hpp"

#include <array>
#include <initializer_list>

#include "objects.hpp"
#include "softrnic/log.hpp"

namespace softrnic {

std::string_view to_string(QpState s) {
  switch (s) {
    case QpState::idle: return "IDLE";
    case QpState::rtr: return "RTR";
    case QpState::rts: return "RTS";
    case QpState::closing: return "CLOSING";
    case QpState::terminate: return "TERMINATE";
    case QpState::error: return "ERROR";
  }
  return "?";
}

std::string_view to_string(CmPhase p) {
  switch (p) {
    case CmPhase::none: return "none";
    case CmPhase::connecting: return "connecting";
    case CmPhase::accepting: return "accepting";
    case CmPhase::connected: return "connected";
    case CmPhase::disconnecting: return "disconnecting";
    case CmPhase::closed: return "closed";
  }
  return "?";
}

std::string_view to_string(QpEvent e) {
  static constexpr std::array<std::string_view, kQpEventCount> kNames = {
      "connect",   "accept",        "path_set", "established", "disconnect", "close",
      "terminate", "terminate_out", "closed",   "broken",      "reset"};
  const auto i = static_cast<std::size_t>(e);
  return i < kNames.size() ? kNames[i] : "?";
}

namespace {

template <class E>
constexpr std::uint8_t set_of(std::initializer_list<E> es) {
  std::uint8_t b = 0;
  for (E e : es) b = static_cast<std::uint8_t>(b | 1u << static_cast<unsigned>(e));
  return b;
}
constexpr std::uint8_t kAny = 0xFF;

// One row: in a state of `states` with a phase of `phases`, `event` leads to `to` / `cm_to`
// (nullopt: unchanged). The first row that matches decides.
struct Row {
  QpEvent event;
  std::uint8_t states;
  std::uint8_t phases;
  std::optional<QpState> to;
  std::optional<CmPhase> cm_to;
};

using enum QpState;
using enum CmPhase;
using E = QpEvent;
using S = QpState;
using P = CmPhase;

constexpr Row kTable[] = {
    {E::connect, set_of<S>({idle}), set_of<P>({none}), std::nullopt, connecting},
    {E::accept, set_of<S>({idle}), set_of<P>({none}), rts, accepting},
    {E::path_set, set_of<S>({idle}), set_of<P>({none}), rtr, std::nullopt},
    {E::established, set_of<S>({idle}), set_of<P>({connecting}), rts, connected},
    {E::established, set_of<S>({rts, closing}), set_of<P>({accepting}), std::nullopt, connected},
    {E::established, set_of<S>({rtr}), set_of<P>({none}), rts, connected},
    {E::disconnect, set_of<S>({rts}), set_of<P>({accepting, connected}), std::nullopt, disconnecting},
    {E::close, set_of<S>({rts}), kAny, closing, std::nullopt},
    {E::terminate, set_of<S>({rtr, rts, closing}), kAny, terminate, closed},
    {E::terminate_out, set_of<S>({terminate}), kAny, error, std::nullopt},
    {E::closed, set_of<S>({closing}), kAny, idle, closed},
    {E::closed, kAny, kAny, error, closed},
    {E::broken, kAny, kAny, error, closed},
    {E::reset, kAny, set_of<P>({none, closed}), idle, none},
};

// "connect: IDLE/none -> IDLE/connecting": the QP's life, move by move (SOFTRNIC_LOG=trace).
void trace(const Qp& qp, QpEvent e, QpStep to) {
  std::string t(to_string(e));
  t.append(": ").append(to_string(qp.state.load())).append("/").append(to_string(qp.cm.load()));
  t.append(" -> ").append(to_string(to.state)).append("/").append(to_string(to.cm));
  log::line(log::Level::trace, qp.who, t);
}

bool in(std::uint8_t set, auto v) {
  return (set >> static_cast<unsigned>(v) & 1u) != 0;
}

}  // namespace

std::optional<QpStep> qp_next(QpState state, CmPhase cm, QpEvent e) {
  for (const Row& r : kTable) {
    if (r.event != e || !in(r.states, state) || !in(r.phases, cm)) continue;
    return QpStep{r.to.value_or(state), r.cm_to.value_or(cm)};
  }
  return std::nullopt;
}

DisconnectAction disconnect_action(QpState state, CmPhase cm, bool graceful) {
  switch (cm) {
    case CmPhase::connecting: return DisconnectAction::cancel_connect;
    case CmPhase::accepting:
    case CmPhase::connected: break;
    case CmPhase::disconnecting:
      if (graceful) return DisconnectAction::nothing;
      break;
    default: return DisconnectAction::refuse;
  }
  return graceful && state == QpState::rts ? DisconnectAction::close_gracefully : DisconnectAction::close_now;
}

bool qp_event(Qp& qp, QpEvent e) {
  const std::optional<QpStep> next = qp_next(qp.state, qp.cm, e);
  if (!next) return false;
  if (log::enabled(log::Level::trace)) trace(qp, e, *next);
  qp.state = next->state;
  qp.cm = next->cm;
  return true;
}

}  // namespace softrnic
