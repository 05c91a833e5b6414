// MPA's data path: FPDUs built from DDP segments (one per TCP segment), written gathered and
// completed when the socket has taken them; the byte stream read into the reassembler, whose
// ULPDUs go to DDP in order.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "mpa.hpp"
#include "user_mem.hpp"

namespace softrnic::mpa {

namespace w = wire;

namespace {
constexpr std::size_t kWriteBatch = 16;  // FPDUs per gathered write
constexpr int kReadsPerRound = 16;       // reads of one connection per receive round (fairness)
}  // namespace

void Mpa::send_segment(Qp& qp, std::initializer_list<std::span<const std::uint8_t>> hdr, const SglRef& sgl,
                       std::uint64_t off, std::uint32_t len, bool) {
  Conn& c = conn(qp);
  TxFpdu& f = c.txq.emplace_back();
  std::size_t n = 0;
  for (auto p : hdr) {
    std::memcpy(f.head.data() + n, p.data(), p.size());
    n += p.size();
  }
  f.head_len = static_cast<std::uint8_t>(n);
  if (len > 0) {
    f.sgl = sgl;
    f.sgl_off = off;
    f.len = len;
  }
  c.tx_queued++;
}

// One FPDU per TCP segment, as siw sizes them: (MSS rounded down to 8) less the MPA length field,
// the DDP/RDMAP headers and the CRC (and room for two markers when the peer wants them).
std::size_t Mpa::max_payload(const Qp& qp, std::size_t hdr_len) const {
  const Conn& c = conn(qp);
  std::size_t room = (c.mss & ~std::size_t{7}) - w::kMpaLenFieldLen - hdr_len - w::kMpaCrcLen;
  if (c.tx_markers) room -= 2 * w::kMpaMarkerLen;
  room = std::min(room, w::kMpaMaxUlpdu - hdr_len);
  return std::max<std::size_t>(room, 64);
}

// The FPDU's bytes: length, headers, payload gathered from registered memory (checked again:
// the consumer may have freed a region a posted request names), pad and CRC; markers inserted
// when the peer asked for them.
constexpr const char* kRegionFreed = "a posted work request names memory whose region was freed";

const char* Mpa::build_image(Qp& qp, TxFpdu& f) {
  Conn& c = conn(qp);
  const std::size_t ulpdu = f.head_len + std::size_t{f.len};
  const std::size_t total = w::mpa_fpdu_len(ulpdu);
  std::vector<std::uint8_t> img(total);
  std::memcpy(img.data() + w::kMpaLenFieldLen, f.head.data(), f.head_len);
  std::size_t at = w::kMpaLenFieldLen + f.head_len;
  if (f.len > 0) {
    std::uint64_t off = f.sgl_off;
    std::size_t left = f.len;
    for (const Sge& g : *f.sgl) {
      if (left == 0) break;
      if (off >= g.length) {
        off -= g.length;
        continue;
      }
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(g.length - off, left));
      if (ctx_.mrs.check(g.lkey, qp.init.pd, g.addr + off, n, Access::none) != MrCheck::ok) return kRegionFreed;
      if (!guarded_copy(img.data() + at, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(g.addr + off)), n)) {
        ctx_.ctr.memory_faults++;
        return kRegionFreed;
      }
      at += n;
      left -= n;
      off = 0;
    }
  }
  if (w::frame_mpa_fpdu(img, ulpdu, c.crc) == 0) return "an FPDU beyond the MULPDU (segmentation keeps it within)";
  if (c.tx_markers) {
    std::vector<std::uint8_t> marked(w::mpa_marked_len(c.tx_stream, img.size()));
    w::mpa_insert_markers(marked, c.tx_stream, img, c.crc);
    img = std::move(marked);
  }
  c.tx_stream += img.size();
  f.image = std::move(img);
  return nullptr;
}

// Writes what the socket takes, in batches; completes what it took.
void Mpa::pump(Qp& qp) {
  Conn& c = conn(qp);
  if (!c.sid || c.phase != Phase::established || c.wait_first) return;
  const char* local_error = nullptr;
  bool progressed = false;
  while (!c.txq.empty()) {
    std::array<std::span<const std::uint8_t>, kWriteBatch> pieces;
    std::size_t np = 0, offered = 0;
    for (TxFpdu& f : c.txq) {
      if (np == kWriteBatch) break;
      if (f.image.empty() && (local_error = build_image(qp, f))) break;
      pieces[np++] = std::span<const std::uint8_t>(f.image).subspan(f.written);
      offered += f.image.size() - f.written;
    }
    if (np == 0) break;
    const std::ptrdiff_t n = nd_.write(c.sid, {pieces.data(), np});
    if (n < 0) return;  // broken: the closed event ends the connection
    auto left = static_cast<std::size_t>(n);
    while (left > 0 && !c.txq.empty()) {
      TxFpdu& f = c.txq.front();
      const std::size_t rest = f.image.size() - f.written;
      if (left < rest) {
        f.written += left;
        left = 0;
        break;
      }
      left -= rest;
      c.txq.pop_front();
      c.tx_done++;
      progressed = true;
    }
    qp.ctr.tx_frames += np;
    if (static_cast<std::size_t>(n) < offered) {
      if (!c.want_writable) {
        c.want_writable = true;
        nd_.want_writable(c.sid);
      }
      break;
    }
    if (local_error) break;
  }
  if (progressed) rdmap_.acked(qp);
  if (local_error) {
    rdmap_.terminate(qp, Error::local_catastrophic, local_error);
    return;
  }
  if (c.txq.empty() && c.close_when_sent && c.sid) {
    c.close_when_sent = false;
    end_stream(qp, c.abort_when_sent);
    if (qp.state == QpState::closing) {
      close_qp(qp, CmEventType::disconnected, "");  // our graceful close is complete
    } else {
      qp_event(qp, QpEvent::terminate_out);
    }
  }
}

std::size_t Mpa::poll(std::optional<Clock::time_point> now) {
  std::size_t got = 0;
  for (;;) {
    const std::size_t n = nd_.events(events_);
    for (std::size_t i = 0; i < n; ++i) {
      const netdev::StreamEvent& e = events_[i];
      if (e.kind == netdev::StreamEventKind::accepted) {
        on_accepted(e);
        continue;
      }
      auto it = by_stream_.find(e.id);
      if (it == by_stream_.end()) {
        // A connection whose request is still coming in (or undecided).
        for (Request* r : reqs_) {
          if (r->sid != e.id) continue;
          if (e.kind == netdev::StreamEventKind::readable) {
            read_request(*r);
            got++;
          } else if (e.kind == netdev::StreamEventKind::closed) {
            r->sid = 0;
            drop_request(r);
          }
          break;
        }
        continue;
      }
      Qp& qp = *it->second;
      Conn& c = conn(qp);
      switch (e.kind) {
        case netdev::StreamEventKind::connected:
          qp.local = NetAddr{nd_.local_ip(), e.local_port};
          on_connected(qp);
          break;
        case netdev::StreamEventKind::connect_failed: on_connect_failed(qp, e.error); break;
        case netdev::StreamEventKind::readable:
          if (c.phase == Phase::wait_reply) {
            read_reply(qp);
            got++;
          } else if (c.phase == Phase::established) {
            got += read_stream(qp);  // (a spin_read stream is reported readable whether or not bytes wait)
          }
          break;
        case netdev::StreamEventKind::writable:
          c.want_writable = false;
          pump(qp);
          break;
        case netdev::StreamEventKind::closed: on_closed(qp, e.error); break;
        case netdev::StreamEventKind::accepted: break;
      }
    }
    if (n < events_.size()) break;
  }
  if (now) {
    ctx_.rx_now = *now;
    timers(*now);
  }
  return got;
}

std::chrono::microseconds Mpa::next_wait() {
  std::chrono::microseconds wait{100000};
  if (const auto t = timers_.next())
    wait =
        std::clamp(std::chrono::ceil<std::chrono::microseconds>(*t - Clock::now()), std::chrono::microseconds(1), wait);
  return wait;
}

bool Mpa::read_stream(Qp& qp) {
  for (int i = 0; i < kReadsPerRound; ++i) {
    Conn& c = conn(qp);
    if (!c.sid || c.phase != Phase::established) return i > 0;
    const std::ptrdiff_t n = nd_.read(c.sid, rx_buf_);
    if (n == 0) return i > 0;  // nothing more now
    if (n < 0) return true;    // the end: its closed event follows
    take(qp, {rx_buf_.data(), static_cast<std::size_t>(n)});
    // Less than the buffer: the socket had no more when it was read. What came since is
    // reported readable again in the next round (epoll is level-triggered), so a read that
    // would only say "nothing more" (a system call per message received) is not made.
    if (static_cast<std::size_t>(n) < rx_buf_.size()) return true;
  }
  return true;
}

// Bytes of the stream: through the reassembler, each ULPDU to DDP in order.
void Mpa::take(Qp& qp, std::span<const std::uint8_t> in) {
  bool first = false;
  while (!in.empty()) {
    Conn& c = conn(qp);
    if (!c.rx || !c.sid || c.phase != Phase::established) return;
    const w::MpaRxResult r = c.rx->next(in);
    in = in.subspan(r.consumed);
    if (r.status == w::MpaRxStatus::need_more) break;
    if (r.status != w::MpaRxStatus::ulpdu) {
      stream_broken(qp, std::string("MPA: ") + std::string(w::to_string(c.rx->error())));
      return;
    }
    qp.ctr.rx_frames++;
    if (c.wait_first) {
      c.wait_first = false;
      first = true;
    }
    if (c.absorb_write_rtr) {
      // The initiator's RTR (a zero-length RDMA Write): it only says FPDUs may flow.
      c.absorb_write_rtr = false;
      w::DdpSegment s;
      if (w::decode_ddp(r.ulpdu, s) == w::DecodeError::none && s.opcode == w::RdmapOpcode::rdma_write &&
          s.payload.empty()) {
        c.rx_count++;
        continue;
      }
    }
    const Pos pos = c.rx_count;
    rdmap_.on_segment(qp, r.ulpdu, pos);
    Conn& c2 = conn(qp);
    c2.rx_count = pos + 1;
    if (qp_receives(qp.state)) rdmap_.delivered(qp);
  }
  if (first) pump(qp);
}

// The TCP connection ended under an established QP.
void Mpa::on_closed(Qp& qp, int error) {
  Conn& c = conn(qp);
  by_stream_.erase(c.sid);
  c.sid = 0;
  c.txq.clear();
  if (qp_event(qp, QpEvent::terminate_out)) return;
  if (qp.cm == CmPhase::closed || qp.cm == CmPhase::none) return;
  if (c.phase != Phase::established) {
    close_qp(qp, CmEventType::unreachable, "the connection closed during the MPA exchange");
    return;
  }
  if (error == ETIMEDOUT || error == EHOSTUNREACH || error == ENETUNREACH) {
    ctx_.ctr.dead_peers++;  // TCP's keepalive or user timeout gave up on it
    close_qp(qp, CmEventType::broken, std::string("the peer stopped answering: ") + std::strerror(error));
    return;
  }
  qp_event(qp, QpEvent::close);
  close_qp(qp, CmEventType::disconnected,
           error ? std::string("the peer reset the connection: ") + std::strerror(error) : "");
}

// The byte stream cannot be parsed any more (CRC, length or marker error): the connection breaks.
void Mpa::stream_broken(Qp& qp, std::string reason) {
  ctx_.ctr.rx_bad_frames++;
  end_stream(qp, true);
  close_qp(qp, CmEventType::broken, std::move(reason));
}

}  // namespace softrnic::mpa
