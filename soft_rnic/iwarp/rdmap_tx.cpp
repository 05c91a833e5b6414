// RDMAP/DDP send side: Sends, Writes and Read Requests segmented into DDP segments, Read
// Responses to the peer's requests, and Terminate.
#include <algorithm>

#include "rdmap.hpp"

namespace softrnic::iwarp {

namespace w = wire;

void Rdmap::issue(Qp& qp, const WaitingWr& wr) {
  IwarpQp& s = state(qp);
  SendWqe& wqe = *wr.wqe;
  wqe.issued = true;
  wqe.sgl = wr.sgl;
  const std::uint64_t total = wr.total;
  if (wr.opcode == SendOpcode::rdma_read) {
    const RequestedRead& rd = begin_read(qp, wr);
    std::uint8_t h[sizeof(w::DdpUntaggedHdr)];
    const std::size_t hl =
        w::encode_untagged(h, w::RdmapOpcode::read_request, true, w::kQnReadRequest, s.read_msn++, 0);
    const w::ReadRequestHdr rr{w::Be32(rd.sink_stag), w::Be64(rd.sink_to), w::Be32(static_cast<std::uint32_t>(total)),
                               w::Be32(wr.rkey), w::Be64(wr.remote_addr)};
    lower_.send_segment(
        qp, {std::span<const std::uint8_t>(h, hl), {reinterpret_cast<const std::uint8_t*>(&rr), sizeof rr}}, {}, 0, 0);
    wqe.end_pos = lower_.tx_pos(qp);
    return;
  }
  const bool write = wr.opcode == SendOpcode::rdma_write;
  const auto op = write                                      ? w::RdmapOpcode::rdma_write
                  : wr.opcode == SendOpcode::send_solicited  ? w::RdmapOpcode::send_se
                  : wr.opcode == SendOpcode::send_invalidate ? w::RdmapOpcode::send_invalidate
                                                             : w::RdmapOpcode::send;
  const std::size_t mss = lower_.max_payload(qp, write ? sizeof(w::DdpTaggedHdr) : sizeof(w::DdpUntaggedHdr));
  const std::uint32_t msn = write ? 0 : s.send_msn++;
  std::uint64_t off = 0;
  do {
    const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(mss, total - off));
    const bool last = off + len == total;
    std::uint8_t h[sizeof(w::DdpUntaggedHdr)];
    const std::size_t hl =
        write ? w::encode_tagged(h, op, last, wr.rkey, wr.remote_addr + off)
              : w::encode_untagged(h, op, last, w::kQnSend, msn, static_cast<std::uint32_t>(off), wr.invalidate_stag);
    // The consumer waits for the completion of a signaled request, and for one of the older
    // half of a send queue to free slots: its last segment asks for a prompt ack.
    const bool awaited = last && (wqe.signaled || 2 * qp.sq.size() >= qp.init.max_send_wr);
    lower_.send_segment(qp, {std::span<const std::uint8_t>(h, hl)}, wr.sgl, off, len, awaited);
    off += len;
  } while (off < total);
  wqe.end_pos = lower_.tx_pos(qp);
}

// The peer's Read Requests, answered once in stream order (responses then go out in MSN order,
// after everything the peer sent before the request).
void Rdmap::answer_read_requests(Qp& qp) {
  IwarpQp& s = state(qp);
  const Pos delivered = lower_.delivered(qp);
  while (qp.state == QpState::rts && !s.reads_in.empty() && s.reads_in.front().pos < delivered) {
    const PeerReadRequest r = s.reads_in.front();
    s.reads_in.pop_front();
    const RxPosScope scope(*this, r.pos);
    if (r.msn != s.peer_read_msn) {
      terminate(qp, Error::msn_range,
                "Read Request MSN " + std::to_string(r.msn) + ", expected " + std::to_string(s.peer_read_msn));
      return;
    }
    if (s.responses_end.size() >= qp.ird) {
      terminate(qp, Error::no_buffer, "more RDMA Reads outstanding than the IRD of " + std::to_string(qp.ird));
      return;
    }
    if (r.size > ctx_.limits.max_msg_size) {
      terminate(qp, Error::read_too_large, "RDMA Read larger than the maximum message");
      return;
    }
    const MrCheck c = ctx_.mrs.check(r.src_stag, qp.init.pd, r.src_to, r.size, Access::remote_read);
    if (c != MrCheck::ok) {
      terminate(qp, tagged_error(c),
                std::string(to_string(c)) + (c == MrCheck::access_denied ? " (RDMA Read needs remote read)" : ""));
      return;
    }
    s.peer_read_msn++;
    // The Read Response: tagged segments to the requester's sink, payload straight from the
    // source region (checked again at each transmission).
    const Sge src{r.src_stag, r.src_to, r.size};
    const SglRef sgl = ctx_.sgl_pool.make({&src, 1});
    const std::size_t mss = lower_.max_payload(qp, sizeof(w::DdpTaggedHdr));
    std::uint64_t off = 0;
    do {
      const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(mss, r.size - off));
      const bool last = off + len == r.size;
      std::uint8_t h[sizeof(w::DdpTaggedHdr)];
      const std::size_t hl = w::encode_tagged(h, w::RdmapOpcode::read_response, last, r.sink_stag, r.sink_to + off);
      lower_.send_segment(qp, {std::span<const std::uint8_t>(h, hl)}, sgl, off, len);
      off += len;
    } while (off < r.size);
    s.responses_end.push_back(lower_.tx_pos(qp));
    lower_.kick(qp);
  }
}

void Rdmap::terminate(Qp& qp, Error e, const std::string& reason, std::optional<Pos> bad) {
  ctx_.ctr.terminates_sent++;
  qp.ctr.terminates_sent++;
  if (!bad) bad = rx_pos_;
  if (bad) lower_.hold_acks_from(qp, *bad);
  const TerminateCode tc = terminate_code(e);
  const w::TerminateHdr th = w::encode_terminate({tc.layer, tc.etype, tc.code, false, false});
  std::uint8_t h[sizeof(w::DdpUntaggedHdr)];
  const std::size_t hl = w::encode_untagged(h, w::RdmapOpcode::terminate, true, w::kQnTerminate, 1, 0);
  // Flush first (no more placement), then send the Terminate as the last segment of the stream.
  flush_qp(qp);
  lower_.send_segment(qp, {{h, hl}, {reinterpret_cast<const std::uint8_t*>(&th), sizeof th}}, {}, 0, 0);
  lower_.kick(qp);
  qp_event(qp, QpEvent::terminate);
  qp.transport->closed(qp);
  emit(qp, CmEventType::broken, "sent Terminate: " + reason);
}

}  // namespace softrnic::iwarp
