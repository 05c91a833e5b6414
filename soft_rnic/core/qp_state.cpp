// QP state transitions by source state (as siw_qp_modify does).
#include "softrnic/rnic.hpp"

namespace softrnic {

std::string_view to_string(QpState s) {
  switch (s) {
    case QpState::idle: return "IDLE";
    case QpState::rts: return "RTS";
    case QpState::closing: return "CLOSING";
    case QpState::terminate: return "TERMINATE";
    case QpState::error: return "ERROR";
  }
  return "?";
}

bool qp_transition_allowed(QpState from, QpState to) {
  switch (from) {
    case QpState::idle: return to == QpState::rts || to == QpState::error;
    case QpState::rts: return to == QpState::closing || to == QpState::terminate || to == QpState::error;
    case QpState::closing: return to == QpState::idle || to == QpState::error;
    case QpState::terminate: return to == QpState::error;
    case QpState::error: return to == QpState::idle;
  }
  return false;
}

}  // namespace softrnic
