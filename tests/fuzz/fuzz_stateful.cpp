// Fuzz target: two connected RNICs (softrnic::Device over the loopback netdev) under hostile
// frames. Each input connects a fresh QP pair (receives posted, memory registered), then runs a
// program (stateful_ops.hpp): legitimate work requests on either side, progress rounds, and
// frames injected toward one side from the other side's address, as if the peer's RNIC had sent
// them: raw bytes, or frames built around the live QP numbers, sequence numbers, STags and MSNs
// (learned from what each RNIC sends) with fuzzed fields: DDP/RDMAP segments, ACKs with SACK
// blocks, CM messages, stream controls. Afterwards both QPs are closed (abrupt disconnect, then
// reset_qp, which must succeed and flushes what was posted after a close), and:
//   - every work request completed exactly once (receives of an SRQ: at most once, the rest still
//     on the SRQ), with a length within its buffer;
//   - registered memory the peer may not write is untouched: guard bytes between the regions, the
//     read-only region, receive slots outside the posted SGEs, the window's region outside the
//     range it was bound to, RDMA Read sinks outside the posted reads' ranges;
//   - both devices still take part (QPs destroyed cleanly, the next input connects).
// No sleeps but the program's own short waits (3 ms at most, for the retransmission timers): the
// harness drives the engines with Device::progress (the progress threads stand back). The pair is
// kept across inputs (registering memory costs a /proc/self/maps read) and made again every
// SOFTRNIC_FUZZ_RECYCLE inputs (default 250; 1 to reproduce a crash with a fresh pair per input).
// SOFTRNIC_FUZZ_TRACE=1 prints each operation, injected frame, event and completion.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_check.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/rnic.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/udp_frame.hpp"
#include "stateful_ops.hpp"

using namespace softrnic;
namespace w = softrnic::wire;
namespace nd = softrnic::netdev;
using namespace fuzzops;

namespace {

constexpr std::size_t kMaxDatagram = 1472;
constexpr std::uint64_t kQual = 0x5eed;

// ---- the input, front to back; zeros past the end ----
class Reader {
 public:
  Reader(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  bool done() const { return at_ >= n_; }
  std::uint8_t u8() { return at_ < n_ ? d_[at_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | u8() << 8); }
  std::uint32_t u32() { return u16() | static_cast<std::uint32_t>(u16()) << 16; }
  std::uint64_t u64() { return u32() | static_cast<std::uint64_t>(u32()) << 32; }
  std::span<const std::uint8_t> bytes(std::size_t n) {
    n = std::min(n, n_ - std::min(at_, n_));
    const std::span<const std::uint8_t> s(d_ + at_, n);
    at_ += n;
    return s;
  }

 private:
  const std::uint8_t* d_;
  std::size_t n_, at_ = 0;
};

bool seq_after(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) > 0;
}

// What one RNIC's own frames say about its current main QP.
struct Live {
  std::uint32_t qpn = 0;       // its QP number (source of its frames)
  std::uint32_t peer_qpn = 0;  // the peer QP it sends to
  std::uint32_t next_seq = 0;  // one past the highest sequence number it sent
  std::uint32_t expects = 0;   // the last cumulative ack it sent: what it expects next from the peer
  bool expects_known = false;
  std::uint32_t conn_id = 0;
  std::uint32_t cookie = 0;  // the seq field of the last cookie it sent to an initiator
};

// A netdev decorator that watches what its RNIC sends (Live), can drop its RNIC's own data frames,
// and sends injected datagrams from its address.
class Tap final : public nd::Netdev {
 public:
  explicit Tap(std::unique_ptr<nd::Netdev> inner) : inner_(std::move(inner)) {}
  nd::NetAddr local_addr() const override { return inner_->local_addr(); }
  std::size_t max_datagram() const override { return inner_->max_datagram(); }
  std::size_t rx_buffer_bytes() const override { return inner_->rx_buffer_bytes(); }
  nd::NetdevStats stats() const override { return inner_->stats(); }
  std::size_t rx_burst(std::span<nd::RxFrame> out) override { return inner_->rx_burst(out); }
  void wait_rx(std::chrono::microseconds t) override { inner_->wait_rx(t); }
  void wake() override { inner_->wake(); }

  std::size_t tx_burst(std::span<const nd::TxFrame> frames) override {
    std::lock_guard lk(mu_);
    for (const nd::TxFrame& f : frames) {
      buf_.clear();
      for (auto part : {f.head, f.body, f.tail}) buf_.insert(buf_.end(), part.begin(), part.end());
      if (observe(buf_) && drop_data_) continue;
      const nd::TxFrame one{f.to, buf_, {}, {}};
      inner_->tx_burst({&one, 1});
    }
    return frames.size();
  }

  void inject(nd::NetAddr to, std::span<const std::uint8_t> d) {
    std::lock_guard lk(mu_);
    const nd::TxFrame one{to, d, {}, {}};
    inner_->tx_burst({&one, 1});
  }
  Live live() const {
    std::lock_guard lk(mu_);
    return live_;
  }
  void begin() {
    std::lock_guard lk(mu_);
    live_ = {};
    drop_data_ = false;
  }
  void set_drop(bool on) {
    std::lock_guard lk(mu_);
    drop_data_ = on;
  }

 private:
  // True for a sequenced frame of the main QP.
  bool observe(std::span<const std::uint8_t> d) {
    w::FrameHeader h;
    std::span<const std::uint8_t> body;
    if (w::open_frame(d, h, body) != w::FrameError::none) return false;
    if (h.type == w::FrameType::cm) {
      if (body.size() < sizeof(w::CmHdrWire)) return false;
      w::CmHdrWire c;
      std::memcpy(&c, body.data(), sizeof c);
      const auto op = static_cast<w::CmOp>(c.op);
      if (live_.qpn == 0 && (op == w::CmOp::connect_request || op == w::CmOp::connect_reply)) {
        live_.qpn = h.src_qpn;
        live_.conn_id = c.conn_id.get();
        live_.next_seq = c.init_seq.get();
        if (op == w::CmOp::connect_reply) live_.peer_qpn = h.dst_qpn;
      } else if (h.src_qpn == live_.qpn && op == w::CmOp::ready_to_use) {
        live_.peer_qpn = h.dst_qpn;
      } else if (op == w::CmOp::cookie) {
        live_.cookie = h.seq;
      }
      return false;
    }
    if (live_.qpn == 0 || h.src_qpn != live_.qpn) return false;
    if (h.flags & w::kFlagAckValid) {
      live_.expects = h.ack;
      live_.expects_known = true;
    }
    if (h.type != w::FrameType::ddp && h.type != w::FrameType::stream_ctrl) return false;
    if (seq_after(h.seq + 1, live_.next_seq)) live_.next_seq = h.seq + 1;
    return true;
  }

  std::unique_ptr<nd::Netdev> inner_;
  mutable std::mutex mu_;
  std::vector<std::uint8_t> buf_;
  Live live_;
  bool drop_data_ = false;
};

// ---- registered memory, with a record of what the peer may change ----
constexpr std::size_t kGuard = 512;
constexpr std::size_t kSlot = 512, kSlots = 32;  // receive buffers: SGEs at +8 and +256, <= 240 bytes each
constexpr std::size_t kArea = 8192;
struct Area {
  std::size_t off = 0, len = 0;
  Mr* mr = nullptr;
};
struct Memory {
  std::vector<std::uint8_t> buf, pristine;
  Area recv, rw, ro, mw, sink;
  std::vector<std::pair<std::size_t, std::size_t>> may_change;  // [begin, end) offsets in buf
  Memory() {
    std::size_t at = kGuard;
    for (Area* a : {&recv, &rw, &ro, &mw, &sink}) {
      a->off = at;
      a->len = a == &recv ? kSlot * kSlots : kArea;
      at += a->len + kGuard;
    }
    buf.resize(at);
    for (std::size_t i = 0; i < at; ++i) buf[i] = static_cast<std::uint8_t>(i * 7 + (i >> 8) + 0x5A);
    pristine = buf;
  }
  std::uint64_t addr(const Area& a, std::uint64_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(buf.data()) + a.off + off;
  }
  void allow(std::uint64_t addr, std::uint64_t len) {
    const auto base = reinterpret_cast<std::uintptr_t>(buf.data());
    if (len == 0 || addr < base || addr - base >= buf.size()) return;
    const std::size_t b = addr - base;
    may_change.emplace_back(b, static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), b + len)));
  }
  // A new input: everything as it was; the remote-write region and the window's range (it stays
  // bound from an earlier input until bound again or invalidated) may change.
  void begin(std::uint64_t window_off, std::uint64_t window_len) {
    std::memcpy(buf.data(), pristine.data(), buf.size());
    may_change.assign({{rw.off, rw.off + rw.len}});
    allow(addr(mw, window_off), window_len);
  }
  // First changed byte outside what may change, or npos.
  std::size_t first_bad() const {
    auto ranges = may_change;
    std::sort(ranges.begin(), ranges.end());
    std::size_t at = 0;
    auto cmp = [&](std::size_t from, std::size_t to) -> std::size_t {
      if (to <= from || std::memcmp(buf.data() + from, pristine.data() + from, to - from) == 0)
        return std::string::npos;
      for (std::size_t i = from; i < to; ++i)
        if (buf[i] != pristine[i]) return i;
      return std::string::npos;
    };
    for (const auto& [b, e] : ranges) {
      if (const auto bad = cmp(at, b); bad != std::string::npos) return bad;
      at = std::max(at, e);
    }
    return cmp(at, buf.size());
  }
  const char* where(std::size_t i) const {
    for (const auto& [a, name] : {std::pair{&recv, "receive slots"},
                                  {&rw, "remote-write region"},
                                  {&ro, "read-only region"},
                                  {&mw, "window's region"},
                                  {&sink, "read sinks"}})
      if (i >= a->off && i < a->off + a->len) return name;
    return "a guard between regions";
  }
};

struct Events {
  std::mutex mu;
  std::vector<std::pair<ConnRequest*, ConnRequestInfo>> requests;
  std::map<const Qp*, std::vector<CmEventType>> events;
};

struct Posted {
  WcOpcode opcode;
  std::uint64_t capacity;  // receives
  bool srq;
};

struct Side {
  Events ev;  // (before dev: callbacks may run until the device is gone)
  Memory mem;
  std::unique_ptr<Device> dev;
  Tap* tap = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Mr* window = nullptr;
  // per input
  Qp* qp = nullptr;
  Srq* srq = nullptr;
  std::vector<Qp*> spares;
  bool accept_next = false;
  std::map<std::uint64_t, Posted> posted;  // by wr_id
  std::uint32_t sends = 0, reads = 0, recvs = 0;
  std::uint64_t bound_off = 0, bound_len = 0;  // the window's last bind (kept across inputs)
};

struct Pair {
  Side s[2];
};

Pair* g_pair = nullptr;
long g_recycle = 250;
bool g_trace = false;  // SOFTRNIC_FUZZ_TRACE=1: each operation and event on stderr
#define TRACE(...)                                               \
  do {                                                           \
    if (g_trace) {                                               \
      char trace_line[512];                                      \
      std::snprintf(trace_line, sizeof trace_line, __VA_ARGS__); \
      std::fprintf(stderr, "stateful: %s\n", trace_line);        \
    }                                                            \
  } while (0)
std::uint64_t g_inputs = 0;
std::uint64_t g_wr_id = 1;

void open_side(Side& s, std::uint16_t port) {
  nd::NetdevConfig c;
  c.kind = "loopback";
  c.ip = "127.0.0.1";
  c.port = port;
  c.max_datagram = kMaxDatagram;
  std::string err;
  auto inner = nd::make_netdev(c, err);
  FUZZ_CHECK_MSG(inner != nullptr, "%s", err.c_str());
  auto tap = std::make_unique<Tap>(std::move(inner));
  s.tap = tap.get();
  DeviceConfig dc;
  dc.initial_rto = std::chrono::microseconds(2000);
  dc.min_rto = std::chrono::microseconds(500);
  dc.retry_limit = 4;
  dc.connect_timeout = std::chrono::milliseconds(2000);
  s.dev = Device::open(dc, std::move(tap));
  s.pd = s.dev->alloc_pd();
  s.cq = s.dev->create_cq(65536, nullptr);
  FUZZ_CHECK(s.pd && s.cq);
  Memory& m = s.mem;
  const auto reg = [&](Area& a, Access acc) {
    FUZZ_CHECK(s.dev->reg_mr(s.pd, m.buf.data() + a.off, a.len, acc, a.mr) == Status::ok);
  };
  reg(m.rw, Access::local_write | Access::remote_write);
  reg(m.ro, Access::local_read | Access::remote_read);
  // One local-write region over the receive slots, the window's region and the read sinks (and
  // the guards between them): each registration reads /proc/self/maps.
  Area local{m.recv.off, m.sink.off + m.sink.len - m.recv.off, nullptr};
  reg(local, Access::local_write);
  m.recv.mr = m.mw.mr = m.sink.mr = local.mr;
  FUZZ_CHECK(s.dev->alloc_mw(s.pd, s.window) == Status::ok);
  FUZZ_CHECK(s.dev->listen(kQual, [ev = &s.ev](ConnRequest* r, const ConnRequestInfo& info) {
    std::lock_guard lk(ev->mu);
    ev->requests.emplace_back(r, info);
  }) == Status::ok);
}

// A pair is closed in the background: a device waits up to a second in its destructor for its
// peers to acknowledge resets, which a hostile input may have left unanswerable. (The new pair
// takes other ports meanwhile.) At most kMaxClosing at once; all are waited for at exit.
constexpr int kMaxClosing = 8;
std::atomic<int> g_closing{0};

void wait_closing(int below) {
  while (g_closing.load() >= below) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void close_pair_async() {
  wait_closing(kMaxClosing);
  g_closing++;
  std::thread([old = g_pair] {
    const auto t0 = std::chrono::steady_clock::now();
    delete old;
    TRACE("pair closed in %lld us",
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count()));
    g_closing--;
  }).detach();
  g_pair = nullptr;
}

void close_pair() {
  delete g_pair;
  g_pair = nullptr;
  wait_closing(1);
}

Pair& pair() {
  if (g_pair && g_recycle > 0 && g_inputs % static_cast<std::uint64_t>(g_recycle) == 0) {
    if (g_recycle == 1)
      close_pair();  // reproducing: nothing of the last input's pair runs on
    else
      close_pair_async();
  }
  if (!g_pair) {
    const auto t0 = std::chrono::steady_clock::now();
    g_pair = new Pair;
    open_side(g_pair->s[0], 47100);
    open_side(g_pair->s[1], 47200);
    TRACE("pair opened in %lld us",
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count()));
    // Closed at exit before the loopback fabric (a function-local static made by the first
    // netdev, so destroyed after this handler runs).
    static const bool registered = (std::atexit(close_pair), true);
    (void)registered;
  }
  return *g_pair;
}

// ---- completions ----
void reap(Side& s) {
  Wc wc[64];
  for (;;) {
    const std::size_t n = s.dev->poll_cq(s.cq, wc);
    for (std::size_t i = 0; i < n; ++i) {
      const Wc& c = wc[i];
      TRACE("completion wr_id %llu opcode %d status %s len %u", static_cast<unsigned long long>(c.wr_id),
            static_cast<int>(c.opcode), std::string(to_string(c.status)).c_str(), c.byte_len);
      auto it = s.posted.find(c.wr_id);
      FUZZ_CHECK_MSG(it != s.posted.end(), "completion (opcode %d, status %s) of wr_id %llu never posted or twice",
                     static_cast<int>(c.opcode), std::string(to_string(c.status)).c_str(),
                     static_cast<unsigned long long>(c.wr_id));
      FUZZ_CHECK_MSG(it->second.opcode == c.opcode, "wr_id %llu posted as %d completed as %d",
                     static_cast<unsigned long long>(c.wr_id), static_cast<int>(it->second.opcode),
                     static_cast<int>(c.opcode));
      if (c.opcode == WcOpcode::recv && c.status == WcStatus::success)
        FUZZ_CHECK_MSG(c.byte_len <= it->second.capacity, "receive of %u bytes into %llu", c.byte_len,
                       static_cast<unsigned long long>(it->second.capacity));
      if (c.srq) s.dev->srq_reaped(c.srq, 1);
      s.posted.erase(it);
    }
    if (n < std::size(wc)) return;
  }
}

bool established(Side& s, const Qp* qp) {
  std::lock_guard lk(s.ev.mu);
  const auto it = s.ev.events.find(qp);
  return it != s.ev.events.end() && std::count(it->second.begin(), it->second.end(), CmEventType::established) > 0;
}

Status make_qp(Side& s, Srq* srq, std::uint32_t ord, std::uint32_t ird, Qp*& out,
               AllocPolicy policy = AllocPolicy::arrival) {
  QpInit qi;
  qi.pd = s.pd;
  qi.send_cq = qi.recv_cq = s.cq;
  qi.max_send_wr = 64;
  qi.max_recv_wr = 64;
  qi.max_sge = 2;
  qi.srq = srq;
  qi.ord = ord;
  qi.ird = ird;
  qi.alloc_policy = policy;
  qi.on_event = [ev = &s.ev](Qp* qp, const CmEvent& e) {
    TRACE("event on QP %p: %s %s", static_cast<void*>(qp), std::string(to_string(e.type)).c_str(), e.reason.c_str());
    std::lock_guard lk(ev->mu);
    ev->events[qp].push_back(e.type);
  };
  return s.dev->create_qp(qi, out);
}

// Connection requests the listeners saw: the main one is accepted, others accepted on a spare QP
// when the program asked, else rejected.
void serve_requests(Pair& p, std::uint64_t token, bool& main_accepted) {
  for (int i = 0; i < 2; ++i) {
    Side& s = p.s[i];
    std::vector<std::pair<ConnRequest*, ConnRequestInfo>> reqs;
    {
      std::lock_guard lk(s.ev.mu);
      reqs.swap(s.ev.requests);
    }
    for (auto& [r, info] : reqs) {
      std::uint64_t t = 0;
      if (info.private_data.size() == sizeof t) std::memcpy(&t, info.private_data.data(), sizeof t);
      if (i == 1 && !main_accepted && t == token && info.remote == p.s[0].dev->address()) {
        FUZZ_CHECK(s.dev->accept(r, s.qp, {}) == Status::ok);
        main_accepted = true;
        continue;
      }
      Qp* spare = nullptr;
      if (s.accept_next && s.spares.size() < 2 && make_qp(s, nullptr, 1, 1, spare) == Status::ok) {
        s.accept_next = false;
        s.spares.push_back(spare);
        const Status st = s.dev->accept(r, spare, {});
        TRACE("side %d: a request from %s accepted on spare QP %p: %s", i, nd::to_string(info.remote).c_str(),
              static_cast<void*>(spare), std::string(to_string(st)).c_str());
        continue;
      }
      s.dev->reject(r, {});
    }
  }
}

// One round of both engines, requests served, completions checked. True when something moved.
bool round(Pair& p, std::uint64_t token, bool& main_accepted) {
  const bool a = p.s[0].dev->progress();
  const bool b = p.s[1].dev->progress();
  serve_requests(p, token, main_accepted);
  reap(p.s[0]);
  reap(p.s[1]);
  return a || b;
}

void settle(Pair& p, std::uint64_t token, bool& main_accepted, int max_rounds) {
  int quiet = 0;
  for (int i = 0; i < max_rounds && quiet < 3; ++i) quiet = round(p, token, main_accepted) ? 0 : quiet + 1;
}

// ---- frames toward a target, from its peer's address ----
struct Ctx {
  Ctx(Pair& pr, int t) : p(pr), tgt(pr.s[t]), snd(pr.s[1 - t]), tl(tgt.tap->live()), sl(snd.tap->live()) {
    // Before the target acknowledged anything it expects the sender's first sequence number.
    if (!tl.expects_known) tl.expects = sl.next_seq;
  }
  Pair& p;
  Side& tgt;
  Side& snd;
  Live tl, sl;  // live state of target and sender
};

void send_frame(Ctx& c, const w::FrameHeader& h, std::span<const std::uint8_t> body) {
  std::vector<std::uint8_t> d(w::kFrameOverhead + body.size());
  w::write_frame_header(d, h);
  if (!body.empty()) std::memcpy(d.data() + w::kFrameHeaderLen, body.data(), body.size());
  w::seal_frame(d, w::kFrameHeaderLen + body.size());
  TRACE(
      "inject type %d flags %#x dst %u src %u seq %u ack %u, %zu body bytes (%02x %02x ...) [live: target qpn %u "
      "expects %u next %u; sender qpn %u next %u]",
      static_cast<int>(h.type), h.flags, h.dst_qpn, h.src_qpn, h.seq, h.ack, body.size(), body.size() ? body[0] : 0,
      body.size() > 1 ? body[1] : 0, c.tl.qpn, c.tl.expects, c.tl.next_seq, c.sl.qpn, c.sl.next_seq);
  if (d.size() <= kMaxDatagram) c.snd.tap->inject(c.tgt.dev->address(), d);
}

// Header fields: mostly the live values (the target's QP, the sender's QP, the sequence number the
// target expects, an ack of what the target sent), each replaceable by input.
w::FrameHeader header(Reader& r, const Ctx& c, w::FrameType type) {
  const std::uint8_t sel = r.u8();
  w::FrameHeader h;
  h.type = type;
  h.flags = (sel & 0x80) ? r.u8() : w::kFlagAckValid;
  h.dst_qpn = (sel & 0x01) ? r.u32() : c.tl.qpn;
  h.src_qpn = (sel & 0x02) ? r.u32() : c.sl.qpn;
  const auto ds = static_cast<std::int16_t>(r.u16());
  switch ((sel >> 2) & 3) {
    case 0: h.seq = c.tl.expects + static_cast<std::uint32_t>(ds % 8); break;
    case 1: h.seq = c.tl.expects + static_cast<std::uint32_t>(ds); break;
    case 2: h.seq = c.sl.next_seq + static_cast<std::uint32_t>(ds); break;
    default: h.seq = r.u32(); break;
  }
  const auto da = static_cast<std::int16_t>(r.u16());
  h.ack = (sel & 0x10) ? r.u32() : c.tl.next_seq - static_cast<std::uint32_t>(da % 64 < 0 ? -(da % 64) : da % 64);
  return h;
}

// An STag and tagged offset of the target: one of its regions (or its window) near or off its
// bounds, its sink, a key-flipped STag, or anything.
std::pair<std::uint32_t, std::uint64_t> stag_to(Reader& r, const Side& t) {
  const std::uint8_t sel = r.u8();
  const std::int64_t off = (sel & 0x80) ? static_cast<std::int32_t>(r.u32()) : static_cast<std::int16_t>(r.u16());
  const Memory& m = t.mem;
  const auto at = [&](const Area& a) {
    return std::pair{t.dev->query_mr(a.mr).stag, m.addr(a) + static_cast<std::uint64_t>(off)};
  };
  switch (sel % 8) {
    case 0: return at(m.rw);
    case 1: return at(m.ro);
    case 2: return at(m.recv);
    case 3: return {t.dev->query_mr(t.window).stag, m.addr(m.mw, t.bound_off) + static_cast<std::uint64_t>(off)};
    case 4: return at(m.sink);
    case 5: {
      auto [stag, to] = at(m.rw);
      return {stag ^ (1u + r.u8()), to};  // another key, or another index
    }
    case 6: return {r.u32(), r.u64()};
    default: return {t.dev->query_mr(m.rw.mr).stag, m.addr(m.rw) + (static_cast<std::uint64_t>(r.u16()) % kArea)};
  }
}

void inject_ddp(Reader& r, Ctx& c) {
  const w::FrameHeader h = header(r, c, w::FrameType::ddp);
  const std::uint8_t sel = r.u8();
  const bool last = (sel & 0x80) == 0;
  const std::size_t len = r.u16() % 1400;
  const std::uint8_t fill = r.u8();
  std::vector<std::uint8_t> body(sizeof(w::DdpUntaggedHdr) + sizeof(w::ReadRequestHdr));
  std::size_t hl = 0;
  const auto msn_delta = static_cast<std::int8_t>(r.u8());
  const std::uint32_t mo = (sel & 0x40) ? r.u32() : r.u16() % 2048;
  const auto untagged = [&](w::RdmapOpcode op, std::uint32_t qn, std::uint32_t msn, std::uint32_t inv) {
    return w::encode_untagged(body, op, last, qn, msn, mo, inv);
  };
  switch (sel % 10) {
    case 0:
    case 1: {
      const auto [stag, to] = stag_to(r, c.tgt);
      hl =
          w::encode_tagged(body, sel % 10 ? w::RdmapOpcode::read_response : w::RdmapOpcode::rdma_write, last, stag, to);
      break;
    }
    case 2:
    case 3:
    case 4:
    case 5: {
      static constexpr w::RdmapOpcode kSends[] = {w::RdmapOpcode::send, w::RdmapOpcode::send_invalidate,
                                                  w::RdmapOpcode::send_se, w::RdmapOpcode::send_se_invalidate};
      const auto op = kSends[sel % 10 - 2];
      const std::uint32_t inv = (r.u8() & 1) ? r.u32() : c.tgt.dev->query_mr(c.tgt.window).stag;
      hl = untagged(op, w::kQnSend, 1 + c.snd.sends + static_cast<std::uint32_t>(msn_delta), inv);
      break;
    }
    case 6: {
      hl = untagged(w::RdmapOpcode::read_request, w::kQnReadRequest,
                    1 + c.snd.reads + static_cast<std::uint32_t>(msn_delta), 0);
      const std::uint8_t rs = r.u8();
      const std::uint32_t sink_stag = (rs & 1) ? r.u32() : c.snd.dev->query_mr(c.snd.mem.sink.mr).stag;
      const std::uint64_t sink_to = c.snd.mem.addr(c.snd.mem.sink) + static_cast<std::int16_t>(r.u16());
      const std::uint32_t size = (rs & 2) ? r.u32() : r.u16() % 12000;
      const auto [src_stag, src_to] = stag_to(r, c.tgt);
      const w::ReadRequestHdr rr{w::Be32(sink_stag), w::Be64(sink_to), w::Be32(size), w::Be32(src_stag),
                                 w::Be64(src_to)};
      std::memcpy(body.data() + hl, &rr, sizeof rr);
      hl += sizeof rr;
      break;
    }
    case 7: {
      hl = untagged(w::RdmapOpcode::terminate, w::kQnTerminate, 1, 0);
      const w::TerminateHdr th{w::Be32(r.u32())};
      std::memcpy(body.data() + hl, &th, sizeof th);
      hl += sizeof th;
      break;
    }
    case 8: {  // an untagged header with any QN (bad_qn, or the wrong queue for the opcode)
      hl = untagged(static_cast<w::RdmapOpcode>(r.u8() & 0x0F), r.u8() % 4, 1 + static_cast<std::uint32_t>(msn_delta),
                    0);
      break;
    }
    default: {  // raw DDP and RDMAP control bytes, then whatever header bytes follow
      const auto raw = r.bytes(2 + r.u8() % 40);
      body.assign(raw.begin(), raw.end());
      hl = body.size();
      break;
    }
  }
  body.resize(hl);
  body.resize(hl + len, fill);
  send_frame(c, h, body);
}

void inject_ack(Reader& r, Ctx& c) {
  w::FrameHeader h = header(r, c, w::FrameType::ack);
  const std::uint8_t sel = r.u8();
  const std::size_t n = sel % 12;
  std::vector<std::uint8_t> body;
  if (n > 0 || (sel & 0x80)) {
    std::vector<w::SackRange> blocks(std::min<std::size_t>(n, w::kMaxSackBlocks));
    const std::uint32_t base = c.tl.next_seq - r.u8() % 32;
    for (auto& b : blocks) {
      b.start = base + static_cast<std::uint32_t>(static_cast<std::int8_t>(r.u8()));
      b.end = b.start + 1 + r.u8() % 16;
      if (r.u8() == 0xFF) b.end = b.start - 1;  // backwards
    }
    body.resize(4 + 8 * blocks.size());
    w::encode_sack(body, blocks);
    if (sel & 0x40) body[0] = r.u8();  // a count that does not match
    if (sel & 0x20) body[1 + r.u8() % 3] = r.u8();
    if (sel & 0x10) body.push_back(r.u8());
  }
  send_frame(c, h, body);
}

void inject_cm(Reader& r, Ctx& c) {
  const std::uint8_t sel = r.u8(), sel2 = r.u8();
  const std::uint8_t op = (sel2 & 0x80) ? r.u8() : static_cast<std::uint8_t>(1 + sel2 % 8);
  w::FrameHeader h;
  h.type = w::FrameType::cm;
  h.flags = (sel & 0x01) ? r.u8() : 0;
  h.dst_qpn = (sel & 0x02) ? r.u32() : (sel & 0x04) ? 0 : c.tl.qpn;
  h.src_qpn = (sel & 0x08) ? r.u32() : c.sl.qpn;
  // seq: the cookie the target gave (a request), the exact next sequence number (a reset), or any.
  const auto ds = static_cast<std::int8_t>(r.u8());
  h.seq = (sel & 0x10)                                                ? r.u32()
          : op == static_cast<std::uint8_t>(w::CmOp::connect_request) ? c.tl.cookie
                                                                      : c.tl.expects + static_cast<std::uint32_t>(ds);
  h.ack = c.tl.next_seq - r.u8() % 8;
  const std::size_t pd_len = r.u8() % 64;
  const std::uint16_t pd_field = (sel & 0x20) ? r.u16() : static_cast<std::uint16_t>(pd_len);
  const w::CmHdrWire cm{op,
                        static_cast<std::uint8_t>((sel2 & 0x40) ? r.u8() : 0),
                        w::Be16(pd_field),
                        w::Be16(r.u8() % 8),
                        w::Be16(r.u8() % 8),
                        w::Be64((sel & 0x40) ? r.u64() : kQual),
                        w::Be32((sel & 0x80) ? r.u32() : c.tl.conn_id),
                        w::Be32((sel2 & 0x20) ? r.u32() : c.sl.next_seq)};
  std::vector<std::uint8_t> body(sizeof cm);
  std::memcpy(body.data(), &cm, sizeof cm);
  const auto pd = r.bytes(pd_len);
  body.insert(body.end(), pd.begin(), pd.end());
  send_frame(c, h, body);
}

// ---- legitimate work requests ----
void post_send(Reader& r, Side& s, Side& peer) {
  const std::uint8_t kind = r.u8() % 6;
  const std::uint32_t len = r.u16() % 6000;
  const std::uint16_t off = r.u16(), roff = r.u16();
  const std::uint8_t flags = r.u8();
  if (!s.qp) return;
  const std::uint64_t id = g_wr_id++;
  Memory& m = s.mem;
  SendWr wr;
  wr.wr_id = id;
  wr.fence = (flags & 1) != 0;
  Sge g{s.dev->query_mr(m.ro.mr).stag, m.addr(m.ro, off % kArea), std::min<std::uint32_t>(len, kArea)};
  wr.sgl = {&g, 1};
  WcOpcode wc = WcOpcode::send;
  // Remote offsets mostly inside the peer's region, sometimes across its end (the peer refuses).
  const std::uint64_t ro = (flags & 2) ? roff : roff % kArea;
  switch (kind) {
    case 0: wr.opcode = SendOpcode::send; break;
    case 1: wr.opcode = SendOpcode::send_solicited; break;
    case 2:
      wr.opcode = SendOpcode::rdma_write;
      wr.rkey = peer.dev->query_mr(peer.mem.rw.mr).stag;
      wr.remote_addr = peer.mem.addr(peer.mem.rw, ro);
      wc = WcOpcode::rdma_write;
      break;
    case 3:
    case 4: {
      wr.opcode = SendOpcode::rdma_read;
      g.lkey = s.dev->query_mr(m.sink.mr).stag;
      g.addr = m.addr(m.sink, off % kArea);
      wr.rkey = peer.dev->query_mr(kind == 3 ? peer.mem.ro.mr : peer.mem.rw.mr).stag;
      wr.remote_addr = peer.mem.addr(kind == 3 ? peer.mem.ro : peer.mem.rw, ro);
      wc = WcOpcode::rdma_read;
      break;
    }
    default:
      wr.opcode = SendOpcode::send_invalidate;
      wr.invalidate_stag = (flags & 4) ? r.u32() : peer.dev->query_mr(peer.window).stag;
      break;
  }
  const Status st = s.dev->post_send(s.qp, wr);
  TRACE("post_send kind %d len %u wr_id %llu: %s", kind, g.length, static_cast<unsigned long long>(id),
        std::string(to_string(st)).c_str());
  if (st != Status::ok) return;
  s.posted[id] = {wc, 0, false};
  if (wc == WcOpcode::rdma_read) {
    s.reads++;
    m.allow(g.addr, g.length);
  } else if (wc == WcOpcode::send) {
    s.sends++;
  }
}

void post_recv(Side& s, std::uint8_t sges, std::uint16_t l1, std::uint16_t l2) {
  if (!s.qp || s.recvs >= kSlots) return;
  const std::size_t slot = s.recvs++;
  Memory& m = s.mem;
  const std::uint32_t stag = s.dev->query_mr(m.recv.mr).stag;
  const Sge g[2] = {{stag, m.addr(m.recv, slot * kSlot + 8), l1 % 241u},
                    {stag, m.addr(m.recv, slot * kSlot + 256), l2 % 241u}};
  const std::size_t n = 1 + sges % 2;
  const std::uint64_t id = g_wr_id++;
  const RecvWr wr{id, {g, n}};
  const Status st = s.srq ? s.dev->post_srq_recv(s.srq, wr) : s.dev->post_recv(s.qp, wr);
  TRACE("post_recv %zu SGEs wr_id %llu: %s", n, static_cast<unsigned long long>(id),
        std::string(to_string(st)).c_str());
  if (st != Status::ok) return;
  std::uint64_t cap = 0;
  for (std::size_t i = 0; i < n; ++i) {
    m.allow(g[i].addr, g[i].length);
    cap += g[i].length;
  }
  s.posted[id] = {WcOpcode::recv, cap, s.srq != nullptr};
}

void bind_window(Side& s, std::uint16_t off, std::uint16_t len) {
  if (!s.qp) return;
  const std::uint64_t o = off % kArea, l = len % (kArea + 1);
  const std::uint64_t id = g_wr_id++;
  if (s.dev->bind_mw(s.qp, s.window, s.mem.mw.mr, s.mem.addr(s.mem.mw, o), l,
                     Access::remote_write | Access::remote_read, id, true) != Status::ok)
    return;
  s.posted[id] = {WcOpcode::bind, 0, false};
  if (l > 0) {
    s.bound_off = o;
    s.bound_len = l;
    s.mem.allow(s.mem.addr(s.mem.mw, o), l);
  }
}

void check_memory(const Side& s, int i) {
  const std::size_t bad = s.mem.first_bad();
  FUZZ_CHECK_MSG(bad == std::string::npos, "side %d: byte %zu (%s) changed to 0x%02x without a right to", i, bad,
                 s.mem.where(bad), s.mem.buf[bad]);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* e = std::getenv("SOFTRNIC_FUZZ_RECYCLE")) g_recycle = std::atol(e);
  if (const char* e = std::getenv("SOFTRNIC_FUZZ_TRACE")) g_trace = *e == '1';
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Pair& p = pair();
  ++g_inputs;
  Reader r(data, size);
  const std::uint64_t token = g_inputs;
  bool main_accepted = false;

  // ---- a fresh connected QP pair ----
  const std::uint8_t flags = r.u8();
  const std::uint32_t ord = r.u8() % 5, ird = r.u8() % 5;
  const std::uint8_t nrecv[2] = {static_cast<std::uint8_t>(r.u8() % 9), static_cast<std::uint8_t>(r.u8() % 9)};
  for (Side& s : p.s) {
    s.mem.begin(s.bound_off, s.bound_len);
    s.tap->begin();
    s.posted.clear();
    s.spares.clear();
    s.sends = s.reads = s.recvs = 0;
    s.accept_next = false;
    s.qp = nullptr;
    s.srq = nullptr;
    std::lock_guard lk(s.ev.mu);
    s.ev.events.clear();
    s.ev.requests.clear();
  }
  if (flags & 1) {
    SrqInit si;
    si.pd = p.s[1].pd;
    si.max_wr = 64;
    si.max_sge = 2;
    FUZZ_CHECK(p.s[1].dev->create_srq(si, p.s[1].srq) == Status::ok);
  }
  FUZZ_CHECK(make_qp(p.s[0], nullptr, ord, ird, p.s[0].qp) == Status::ok);
  FUZZ_CHECK(make_qp(p.s[1], p.s[1].srq, ird, ord, p.s[1].qp,
                     (flags & 2) ? AllocPolicy::gap_fill : AllocPolicy::arrival) == Status::ok);
  if (flags & 4) FUZZ_CHECK(p.s[1].dev->set_recv_watermarks(p.s[1].qp, 2, 4) == Status::ok);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < nrecv[i]; ++k) post_recv(p.s[i], 0, 240, 0);
  std::uint8_t tok[sizeof token];
  std::memcpy(tok, &token, sizeof token);
  FUZZ_CHECK(p.s[0].dev->connect(p.s[0].qp, p.s[1].dev->address(), kQual, tok, std::chrono::milliseconds(2000)) ==
             Status::ok);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; !(established(p.s[0], p.s[0].qp) && established(p.s[1], p.s[1].qp)); ++i) {
    round(p, token, main_accepted);
    if (i > 64) std::this_thread::yield();
    FUZZ_CHECK_MSG(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5),
                   "no connection between fresh QPs after 5 s (state %s / %s)",
                   std::string(to_string(p.s[0].dev->qp_state(p.s[0].qp))).c_str(),
                   std::string(to_string(p.s[1].dev->qp_state(p.s[1].qp))).c_str());
  }

  TRACE("connected in %lld us",
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count()));

  // ---- the program ----
  std::chrono::microseconds waited{0};
  for (int n = 0; n < kMaxOps && !r.done(); ++n) {
    const auto op = static_cast<Op>(r.u8() % kOpCount);
    TRACE("op %d", static_cast<int>(op));
    switch (op) {
      case kProgress: {
        const int k = 1 + r.u8() % 4;
        for (int i = 0; i < k; ++i) round(p, token, main_accepted);
        break;
      }
      case kPostSend: {
        const int s = r.u8() & 1;
        post_send(r, p.s[s], p.s[1 - s]);
        break;
      }
      case kPostRecv: {
        const int s = r.u8() & 1;
        const std::uint8_t sges = r.u8();
        const std::uint16_t l1 = r.u16(), l2 = r.u16();
        post_recv(p.s[s], sges, l1, l2);
        break;
      }
      case kDropOwn: {
        const int s = r.u8() & 1;
        p.s[s].tap->set_drop(r.u8() & 1);
        break;
      }
      case kBindWindow: {
        const int s = r.u8() & 1;
        const std::uint16_t off = r.u16(), len = r.u16();
        bind_window(p.s[s], off, len);
        break;
      }
      case kDisconnect: {
        const int s = r.u8() & 1;
        const int how = r.u8() % 3;
        if (how < 2)
          p.s[s].dev->disconnect(p.s[s].qp, how == 1);
        else
          p.s[s].dev->modify_qp(p.s[s].qp, QpState::error);
        break;
      }
      case kAcceptNext: p.s[r.u8() & 1].accept_next = true; break;
      case kWait: {
        const auto us = std::chrono::microseconds(500 * (1 + r.u8() % 4));
        if (waited + us > std::chrono::microseconds(3000)) break;
        waited += us;
        std::this_thread::sleep_for(us);
        break;
      }
      default: {  // a frame toward a target, from its peer's address
        const int t = r.u8() & 1;
        Ctx c(p, t);
        switch (op) {
          case kInjectRaw: {
            const bool seal = r.u8() & 1;
            const auto b = r.bytes(r.u16() % (kMaxDatagram + 1));
            std::vector<std::uint8_t> d(b.begin(), b.end());
            if (seal && d.size() >= w::kFrameOverhead) w::seal_frame(d, d.size() - w::kFrameTrailerLen);
            c.snd.tap->inject(c.tgt.dev->address(), d);
            break;
          }
          case kInjectFrame: {
            const std::uint8_t type = r.u8();
            const w::FrameHeader h = header(r, c, static_cast<w::FrameType>(type < 0xF0 ? 1 + type % 4 : type & 0x0F));
            const auto body = r.bytes(r.u16() % (kMaxDatagram - w::kFrameOverhead + 1));
            send_frame(c, h, body);
            break;
          }
          case kInjectDdp: inject_ddp(r, c); break;
          case kInjectAck: inject_ack(r, c); break;
          case kInjectCm: inject_cm(r, c); break;
          case kInjectStreamCtrl: {
            const w::FrameHeader h = header(r, c, w::FrameType::stream_ctrl);
            const std::uint8_t sel = r.u8();
            const w::StreamCtrlWire sc{w::Be32((sel & 1) ? r.u32() : 1)};
            std::vector<std::uint8_t> body(sizeof sc);
            std::memcpy(body.data(), &sc, sizeof sc);
            if (sel & 2) body.resize(sel >> 4);  // short or long
            send_frame(c, h, body);
            break;
          }
          default: break;
        }
        break;
      }
    }
  }

  // ---- close, check, clean up ----
  settle(p, token, main_accepted, 64);
  for (Side& s : p.s) {
    s.accept_next = false;  // requests still arriving are rejected: no spare QP after this
    s.tap->set_drop(false);
    s.dev->disconnect(s.qp, false);
    for (Qp* q : s.spares) {
      const Status st = s.dev->disconnect(q, false);
      TRACE("disconnect of spare QP %p: %s", static_cast<void*>(q), std::string(to_string(st)).c_str());
    }
  }
  settle(p, token, main_accepted, 64);
  for (int i = 0; i < 2; ++i) {
    Side& s = p.s[i];
    // Every QP is closed now; a reset flushes what was posted after its close (a QP a graceful
    // close left idle still takes receives, for its next connection).
    for (Qp* q : s.spares) {
      const Status st = s.dev->reset_qp(q);
      FUZZ_CHECK_MSG(st == Status::ok, "side %d: reset_qp of a spare QP after an abrupt disconnect: %s (QP state %s)",
                     i, std::string(to_string(st)).c_str(), std::string(to_string(s.dev->qp_state(q))).c_str());
    }
    const Status rs = s.dev->reset_qp(s.qp);
    FUZZ_CHECK_MSG(rs == Status::ok, "side %d: reset_qp after an abrupt disconnect: %s (QP state %s)", i,
                   std::string(to_string(rs)).c_str(), std::string(to_string(s.dev->qp_state(s.qp))).c_str());
    reap(s);
    std::size_t srq_left = 0;
    for (const auto& [id, x] : s.posted) {
      if (x.srq) {
        srq_left++;
        continue;
      }
      FUZZ_CHECK_MSG(false, "side %d: wr_id %llu (opcode %d) never completed after the QP closed", i,
                     static_cast<unsigned long long>(id), static_cast<int>(x.opcode));
    }
    check_memory(s, i);
    FUZZ_CHECK(s.dev->destroy_qp(s.qp) == Status::ok);
    for (Qp* q : s.spares) FUZZ_CHECK(s.dev->destroy_qp(q) == Status::ok);
    if (s.srq) {
      // What the QP did not take is still on the SRQ.
      const SrqCounts sc = s.dev->srq_counts(s.srq);
      FUZZ_CHECK_MSG(sc.available == srq_left, "side %d: %u buffers on the SRQ, %zu receives not completed", i,
                     sc.available, srq_left);
      FUZZ_CHECK(s.dev->destroy_srq(s.srq) == Status::ok);
    }
    s.qp = nullptr;
    s.srq = nullptr;
  }
  settle(p, token, main_accepted, 16);
  TRACE("input done in %lld us",
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count()));
  return 0;
}
