// soft_rnic public API: a software RNIC with protection zones, memory regions, completion
// queues, RC queue pairs with connection management, Send/Receive and RDMA Write, driven by a
// progress engine thread over a netdev.
//
// Threading: every Device method may be called from any thread (one device lock). Callbacks
// (Qp events, listener requests, Cq notify) run in the progress thread or inside a Device call,
// with the device lock held: they must not call back into the Device.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "softrnic/netdev/netdev.hpp"

namespace softrnic {

using netdev::NetAddr;

enum class Status : std::uint8_t {
  ok,
  invalid_param,
  invalid_state,
  insufficient_resources,
  protection_violation,  // another protection domain's memory
  length_error,
  not_found,
  in_use,
  privileges_violation,  // a region that is not there (a bad or stale key) or does not grant the access
};
std::string_view to_string(Status s);

enum class Access : std::uint32_t {
  none = 0,
  local_read = 1,
  local_write = 2,
  remote_read = 4,
  remote_write = 8,
  remote_atomic = 16,  // RoCE: the peer's CmpSwap and FetchAdd
};
constexpr Access operator|(Access a, Access b) {
  return static_cast<Access>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}
constexpr bool has(Access set, Access want) {
  return (static_cast<std::uint32_t>(set) & static_cast<std::uint32_t>(want)) == static_cast<std::uint32_t>(want);
}

// Limits the RNIC enforces (and the DAT provider reports).
struct Limits {
  std::uint32_t max_qp = 4096;
  std::uint32_t max_qp_wr = 16384;
  std::uint32_t max_sge = 16;
  std::uint32_t max_cqe = 4194303;          // mlx5's: completions past a CQ's first 65536 wait in memory
  std::uint32_t max_mr = 65535;             // STag = 16-bit index << 16 | 16-bit random key
  std::uint64_t max_mr_size = 0xFFFFFFFFu;  // DAT_SEG_LENGTH is 32-bit
  std::uint32_t max_msg_size = 1u << 30;
  std::uint32_t max_private_data = 256;
  std::uint32_t max_pd = 4096;
  std::uint32_t max_rd = 16;  // RDMA Reads outstanding per QP, each way (ORD and IRD)
};

// How an SRQ QP takes buffers for messages that arrive ahead of earlier ones (DESIGN.md).
enum class AllocPolicy : std::uint8_t {
  arrival,   // only the arriving MSN takes a buffer (19, 22, 23 after 18: allocated 3, span 5)
  gap_fill,  // the gap below it is allocated too (allocated 5, span 5)
};

// The wire: iWARP over the project's reliable datagram framing over UDP (the default; the wire
// where out-of-order arrival is real), iWARP over the standard MPA over TCP (RFC 5044/6581), which
// Linux siw and iWARP NICs speak, or RoCEv2 (InfiniBand RC over UDP port 4791), which Linux rxe
// and RoCE NICs speak.
enum class Wire : std::uint8_t { udp, tcp, roce };

// What the MPA side asks for in its request or reply (wire tcp).
struct MpaConfig {
  std::uint8_t revision = 2;  // 1 or 2 (RFC 6581: IRD/ORD, peer-to-peer RTR)
  bool crc = true;            // ask for CRC32c (used when either side asks)
  bool markers = false;       // ask the peer to insert markers (RFC 5044 section 4.3)
  bool peer_to_peer = true;   // as initiator, offer the peer-to-peer RTR (a zero-length Write)
  friend bool operator==(const MpaConfig&, const MpaConfig&) = default;
};

// RoCEv2 (wire roce): the RC QP attributes ibv_modify_qp would set (rdma_cm's and
// ibv_rc_pingpong's defaults).
struct RoceConfig {
  std::uint32_t mtu = 0;  // path MTU, 256..4096; 0: the largest the link carries (1024 on 1500-byte Ethernet)
  // Local ACK timeout: 4.096 us * 2^timeout, fixed, as a QP attribute set with ibv_modify_qp is.
  // Unset: 67 ms (14) at first, doubling with each timeout in a row up to 4.3 s (20), so that
  // retry_cnt 7 spans 12.8 s: a peer that stalls (a pause, a descheduled process, a loaded host)
  // is waited for, while a lost packet is still sent again promptly.
  std::optional<std::uint8_t> timeout;
  std::uint8_t retry_cnt = 7;       // retransmissions after a timeout or a NAK before the QP fails
  std::uint8_t rnr_retry = 7;       // retries after an RNR NAK (7: without limit)
  std::uint8_t min_rnr_timer = 12;  // the RNR NAK we send asks the peer to wait this long (12: 0.64 ms)
  friend bool operator==(const RoceConfig&, const RoceConfig&) = default;
};

struct DeviceConfig {
  std::string name;  // who the device is (the DAT IA's name): the prefix of its log lines
  netdev::NetdevConfig netdev;
  Wire wire = Wire::udp;
  MpaConfig mpa;                                     // wire tcp
  RoceConfig roce;                                   // wire roce
  std::chrono::milliseconds connect_timeout{20000};  // default when the caller gives none
  std::chrono::microseconds initial_rto{20000};      // retransmission timeout before an RTT sample
  std::chrono::microseconds min_rto{5000};           // RTO floor (RFC 6298 estimator above it)
  int retry_limit = 12;                              // retransmissions of one frame before the QP breaks
  std::uint32_t window = 1024;                       // frames in flight per QP
  std::size_t window_bytes = 4 << 20;                // payload bytes in flight per QP (capped by rx buffer / 4)
  AllocPolicy alloc_policy = AllocPolicy::arrival;   // for SRQ QPs
  bool busy_poll = false;                            // progress thread spins instead of sleeping
  // A consumer's blocking wait (dat_evd_wait, ibv_get_cq_event) polls the netdev this long
  // before it sleeps in the kernel (engine::Engine::wait_progress). 0: it sleeps at once.
  std::chrono::microseconds wait_spin{50};
  // wire udp: posts to a QP with others outstanding, made while a consumer drives the engine (it
  // polls, or came back from a wait), wait for the doorbell: its next engine round, or 32 of
  // them, sends them together (one system call for a run of frames). false: each post
  // transmits at once.
  bool batch_posts = true;
  // wire roce: the longest an ACK we owe waits, while requests of ours wait for the peer's ACK,
  // for our reply to ride behind (Roce::flush_acks): a ping-pong's reply is posted within a
  // round or two of that ACK. A build that runs rounds several times slower (ThreadSanitizer)
  // needs more for the same rounds.
  std::chrono::microseconds roce_ack_hold{20};
  // Liveness of a connection: after `keepalive_idle` without a frame from the peer (0: never),
  // a probe every `keepalive_interval`; `keepalive_probes` unanswered ones break the connection.
  std::chrono::milliseconds keepalive_idle{5000};
  std::chrono::milliseconds keepalive_interval{1000};
  int keepalive_probes = 5;
  // A connection request that nothing answers (no reply, reject, cookie or "pending") fails
  // after this long, even when the caller's timeout is longer.
  std::chrono::milliseconds connect_no_answer{10000};
};

struct Pd;
struct Mr;
struct Cq;
struct Qp;
struct ConnRequest;
struct Srq;

struct Sge {
  std::uint32_t lkey = 0;
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
};

// rdma_write_imm: our RDMA Write with Immediate; recv_rdma_imm: a receive the peer's Write with
// Immediate consumed (byte_len: the Write's length; the data went where the Write said).
enum class WcOpcode : std::uint8_t {
  send,
  rdma_write,
  rdma_read,
  recv,
  bind,
  rdma_write_imm,
  recv_rdma_imm,
  cmp_swap,
  fetch_add
};
enum class WcStatus : std::uint8_t {
  success,
  flushed,
  local_length_error,
  local_protection_error,
  remote_access_error,
  remote_operation_error,
  transport_error,
  remote_invalid_request,  // RoCE: the responder refused the request (NAK invalid request)
  rnr_retry_exceeded,      // RoCE: the peer had no receive buffer through every RNR retry
};
std::string_view to_string(WcStatus s);

struct Wc {
  std::uint64_t wr_id = 0;
  WcOpcode opcode = WcOpcode::send;
  WcStatus status = WcStatus::success;
  std::uint32_t byte_len = 0;
  Qp* qp = nullptr;
  void* qp_context = nullptr;
  Srq* srq = nullptr;                  // the buffer came from this SRQ (the consumer reports reaping it)
  std::uint32_t invalidated_stag = 0;  // recv of a Send with Invalidate: the window it invalidated
  bool with_imm = false;               // recv: the message carried immediate data
  std::uint32_t imm = 0;               // its 4 bytes as they came (network order, opaque)
  bool solicited = false;              // recv: the message asked for a solicited event (its SE bit)
  // recv on a UD QP: the sender's QP number and IPv4 address (host order); the buffer's first 40
  // bytes hold the GRH (byte_len counts them).
  std::uint32_t src_qp = 0;
  std::uint32_t src_ip = 0;
};

// rdma_read: sgl (one SGE) is the local sink, rkey/remote_addr the remote source.
// send_invalidate: the peer invalidates the memory window `invalidate_stag` names.
// RoCE only: send_imm and rdma_write_imm carry `imm` to the peer's receive; cmp_swap and
// fetch_add act on 8 aligned bytes at remote_addr (rkey with remote_atomic) and return the value
// they found into the one 8-byte SGE.
enum class SendOpcode : std::uint8_t {
  send,
  send_solicited,
  rdma_write,
  rdma_read,
  send_invalidate,
  send_imm,
  rdma_write_imm,
  cmp_swap,
  fetch_add
};
// A datagram's destination (a UD QP's send; RoCEv2): the peer's IPv4 address (host order), its
// QP number and the Q_Key the datagram carries.
struct UdDest {
  std::uint32_t ip = 0;
  std::uint32_t qpn = 0;
  std::uint32_t qkey = 0;
};

struct SendWr {
  std::uint64_t wr_id = 0;
  SendOpcode opcode = SendOpcode::send;
  std::span<const Sge> sgl;
  std::uint32_t rkey = 0;         // rdma_write
  std::uint64_t remote_addr = 0;  // rdma_write
  bool signaled = true;
  std::uint32_t invalidate_stag = 0;  // send_invalidate
  // Read fence: not started before every earlier RDMA Read of this QP has completed.
  bool fence = false;
  // rdma_read into a memory window (dat_ep_post_rdma_read_to_rmr): the sink SGE's lkey is the
  // window's STag, which must grant remote write (iWARP places Read Responses as tagged data).
  bool sink_is_window = false;
  std::uint32_t imm = 0;          // send_imm, rdma_write_imm: 4 opaque bytes (network order)
  std::uint64_t compare_add = 0;  // cmp_swap: the value compared; fetch_add: the value added
  std::uint64_t swap = 0;         // cmp_swap: the value stored when equal
  UdDest ud{};                    // a UD QP's send: where the datagram goes
};
struct RecvWr {
  std::uint64_t wr_id = 0;
  std::span<const Sge> sgl;
};

// RDMAC verbs QP states (siw's set; the machine that moves them: soft_rnic/core/qp_state.hpp).
enum class QpState : std::uint8_t { idle, rtr, rts, closing, terminate, error };
inline constexpr int kQpStateCount = 6;
std::string_view to_string(QpState s);

enum class CmEventType : std::uint8_t {
  established,       // connection up (both sides)
  rejected,          // the peer's consumer rejected
  no_listener,       // nothing listens on that conn_qual at the peer (or on that port: ICMP port unreachable)
  unreachable,       // no answer within the timeout
  host_unreachable,  // ICMP host or network unreachable while connecting
  disconnected,      // closed by us or the peer; receives flushed
  broken,            // terminated on an error (Terminate received or sent, retry limit)
};
std::string_view to_string(CmEventType t);
struct CmEvent {
  CmEventType type = CmEventType::established;
  std::vector<std::uint8_t> private_data;
  std::string reason;  // for broken: what happened
};

// RC: a reliable connection. UD: unreliable datagrams (RoCEv2 only, as on rxe): Sends and Sends
// with Immediate of at most the path MTU, each to the destination its work request names,
// complete once sent; a receive takes the next buffer, or the datagram is dropped.
enum class QpType : std::uint8_t { rc, ud };

struct QpInit {
  QpType type = QpType::rc;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  std::uint32_t max_send_wr = 256;
  std::uint32_t max_recv_wr = 256;
  std::uint32_t max_sge = 4;
  void* context = nullptr;                            // returned in Wc::qp_context
  std::function<void(Qp*, const CmEvent&)> on_event;  // connection events
  Srq* srq = nullptr;                                 // receives come from this SRQ
  std::uint32_t ord = 0;                       // RDMA Reads this QP may have outstanding (negotiated down at connect)
  std::uint32_t ird = 0;                       // RDMA Reads it accepts from the peer at once
  std::optional<AllocPolicy> alloc_policy;     // default: the device's
  std::function<void(Qp*)> on_soft_watermark;  // allocated buffers exceeded the soft watermark
  // Verbs semantics (rxe's), instead of post_send and post_recv refusing with a Status: a send
  // whose local memory check fails (a bad lkey, a region of another PD or without the access,
  // beyond it) is taken and completes in error, the QP moving to error; and a post to a QP in
  // error is taken and completes flushed (how a verbs consumer drains a QP).
  bool errors_complete = false;
};

struct ConnRequestInfo {
  NetAddr remote;
  std::uint64_t conn_qual = 0;
  std::vector<std::uint8_t> private_data;
};

struct SrqInit {
  Pd* pd = nullptr;
  std::uint32_t max_wr = 256;
  std::uint32_t max_sge = 4;
  std::function<void(Srq*)> on_low_watermark;  // fewer buffers available than the armed watermark
};

struct SrqCounts {
  std::uint32_t available = 0;    // buffers still on the SRQ
  std::uint32_t outstanding = 0;  // posted and not yet reaped by the consumer
  std::uint32_t allocated = 0;    // taken by QPs, not yet completed
  std::uint32_t completed = 0;    // completions generated, not yet reaped
  std::uint32_t max_wr = 0;
  std::uint32_t low_watermark = 0;
};

// One consistent snapshot of a QP's receive buffers (dat_ep_recv_query).
struct RecvCounts {
  std::uint32_t allocated = 0;  // buffers allocated to the QP, not yet completed
  std::uint32_t span = 0;       // MSNs from the next to complete to the highest allocated
};

// RoCEv2 without connection management, as the rdma-core tools' out-of-band exchanges do it
// (ibv_rc_pingpong, perftest without -R): each side tells the other its address, QP number and
// first PSN, and moves its QP to RTS with the other's (roce_connect).
struct RoceEndpoint {
  NetAddr addr;           // the IPv4 address (its GID ::ffff:a.b.c.d); port 0: the RoCEv2 port everyone uses (4791)
  std::uint32_t qpn = 0;  // 24 bits
  std::uint32_t psn = 0;  // the first PSN this side sends (24 bits)
  std::uint32_t mtu = 0;  // path MTU in bytes (0: ours)
};

// The same connection in a verbs consumer's two steps (ibv_modify_qp to RTR, then RTS), with the
// attributes the consumer chose (ibv_qp_attr's).
struct RoceRtr {
  RoceEndpoint remote;              // its psn: our rq_psn, the first PSN we expect from it
  std::uint32_t ird = 0;            // max_dest_rd_atomic: the peer's Reads and atomics we take at once
  std::uint8_t min_rnr_timer = 12;  // what our RNR NAKs ask the peer to wait (IBTA table 45 code)
};
struct RoceRts {
  std::uint32_t sq_psn = 0;             // our first PSN (24 bits)
  std::uint32_t ord = 0;                // max_rd_atomic: our Reads and atomics outstanding at once
  std::optional<std::uint8_t> timeout;  // local ACK timeout code (4.096 us * 2^timeout); unset: the device's
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;  // 7: without limit
};

struct MrInfo {
  std::uint32_t stag = 0;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  Access access = Access::none;
};

struct DeviceCounters {
  std::uint64_t tx_frames = 0, rx_frames = 0;
  std::uint64_t retransmits = 0, rx_duplicates = 0, rx_out_of_order = 0, rx_beyond_window = 0;
  std::uint64_t rx_bad_frames = 0, rx_unknown_qp = 0;
  std::uint64_t terminates_sent = 0, terminates_received = 0;  // iWARP: the Terminates that broke connections
  std::uint64_t fatal_naks_sent = 0, fatal_naks_received = 0;  // RoCEv2: the NAKs that did (not RNR or PSN sequence)
  std::uint64_t rx_dropped_requests = 0;                       // connection requests beyond the pending limit
  std::uint64_t rx_bad_acks = 0;           // acknowledgements of data never sent, SACK blocks outside what is in flight
  std::uint64_t challenge_acks = 0;        // in-window control frames (RESET, DISCONNECT) not at the exact sequence
  std::uint64_t rx_bad_cookies = 0;        // connection requests with a wrong or stale cookie
  std::uint64_t rx_stray_cm = 0;           // RoCEv2 CM messages no connection of ours takes (state, peer, IDs)
  std::uint64_t cookies_sent = 0;          // connection requests answered with a cookie
  std::uint64_t keepalive_probes = 0;      // probes sent to idle peers
  std::uint64_t dead_peers = 0;            // connections broken by unanswered keepalive probes
  std::uint64_t memory_faults = 0;         // registered memory found unmapped or protected at access
  std::uint64_t rx_dropped_datagrams = 0;  // UD (RoCEv2): no receive posted, a wrong Q_Key or opcode
};

struct QpCounters {
  std::uint64_t tx_frames = 0, rx_frames = 0, retransmits = 0, rx_duplicates = 0, rx_out_of_order = 0;
  std::uint64_t rx_beyond_window = 0;
  std::uint64_t rack_retransmits = 0;      // retransmissions decided by a later frame's delivery, before the RTO
  std::uint64_t spurious_retransmits = 0;  // found out afterwards (acknowledged too soon after)
  std::uint64_t terminates_sent = 0, terminates_received = 0;  // iWARP
  std::uint64_t fatal_naks_sent = 0, fatal_naks_received = 0;  // RoCEv2
};

// A look inside a live device (softrnic_info): one consistent snapshot, taken under the device
// lock, of what each QP's receive side holds and what its connection did.
struct QpInfo {
  std::uint32_t qpn = 0;
  QpState state = QpState::idle;
  NetAddr local{}, peer{};
  std::uint32_t msn_expected = 0;          // MSN of the next incoming message to complete (ordering)
  std::uint32_t recv_queued = 0;           // receive entries the QP holds (posted, or SRQ buffers taken)
  std::uint32_t placed_not_completed = 0;  // messages with data placed, waiting for an earlier one to complete
  RecvCounts recv;                         // what dat_ep_recv_query reports
  bool uses_srq = false;
  SrqCounts srq;                  // the QP's SRQ as dat_srq_query reports it (uses_srq)
  std::uint32_t send_queued = 0;  // posted sends not yet completed
  QpCounters ctr;
};
struct DeviceInfo {
  std::string name;
  Wire wire = Wire::udp;
  std::string netdev;  // "udp", "loopback", "dpdk", "tcp"
  NetAddr address{};
  DeviceCounters ctr;
  std::vector<QpInfo> qps;  // by QP number
};

// A completion channel (ibv_comp_channel's place): where consumer threads that block wait for
// one object's completions and events (a DAT EVD or CNO). A waiter becomes the thread that drives
// the device's engine while it waits, blocked in the netdev, instead of sleeping until the
// progress thread wakes it: the frame that brings its event wakes it directly (one thread
// hand-off per message instead of two). The consumer's object keeps what is waited for under its
// own mutex, the `lk` of wait_step.
class CompletionChannel {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~CompletionChannel() = default;
  // One step of a waiter that looked under `lk` and found nothing yet; `lk` is held again on
  // return and the caller looks again. It drives the engine (until a frame, a due timer,
  // notify(), `deadline` or 100 ms) unless another thread did at its last step; then it sleeps
  // until notified or `deadline`. `another_drives` is the waiter's state across its steps (false
  // at the first). False when a signal ended the wait (for an API with EINTR; the sleep while
  // another thread drives does not end on signals).
  virtual bool wait_step(std::unique_lock<std::mutex>& lk, std::optional<Clock::time_point> deadline,
                         bool& another_drives) = 0;
  // What a waiter looks for happened (any thread, the object's mutex released): wakes the waiters.
  virtual void notify() = 0;
  // Whether this thread drives the engine as a waiter on this channel (wait_step), so that what
  // it raises now can be handed to it directly.
  virtual bool driven_here() const = 0;
  // Ends every wait (the object goes away or cannot be waited on), wherever its waiters are.
  virtual void interrupt() = 0;
  // For waits on the object's other state (its waiters leaving), under the object's mutex.
  virtual std::condition_variable& cv() = 0;
};

class Device {
 public:
  // Opens a device on the configured netdev and starts its progress thread.
  static std::unique_ptr<Device> open(const DeviceConfig& cfg, std::string& error);
  // The same over a netdev the caller made (cfg.netdev is then not used).
  static std::unique_ptr<Device> open(const DeviceConfig& cfg, std::unique_ptr<netdev::Netdev> nd);
  // iWARP over MPA/TCP on a stream netdev (cfg.wire is taken as tcp).
  static std::unique_ptr<Device> open(const DeviceConfig& cfg, std::unique_ptr<netdev::StreamNetdev> nd);
  virtual ~Device() = default;

  virtual NetAddr address() const = 0;
  // The wire its QPs speak (DeviceConfig::wire).
  virtual Wire wire() const = 0;
  virtual const Limits& limits() const = 0;
  // The largest path MTU (256..4096) a RoCEv2 packet of this device's link carries: what its
  // QPs use unless the peer's is smaller (the link's MTU for the iWARP wires too, for reporting).
  virtual std::uint32_t path_mtu() const = 0;
  virtual DeviceCounters counters() const = 0;

  virtual Pd* alloc_pd() = 0;
  virtual Status dealloc_pd(Pd* pd) = 0;

  virtual Status reg_mr(Pd* pd, void* addr, std::uint64_t length, Access access, Mr*& out) = 0;
  virtual Status dereg_mr(Mr* mr) = 0;
  virtual MrInfo query_mr(const Mr* mr) const = 0;
  // Memory windows (freed with dereg_mr). A bind is a work request on `qp`'s send queue: it takes
  // effect at once and completes (WcOpcode::bind) in order after what was posted before it;
  // length 0 unbinds. The window gets a new STag at each bind (query_mr).
  virtual Status alloc_mw(Pd* pd, Mr*& out) = 0;
  virtual Status bind_mw(Qp* qp, Mr* mw, Mr* mr, std::uint64_t addr, std::uint64_t length, Access access,
                         std::uint64_t wr_id, bool signaled) = 0;

  virtual Cq* create_cq(std::uint32_t depth, std::function<void()> notify) = 0;
  virtual Status destroy_cq(Cq* cq) = 0;
  // Takes up to out.size() completions off the CQ.
  virtual std::size_t poll_cq(Cq* cq, std::span<Wc> out) = 0;
  // Completions waiting on the CQ.
  virtual std::size_t cq_count(Cq* cq) = 0;
  // Which completions call the CQ's notify: every one (the default), or only those of solicited
  // messages and those in error (a verbs consumer's ibv_req_notify_cq(cq, 1)).
  virtual void set_cq_notify_solicited(Cq* cq, bool solicited_only) = 0;
  // Whether the CQ holds no completion, without taking its lock (a completion pushed
  // concurrently may be seen on the next call).
  virtual bool cq_empty(const Cq* cq) const = 0;

  virtual Status create_qp(const QpInit& init, Qp*& out) = 0;
  virtual Status destroy_qp(Qp* qp) = 0;
  virtual QpState qp_state(const Qp* qp) const = 0;
  // The consumer's moves: to error (flushes; the connection, if any, breaks) and to idle (a QP
  // whose connection ended, ready for a new one). invalid_state where the machine does not allow
  // it from the QP's state, invalid_param for a state a consumer does not move to this way.
  virtual Status modify_qp(Qp* qp, QpState to) = 0;
  // The remote operations the QP accepts from its peer (remote_read, remote_write,
  // remote_atomic; all of them unless set): ibv_modify_qp's qp_access_flags. RoCEv2: a request
  // the QP does not allow is NAKed as an invalid request, as rxe does.
  virtual Status set_qp_access(Qp* qp, Access remote) = 0;
  // The RDMA Reads and atomics an idle QP may have outstanding at its peer (ord) and takes from
  // it at once (ird), which its next CM connection offers and negotiates down (rdma_cm's
  // initiator_depth and responder_resources; QpInit's until then).
  virtual Status set_qp_rd_atomic(Qp* qp, std::uint32_t ord, std::uint32_t ird) = 0;
  virtual QpCounters qp_counters(const Qp* qp) const = 0;
  virtual NetAddr qp_peer(const Qp* qp) const = 0;
  // Our end of the QP's connection: the address and port the peer sends to (over MPA/TCP the
  // connection's own TCP port: the listening port on the passive side, an ephemeral one on the
  // active side). {} before a connection.
  virtual NetAddr qp_local(const Qp* qp) const = 0;
  // Whether no receive / no send-queue work request is outstanding.
  virtual std::pair<bool, bool> qp_idle(const Qp* qp) const = 0;
  // Makes a QP whose connection ended (or never began) ready for a new one; flushes what is left.
  virtual Status reset_qp(Qp* qp) = 0;

  virtual Status connect(Qp* qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> private_data,
                         std::chrono::milliseconds timeout) = 0;
  // Starts listening on conn_qual; requests arrive through `on_request` until stop_listen.
  virtual Status listen(std::uint64_t conn_qual,
                        std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) = 0;
  virtual Status stop_listen(std::uint64_t conn_qual) = 0;
  virtual Status accept(ConnRequest* req, Qp* qp, std::span<const std::uint8_t> private_data) = 0;
  virtual Status reject(ConnRequest* req, std::span<const std::uint8_t> private_data) = 0;
  // Graceful: delivers what was posted, then closes. Abrupt: closes now, flushing.
  virtual Status disconnect(Qp* qp, bool graceful) = 0;

  // RoCEv2 out-of-band connection (wire roce; invalid_state elsewhere): what to tell the peer of
  // an idle QP, and the move to RTS with what the peer told (ord: RDMA Reads and atomics we may
  // have outstanding at the peer, its max_dest_rd_atomic; ird: what we accept).
  virtual Status roce_local(const Qp* qp, RoceEndpoint& out) const = 0;
  virtual Status roce_connect(Qp* qp, const RoceEndpoint& remote, std::uint32_t ord, std::uint32_t ird) = 0;
  // roce_connect in a verbs consumer's two steps: RTR (the QP takes the peer's packets and
  // answers its Reads and Writes; receives may be posted, sends not) and RTS.
  virtual Status roce_rtr(Qp* qp, const RoceRtr& a) = 0;
  virtual Status roce_rts(Qp* qp, const RoceRts& a) = 0;
  // A UD QP's RTR: it takes datagrams that carry `qkey` (then roce_rts: its first PSN).
  virtual Status roce_ud_rtr(Qp* qp, std::uint32_t qkey) = 0;
  // The QP's number (its RoCEv2 QPN; 24 bits).
  virtual std::uint32_t qp_num(const Qp* qp) const = 0;

  // Runs one round of the progress engine in the caller's thread, unless another thread is
  // already running it (for consumers that busy-poll). The caller says it will keep calling for
  // about `drive_for`: the progress thread leaves the netdev to it until then (a consumer that
  // polls for a moment before it blocks passes that moment). False when the round received
  // nothing (so a poller need not look at its queues again); true when it did, or when another
  // thread was running the engine.
  // drive_for 0: the caller polls now but says nothing of later calls (an event-driven consumer
  // about to block elsewhere), and the progress thread does not stand back for it.
  virtual bool progress(std::chrono::microseconds drive_for = std::chrono::microseconds(2000)) = 0;
  // Whether the progress thread now leaves the engine to a consumer that said it polls.
  virtual bool consumer_polling() const = 0;
  // For consumers that block (dat_evd_wait, dat_cno_wait): a completion channel of this device's
  // engine (CompletionChannel above). One per object that is waited on.
  virtual std::unique_ptr<CompletionChannel> create_channel() = 0;

  virtual Status post_send(Qp* qp, const SendWr& wr) = 0;
  virtual Status post_recv(Qp* qp, const RecvWr& wr) = 0;

  // Shared receive queues.
  virtual Status create_srq(const SrqInit& init, Srq*& out) = 0;
  virtual Status destroy_srq(Srq* srq) = 0;  // in_use while QPs use it
  virtual Status post_srq_recv(Srq* srq, const RecvWr& wr) = 0;
  virtual SrqCounts srq_counts(const Srq* srq) const = 0;
  virtual Status resize_srq(Srq* srq, std::uint32_t max_wr) = 0;
  // Arms one low-watermark notification (at once if already below).
  virtual Status set_srq_low_watermark(Srq* srq, std::uint32_t lw) = 0;
  // The consumer took `n` completions of this SRQ's buffers off its queue.
  virtual void srq_reaped(Srq* srq, std::uint32_t n) = 0;

  virtual RecvCounts recv_counts(const Qp* qp) const = 0;
  // Every QP's receive state and counters, in one snapshot (softrnic_info). Takes the device
  // lock: not from a callback of this device (on_event, a listener), which runs under it.
  virtual DeviceInfo info() const = 0;
  // Soft: one notification when allocated buffers exceed it; hard: the connection breaks.
  virtual Status set_recv_watermarks(Qp* qp, std::uint32_t soft, std::uint32_t hard) = 0;
};

}  // namespace softrnic
