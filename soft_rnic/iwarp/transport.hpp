// An iWARP transport: core's Transport with RDMAP/DDP over a lower layer (the project's framing
// in rudp/, MPA over TCP in mpa/). What both lower layers give core in the same way lives here:
// work requests go to RDMAP as segments, a fatal error leaves as a Terminate, and what the peer
// has acknowledged is the lower layer's `acked`.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "lower_layer.hpp"
#include "rdmap.hpp"

namespace softrnic::iwarp {

class Transport : public softrnic::Transport, public LowerLayer {
 public:
  explicit Transport(Ctx& ctx) : rdmap_(ctx, *this) {}

  void issue(Qp& qp, const WaitingWr& w) final { rdmap_.issue(qp, w); }
  Pos acked_pos(const Qp& qp) const final { return acked(qp); }
  void fatal(Qp& qp, Error e, std::string reason, std::optional<Pos> bad) final {
    rdmap_.terminate(qp, e, std::move(reason), bad);
  }

 protected:
  Rdmap rdmap_;
};

}  // namespace softrnic::iwarp
