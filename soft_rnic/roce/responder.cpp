// RoCEv2 responder (rxe_resp.c): request packets in PSN order. A packet ahead of the expected PSN
// gets one PSN sequence error NAK per gap; an older one is a duplicate (acknowledged again, or a
// Read answered again). In order: Sends are placed by core into the buffer of their message
// number (an SRQ buffer taken on the first packet; none there: RNR NAK), Writes after the rkey,
// bounds and access checks of their RETH, Reads answered from the region their RETH names.
#include <algorithm>
#include <cstdio>

#include "roce.hpp"
#include "user_mem.hpp"

namespace softrnic::roce {

namespace w = wire::roce;

namespace {

constexpr int kResponseBurst = 256;  // Read response packets per round and QP

// rxe's check_length: no packet longer than the path MTU, a first or middle one exactly that.
std::optional<Fault> check_length(const RoceQp& s, const w::OpInfo& op, std::size_t len) {
  if (len > s.mtu || (op.has(w::Has::payload) && !op.has(w::Has::last) && len != s.mtu))
    return Fault{Error::message_too_long,
                 "a packet of " + std::to_string(len) + " bytes where the path MTU is " + std::to_string(s.mtu)};
  return std::nullopt;
}

// rxe's check_op_seq: a message's first packet only between messages, its others only within one.
std::optional<Fault> check_op_seq(const RoceQp& s, const w::OpInfo& op) {
  if (op.has(w::Has::first)) {
    if (s.in_send || s.in_write) return Fault{Error::unexpected_opcode, "a new message before the last one ended"};
  } else if (op.has(w::Has::send) && !s.in_send) {
    return Fault{Error::unexpected_opcode, "a Send's middle or last packet without its first"};
  } else if (op.has(w::Has::write) && !s.in_write) {
    return Fault{Error::unexpected_opcode, "an RDMA Write's middle or last packet without its first"};
  }
  return std::nullopt;
}

}  // namespace

// What the QP itself allows (its qp_access_flags), as rxe's check_op_valid: another operation is
// an invalid request, whatever region it names.
std::optional<Fault> Roce::check_qp_access(const Qp& qp, const w::OpInfo& op) {
  const Access want = op.has(w::Has::read)     ? Access::remote_read
                      : op.has(w::Has::write)  ? Access::remote_write
                      : op.has(w::Has::atomic) ? Access::remote_atomic
                                               : Access::none;
  if (want == Access::none || has(qp.remote_access, want)) return std::nullopt;
  return Fault{Error::unexpected_opcode, std::string(op.name) + ": the QP does not allow this remote access"};
}

// A request packet, in the order of rxe's responder: its PSN (a gap or a duplicate ends here), its
// length and place in the message, a receive buffer for what takes one (else RNR NAK), then the
// operation. Whatever cannot be carried out is NAKed with the Error it is (nak), the QP broken.
void Roce::on_request(Qp& qp, const w::Packet& p) {
  RoceQp& s = st(qp);
  if (!qp_receives(qp.state)) return;
  const Pos psn = extend_psn(s.exp_psn, p.psn);
  if (!check_psn(qp, p, psn)) return;
  const w::OpInfo& op = w::op_info(p.opcode);
  std::optional<Fault> f = check_length(s, op, p.payload.size());
  if (!f) f = check_op_seq(s, op);
  if (!f) f = check_qp_access(qp, op);
  if (f) {
    nak(qp, psn, f->error, f->reason);
    return;
  }
  if (!check_resource(qp, op, psn)) return;
  if (op.has(w::Has::send)) {
    f = execute_send(qp, p, op, psn);
  } else if (op.has(w::Has::write)) {
    f = execute_write(qp, p, op, psn);
  } else if (op.has(w::Has::atomic)) {
    if (answer_atomic(qp, p, psn)) s.exp_psn = psn + 1;
    return;
  } else if (op.has(w::Has::read)) {
    answer_read(qp, psn, p.reth->rkey, p.reth->va, p.reth->dma_len);  // its response acknowledges it
    return;
  } else {
    f = Fault{Error::unexpected_opcode, std::string(w::op_info(p.opcode).name) + " is not supported yet"};
  }
  if (f) {
    nak(qp, psn, f->error, f->reason);
    return;
  }
  s.exp_psn = psn + 1;
  complete_receives(ctx_, qp, s.exp_psn);
  if (p.ack_req && s.has_path) owe_ack(qp, psn, false);
}

// The expected PSN goes on; a gap (a packet lost or late) gets one NAK naming the expected PSN,
// the rest wait for it; an older PSN is a duplicate.
bool Roce::check_psn(Qp& qp, const w::Packet& p, Pos psn) {
  RoceQp& s = st(qp);
  if (psn > s.exp_psn) {
    qp.ctr.rx_out_of_order++;
    ctx_.ctr.rx_out_of_order++;
    if (!s.nak_sent) {
      s.nak_sent = true;
      s.ack_pending = false;
      send_ack(qp, w::kNakPsnSeqError, s.exp_psn);
    }
    return false;
  }
  if (psn < s.exp_psn) {
    duplicate(qp, p, psn);
    return false;
  }
  s.nak_sent = false;
  return true;
}

// rxe's check_resource: a Send's first packet, and a Write with Immediate's last, take a receive
// buffer; none there, an RNR NAK (before anything of the packet is placed, so the retry finds
// everything as it was). False when the packet goes no further (also when taking the posted
// receives in broke the QP: the hard watermark).
bool Roce::check_resource(Qp& qp, const w::OpInfo& op, Pos psn) {
  RoceQp& s = st(qp);
  const bool takes = op.has(w::Has::send) ? op.has(w::Has::first) : op.has(w::Has::write) && op.has(w::Has::imm);
  if (!takes) return true;
  if (!take_receives_for(qp, s.next_recv_msn)) return false;
  if (recv_buffer_ready(qp, s.next_recv_msn)) return true;
  rnr_nak(qp, psn);
  return false;
}

// A Send's packet into the buffer of its message (core's receive queue).
std::optional<Fault> Roce::execute_send(Qp& qp, const w::Packet& p, const w::OpInfo& op, Pos psn) {
  RoceQp& s = st(qp);
  if (op.has(w::Has::first)) {
    s.in_send = true;
    s.send_msn = s.next_recv_msn++;
    s.send_off = 0;
  }
  if (auto f = place_untagged(ctx_, qp, s.send_msn, s.send_off, p.payload, op.has(w::Has::last), p.inv_rkey.value_or(0),
                              op.has(w::Has::ieth), psn))
    return f;
  s.send_off += p.payload.size();
  if (op.has(w::Has::imm)) set_recv_imm(qp, s.send_msn, *p.imm, std::nullopt);
  if (op.has(w::Has::last) && p.solicited) set_recv_solicited(qp, s.send_msn);
  if (op.has(w::Has::last)) {
    s.in_send = false;
    s.msn++;
  }
  return std::nullopt;
}

// An RDMA Write's packet where its RETH (on the first) says, after the rkey, bounds and access
// checks; with Immediate, its last packet completes a receive of its own.
std::optional<Fault> Roce::execute_write(Qp& qp, const w::Packet& p, const w::OpInfo& op, Pos psn) {
  RoceQp& s = st(qp);
  const std::size_t len = p.payload.size();
  if (op.has(w::Has::first)) {
    if (p.reth->dma_len > ctx_.limits.max_msg_size)
      return Fault{Error::message_too_long, "an RDMA Write longer than the largest message"};
    if (p.reth->dma_len) {
      const MrCheck c = ctx_.mrs.check(p.reth->rkey, qp.init.pd, p.reth->va, p.reth->dma_len, Access::remote_write);
      if (c != MrCheck::ok) return Fault{tagged_error(c), std::string("RDMA Write: ") + std::string(to_string(c))};
    }
    s.in_write = true;
    s.write_rkey = p.reth->rkey;
    s.write_va = p.reth->va;
    s.write_left = s.write_total = p.reth->dma_len;
  }
  if (len > s.write_left) return Fault{Error::bad_offset, "RDMA Write data beyond the length its RETH gave"};
  if (len) {
    if (auto f = place_tagged(ctx_, qp, s.write_rkey, s.write_va, p.payload)) return f;
  }
  s.write_va += len;
  s.write_left -= len;
  if (!op.has(w::Has::last)) return std::nullopt;
  if (s.write_left) return Fault{Error::bad_offset, "RDMA Write shorter than the length its RETH gave"};
  s.in_write = false;
  s.msn++;
  if (op.has(w::Has::imm)) {
    const std::uint32_t msn = s.next_recv_msn++;
    if (auto f = place_untagged(ctx_, qp, msn, 0, {}, true, 0, false, psn)) return f;
    set_recv_imm(qp, msn, *p.imm, s.write_total);
    if (p.solicited) set_recv_solicited(qp, msn);
  }
  return std::nullopt;
}

void Roce::duplicate(Qp& qp, const w::Packet& p, Pos psn) {
  RoceQp& s = st(qp);
  qp.ctr.rx_duplicates++;
  ctx_.ctr.rx_duplicates++;
  if (w::op_info(p.opcode).has(w::Has::atomic)) {
    // An atomic asked again (its ACK was lost): the same answer, not a second execution.
    for (const AnsweredRead& r : s.answered_reads)
      if (r.atomic && r.first_psn == psn) {
        send_atomic_ack(qp, psn, r.orig);
        return;
      }
    return;
  }
  if (w::op_info(p.opcode).has(w::Has::read)) {
    // A Read asked again (its response was lost): answered again from its PSN, if it lies within
    // one we answered (rxe replays the same way). Its RETH is checked again.
    for (const AnsweredRead& r : s.answered_reads) {
      if (r.atomic || psn < r.first_psn || psn >= r.first_psn + r.npkts) continue;
      if (p.reth->dma_len) {
        const MrCheck c = ctx_.mrs.check(p.reth->rkey, qp.init.pd, p.reth->va, p.reth->dma_len, Access::remote_read);
        if (c != MrCheck::ok) {
          nak(qp, psn, tagged_error(c), std::string("RDMA Read: ") + std::string(to_string(c)));
          return;
        }
      }
      const Sge src{p.reth->rkey, p.reth->va, p.reth->dma_len};
      s.read_jobs.push_back(
          ReadResponseJob{psn, p.reth->rkey, 0, p.reth->dma_len, true, ctx_.sgl_pool.make({&src, 1})});
      send_responses(qp);
      return;
    }
    return;  // older than what we keep: the requester's retry limit decides
  }
  // A Send or Write we have: acknowledged again through the last PSN we received (C9-105), at
  // the end of this round (the requester waits for it: our ACK was lost or late).
  owe_ack(qp, s.exp_psn - 1, true);
}

bool Roce::answer_read(Qp& qp, Pos psn, std::uint32_t rkey, std::uint64_t va, std::uint32_t len) {
  RoceQp& s = st(qp);
  if (len > ctx_.limits.max_msg_size) {
    nak(qp, psn, Error::read_too_large, "RDMA Read larger than the largest message");
    return false;
  }
  if (len) {
    const MrCheck c = ctx_.mrs.check(rkey, qp.init.pd, va, len, Access::remote_read);
    if (c != MrCheck::ok) {
      nak(qp, psn, tagged_error(c), std::string("RDMA Read: ") + std::string(to_string(c)));
      return false;
    }
  }
  const auto npkts = len == 0 ? 1u : (len + s.mtu - 1) / s.mtu;
  s.answered_reads.push_back(AnsweredRead{psn, npkts});
  while (s.answered_reads.size() > std::max<std::uint32_t>(qp.ird, 1)) s.answered_reads.pop_front();
  const Sge src{rkey, va, len};
  s.exp_psn = psn + npkts;
  s.msn++;
  s.read_jobs.push_back(ReadResponseJob{psn, rkey, 0, len, true, ctx_.sgl_pool.make({&src, 1})});
  send_responses(qp);
  return true;
}

// Sends Read response packets, a burst per call; what is left goes at the QP's next timer (due at
// once).
void Roce::send_responses(Qp& qp) {
  RoceQp& s = st(qp);
  int budget = kResponseBurst;
  while (!s.read_jobs.empty() && budget-- > 0 && s.has_path) {
    ReadResponseJob& j = s.read_jobs.front();
    const std::uint32_t len = std::min(s.mtu, j.left);
    const bool last = len == j.left;
    w::Packet p;
    p.opcode = j.first && last ? w::Opcode::read_response_only
               : j.first       ? w::Opcode::read_response_first
               : last          ? w::Opcode::read_response_last
                               : w::Opcode::read_response_middle;
    p.dest_qpn = s.peer_qpn;
    p.psn = static_cast<std::uint32_t>(j.psn & w::kPsnMask);
    p.aeth = w::Aeth{w::kAethAck | w::kAethNoCredit, s.msn};
    if (!send_packet(qp, p, j.src, j.off, len, qp.init.pd, /*copy=*/true)) {
      nak(qp, j.psn, Error::local_catastrophic, "an RDMA Read source's registered memory is gone");
      return;
    }
    j.first = false;
    j.psn++;
    j.off += len;
    j.left -= len;
    if (last) s.read_jobs.pop_front();
  }
  if (!s.read_jobs.empty()) rearm(qp);
}

// CmpSwap and FetchAdd on 8 aligned bytes of a region that grants remote atomic access, done with
// the CPU's atomic instructions (the owner may read the same memory meanwhile), answered with the
// value found; kept for a duplicate.
bool Roce::answer_atomic(Qp& qp, const w::Packet& p, Pos psn) {
  RoceQp& s = st(qp);
  if (p.atomic_eth->va % 8 != 0) {
    nak(qp, psn, Error::bad_offset, "an atomic at an address not 8-byte aligned");
    return false;
  }
  const MrCheck c = ctx_.mrs.check(p.atomic_eth->rkey, qp.init.pd, p.atomic_eth->va, 8, Access::remote_atomic);
  if (c != MrCheck::ok) {
    nak(qp, psn, tagged_error(c), std::string("atomic: ") + std::string(to_string(c)));
    return false;
  }
  struct Op {
    std::uint64_t* at;
    bool cmp;
    std::uint64_t compare, swap_add, orig;
  } op{reinterpret_cast<std::uint64_t*>(static_cast<std::uintptr_t>(p.atomic_eth->va)), p.opcode == w::Opcode::cmp_swap,
       p.atomic_eth->compare, p.atomic_eth->swap_add, 0};
  const bool ok = run_guarded(
      [](void* v) {
        auto* o = static_cast<Op*>(v);
        if (o->cmp) {
          std::uint64_t expected = o->compare;
          __atomic_compare_exchange_n(o->at, &expected, o->swap_add, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
          o->orig = expected;  // the value found, equal or not
        } else {
          o->orig = __atomic_fetch_add(o->at, o->swap_add, __ATOMIC_SEQ_CST);
        }
      },
      &op);
  if (!ok) {
    ctx_.ctr.memory_faults++;
    nak(qp, psn, Error::local_catastrophic, "an atomic's target memory is gone");
    return false;
  }
  s.answered_reads.push_back(AnsweredRead{psn, 1, true, op.orig});
  while (s.answered_reads.size() > std::max<std::uint32_t>(qp.ird, 1)) s.answered_reads.pop_front();
  s.msn++;
  send_atomic_ack(qp, psn, op.orig);
  return true;
}

void Roce::send_atomic_ack(Qp& qp, Pos psn, std::uint64_t orig) {
  RoceQp& s = st(qp);
  w::Packet p;
  p.opcode = w::Opcode::atomic_ack;
  p.dest_qpn = s.peer_qpn;
  p.psn = static_cast<std::uint32_t>(psn & w::kPsnMask);
  p.aeth = w::Aeth{w::kAethAck | w::kAethNoCredit, s.msn};
  p.atomic_ack = orig;
  send_packet(qp, p, {}, 0, 0, qp.init.pd);
}

// No receive buffer for the message at `psn`: the requester waits the RNR timer and sends again
// from this PSN; the rest of the message behind it needs no sequence error NAK.
void Roce::rnr_nak(Qp& qp, Pos psn) {
  RoceQp& s = st(qp);
  s.ack_pending = false;
  s.nak_sent = true;
  send_ack(qp, static_cast<std::uint8_t>(w::kAethRnrNak | (s.min_rnr_timer & 0x1F)), psn);
}

void Roce::send_ack(Qp& qp, std::uint8_t syndrome, Pos psn) {
  RoceQp& s = st(qp);
  w::Packet p;
  p.opcode = w::Opcode::ack;
  p.dest_qpn = s.peer_qpn;
  p.psn = static_cast<std::uint32_t>(psn & w::kPsnMask);
  p.aeth = w::Aeth{syndrome, s.msn};
  send_packet(qp, p, {}, 0, 0, qp.init.pd);
}

// A request we cannot carry out: the NAK its Error maps to goes to the requester (which completes
// the request in error) and the QP goes to the error state.
void Roce::nak(Qp& qp, Pos psn, Error e, std::string reason) {
  const std::uint8_t code = nak_syndrome(e);
  st(qp).ack_pending = false;
  send_ack(qp, code, psn);
  ctx_.ctr.fatal_naks_sent++;
  qp.ctr.fatal_naks_sent++;
  break_qp(qp, "sent " + nak_text(code) + " (" + std::string(to_string(e)) + "): " + reason);
}

std::string nak_text(std::uint8_t syndrome) {
  char b[12];
  std::snprintf(b, sizeof b, "NAK 0x%02x", syndrome);
  return b;
}

void Roce::fatal(Qp& qp, Error e, std::string reason, std::optional<Pos> bad) {
  nak(qp, bad.value_or(st(qp).exp_psn), e, std::move(reason));
}

}  // namespace softrnic::roce
