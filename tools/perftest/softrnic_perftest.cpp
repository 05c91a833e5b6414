// softrnic_perftest: perftest's exchanges, spoken through softrnic's own RNIC API, so that
// unmodified perftest 4.5-0.17 tools (ib_send_lat, ib_write_bw, ib_read_bw, ib_atomic_bw) can be
// its peer in either role: with `-R` (rdma_cm) over iWARP/MPA/TCP against Linux siw, and over
// RoCEv2 (--roce) against Linux rxe both with `-R` (rdma_cm, IB CM over QP1) and without (the
// out-of-band TCP exchange). The CLI follows perftest's: --roce picks the wire, -R the exchange
// (over iWARP always rdma_cm, -R or not). atomic_bw is RoCEv2 only.
//
// The -R exchange (perftest's perftest_communication.c, send_lat.c, write_bw.c, read_bw.c), on
// one port (TCP over iWARP, the CM's service ID over RoCEv2) for two rdma_cm connections:
//   C1   control ("comm") connection; every exchange Xk on it is one Send client -> server, then
//        one Send server -> client (at most 56 bytes each; perftest keeps one receive posted)
//   X1   version "6.06" (16 B)   X2 cycle buffer (BE int)   X3 cache line (BE int)
//   X4   MTU ("3\0")             X5 struct pingpong_dest, all zero
//   C2   data connection (the perftest server listens again only after its X5 reply)
//   X6   zero dest               X7..X9 real dests (rkey, vaddr of the data buffer, BE)
//   send_lat: X10 (receives posted), Send ping-pong on the data QP, X11 (close)
//   write_bw / read_bw: the client RDMA Writes / Reads the server's buffer, X10, the client's
//   report (X11 size, X12 iterations, X13 peak, X14 average, X15 message rate: BE u64 and
//   byte-swapped doubles), X16 (close)
// The client closes first; each side waits for the peer to close both connections.
//
// Over RoCEv2 with -R the same exchange, the connections through IB CM (REQ/REP/RTU with
// rdma_cm's header in the REQ's private data; perftest adds none of its own): the path MTU is the
// CM's, the X4 MTU only reported, X5..X9's dests carry our QPN and the GID ::ffff:IPv4.
//
// The out-of-band exchange (--roce; perftest without -R, -x GID_INDEX on rxe): one TCP connection
// to the server's port, no control QP. Each exchange Yk: the client write()s its message, the
// server read()s it and write()s its own of the same size, the client read()s it; perftest
// takes a short read() as a failure, so each message goes in one write.
//   Y1   version "6.06" (16 B, NUL-padded)   Y2 cycle buffer (BE int, 4 B)
//   Y3   cache line (BE int, 4 B)             Y4 MTU: the ibv_mtu enum as "%d" in 2 B ("3\0": 1024)
//   Y5   dest (108 B): "%04x:%04x:%06x:%06x:%08x:%016llx:" LID:out_reads:QPN:PSN:RKey:VAddr, the 16
//        GID bytes as "%02x:" each, then "%08x:" SRQN and a NUL; both sides then move their QP
//        to RTR/RTS with the peer's QPN, PSN and GID (perftest's bw server stops at RTR)
//   Y6, Y7 the same dests again
//   send_lat: Y8 (receives posted), Send ping-pong, Y9 (close)
//   write_bw / read_bw / atomic_bw: the client Writes / Reads / atomically updates the server's
//   buffer, Y8, the client's report (Y9 size, Y10 iterations: BE u64; Y11 peak, Y12 average, Y13
//   message rate: byte-swapped doubles), Y14 (close)
// then each side write()s "done\0" (5 B), which perftest never reads, and closes.
//
// Data checks (perftest itself checks no payload):
//   send_lat: every message received is exactly S bytes, is not the fill the receive buffer held,
//     and all are byte-identical (perftest sends the same buffer every time); with
//     --expect-pattern (peer: softrnic_perftest) they are exactly softrnic's pattern.
//   write_bw server: the ranges perftest's offsets write no longer hold the fill, the rest of
//     the buffer and the guards around it still do (exact pattern with --expect-pattern).
//   write_bw client: every Write completed successfully (perftest's server registers its buffer
//     REMOTE_WRITE only: it cannot be read back).
//   read_bw client: every Read completed with S bytes, replaced the fill, and Reads of the same
//     source offset brought identical bytes; with --prime-remote the peer's buffer is first
//     written with softrnic's pattern (perftest's iWARP MR is also REMOTE_WRITE), and every Read
//     must bring exactly that pattern back (also with --expect-pattern).
//   read_bw server: the buffer served (softrnic's pattern) is unchanged, the data QP sent frames.
//   atomic_bw (8-byte atomics, the k-th at offset (k mod 64) * 64 with 4 KiB pages, as perftest):
//     client: every value returned after a slot's first is exactly the one predicted from the
//     previous operation on the slot (FetchAdd: that one's plus 1; our CmpSwap compares what the
//     slot holds and swaps in a new value, so it must find it), the first ones are the peer's
//     (perftest: rand() bytes, unchecked; with --expect-pattern softrnic's pattern).
//     server (its words start as softrnic's pattern): FetchAdd: every slot grew by exactly its
//     number of operations, in all the client's iterations; CmpSwap: perftest's compare 0 / swap 0
//     leave every slot unchanged (with --expect-pattern: the last value softrnic swapped in); no
//     other byte changed, the QP sent at least one frame per atomic.
//
// Over RoCEv2 perftest's buffers allow no remote access beyond the test's (write_bw: REMOTE_WRITE,
// read_bw: REMOTE_READ) and hold rand() bytes: --prime-remote fails against them, and the read_bw
// client checks the S bytes, the fill replaced and identical data per source offset.
//
//   softrnic_perftest send_lat|write_bw|read_bw -s -a 10.99.0.1 [-p 18515] [-n N] [-S SIZE]
//   softrnic_perftest send_lat|write_bw|read_bw -c 10.99.0.2 --local 10.99.0.1 [...]
//   softrnic_perftest send_lat|write_bw|read_bw|atomic_bw --roce [-R] [-m 1024] -s -a 10.99.1.1 | -c 10.99.1.2
//   --local 10.99.1.1 (atomic_bw [-A FETCH_AND_ADD|CMP_AND_SWAP] [-o OUTSTANDING])
// Exit status 0 when the exchange completed and the data checks passed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mpa_tool.hpp"
#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

enum class Tool : std::uint8_t { send_lat, write_bw, read_bw, atomic_bw };

constexpr std::uint32_t kCycleBuffer = 4096;  // perftest's cycle_buffer: the page size
constexpr std::uint32_t kCacheLine = 64;
constexpr std::size_t kDestSize = 56;  // sizeof(struct pingpong_dest) on x86-64
constexpr std::size_t kVersionSize = 16;
constexpr std::size_t kKeyMsgSizeGid = 108;  // perftest's KEY_MSG_SIZE_GID: the text dest with the GID
constexpr std::uint32_t kCommSlots = 4;      // comm receives kept posted
constexpr std::uint32_t kCommSlotSize = 64;
constexpr std::uint8_t kFill = 0xA5;  // what receive buffers and written-to regions hold before
constexpr std::size_t kGuard = 4096;  // around the advertised region: must stay the fill

struct Options {
  Tool tool = Tool::send_lat;
  std::string tool_name;
  bool server = false;
  std::string server_addr, listen_addr = "127.0.0.1", local = "127.0.0.1";
  std::uint16_t port = 18515;
  std::uint64_t iters = 0;  // 0: perftest's default for the tool
  std::uint32_t size = 0;   // 0: perftest's default for the tool
  std::uint32_t out_reads = 4;
  double step_timeout = 60;     // s: each comm message, each completion
  double accept_timeout = 120;  // s: server, waiting for a connection request
  double connect_retry = 15;    // s: client, connection refused is retried this long
  double peer_close = -1;       // s: waiting for the peer to close (default: server 30, client 15)
  bool expect_pattern = false, prime_remote = false, verbose = false;
  MpaConfig mpa;
  bool roce = false;         // the RoCEv2 wire (else iWARP/MPA/TCP)
  bool rdma_cm = false;      // -R: perftest's rdma_cm exchange (always so over iWARP; --roce without
                             // -R: its out-of-band TCP exchange, as perftest without -R)
  std::uint32_t mtu = 1024;  // --roce: our path MTU before the exchange takes the smaller one
  bool cmp_swap = false;     // atomic_bw: CMP_AND_SWAP (else perftest's default FETCH_AND_ADD)
};

// perftest's struct pingpong_dest, integers big-endian
struct Dest {
  std::uint32_t lid = 0, out_reads = 0, qpn = 0, psn = 0, rkey = 0;
  std::uint64_t vaddr = 0;
  std::array<std::uint8_t, 16> gid{};
  std::uint32_t srqn = 0, gid_index = 0;
};

void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
void put64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t get64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}
std::array<std::uint8_t, 8> pack_double(double d) {
  std::uint64_t u = 0;
  std::memcpy(&u, &d, sizeof u);
  std::array<std::uint8_t, 8> b{};
  put64(b.data(), u);
  return b;
}
double unpack_double(const std::uint8_t* p) {
  const std::uint64_t u = get64(p);
  double d = 0;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

std::array<std::uint8_t, kDestSize> pack(const Dest& d) {
  std::array<std::uint8_t, kDestSize> b{};
  put32(&b[0], d.lid);
  put32(&b[4], d.out_reads);
  put32(&b[8], d.qpn);
  put32(&b[12], d.psn);
  put32(&b[16], d.rkey);
  put64(&b[24], d.vaddr);
  std::memcpy(&b[32], d.gid.data(), 16);
  put32(&b[48], d.srqn);
  put32(&b[52], d.gid_index);
  return b;
}
Dest unpack(const std::uint8_t* b) {
  Dest d;
  d.lid = get32(&b[0]);
  d.out_reads = get32(&b[4]);
  d.qpn = get32(&b[8]);
  d.psn = get32(&b[12]);
  d.rkey = get32(&b[16]);
  d.vaddr = get64(&b[24]);
  std::memcpy(d.gid.data(), &b[32], 16);
  d.srqn = get32(&b[48]);
  d.gid_index = get32(&b[52]);
  return d;
}

// perftest's out-of-band dest (KEY_PRINT_FMT_GID), 107 characters and the NUL.
std::array<std::uint8_t, kKeyMsgSizeGid> pack_text(const Dest& d) {
  std::array<char, kKeyMsgSizeGid + 8> t{};
  int n = std::snprintf(t.data(), t.size(), "%04x:%04x:%06x:%06x:%08x:%016llx:", d.lid, d.out_reads, d.qpn, d.psn,
                        d.rkey, static_cast<unsigned long long>(d.vaddr));
  for (std::uint8_t g : d.gid) n += std::snprintf(t.data() + n, t.size() - static_cast<std::size_t>(n), "%02x:", g);
  std::snprintf(t.data() + n, t.size() - static_cast<std::size_t>(n), "%08x:", d.srqn);
  std::array<std::uint8_t, kKeyMsgSizeGid> b{};
  std::memcpy(b.data(), t.data(), kKeyMsgSizeGid - 1);
  return b;
}

// The peer's text dest: 23 hex fields, each ended by ':' (perftest parses them with strtol).
bool unpack_text(const std::uint8_t* b, Dest& d, std::string& error) {
  const std::string t(reinterpret_cast<const char*>(b), strnlen(reinterpret_cast<const char*>(b), kKeyMsgSizeGid));
  std::vector<std::uint64_t> f;
  std::size_t pos = 0;
  while (f.size() < 23) {
    const std::size_t colon = t.find(':', pos);
    if (colon == std::string::npos || colon == pos) break;
    const std::string field = t.substr(pos, colon - pos);
    if (field.size() > 16 || field.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) break;
    f.push_back(std::stoull(field, nullptr, 16));
    pos = colon + 1;
  }
  if (f.size() != 23) {
    error = "cannot parse the peer's address message '" + t + "'";
    return false;
  }
  d.lid = static_cast<std::uint32_t>(f[0]);
  d.out_reads = static_cast<std::uint32_t>(f[1]);
  d.qpn = static_cast<std::uint32_t>(f[2]);
  d.psn = static_cast<std::uint32_t>(f[3]);
  d.rkey = static_cast<std::uint32_t>(f[4]);
  d.vaddr = f[5];
  for (std::size_t i = 0; i < 16; ++i) d.gid[i] = static_cast<std::uint8_t>(f[6 + i]);
  d.srqn = static_cast<std::uint32_t>(f[22]);
  return true;
}

// GID ::ffff:a.b.c.d of an IPv4 address (RoCEv2 over IPv4), and back.
std::array<std::uint8_t, 16> mapped_gid(std::uint32_t ip) {
  std::array<std::uint8_t, 16> g{};
  g[10] = g[11] = 0xff;
  put32(&g[12], ip);
  return g;
}
bool gid_ipv4(const std::array<std::uint8_t, 16>& g, std::uint32_t& ip) {
  for (std::size_t i = 0; i < 10; ++i)
    if (g[i]) return false;
  if (g[10] != 0xff || g[11] != 0xff) return false;
  ip = get32(&g[12]);
  return true;
}
std::string gid_string(const std::array<std::uint8_t, 16>& g) {
  std::string s;
  char b[4];
  for (std::size_t i = 0; i < 16; ++i) {
    std::snprintf(b, sizeof b, i ? ":%02x" : "%02x", g[i]);
    s += b;
  }
  return s;
}

// ibv_mtu's enum (IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5), what perftest exchanges, and back.
int mtu_enum(std::uint32_t bytes) {
  int e = 1;
  for (std::uint32_t m = 256; m < bytes && e < 5; m <<= 1) ++e;
  return e;
}
std::uint32_t mtu_bytes(int e) {
  return e >= 1 && e <= 5 ? 128u << e : 0;
}

// softrnic's payload pattern: byte i of the source buffer
std::uint8_t pattern(std::size_t i) {
  return static_cast<std::uint8_t>((i * 7 + (i >> 8) * 13 + 0x3c) & 0xff);
}

std::size_t round_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}

double usec(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

class Perftest {
 public:
  explicit Perftest(const Options& o) : o_(o) {}

  int run() {
    std::string e;
    const std::string& ip = o_.server ? o_.listen_addr : o_.local;
    if (o_.roce) {
      DeviceConfig cfg;
      cfg.wire = Wire::roce;
      cfg.netdev.ip = ip;
      cfg.netdev.port = 4791;
      cfg.roce.mtu = o_.mtu;
      dev_ = Device::open(cfg, e);
    } else {
      dev_ = tools::open_mpa_device(o_.mpa, ip, e);
    }
    if (!dev_) return fail("cannot open the RNIC: " + e);
    if (!setup()) return 1;
    done_ok_ = o_.server ? serve() : drive();
    teardown();  // (the servers check their buffer there, once the peer closed)
    if (!done_ok_ || !verdict_ok_) return 1;
    std::printf("softrnic_perftest: %s %s: %llu x %u B, %s\n", o_.tool_name.c_str(), o_.server ? "server" : "client",
                static_cast<unsigned long long>(iters_), size_, verdict_.c_str());
    return 0;
  }

 private:
  // ---- set-up -----------------------------------------------------------------------------

  bool setup() {
    iters_ = o_.iters ? o_.iters : (o_.tool == Tool::write_bw ? 5000 : 1000);
    size_ = o_.size ? o_.size : (o_.tool == Tool::send_lat ? 2 : o_.tool == Tool::atomic_bw ? kAtomicSize : 65536);
    if (o_.tool == Tool::atomic_bw && size_ != kAtomicSize)
      return fail("atomic_bw: the message size is 8 (perftest's DEF_SIZE_ATOMIC)") == 0;
    if (iters_ < 5) return fail("at least 5 iterations (perftest's MIN_ITER)") == 0;
    const std::uint32_t max_rd = dev_->limits().max_rd;
    reads_ = std::clamp<std::uint32_t>(o_.out_reads, 1, max_rd);
    window_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(128, iters_));  // perftest's tx_depth
    if (takes_ord()) window_ = std::min(window_, reads_);
    rx_depth_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(512, iters_));
    pd_ = dev_->alloc_pd();
    data_scq_ = dev_->create_cq(1024, nullptr);
    data_rcq_ = dev_->create_cq(1024, nullptr);
    if (!pd_ || !data_scq_ || !data_rcq_) return fail("cannot create the PD or CQs") == 0;
    QpInit ci;
    ci.pd = pd_;
    ci.max_send_wr = 4;
    ci.max_recv_wr = kCommSlots;
    ci.max_sge = 1;
    ci.on_event = [this](Qp* q, const CmEvent& ev) { on_event(q, ev); };
    if (!oob()) {  // -R: the control QP (the out-of-band exchange is over a TCP socket instead)
      comm_scq_ = dev_->create_cq(64, nullptr);
      comm_rcq_ = dev_->create_cq(64, nullptr);
      if (!comm_scq_ || !comm_rcq_) return fail("cannot create the control CQs") == 0;
      ci.send_cq = comm_scq_;
      ci.recv_cq = comm_rcq_;
      if (dev_->create_qp(ci, comm_qp_) != Status::ok) return fail("cannot create the control QP") == 0;
    }
    QpInit di = ci;
    di.send_cq = data_scq_;
    di.recv_cq = data_rcq_;
    di.max_send_wr = 256;
    di.max_recv_wr = 1024;
    // perftest asks IRD = ORD = out_reads for read_bw and atomic_bw only (0 otherwise); with the
    // out-of-band exchange they are set at roce_connect with what the exchange told
    di.ord = di.ird = takes_ord() && !oob() ? (o_.server ? max_rd : reads_) : 0;
    if (dev_->create_qp(di, data_qp_) != Status::ok) return fail("cannot create the data QP") == 0;

    if (!oob()) {
      comm_mem_.assign((kCommSlots + 1) * kCommSlotSize, 0);
      if (dev_->reg_mr(pd_, comm_mem_.data(), comm_mem_.size(), Access::local_write, comm_mr_) != Status::ok)
        return fail("cannot register the control buffer") == 0;
      comm_stag_ = dev_->query_mr(comm_mr_).stag;
    }

    // The data buffer: [guard][advertised region R][guard][local area R][receive slots]. R is
    // perftest's BUFF_SIZE: max(S, cycle buffer); the cycle buffer may still grow in X2 (a peer
    // with bigger pages), so R is sized for the largest one accepted.
    region_ = std::max<std::size_t>(size_, kMaxCycle);
    const std::size_t recv_slots = o_.tool == Tool::send_lat ? rx_depth_ : (takes_ord() ? window_ : 0);
    data_mem_.assign(kGuard + region_ + kGuard + region_ + recv_slots * std::size_t{size_}, kFill);
    for (std::size_t i = 0; i < region_; ++i) local()[i] = pattern(i);
    if (takes_ord() && o_.server)  // what Reads fetch, the atomics' first targets
      for (std::size_t i = 0; i < region_; ++i) remote()[i] = pattern(i);
    Access access = Access::local_write | Access::remote_write | Access::remote_read;
    if (o_.tool == Tool::atomic_bw) access = access | Access::remote_atomic;
    if (dev_->reg_mr(pd_, data_mem_.data(), data_mem_.size(), access, data_mr_) != Status::ok)
      return fail("cannot register the data buffer (" + std::to_string(data_mem_.size()) + " bytes)") == 0;
    data_stag_ = dev_->query_mr(data_mr_).stag;
    std::mt19937 rng(static_cast<unsigned>(Clock::now().time_since_epoch().count()));
    my_.lid = 0;
    my_.out_reads = takes_ord() ? reads_ : 1;
    my_.qpn = (rng() & 0xffffff) | 1;
    my_.psn = rng() & 0xffffff;
    my_.rkey = data_stag_;
    my_.vaddr = addr_of(remote());
    if (o_.roce) {  // the QP's own number, first PSN and address (GID ::ffff:IPv4)
      RoceEndpoint me;
      if (dev_->roce_local(data_qp_, me) != Status::ok) return fail("cannot read the QP's RoCEv2 endpoint") == 0;
      my_.qpn = me.qpn;
      my_.psn = me.psn;
      my_.gid = mapped_gid(me.addr.ip);
      my_.out_reads = takes_ord() ? reads_ : 1;  // (perftest: 1 but for read_bw and atomic_bw)
    }
    return true;
  }

  static constexpr std::size_t kMaxCycle = 65536;
  static constexpr std::uint32_t kAtomicSize = 8;  // perftest's DEF_SIZE_ATOMIC, the only size
  static constexpr std::uint64_t kAtomicAdd = 1;   // perftest's ATOMIC_ADD_VALUE

  // The out-of-band TCP exchange (RoCEv2 without -R), else rdma_cm's (control QP, CM).
  bool oob() const { return o_.roce && !o_.rdma_cm; }
  // The tools whose operations take ORD slots at the responder (perftest: out_reads).
  bool takes_ord() const { return o_.tool == Tool::read_bw || o_.tool == Tool::atomic_bw; }

  std::uint8_t* remote() { return data_mem_.data() + kGuard; }
  std::uint8_t* local() { return data_mem_.data() + kGuard + region_ + kGuard; }
  std::uint8_t* recv_slot(std::size_t k) { return local() + region_ + k * size_; }
  static std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

  // ---- events, completions ------------------------------------------------------------------

  void on_event(Qp* q, const CmEvent& ev) {
    std::lock_guard lk(mu_);
    events_.emplace_back(q, ev);
    if (ev.type == CmEventType::disconnected || ev.type == CmEventType::broken) closed_[q] = true;
    cv_.notify_all();
  }

  bool wait_event(Qp* q, std::chrono::milliseconds t, CmEvent& out) {
    std::unique_lock lk(mu_);
    auto it = events_.end();
    const bool got = cv_.wait_for(lk, t, [&] {
      it = std::find_if(events_.begin(), events_.end(), [&](const auto& e) { return e.first == q; });
      return it != events_.end();
    });
    if (!got) return false;
    out = it->second;
    events_.erase(it);
    return true;
  }

  bool is_closed(Qp* q) {
    std::lock_guard lk(mu_);
    return closed_[q];
  }

  int fail(const std::string& why) {
    std::fprintf(stderr, "softrnic_perftest: %s\n", why.c_str());
    return 1;
  }

  std::chrono::milliseconds step() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(o_.step_timeout * 1000));
  }

  // Nothing on a CQ yet: over RoCEv2 the poller drives the engine itself (as perftest spins on
  // its CQ while rxe runs in softirq; no thread hand-off per message), else it sleeps `d`.
  void idle(std::chrono::microseconds d) {
    if (o_.roce)
      dev_->progress();
    else
      std::this_thread::sleep_for(d);
  }

  bool poll(Cq* cq, Wc& wc, const char* what) {
    const auto end = Clock::now() + step();
    for (;;) {
      if (dev_->poll_cq(cq, {&wc, 1}) == 1) return true;
      if (Clock::now() >= end) break;
      idle(20us);
    }
    fail(std::string("timed out waiting for ") + what);
    return false;
  }

  // ---- the control QP -----------------------------------------------------------------------

  void post_comm_recv(std::uint32_t slot) {
    const Sge s{comm_stag_, addr_of(comm_mem_.data() + slot * kCommSlotSize), kCommSlotSize};
    dev_->post_recv(comm_qp_, RecvWr{slot, {&s, 1}});
  }

  bool comm_send(const std::uint8_t* p, std::size_t n) {
    std::uint8_t* b = comm_mem_.data() + kCommSlots * kCommSlotSize;
    std::memcpy(b, p, n);
    const Sge s{comm_stag_, addr_of(b), static_cast<std::uint32_t>(n)};
    SendWr wr;
    wr.wr_id = 100;
    wr.opcode = SendOpcode::send;
    wr.sgl = {&s, 1};
    if (const Status st = dev_->post_send(comm_qp_, wr); st != Status::ok)
      return fail("control message " + std::to_string(xk_) + ": post_send: " + std::string(to_string(st))) == 0;
    Wc wc;
    if (!poll(comm_scq_, wc, "a control Send to complete")) return false;
    if (wc.status != WcStatus::success)
      return fail("control message " + std::to_string(xk_) + ": Send " + std::string(to_string(wc.status))) == 0;
    return true;
  }

  bool comm_recv(std::uint8_t* p, std::size_t n) {
    Wc wc;
    if (!poll(comm_rcq_, wc, "a control message from the peer")) return false;
    if (wc.status != WcStatus::success)
      return fail("exchange X" + std::to_string(xk_) + ": receive " + std::string(to_string(wc.status)) +
                  " (the peer closed?)") == 0;
    if (wc.byte_len != n)
      return fail("exchange X" + std::to_string(xk_) + ": expected a " + std::to_string(n) + "-byte message, got " +
                  std::to_string(wc.byte_len)) == 0;
    const auto slot = static_cast<std::uint32_t>(wc.wr_id);
    std::memcpy(p, comm_mem_.data() + slot * kCommSlotSize, n);
    post_comm_recv(slot);
    return true;
  }

  // One exchange: the client sends first, the server receives first (perftest's ctx_xchg_data).
  // (--roce: over the TCP socket, perftest's ctx_xchg_data_ethernet)
  bool xchg(const std::uint8_t* out, std::uint8_t* in, std::size_t n) {
    ++xk_;
    if (o_.verbose) std::printf("softrnic_perftest: %c%d (%zu bytes)\n", oob() ? 'Y' : 'X', xk_, n);
    if (oob()) {
      if (!o_.server) return sock_send(out, n) && sock_recv(in, n);
      return sock_recv(in, n) && sock_send(out, n);
    }
    if (!o_.server) return comm_send(out, n) && comm_recv(in, n);
    return comm_recv(in, n) && comm_send(out, n);
  }

  bool xchg_dest(bool real) {
    if (oob()) {  // perftest's ctx_hand_shake over the socket: the text dest with the GID
      const auto out = pack_text(my_);
      std::array<std::uint8_t, kKeyMsgSizeGid> in{};
      if (!xchg(out.data(), in.data(), in.size())) return false;
      std::string e;
      if (!unpack_text(in.data(), rem_, e)) return fail("exchange Y" + std::to_string(xk_) + ": " + e) == 0;
      return true;
    }
    const auto out = real ? pack(my_) : std::array<std::uint8_t, kDestSize>{};
    std::array<std::uint8_t, kDestSize> in{};
    if (!xchg(out.data(), in.data(), kDestSize)) return false;
    rem_ = unpack(in.data());
    return true;
  }

  // ---- the out-of-band TCP connection (--roce) -------------------------------------------

  // Waits until the socket is readable (or writable); false after the step timeout.
  bool sock_wait(short events, std::chrono::milliseconds t) {
    pollfd p{sock_, events, 0};
    const auto end = Clock::now() + t;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      if (left.count() <= 0) return false;
      const int r = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }

  // One message in one send (perftest read()s each message whole, a short read fails it).
  bool sock_send(const std::uint8_t* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      if (!sock_wait(POLLOUT, step()))
        return fail("exchange Y" + std::to_string(xk_) + ": the socket takes nothing") == 0;
      const ssize_t r = ::send(sock_, p + done, n - done, MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return fail("exchange Y" + std::to_string(xk_) + ": send: " + std::string(std::strerror(errno))) == 0;
      done += static_cast<std::size_t>(r);
    }
    return true;
  }

  bool sock_recv(std::uint8_t* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      if (!sock_wait(POLLIN, step()))
        return fail("exchange Y" + std::to_string(xk_) + ": timed out waiting for the peer's " + std::to_string(n) +
                    "-byte message") == 0;
      const ssize_t r = ::recv(sock_, p + done, n - done, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0)
        return fail("exchange Y" + std::to_string(xk_) + ": the peer closed the connection after " +
                    std::to_string(done) + " of " + std::to_string(n) + " bytes") == 0;
      if (r < 0) return fail("exchange Y" + std::to_string(xk_) + ": recv: " + std::string(std::strerror(errno))) == 0;
      done += static_cast<std::size_t>(r);
    }
    return true;
  }

  static void set_nodelay(int fd) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }

  // Server: listen on the address and port, print the ready line, take one connection.
  bool tcp_accept() {
    std::uint32_t ip = 0;
    if (!netdev::parse_ipv4(o_.listen_addr, ip)) return fail("bad address " + o_.listen_addr) == 0;
    const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0) return fail("socket: " + std::string(std::strerror(errno))) == 0;
    const int one = 1;
    ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(o_.port);
    sa.sin_addr.s_addr = htonl(ip);
    if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls, 1) != 0) {
      const std::string why = std::strerror(errno);
      ::close(ls);
      return fail("cannot listen on TCP " + o_.listen_addr + ":" + std::to_string(o_.port) + ": " + why) == 0;
    }
    std::printf("softrnic_perftest: %s server listening on %s:%u (RoCEv2 QPN 0x%06x, out-of-band TCP exchange)\n",
                o_.tool_name.c_str(), o_.listen_addr.c_str(), o_.port, my_.qpn);
    std::fflush(stdout);
    pollfd p{ls, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(o_.accept_timeout * 1000));
    if (r > 0) sock_ = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(ls);
    if (sock_ < 0) return fail(r > 0 ? "accept: " + std::string(std::strerror(errno)) : "no client connected") == 0;
    set_nodelay(sock_);
    return true;
  }

  // Client: connect from our address, retrying while the server does not listen yet.
  bool tcp_connect() {
    std::uint32_t ip = 0, lip = 0;
    if (!netdev::parse_ipv4(o_.server_addr, ip)) return fail("bad address " + o_.server_addr) == 0;
    if (!netdev::parse_ipv4(o_.local, lip)) return fail("bad address " + o_.local) == 0;
    const auto end = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(o_.connect_retry * 1000));
    for (int tries = 1;; ++tries) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return fail("socket: " + std::string(std::strerror(errno))) == 0;
      sockaddr_in la{};
      la.sin_family = AF_INET;
      la.sin_addr.s_addr = htonl(lip);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(o_.port);
      sa.sin_addr.s_addr = htonl(ip);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&la), sizeof la) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return fail("cannot bind the exchange's socket to " + o_.local + ": " + why) == 0;
      }
      if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
        sock_ = fd;
        set_nodelay(sock_);
        if (o_.verbose || tries > 1)
          std::printf("softrnic_perftest: connected to %s:%u (try %d)\n", o_.server_addr.c_str(), o_.port, tries);
        return true;
      }
      const int err = errno;
      ::close(fd);
      if ((err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH) || Clock::now() >= end)
        return fail("Couldn't connect to " + o_.server_addr + ":" + std::to_string(o_.port) + ": " +
                    std::strerror(err) + " (try " + std::to_string(tries) + ")") == 0;
      std::this_thread::sleep_for(100ms);
    }
  }

  // perftest's ctx_close_connection ends with "done" (with its NUL) and close(); it never reads
  // the peer's. We take the peer's (a close with unread data would be a reset) and close.
  void tcp_close() {
    if (sock_ < 0) return;
    static constexpr char kDone[] = "done";
    ::send(sock_, kDone, sizeof kDone, MSG_NOSIGNAL);
    std::array<char, sizeof kDone> in{};
    std::size_t got = 0;
    const auto end = Clock::now() + 3s;
    pollfd p{sock_, POLLIN, 0};
    while (got < in.size() && Clock::now() < end && ::poll(&p, 1, 200) >= 0) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t r = ::recv(sock_, in.data() + got, in.size() - got, 0);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    if (o_.verbose)
      std::printf("softrnic_perftest: the peer's closing message: %s\n",
                  got == in.size() && std::memcmp(in.data(), kDone, sizeof kDone) == 0 ? "\"done\"" : "(none)");
    ::close(sock_);
    sock_ = -1;
  }

  void print_dests() {
    const bool rdma = o_.tool != Tool::send_lat;
    auto line = [&](const char* who, const Dest& d) {
      std::printf(" %s address: LID 0x%04x QPN 0x%04x PSN 0x%06x", who, d.lid, d.qpn, d.psn);
      if (rdma) std::printf(" RKey 0x%08x VAddr 0x%016llx", d.rkey, static_cast<unsigned long long>(d.vaddr));
      if (takes_ord()) std::printf(" OUT 0x%02x", d.out_reads);
      std::printf("\n");
      if (o_.roce) std::printf(" GID: %s\n", gid_string(d.gid).c_str());
    };
    line("local", my_);
    line("remote", rem_);
    std::fflush(stdout);
  }

  // X1..X5: version, cycle buffer, cache line, MTU, zero dest
  bool prefix() { return prefix_common() && xchg_dest(false); }  // X5: sync before the data connection

  // X1..X4 (Y1..Y4): version, cycle buffer, cache line, MTU
  bool prefix_common() {
    std::array<std::uint8_t, kVersionSize> ver{}, rver{};
    std::memcpy(ver.data(), "6.06", 4);
    if (!xchg(ver.data(), rver.data(), ver.size())) return false;
    rver.back() = 0;
    const std::string rv(reinterpret_cast<const char*>(rver.data()));
    if (std::atof(rv.c_str()) < 5.70) return fail("the peer's version '" + rv + "' is older than 5.70") == 0;
    std::array<std::uint8_t, 4> i32{}, r32{};
    put32(i32.data(), kCycleBuffer);
    if (!xchg(i32.data(), r32.data(), 4)) return false;
    cycle_ = std::max(kCycleBuffer, get32(r32.data()));
    if (cycle_ > kMaxCycle) return fail("the peer's cycle buffer " + std::to_string(cycle_) + " is too big") == 0;
    put32(i32.data(), kCacheLine);
    if (!xchg(i32.data(), r32.data(), 4)) return false;
    cache_line_ = std::max(kCacheLine, get32(r32.data()));
    if (cache_line_ == 0 || cache_line_ > cycle_) return fail("bad cache line size") == 0;
    // the ibv_mtu enum as "%d" in 2 bytes (perftest >= 5.31); the path MTU is the smaller one
    const int my_mtu = o_.roce ? mtu_enum(o_.mtu) : 3;
    const std::array<std::uint8_t, 2> mtu{static_cast<std::uint8_t>('0' + my_mtu), 0};
    std::array<std::uint8_t, 2> rmtu{};
    if (!xchg(mtu.data(), rmtu.data(), 2)) return false;
    const int peer_mtu = rmtu[0] >= '1' && rmtu[0] <= '5' && rmtu[1] == 0 ? rmtu[0] - '0' : 0;
    path_mtu_ = mtu_bytes(peer_mtu && peer_mtu < my_mtu ? peer_mtu : my_mtu);
    std::printf("softrnic_perftest: peer version %s, cycle buffer %u, cache line %u, peer MTU enum %c", rv.c_str(),
                cycle_, cache_line_, rmtu[0]);
    if (o_.roce) std::printf(", path MTU %u", path_mtu_);
    std::printf("\n");
    std::fflush(stdout);
    return true;
  }

  // ---- connections --------------------------------------------------------------------------

  void post_data_recvs() {
    if (o_.tool != Tool::send_lat) return;
    const std::uint64_t n = std::min<std::uint64_t>(rx_depth_, iters_);
    for (std::uint64_t k = 0; k < n; ++k) post_data_recv(k);
  }

  void post_data_recv(std::uint64_t k) {
    const std::size_t slot = k % rx_depth_;
    std::memset(recv_slot(slot), kFill, size_);
    const Sge s{data_stag_, addr_of(recv_slot(slot)), size_};
    dev_->post_recv(data_qp_, RecvWr{slot, {&s, 1}});
    ++recvs_posted_;
  }

  void drain(Cq* cq) {
    Wc wc;
    while (dev_->poll_cq(cq, {&wc, 1}) == 1) {
    }
  }

  bool wait_established(Qp* qp, const char* which) {
    CmEvent ev;
    if (!wait_event(qp, 15000ms, ev)) return fail(std::string(which) + " connection: no event") == 0;
    if (ev.type != CmEventType::established)
      return fail(std::string(which) + " connection: " + std::string(to_string(ev.type)) + " " + ev.reason) == 0;
    return true;
  }

  // Client: connect, retrying "connection refused" (the peer may not listen yet: perftest's
  // server prints its banner before it listens, and listens for the data connection only after
  // its X5 reply). Receives are posted again after each refused try (a reset flushes them).
  bool connect_retry(Qp* qp, const char* which, bool comm) {
    std::uint32_t ip = 0;
    if (!netdev::parse_ipv4(o_.server_addr, ip)) return fail("bad address " + o_.server_addr) == 0;
    const auto end = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(o_.connect_retry * 1000));
    for (int tries = 1;; ++tries) {
      if (comm)
        for (std::uint32_t s = 0; s < kCommSlots; ++s) post_comm_recv(s);
      else
        post_data_recvs();
      if (const Status st = dev_->connect(qp, NetAddr{ip, 0}, o_.port, {}, 10000ms); st != Status::ok)
        return fail(std::string(which) + " connection: connect: " + std::string(to_string(st))) == 0;
      CmEvent ev;
      if (!wait_event(qp, 20000ms, ev)) return fail(std::string(which) + " connection: no answer") == 0;
      if (ev.type == CmEventType::established) {
        if (o_.verbose || tries > 1)
          std::printf("softrnic_perftest: %s connection established (try %d)\n", which, tries);
        return true;
      }
      if (ev.type != CmEventType::no_listener || Clock::now() >= end)
        return fail(std::string(which) + " connection to " + o_.server_addr + ":" + std::to_string(o_.port) + ": " +
                    std::string(to_string(ev.type)) + " " + ev.reason + " (try " + std::to_string(tries) + ")") == 0;
      std::this_thread::sleep_for(100ms);
      {
        std::lock_guard lk(mu_);
        closed_[qp] = false;
      }
      if (dev_->reset_qp(qp) != Status::ok) return fail("cannot reset the QP after a refused connect") == 0;
      drain(comm ? comm_rcq_ : data_rcq_);
      recvs_posted_ = comm ? recvs_posted_ : 0;
    }
  }

  ConnRequest* wait_request(const char* which) {
    std::unique_lock lk(mu_);
    const auto t = std::chrono::milliseconds(static_cast<std::int64_t>(o_.accept_timeout * 1000));
    if (!cv_.wait_for(lk, t, [&] { return !reqs_.empty(); })) {
      lk.unlock();
      fail(std::string("no ") + which + " connection request");
      return nullptr;
    }
    auto [r, info] = reqs_.front();
    reqs_.pop_front();
    lk.unlock();
    if (o_.verbose || info.private_data.size())
      std::printf("softrnic_perftest: %s connection request from %s, %zu bytes of private data\n", which,
                  netdev::to_string(info.remote).c_str(), info.private_data.size());
    return r;
  }

  bool accept(Qp* qp, const char* which) {
    ConnRequest* r = wait_request(which);
    if (!r) return false;
    if (const Status st = dev_->accept(r, qp, {}); st != Status::ok)
      return fail(std::string(which) + " connection: accept: " + std::string(to_string(st))) == 0;
    return wait_established(qp, which);
  }

  // ---- the roles ----------------------------------------------------------------------------

  bool serve() {
    if (oob()) return tcp_accept() && session_roce();
    // One listener for both connections, up the whole time.
    if (dev_->listen(o_.port, [this](ConnRequest* r, const ConnRequestInfo& info) {
          std::lock_guard lk(mu_);
          reqs_.emplace_back(r, info);
          cv_.notify_all();
        }) != Status::ok)
      return fail("cannot listen on port " + std::to_string(o_.port)) == 0;
    listening_ = true;
    std::printf("softrnic_perftest: %s server listening on %s:%u\n", o_.tool_name.c_str(), o_.listen_addr.c_str(),
                o_.port);
    std::fflush(stdout);
    for (std::uint32_t s = 0; s < kCommSlots; ++s) post_comm_recv(s);
    if (!accept(comm_qp_, "control") || !prefix()) return false;
    post_data_recvs();
    if (!accept(data_qp_, "data")) return false;
    if (!xchg_dest(false) || !xchg_dest(true) || !xchg_dest(true) || !xchg_dest(true)) return false;  // X6..X9
    print_dests();
    if (o_.tool == Tool::send_lat) {
      if (!xchg_dest(true)) return false;  // X10: our receives are posted
      if (!pingpong()) return false;
      return xchg_dest(true);  // X11
    }
    // bw: the client works on our buffer meanwhile; X10 is its "done"
    if (!xchg_dest(true)) return false;
    Report mine{}, theirs{};
    if (!xchg_report(mine, theirs)) return false;
    print_bw(theirs);        // as perftest's server: the client's figures
    return xchg_dest(true);  // X16
  }

  bool drive() {
    if (oob()) return tcp_connect() && session_roce();
    if (!connect_retry(comm_qp_, "control", true) || !prefix()) return false;
    if (!connect_retry(data_qp_, "data", false)) return false;
    if (!xchg_dest(false) || !xchg_dest(true) || !xchg_dest(true) || !xchg_dest(true)) return false;  // X6..X9
    print_dests();
    if (o_.tool == Tool::send_lat) {
      if (!xchg_dest(true)) return false;  // X10: the server's receives are posted
      if (!pingpong()) return false;
      return xchg_dest(true);  // X11
    }
    Report mine{};
    if (!run_client(mine)) return false;
    if (!xchg_dest(true)) return false;  // X10
    print_bw(mine);
    Report theirs{};
    if (!xchg_report(mine, theirs)) return false;
    return xchg_dest(true);  // X16
  }

  // --roce, both roles on the connected socket: Y1..Y4, Y5 (then RTR/RTS), Y6, Y7, the test.
  bool session_roce() {
    if (!prefix_common()) return false;
    post_data_recvs();                   // (an idle QP takes receives: they are up before the peer can Send)
    if (!xchg_dest(true)) return false;  // Y5
    if (!roce_connect()) return false;
    if (!xchg_dest(true) || !xchg_dest(true)) return false;  // Y6, Y7
    print_dests();
    bool ok = false;
    if (o_.tool == Tool::send_lat) {
      ok = xchg_dest(true) && pingpong() && xchg_dest(true);  // Y8: receives posted; Y9
    } else if (o_.server) {
      Report mine{}, theirs{};
      ok = xchg_dest(true) && xchg_report(mine, theirs);  // Y8: the client is done; Y9..Y13
      if (ok) print_bw(theirs);                           // as perftest's server: the client's figures
      ok = ok && xchg_dest(true);                         // Y14
    } else {
      Report mine{}, theirs{};
      ok = run_client(mine);
      ok = ok && xchg_dest(true);  // Y8
      if (ok) print_bw(mine);
      ok = ok && xchg_report(mine, theirs) && xchg_dest(true);  // Y9..Y13, Y14
    }
    if (ok) tcp_close();
    return ok;
  }

  // The QP to RTS with the peer's QPN, PSN and GID (perftest's ctx_connect). Its out_reads is
  // what it accepts (its max_dest_rd_atomic) and ours what we accept: our ORD is the smaller of
  // ours and its.
  bool roce_connect() {
    RoceEndpoint peer;
    if (!gid_ipv4(rem_.gid, peer.addr.ip))
      return fail("the peer's GID " + gid_string(rem_.gid) +
                  " is not IPv4-mapped (give perftest -x with its RoCEv2 IPv4 GID's index)") == 0;
    peer.qpn = rem_.qpn & 0xffffff;
    peer.psn = rem_.psn & 0xffffff;
    peer.mtu = path_mtu_;
    const std::uint32_t max_rd = dev_->limits().max_rd;
    const std::uint32_t ird = std::min(my_.out_reads, max_rd);
    const std::uint32_t ord = std::min({my_.out_reads, rem_.out_reads, max_rd});
    if (const Status st = dev_->roce_connect(data_qp_, peer, ord, ird); st != Status::ok)
      return fail("cannot connect the data QP to QPN 0x" + std::to_string(peer.qpn) + ": " +
                  std::string(to_string(st))) == 0;
    if (takes_ord()) {
      if (ord == 0) return fail("the peer takes no RDMA Read or atomic (its out_reads is 0)") == 0;
      window_ = std::min(window_, ord);
    }
    if (o_.verbose)
      std::printf("softrnic_perftest: data QP 0x%06x -> %s QPN 0x%06x, path MTU %u, ORD %u, IRD %u\n", my_.qpn,
                  netdev::to_string(NetAddr{peer.addr.ip, 0}).c_str(), peer.qpn, path_mtu_, ord, ird);
    return true;
  }

  // ---- send_lat ------------------------------------------------------------------------------

  bool post_data_send(const std::uint8_t* p, std::uint32_t len) {
    const Sge s{data_stag_, addr_of(p), len};
    SendWr wr;
    wr.wr_id = 1;
    wr.opcode = SendOpcode::send;
    wr.sgl = {&s, 1};
    if (const Status st = dev_->post_send(data_qp_, wr); st != Status::ok)
      return fail("data Send: post_send: " + std::string(to_string(st))) == 0;
    Wc wc;
    if (!poll(data_scq_, wc, "a data Send to complete")) return false;
    if (wc.status != WcStatus::success) return fail("data Send: " + std::string(to_string(wc.status))) == 0;
    return true;
  }

  // One message of the peer: exactly S bytes, not the fill, the same bytes as the first one (or
  // softrnic's pattern).
  bool take_message(std::uint64_t k) {
    Wc wc;
    if (!poll(data_rcq_, wc, "a data message")) return false;
    if (wc.status != WcStatus::success)
      return fail("data receive " + std::to_string(k) + ": " + std::string(to_string(wc.status))) == 0;
    if (wc.byte_len != size_)
      return fail("data receive " + std::to_string(k) + ": " + std::to_string(wc.byte_len) + " bytes, not " +
                  std::to_string(size_)) == 0;
    const std::uint8_t* m = recv_slot(wc.wr_id);
    if (!check_payload(m, 0, "message " + std::to_string(k))) return false;
    if (recvs_posted_ < iters_) post_data_recv(recvs_posted_);
    return true;
  }

  // A payload that came from the peer, placed where it was expected, `src_off` its offset in
  // the peer's source buffer: with a known source (our pattern), exactly it; otherwise not the
  // fill, and identical to what came before from the same source offset.
  bool check_payload(const std::uint8_t* m, std::size_t src_off, const std::string& what) {
    if (o_.expect_pattern || o_.prime_remote) {
      for (std::uint32_t i = 0; i < size_; ++i)
        if (m[i] != pattern(src_off + i))
          return fail(what + ": byte " + std::to_string(i) + " is " + std::to_string(m[i]) +
                      ", softrnic's pattern has " + std::to_string(pattern(src_off + i))) == 0;
      return true;
    }
    const auto differ =
        static_cast<std::size_t>(std::count_if(m, m + size_, [](std::uint8_t b) { return b != kFill; }));
    if (differ < std::max<std::size_t>(1, size_ / 2))
      return fail(what + ": only " + std::to_string(differ) + " of " + std::to_string(size_) +
                  " bytes differ from the fill: no data placed?") == 0;
    auto [it, fresh] = reference_.try_emplace(src_off, m, m + size_);
    if (!fresh && std::memcmp(it->second.data(), m, size_) != 0)
      return fail(what + ": differs from an earlier payload of the same source") == 0;
    return true;
  }

  bool pingpong() {
    std::vector<Clock::time_point> tposted(iters_);
    for (std::uint64_t k = 0; k < iters_; ++k) {
      if (o_.server && !take_message(k)) return false;
      tposted[k] = Clock::now();
      if (!post_data_send(local(), size_)) return false;
      if (!o_.server && !take_message(k)) return false;
    }
    // perftest's send_lat: latency = half the time between consecutive posts
    std::vector<double> lat;
    for (std::uint64_t k = 1; k < iters_; ++k) lat.push_back(usec(tposted[k] - tposted[k - 1]) / 2);
    std::sort(lat.begin(), lat.end());
    double sum = 0, sq = 0;
    for (double v : lat) sum += v;
    const double avg = sum / static_cast<double>(lat.size());
    for (double v : lat) sq += (v - avg) * (v - avg);
    const double stdev = std::sqrt(sq / static_cast<double>(lat.size()));
    auto pct = [&](double p) {
      return lat[std::min(lat.size() - 1,
                          static_cast<std::size_t>(std::ceil(p * static_cast<double>(lat.size())) - 1))];
    };
    std::printf("%s", kResultLine);
    std::printf(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% "
        "percentile[usec]   99.9%% percentile[usec] \n");
    std::printf(
        " %-7u %llu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
        size_, static_cast<unsigned long long>(iters_), lat.front(), lat.back(), lat[lat.size() / 2], avg, stdev,
        pct(0.99), pct(0.999));
    std::printf("%s", kResultLine);
    std::fflush(stdout);
    verdict_ = "data verified (" + std::to_string(iters_) + " messages of exactly " + std::to_string(size_) + " B, " +
               (o_.expect_pattern ? "softrnic's pattern" : "identical payloads") + ")";
    return true;
  }

  // ---- write_bw / read_bw --------------------------------------------------------------------

  struct Report {
    std::uint64_t size = 0, iters = 0;
    double peak = 0, avg = 0, rate = 0;
  };

  // perftest's addressing (run_iter_bw): with S <= cycle/2 the k-th operation is at offset
  // (k mod (cycle / INC)) * INC, INC = S rounded up to the cache line; else always at 0.
  std::size_t offset_of(std::uint64_t k) const {
    if (size_ > cycle_ / 2) return 0;
    const std::size_t inc = size_ > cache_line_ ? round_up(size_, cache_line_) : cache_line_;
    return (k % (cycle_ / inc)) * inc;
  }

  bool run_writes(Report& r) { return run_bw(SendOpcode::rdma_write, r); }

  bool run_client(Report& r) {
    switch (o_.tool) {
      case Tool::write_bw: return run_writes(r);
      case Tool::read_bw: return run_reads(r);
      case Tool::atomic_bw: return run_atomics(r);
      case Tool::send_lat: break;
    }
    return false;
  }

  bool run_reads(Report& r) {
    if (o_.prime_remote) {
      // Our pattern into the peer's buffer first (not timed), so that every Read has a known answer.
      const Sge s{data_stag_, addr_of(local()), static_cast<std::uint32_t>(std::max<std::size_t>(size_, cycle_))};
      SendWr wr;
      wr.wr_id = 7;
      wr.opcode = SendOpcode::rdma_write;
      wr.sgl = {&s, 1};
      wr.rkey = rem_.rkey;
      wr.remote_addr = rem_.vaddr;
      if (dev_->post_send(data_qp_, wr) != Status::ok) return fail("priming Write: post_send failed") == 0;
      Wc wc;
      if (!poll(data_scq_, wc, "the priming Write")) return false;
      if (wc.status != WcStatus::success) return fail("priming Write: " + std::string(to_string(wc.status))) == 0;
    }
    return run_bw(SendOpcode::rdma_read, r);
  }

  bool run_bw(SendOpcode op, Report& r) {
    const bool read = op == SendOpcode::rdma_read;
    std::vector<Clock::time_point> tposted(iters_), tdone(iters_);
    std::uint64_t posted = 0, done = 0;
    const auto end_of = [&] { return Clock::now() + step(); };
    auto deadline = end_of();
    while (done < iters_) {
      while (posted < iters_ && posted - done < window_) {
        const std::size_t off = offset_of(posted);
        SendWr wr;
        wr.wr_id = posted;
        wr.opcode = op;
        Sge s{data_stag_, addr_of(local() + off), size_};
        if (read) {
          std::uint8_t* sink = recv_slot(posted % window_);
          std::memset(sink, kFill, size_);
          s.addr = addr_of(sink);
        }
        wr.sgl = {&s, 1};
        wr.rkey = rem_.rkey;
        wr.remote_addr = rem_.vaddr + off;
        tposted[posted] = Clock::now();
        if (const Status st = dev_->post_send(data_qp_, wr); st != Status::ok)
          return fail("post_send " + std::to_string(posted) + ": " + std::string(to_string(st))) == 0;
        ++posted;
      }
      Wc wc;
      if (dev_->poll_cq(data_scq_, {&wc, 1}) == 0) {
        if (Clock::now() >= deadline) return fail("timed out waiting for a completion") == 0;
        idle(10us);
        continue;
      }
      deadline = end_of();
      if (wc.status != WcStatus::success)
        return fail(std::string(read ? "Read " : "Write ") + std::to_string(wc.wr_id) + ": " +
                    std::string(to_string(wc.status))) == 0;
      if (wc.wr_id != done) return fail("completion out of order: " + std::to_string(wc.wr_id)) == 0;
      tdone[done] = Clock::now();
      if (read) {
        if (wc.byte_len != size_)
          return fail("Read " + std::to_string(done) + ": " + std::to_string(wc.byte_len) + " bytes") == 0;
        if (!check_payload(recv_slot(done % window_), offset_of(done), "Read " + std::to_string(done))) return false;
      }
      ++done;
    }
    const double total = usec(tdone[iters_ - 1] - tposted[0]);
    double best = 1e300;
    for (std::uint64_t k = 0; k < iters_; ++k) best = std::min(best, usec(tdone[k] - tposted[k]));
    constexpr double kMB = 1 << 20;
    r.size = size_;
    r.iters = iters_;
    r.avg = total > 0 ? static_cast<double>(size_) * static_cast<double>(iters_) / kMB / (total / 1e6) : 0;
    r.peak = best > 0 ? static_cast<double>(size_) / kMB / (best / 1e6) : 0;
    r.rate = total > 0 ? static_cast<double>(iters_) / total : 0;  // Mpps: per microsecond
    if (read)
      verdict_ = std::string("data verified (") + std::to_string(iters_) + " Reads of " + std::to_string(size_) +
                 " B, " +
                 (o_.prime_remote     ? "each returned the pattern written first"
                  : o_.expect_pattern ? "each returned softrnic's pattern"
                                      : "the fill replaced, identical data per source offset") +
                 ")";
    else
      verdict_ = "completions verified (" + std::to_string(iters_) + " Writes of " + std::to_string(size_) +
                 " B completed; the peer's buffer cannot be read back)";
    return true;
  }

  // ---- atomic_bw ------------------------------------------------------------------------------

  // perftest's atomic_bw (run_iter_bw with ATOMIC): 8-byte atomics on the peer's buffer, the k-th
  // at offset (k mod slots) * cache line, slots = cycle buffer / cache line (64 on 4 KiB pages);
  // FETCH_AND_ADD adds 1 (ATOMIC_ADD_VALUE), CMP_AND_SWAP compares 0 and swaps 0. Ours: the same
  // FetchAdds; our CmpSwaps compare the value the previous one left in the slot and swap in
  // swap_value(k), so that after a slot's first (compare 0) every CmpSwap must succeed.
  std::size_t atomic_slots() const { return cycle_ / std::max(size_, cache_line_); }
  static std::uint64_t swap_value(std::uint64_t k) { return 0xC5A9000000000000ull + k; }
  std::uint64_t initial_word(std::size_t off) const {  // softrnic's pattern as the u64 at `off`
    std::array<std::uint8_t, 8> b{};
    for (std::size_t i = 0; i < 8; ++i) b[i] = pattern(off + i);
    std::uint64_t v = 0;
    std::memcpy(&v, b.data(), 8);
    return v;
  }

  // What the atomic_bw client tracks while its atomics run.
  struct AtomicRun {
    bool cs = false;  // CmpSwaps, else FetchAdds
    // per slot: whether we know the value the target holds (after our last operation on it), and it
    std::vector<bool> known;
    std::vector<std::uint64_t> cur, compare;
    std::vector<Clock::time_point> tposted, tdone;
    std::uint64_t posted = 0, done = 0, swapped = 0;
  };

  bool run_atomics(Report& r) {
    const std::size_t slots = atomic_slots();
    if (window_ > slots) return fail("more atomics outstanding than the buffer has slots") == 0;
    AtomicRun a{.cs = o_.cmp_swap,
                .known = std::vector<bool>(slots, false),
                .cur = std::vector<std::uint64_t>(slots, 0),
                .compare = std::vector<std::uint64_t>(iters_, 0),
                .tposted = std::vector<Clock::time_point>(iters_),
                .tdone = std::vector<Clock::time_point>(iters_)};
    const auto end_of = [&] { return Clock::now() + step(); };
    auto deadline = end_of();
    while (a.done < iters_) {
      // (op k - slots, the previous one on k's slot, completed: at most window_ <= slots outstanding)
      while (a.posted < iters_ && a.posted - a.done < window_)
        if (!post_atomic(a)) return false;
      Wc wc;
      if (dev_->poll_cq(data_scq_, {&wc, 1}) == 0) {
        if (Clock::now() >= deadline) return fail("timed out waiting for a completion") == 0;
        idle(10us);
        continue;
      }
      deadline = end_of();
      if (!complete_atomic(a, wc)) return false;
    }
    const double total = usec(a.tdone[iters_ - 1] - a.tposted[0]);
    double best = 1e300;
    for (std::uint64_t k = 0; k < iters_; ++k) best = std::min(best, usec(a.tdone[k] - a.tposted[k]));
    constexpr double kMB = 1 << 20;
    r.size = size_;
    r.iters = iters_;
    r.avg = total > 0 ? static_cast<double>(size_) * static_cast<double>(iters_) / kMB / (total / 1e6) : 0;
    r.peak = best > 0 ? static_cast<double>(size_) / kMB / (best / 1e6) : 0;
    r.rate = total > 0 ? static_cast<double>(iters_) / total : 0;
    set_atomics_verdict(a, slots);
    return true;
  }

  // Posts atomic number a.posted on its slot (a CmpSwap compares the value we expect there).
  bool post_atomic(AtomicRun& a) {
    const std::uint64_t k = a.posted;
    const std::size_t off = offset_of(k), slot = off / std::max(size_, cache_line_);
    std::uint8_t* sink = recv_slot(k % window_);
    std::memset(sink, kFill, kAtomicSize);
    const Sge sg{data_stag_, addr_of(sink), kAtomicSize};
    SendWr wr;
    wr.wr_id = k;
    wr.opcode = a.cs ? SendOpcode::cmp_swap : SendOpcode::fetch_add;
    wr.sgl = {&sg, 1};
    wr.rkey = rem_.rkey;
    wr.remote_addr = rem_.vaddr + off;
    if (a.cs) {
      a.compare[k] = a.known[slot] ? a.cur[slot] : 0;
      wr.compare_add = a.compare[k];
      wr.swap = swap_value(k);
    } else {
      wr.compare_add = kAtomicAdd;
    }
    a.tposted[k] = Clock::now();
    if (const Status st = dev_->post_send(data_qp_, wr); st != Status::ok)
      return fail("post_send " + std::to_string(k) + ": " + std::string(to_string(st))) == 0;
    ++a.posted;
    return true;
  }

  // Checks the completion of atomic number a.done and the value it found; predicts the slot's next.
  bool complete_atomic(AtomicRun& a, const Wc& wc) {
    const std::string what = std::string(a.cs ? "CmpSwap " : "FetchAdd ") + std::to_string(wc.wr_id);
    if (wc.status != WcStatus::success) return fail(what + ": " + std::string(to_string(wc.status))) == 0;
    if (wc.wr_id != a.done) return fail("completion out of order: " + std::to_string(wc.wr_id)) == 0;
    if (wc.opcode != (a.cs ? WcOpcode::cmp_swap : WcOpcode::fetch_add))
      return fail(what + ": completed as another operation") == 0;
    const std::uint64_t k = a.done;
    a.tdone[k] = Clock::now();
    const std::size_t off = offset_of(k), slot = off / std::max(size_, cache_line_);
    std::uint64_t orig = 0;
    std::memcpy(&orig, recv_slot(k % window_), kAtomicSize);
    // the value found: the one we predicted (the previous op on the slot), or with a known
    // source (the peer is softrnic_perftest) its pattern for the slot's first
    const bool first = !a.known[slot];
    const std::uint64_t want = first ? initial_word(off) : a.cur[slot];
    if ((!first || o_.expect_pattern) && orig != want) {
      char b[160];
      std::snprintf(b, sizeof b, ": at offset %zu found 0x%016llx, expected 0x%016llx", off,
                    static_cast<unsigned long long>(orig), static_cast<unsigned long long>(want));
      return fail(what + b) == 0;
    }
    if (a.cs) {
      if (orig == a.compare[k]) ++a.swapped;
      a.cur[slot] = orig == a.compare[k] ? swap_value(k) : orig;
    } else {
      a.cur[slot] = orig + kAtomicAdd;
    }
    a.known[slot] = true;
    ++a.done;
    return true;
  }

  void set_atomics_verdict(const AtomicRun& a, std::size_t slots) {
    const std::uint64_t used = std::min<std::uint64_t>(iters_, slots);
    const std::string firsts = o_.expect_pattern ? "softrnic's pattern" : "the peer's, unchecked";
    if (a.cs)
      verdict_ = "data verified (" + std::to_string(iters_) + " CmpSwaps on " + std::to_string(used) + " slots, " +
                 std::to_string(a.swapped) +
                 " swapped: each after a slot's first found the value swapped in before it; the first ones " + firsts +
                 ")";
    else
      verdict_ = "data verified (" + std::to_string(iters_) + " FetchAdds of " + std::to_string(kAtomicAdd) + " on " +
                 std::to_string(used) + " slots: each after a slot's first found the value before it plus " +
                 std::to_string(kAtomicAdd) + "; the first ones " + firsts + ")";
  }

  // atomic_bw server: each slot's u64 is what the client's operations leave there, and nothing
  // else changed. FetchAdd: the slot's pattern value plus 1 per operation on it (together the
  // client's iterations). CmpSwap: from perftest (compare 0, swap 0) against our nonzero words
  // unchanged; from softrnic_perftest (--expect-pattern) the last value swapped in.
  void check_atomics() {
    const std::size_t slots = atomic_slots(), inc = std::max(size_, cache_line_);
    std::vector<bool> word(region_, false);
    std::uint64_t sum = 0, changed = 0;
    for (std::size_t s = 0; s < slots && s < iters_; ++s) {
      const std::size_t off = s * inc;
      for (std::size_t i = 0; i < kAtomicSize; ++i) word[off + i] = true;
      const std::uint64_t n = iters_ / slots + (s < iters_ % slots ? 1 : 0);
      const std::uint64_t last = s + (n - 1) * slots;  // the slot's last operation
      const std::uint64_t init = initial_word(off);
      std::uint64_t want = init;
      if (!o_.cmp_swap)
        want = init + n * kAtomicAdd;
      else if (o_.expect_pattern && n >= 2)
        want = swap_value(last);
      std::uint64_t got = 0;
      std::memcpy(&got, remote() + off, 8);
      if (got != want) {
        char b[200];
        std::snprintf(b, sizeof b, "slot %zu (offset %zu, %llu operations): holds 0x%016llx, expected 0x%016llx", s,
                      off, static_cast<unsigned long long>(n), static_cast<unsigned long long>(got),
                      static_cast<unsigned long long>(want));
        fail(b);
        verdict_ok_ = false;
        return;
      }
      sum += got - init;
      if (got != init) ++changed;
    }
    std::size_t stray = 0;
    for (std::size_t i = 0; i < region_; ++i)
      if (!word[i] && remote()[i] != pattern(i)) ++stray;
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (data_mem_[i] != kFill) ++stray;
      if (remote()[region_ + i] != kFill) ++stray;
    }
    if (stray) {
      fail(std::to_string(stray) + " bytes outside the atomics' 8-byte words changed");
      verdict_ok_ = false;
      return;
    }
    const QpCounters c = dev_->qp_counters(data_qp_);
    if (c.tx_frames < iters_) {
      fail("the data QP sent " + std::to_string(c.tx_frames) + " frames, fewer than the " + std::to_string(iters_) +
           " Atomic Acknowledges");
      verdict_ok_ = false;
      return;
    }
    const std::size_t used = std::min<std::size_t>(slots, iters_);
    if (!o_.cmp_swap)
      verdict_ = "data verified (" + std::to_string(used) + " slots each grew by its FetchAdds, " +
                 std::to_string(sum) + " in all = the " + std::to_string(iters_) + " adds of " +
                 std::to_string(kAtomicAdd) + "; the rest and the guards intact; " + std::to_string(c.tx_frames) +
                 " frames sent)";
    else
      verdict_ = "data verified (" + std::to_string(used) + " slots after " + std::to_string(iters_) +
                 " CmpSwaps: " + std::to_string(changed) + " changed, " +
                 (o_.expect_pattern ? "each to the last value swapped in" : "none may (compare 0, swap 0)") +
                 "; the rest and the guards intact; " + std::to_string(c.tx_frames) + " frames sent)";
  }

  bool xchg_report(const Report& mine, Report& theirs) {
    std::array<std::uint8_t, 8> out{}, in{};
    put64(out.data(), mine.size);
    if (!xchg(out.data(), in.data(), 8)) return false;
    theirs.size = get64(in.data());
    put64(out.data(), mine.iters);
    if (!xchg(out.data(), in.data(), 8)) return false;
    theirs.iters = get64(in.data());
    out = pack_double(mine.peak);
    if (!xchg(out.data(), in.data(), 8)) return false;
    theirs.peak = unpack_double(in.data());
    out = pack_double(mine.avg);
    if (!xchg(out.data(), in.data(), 8)) return false;
    theirs.avg = unpack_double(in.data());
    out = pack_double(mine.rate);
    if (!xchg(out.data(), in.data(), 8)) return false;
    theirs.rate = unpack_double(in.data());
    if (o_.server && (theirs.size != size_ || theirs.iters != iters_)) {
      fail("the client reports " + std::to_string(theirs.iters) + " x " + std::to_string(theirs.size) +
           " B, we expected " + std::to_string(iters_) + " x " + std::to_string(size_));
      verdict_ok_ = false;
    }
    return true;
  }

  void print_bw(const Report& r) {
    std::printf("%s", kResultLine);
    std::printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
    std::printf(" %-7llu    %-10llu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n",
                static_cast<unsigned long long>(r.size), static_cast<unsigned long long>(r.iters), r.peak, r.avg,
                r.rate);
    std::printf("%s", kResultLine);
    std::fflush(stdout);
  }

  // ---- the end -------------------------------------------------------------------------------

  // Send nothing more; wait for the peer to close both connections (perftest closes first in
  // both roles; closing under siw's last Send can fail it), then close what is left.
  void teardown() {
    if (oob()) {  // no connection events: the exchange's end was the end
      if (sock_ >= 0) ::close(sock_);
      sock_ = -1;
      check_server();
      return;
    }
    const double pc = o_.peer_close >= 0 ? o_.peer_close : (o_.server ? 30 : 15);
    const auto end = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(pc * 1000));
    // (the device lock is taken before ours in callbacks: ask the device before locking)
    const bool data_used = dev_->qp_state(data_qp_) != QpState::idle;
    std::unique_lock lk(mu_);
    cv_.wait_until(lk, end, [&] { return closed_[comm_qp_] && (closed_[data_qp_] || !data_used); });
    const bool peer_closed = closed_[comm_qp_] && (closed_[data_qp_] || !data_used);
    lk.unlock();
    if (o_.verbose) std::printf("softrnic_perftest: %s\n", peer_closed ? "the peer closed" : "closing first");
    for (Qp* q : {data_qp_, comm_qp_}) {
      if (!q || is_closed(q)) continue;
      const QpState s = dev_->qp_state(q);
      if (s == QpState::rts) dev_->disconnect(q, true);
    }
    lk.lock();
    cv_.wait_for(lk, 3s, [&] { return closed_[comm_qp_] && (closed_[data_qp_] || !data_used); });
    lk.unlock();
    if (listening_) dev_->stop_listen(o_.port);
    check_server();
  }

  // The server's verdict on its buffer, once the peer is done with it.
  void check_server() {
    if (!o_.server || !done_ok_) return;
    if (o_.tool == Tool::write_bw) check_written();
    if (o_.tool == Tool::read_bw) check_served();
    if (o_.tool == Tool::atomic_bw) check_atomics();
  }

  // write_bw server: after the data connection ended (all Writes placed), the ranges the
  // client's offsets cover hold new data, everything else the fill.
  void check_written() {
    std::vector<bool> hit(region_, false);
    // distinct offsets: all of them once the cycle wrapped
    const std::size_t inc = size_ > cache_line_ ? round_up(size_, cache_line_) : cache_line_;
    const std::uint64_t ranges = size_ > cycle_ / 2 ? 1 : std::min<std::uint64_t>(iters_, cycle_ / inc);
    for (std::uint64_t k = 0; k < ranges; ++k)
      for (std::size_t i = offset_of(k); i < offset_of(k) + size_; ++i) hit[i] = true;
    std::size_t written = 0, stray = 0;
    for (std::size_t i = 0; i < region_; ++i) {
      if (hit[i])
        ++written;
      else if (remote()[i] != kFill)
        ++stray;
    }
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (data_mem_[i] != kFill) ++stray;
      if (remote()[region_ + i] != kFill) ++stray;
    }
    if (stray) {
      fail(std::to_string(stray) + " bytes outside the ranges the client writes changed");
      verdict_ok_ = false;
      return;
    }
    for (std::uint64_t k = 0; k < ranges; ++k) {
      if (!check_payload(remote() + offset_of(k), offset_of(k), "written range " + std::to_string(k))) {
        verdict_ok_ = false;
        return;
      }
    }
    verdict_ = "data verified (" + std::to_string(written) + " bytes written in " + std::to_string(ranges) +
               " range(s), " + (o_.expect_pattern ? "softrnic's pattern" : "the fill replaced") +
               ", the rest and the guards intact)";
  }

  void check_served() {
    for (std::size_t i = 0; i < region_; ++i)
      if (remote()[i] != pattern(i)) {
        fail("the buffer served to Reads changed at byte " + std::to_string(i));
        verdict_ok_ = false;
        return;
      }
    const QpCounters c = dev_->qp_counters(data_qp_);
    if (c.tx_frames < iters_) {
      fail("the data QP sent " + std::to_string(c.tx_frames) + " frames, fewer than the " + std::to_string(iters_) +
           " Read Responses");
      verdict_ok_ = false;
      return;
    }
    verdict_ = "data served (" + std::to_string(region_) + " B of softrnic's pattern, unchanged; " +
               std::to_string(c.tx_frames) + " frames sent on the data connection)";
  }

  static constexpr const char* kResultLine =
      "---------------------------------------------------------------------------------------\n";

  const Options& o_;
  std::unique_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq *comm_scq_ = nullptr, *comm_rcq_ = nullptr, *data_scq_ = nullptr, *data_rcq_ = nullptr;
  Qp *comm_qp_ = nullptr, *data_qp_ = nullptr;
  Mr *comm_mr_ = nullptr, *data_mr_ = nullptr;
  std::uint32_t comm_stag_ = 0, data_stag_ = 0;
  std::vector<std::uint8_t> comm_mem_, data_mem_;
  std::size_t region_ = 0;
  std::uint64_t iters_ = 0, recvs_posted_ = 0;
  std::uint32_t size_ = 0, reads_ = 0, window_ = 0, rx_depth_ = 0;
  std::uint32_t cycle_ = kCycleBuffer, cache_line_ = kCacheLine;
  std::uint32_t path_mtu_ = 0;  // --roce: the smaller of ours and the peer's
  int sock_ = -1;               // --roce: the exchange's TCP connection
  Dest my_, rem_;
  int xk_ = 0;
  bool listening_ = false, done_ok_ = false, verdict_ok_ = true;
  std::string verdict_;
  std::map<std::size_t, std::vector<std::uint8_t>> reference_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Qp*, CmEvent>> events_;
  std::map<Qp*, bool> closed_;
  std::deque<std::pair<ConnRequest*, ConnRequestInfo>> reqs_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "softrnic_perftest: perftest's -R (rdma_cm) exchange over softrnic's iWARP/MPA/TCP (peer: ib_send_lat, "
      "ib_write_bw, ib_read_bw -R on siw), or with --roce over RoCEv2: its out-of-band TCP exchange (peer: the "
      "tools and ib_atomic_bw without -R on rxe), with --roce -R its rdma_cm exchange over IB CM (peer: the tools "
      "with -R on rxe)"};
  app.add_option("tool", o.tool_name, "send_lat, write_bw, read_bw or atomic_bw (--roce only)")
      ->required()
      ->check(CLI::IsMember({"send_lat", "write_bw", "read_bw", "atomic_bw"}));
  app.add_flag("-s,--server", o.server, "server");
  app.add_option("-c,--client", o.server_addr, "client: the server's address");
  app.add_option("-a", o.listen_addr, "server: the address to listen on (default 127.0.0.1)");
  app.add_option("--local", o.local, "client: the local address (default 127.0.0.1)");
  app.add_option("-p,--port", o.port,
                 "port (rdma_cm's = TCP over iWARP; --roce: the exchange's TCP port; perftest's default 18515)");
  app.add_option("-n,--iters", o.iters, "iterations (default as perftest: 1000, write_bw 5000)");
  app.add_option("-S,--size", o.size, "message size (default as perftest: send_lat 2, bw 65536)")
      ->check(CLI::Range(1u, 1u << 24));
  app.add_option("-o,--outs", o.out_reads,
                 "read_bw, atomic_bw: outstanding Reads / atomics (capped by softrnic's limit)")
      ->check(CLI::Range(1u, 128u));
  app.add_option("--timeout", o.step_timeout, "seconds for each message or completion (default 60)");
  app.add_option("--accept-timeout", o.accept_timeout, "server: seconds to wait for a connection request");
  app.add_option("--connect-retry", o.connect_retry, "client: seconds to retry a refused connection (default 15)");
  app.add_option("--peer-close", o.peer_close,
                 "seconds to wait at the end for the peer to close both connections (default: server 30, client 15)");
  app.add_flag("--expect-pattern", o.expect_pattern,
               "the peer is softrnic_perftest: received data must be softrnic's pattern");
  app.add_flag("--prime-remote", o.prime_remote,
               "read_bw client: RDMA Write softrnic's pattern into the peer's buffer first, check every Read");
  app.add_flag("--roce", o.roce,
               "RoCEv2 (UDP 4791 on the -a / --local address); without -R perftest's out-of-band TCP exchange (peer: "
               "perftest without -R, with -x GID_INDEX, on rxe)");
  app.add_flag("-R,--rdma_cm", o.rdma_cm,
               "perftest's rdma_cm exchange (control and data connection through the CM on the port); always so "
               "without --roce (iWARP), with --roce IB CM over QP1 (peer: perftest -R on rxe)");
  std::string atomic_type = "FETCH_AND_ADD";
  app.add_option("-A,--atomic_type", atomic_type, "atomic_bw: FETCH_AND_ADD (default) or CMP_AND_SWAP, as perftest")
      ->check(CLI::IsMember({"FETCH_AND_ADD", "CMP_AND_SWAP"}));
  app.add_option("-m,--mtu", o.mtu, "--roce: our path MTU (the exchange takes the smaller of both sides')")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  app.add_flag("-v,--verbose", o.verbose, "print each exchange");
  tools::MpaOptions mpa;
  mpa.add_to(app);
  CLI11_PARSE(app, argc, argv);
  if (o.server == !o.server_addr.empty()) {
    std::fprintf(stderr, "softrnic_perftest: give -s or -c ADDR\n");
    return 2;
  }
  if (o.prime_remote && (o.server || o.tool_name != "read_bw")) {
    std::fprintf(stderr, "softrnic_perftest: --prime-remote is for the read_bw client\n");
    return 2;
  }
  o.tool = o.tool_name == "send_lat"   ? Tool::send_lat
           : o.tool_name == "write_bw" ? Tool::write_bw
           : o.tool_name == "read_bw"  ? Tool::read_bw
                                       : Tool::atomic_bw;
  if (o.tool == Tool::atomic_bw && !o.roce) {
    std::fprintf(stderr, "softrnic_perftest: atomic_bw needs --roce (softrnic's iWARP has no atomics)\n");
    return 2;
  }
  if (!o.roce) o.rdma_cm = true;  // iWARP: rdma_cm only (-R may be given, as to perftest)
  o.cmp_swap = atomic_type == "CMP_AND_SWAP";
  o.mpa = mpa.config();
  return Perftest(o).run();
}
