// iWARP's RDMAP and DDP (RFC 5040, RFC 5041) over a lower layer: segmentation of Sends, Writes
// and Read Responses (rdmap_tx.cpp), placement by MSN/MO and STag/TO, the Read responder and
// Terminate (rdmap_rx.cpp). The queues themselves are core's (core/queues.hpp).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "lower_layer.hpp"
#include "queues.hpp"

namespace softrnic::iwarp {

class Rdmap {
 public:
  Rdmap(Ctx& ctx, LowerLayer& lower) : ctx_(ctx), lower_(lower) {}

  // Puts a Send, Send with Invalidate or RDMA Write on the wire as DDP segments, or an RDMA Read
  // as its Read Request (QN 1, its own MSN, naming our sink and the peer's source; it completes
  // when the whole Read Response has been delivered).
  void issue(Qp& qp, const WaitingWr& w);
  // A received DDP segment (after the lower layer's checks) at stream position `pos`.
  void on_segment(Qp& qp, std::span<const std::uint8_t> ddp, Pos pos);
  // Delivery advanced: receives complete in MSN order, Read Requests now in stream order are
  // answered, our Reads whose responses are whole complete.
  void delivered(Qp& qp);
  // Acknowledgement advanced: sends complete, responses leave the IRD.
  void acked(Qp& qp);
  // Sends a Terminate as the stream's last segment after flushing the queues; the QP goes to
  // TERMINATE and the consumer gets a BROKEN event.
  void terminate(Qp& qp, Error e, const std::string& reason, std::optional<Pos> bad = std::nullopt);

  static void reset(IwarpQp& s) {
    s.send_msn = s.read_msn = s.peer_read_msn = 1;
    s.reads_in.clear();
    s.responses_end.clear();
  }
  static void flush(IwarpQp& s) {
    s.reads_in.clear();
    s.responses_end.clear();
  }

 private:
  static IwarpQp& state(Qp& qp) { return static_cast<IwarpQp&>(*qp.t); }
  void answer_read_requests(Qp& qp);
  void fail(Qp& qp, const std::optional<Fault>& f) {
    if (f) terminate(qp, f->error, f->reason);
  }

  Ctx& ctx_;
  LowerLayer& lower_;
  std::optional<Pos> rx_pos_;  // the position of the segment being handled

  // Names the segment being handled for terminate() while it lives.
  struct RxPosScope {
    RxPosScope(Rdmap& r, Pos pos) : r_(r), saved_(r.rx_pos_) { r.rx_pos_ = pos; }
    ~RxPosScope() { r_.rx_pos_ = saved_; }
    RxPosScope(const RxPosScope&) = delete;
    RxPosScope& operator=(const RxPosScope&) = delete;
    Rdmap& r_;
    std::optional<Pos> saved_;
  };
};

}  // namespace softrnic::iwarp
