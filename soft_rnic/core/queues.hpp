// The queues every transport shares (DESIGN.md, "Receive-side semantics"):
// - receive queue (recv_queue.cpp): buffers matched by MSN, SRQ buffers taken when a message's
//   first segment arrives (or with the gap), watermarks, placement into a buffer's SGL,
//   completion strictly in MSN order once the transport has delivered everything before;
// - send queue (send_queue.cpp): ORD gating and read fences, completion in posting order once
//   acknowledged; placement of RDMA Write data and Read Responses (tagged, after STag checks);
// - completions (completion.cpp): CQ entries, flushing, closing a QP with one event.
// A violation comes back as a Fault; the transport turns it into what its wire says.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "objects.hpp"

namespace softrnic {

struct Fault {
  Error error;
  std::string reason;
};

// Copies `payload` into the scatter list `sgl` at byte offset `off`, every region checked first
// (in `pd`, for `need`): nothing is placed unless all of it may be. `what` names the buffer in
// the fault's reason.
std::optional<Fault> scatter(Ctx& ctx, const Pd* pd, std::span<const Sge> sgl, std::uint64_t off,
                             std::span<const std::uint8_t> payload, Access need, const char* what);

// `len` bytes of the scatter list `sgl` from byte `off`, for transmission: one span straight from
// registered memory when one SGE holds them, else gathered into `scratch`. Every region is
// checked again at each read (a consumer may free a region a posted work request still names,
// and then nothing may be read from it): nullopt when one is gone or unmapped.
std::optional<std::span<const std::uint8_t>> gather(Ctx& ctx, const Pd* pd, std::span<const Sge> sgl, std::uint64_t off,
                                                    std::size_t len, std::vector<std::uint8_t>& scratch);

// ---- receive queue ----
Status make_recv(Ctx& ctx, Pd* pd, const RecvWr& wr, RecvWqe& r);
void srq_completed(Srq* srq);
void check_low_watermark(Srq& srq);
// Soft: one notification per arming. Hard: the connection breaks (transport->fatal). False when broken.
bool check_watermarks(Qp& qp);
// Places an untagged segment (MSN, offset, payload) into its buffer, taking one from the SRQ if
// the QP has one and the MSN has none yet. `pos`: the segment's stream position. `last`: the
// message's last segment. nullopt when placed.
std::optional<Fault> place_untagged(Ctx& ctx, Qp& qp, std::uint32_t msn, std::uint64_t mo,
                                    std::span<const std::uint8_t> payload, bool last, std::uint32_t inv_stag,
                                    bool invalidate, Pos pos);
// Takes in the receives posted since (take_posted_receives) when message `msn` has no entry on
// rq yet and the QP has no SRQ: a receive whose post returned before the message arrived is there
// for it. False when that broke the connection (the hard watermark).
bool take_receives_for(Qp& qp, std::uint32_t msn);
// Whether a Send with this MSN finds a buffer (on rq, or one the SRQ can give now); looks only
// (take_receives_for first). RoCE answers an RNR NAK instead of placing when it does not.
bool recv_buffer_ready(const Qp& qp, std::uint32_t msn);
// Receives posted and not yet taken in (Qp::posted) go onto rq. Under the device lock: by its
// hand-off, and by a Send that finds no buffer (a receive whose post returned before the Send
// arrived is there for it, as on a hardware RNIC). False when they broke the connection (the hard
// watermark).
bool take_posted_receives(Qp& qp);
// One posted receive (its rq_used entry reserved) onto rq, or flushed if the QP has gone to
// error since the post checked (a closing QP still takes it: what the peer sent before it saw
// the close lands). False when it broke the connection (the hard watermark).
bool take_receive(Qp& qp, RecvWqe&& r);
// RoCE: the receive of message `msn` carried immediate data; `rdma_len`: it was consumed by an
// RDMA Write with Immediate of that many bytes (placed elsewhere). The message must be placed.
// The message of `msn` asked for a solicited event (its completion says so: Wc::solicited).
void set_recv_solicited(Qp& qp, std::uint32_t msn);
void set_recv_imm(Qp& qp, std::uint32_t msn, std::uint32_t imm, std::optional<std::uint64_t> rdma_len);
// A UD QP's datagram into its next receive buffer (the QP's, or one its SRQ gives now): `grh`
// (40 bytes) first, the payload behind it, completed at once, with local_length_error when it
// does not fit (nothing of it is placed then). False when no buffer was there: UD drops it.
struct Datagram {
  std::span<const std::uint8_t> grh, payload;
  std::uint32_t src_qp = 0, src_ip = 0;
  std::optional<std::uint32_t> imm;
  bool solicited = false;
};
bool receive_datagram(Ctx& ctx, Qp& qp, const Datagram& d);
// Completes receives in MSN order: the front buffer when its message is whole and everything
// before its last segment has been delivered (`delivered`: every position below it).
void complete_receives(Ctx& ctx, Qp& qp, Pos delivered);

// ---- send queue ----
// Whether a work request may go on the wire now: an RDMA Read needs a free ORD slot, a fenced
// request needs every earlier RDMA Read completed.
bool can_issue(const Qp& qp, const WaitingWr& w);
// RDMA Reads and atomics: they take an ORD slot and complete when their response comes.
inline bool is_read_like(SendOpcode op) {
  return op == SendOpcode::rdma_read || op == SendOpcode::cmp_swap || op == SendOpcode::fetch_add;
}
// Issues the waiting requests at the head of sq_wait that may go now, in order.
void issue_waiting(Qp& qp);
// An RDMA Read goes on the wire: its RequestedRead (where the response goes) joins reads_out. One sink
// SGE is named as it is; a scatter list by an internal STag over it (TO from 0).
RequestedRead& begin_read(Qp& qp, const WaitingWr& w);
// Completes send-queue entries in posting order: a Send or Write when everything before
// `acked` is acknowledged and covers its last segment, an RDMA Read when its response is whole.
void complete_sends(Qp& qp, Pos acked);
// The request at the head of the send queue, the one the peer refused (a Terminate or a fatal
// NAK names the first not acknowledged), completes with `status` whether signaled or not.
void complete_head(Qp& qp, WcStatus status);
// RDMA Write data: placed after the STag, zone, bounds and access checks.
std::optional<Fault> place_tagged(Ctx& ctx, Qp& qp, std::uint32_t stag, std::uint64_t to,
                                  std::span<const std::uint8_t> payload);
// A segment of the response to one of our RDMA Reads: into that read's sink only.
std::optional<Fault> place_read_response(Ctx& ctx, Qp& qp, std::uint32_t stag, std::uint64_t to,
                                         std::span<const std::uint8_t> payload, Pos pos);
// Reads complete in order, each once its response is whole and delivered; then the requests
// that waited for them are issued. True when any completed.
bool complete_reads(Qp& qp, Pos delivered, Pos acked);

// ---- completions ----
// A send-queue (receive-queue) entry leaves the QP's count of used entries: before its completion
// is pushed, so that a consumer that has the completion finds the entry free (Qp::sq_used).
inline void sq_retire(Qp& qp, std::uint32_t n = 1) {
  qp.sq_used.fetch_sub(n, std::memory_order_relaxed);
}
inline void rq_retire(Qp& qp, std::uint32_t n = 1) {
  if (!qp.init.srq) qp.rq_used.fetch_sub(n, std::memory_order_relaxed);
}
void push_wc(Cq* cq, const Wc& wc);
// Everything posted completes as flushed (SRQ buffers the QP took go to its receive CQ too).
void flush_qp(Qp& qp);
// Ends the connection: flush, state, and (if given) one event to the consumer.
void close_qp(Qp& qp, std::optional<CmEventType> ev, std::string reason);
void emit(Qp& qp, CmEventType ev, std::string reason, std::vector<std::uint8_t> pd = {});

}  // namespace softrnic
