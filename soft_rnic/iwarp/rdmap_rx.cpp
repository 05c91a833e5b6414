// RDMAP/DDP receive side: a segment's checks, then placement (untagged by MSN/MO into receive
// buffers, tagged by STag/TO), the peer's Read Requests queued for stream order, Terminates.
#include <algorithm>
#include <cstring>

#include "rdmap.hpp"

namespace softrnic::iwarp {

namespace w = wire;

void Rdmap::on_segment(Qp& qp, std::span<const std::uint8_t> body, Pos pos) {
  // Terminated: nothing more is placed. Closing (our graceful disconnect is in the stream): what
  // the peer sent before it sees our disconnect still lands, Read Responses included.
  if (!qp_receives(qp.state)) return;
  const RxPosScope scope(*this, pos);
  w::DdpSegment s;
  const w::DecodeError e = w::decode_ddp(body, s);
  if (e != w::DecodeError::none) {
    terminate(qp, decode_error(e), std::string(to_string(e)));
    return;
  }
  switch (s.opcode) {
    case w::RdmapOpcode::send:
    case w::RdmapOpcode::send_se:
    case w::RdmapOpcode::send_invalidate:
    case w::RdmapOpcode::send_se_invalidate:
      fail(qp, place_untagged(ctx_, qp, s.msn, s.mo, s.payload, s.last, s.inv_stag,
                              w::opcode_info(s.opcode).carries_inv_stag, pos));
      if (s.last && w::opcode_info(s.opcode).solicited) set_recv_solicited(qp, s.msn);
      return;
    case w::RdmapOpcode::rdma_write: fail(qp, place_tagged(ctx_, qp, s.stag, s.to, s.payload)); return;
    case w::RdmapOpcode::read_request: {
      if (qp.state != QpState::rts) return;  // none answered behind our disconnect
      w::ReadRequestHdr rr;
      std::memcpy(&rr, s.ulp_header.data(), sizeof rr);
      IwarpQp& st = state(qp);
      st.reads_in.push_back(PeerReadRequest{pos, s.msn, rr.sink_stag.get(), rr.src_stag.get(), rr.size.get(),
                                            rr.sink_to.get(), rr.src_to.get()});
      std::sort(st.reads_in.begin(), st.reads_in.end(),
                [](const PeerReadRequest& a, const PeerReadRequest& b) { return a.pos < b.pos; });
      return;
    }
    case w::RdmapOpcode::read_response: fail(qp, place_read_response(ctx_, qp, s.stag, s.to, s.payload, pos)); return;
    case w::RdmapOpcode::terminate: {
      ctx_.ctr.terminates_received++;
      qp.ctr.terminates_received++;
      std::string reason = "peer sent Terminate";
      WcStatus status = WcStatus::remote_operation_error;
      if (s.ulp_header.size() >= sizeof(w::TerminateHdr)) {
        w::TerminateHdr th;
        std::memcpy(&th, s.ulp_header.data(), sizeof th);
        const auto t = w::decode_terminate(th);
        reason += " (layer " + std::to_string(static_cast<int>(t.layer)) + ", etype " + std::to_string(t.etype) +
                  ", code " + std::to_string(t.code) + ")";
        status = terminated_status(t.layer, t.etype);
      }
      // The request the peer refused (the first not acknowledged: the Terminate acknowledges
      // nothing from the offending segment on) completes in error; the rest are flushed.
      complete_head(qp, status);
      close_qp(qp, CmEventType::broken, reason);
      return;
    }
    default:
      terminate(qp, Error::unexpected_opcode, std::string(w::opcode_info(s.opcode).name) + " is not supported yet");
      return;
  }
}

void Rdmap::delivered(Qp& qp) {
  const Pos delivered = lower_.delivered(qp);
  complete_receives(ctx_, qp, delivered);
  answer_read_requests(qp);
  complete_reads(qp, delivered, lower_.acked(qp));
}

void Rdmap::acked(Qp& qp) {
  const Pos acked = lower_.acked(qp);
  complete_sends(qp, acked);
  IwarpQp& s = state(qp);
  while (!s.responses_end.empty() && s.responses_end.front() <= acked) s.responses_end.pop_front();
}

}  // namespace softrnic::iwarp
