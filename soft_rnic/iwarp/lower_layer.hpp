// What iWARP's RDMAP/DDP needs of the layer below it: the project's reliable datagram framing
// (rudp/) or MPA over a TCP stream (mpa/). DDP segments go down in order; segments come up with
// their stream position, and the layer says how far delivery and acknowledgement have come.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "objects.hpp"

namespace softrnic::iwarp {

class LowerLayer {
 public:
  virtual ~LowerLayer() = default;
  // Queues one DDP segment behind everything queued before: `hdr` (the DDP/RDMAP headers and any
  // RDMAP header that follows them), then `len` payload bytes of `sgl` from offset `off` (read
  // from registered memory at each transmission, not copied). Nothing goes out before kick().
  // `awaited`: the last segment of a request whose completion the consumer waits for (its
  // acknowledgement should not be delayed).
  virtual void send_segment(Qp& qp, std::initializer_list<std::span<const std::uint8_t>> hdr, const SglRef& sgl,
                            std::uint64_t off, std::uint32_t len, bool awaited = false) = 0;
  virtual void kick(Qp& qp) = 0;
  // The largest payload of one of the QP's segments whose DDP/RDMAP headers take `hdr_len` bytes.
  virtual std::size_t max_payload(const Qp& qp, std::size_t hdr_len) const = 0;
  // The position after the last segment queued; every position below `delivered` has arrived;
  // the peer has every position below `acked`.
  virtual Pos tx_pos(const Qp& qp) const = 0;
  virtual Pos delivered(const Qp& qp) const = 0;
  virtual Pos acked(const Qp& qp) const = 0;
  // A Terminate is going out for the segment at `bad`: acknowledge nothing from it on, so the
  // request it belongs to completes in error at its sender, never in success.
  virtual void hold_acks_from(Qp& qp, Pos bad) = 0;
};

// RDMAP's own state of a connection; a lower layer's per-QP state derives from it.
struct PeerReadRequest {  // a Read Request the peer made, waiting for stream order before it is answered
  Pos pos = 0;
  std::uint32_t msn = 0;
  std::uint32_t sink_stag = 0, src_stag = 0, size = 0;
  std::uint64_t sink_to = 0, src_to = 0;
};

struct IwarpQp : TransportQp {
  std::uint32_t send_msn = 1;            // next MSN on QN 0
  std::uint32_t read_msn = 1;            // next MSN on QN 1 (Read Requests we send)
  std::uint32_t peer_read_msn = 1;       // next Read Request MSN expected from the peer
  std::deque<PeerReadRequest> reads_in;  // the peer's, not yet in stream order
  std::deque<Pos> responses_end;         // end positions of our responses not yet acknowledged (IRD)
};

}  // namespace softrnic::iwarp
