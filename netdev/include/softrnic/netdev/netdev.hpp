// netdev: moves datagrams or byte streams, nothing else. Two small interfaces: Netdev (datagrams,
// burst send and receive; backends chosen at run time from a configuration, make_netdev) and
// StreamNetdev (TCP connections: listen, connect, non-blocking read and write; make_tcp_netdev).
// Both are Waitable: the engine blocks in one wait for whichever it drives.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace softrnic::netdev {

// An IPv4 address and UDP port, host byte order.
struct NetAddr {
  std::uint32_t ip = 0;
  std::uint16_t port = 0;
  friend bool operator==(const NetAddr&, const NetAddr&) = default;
  friend auto operator<=>(const NetAddr&, const NetAddr&) = default;
};
std::string to_string(const NetAddr& a);
// The dotted quad of an IPv4 address (host order), without a port.
std::string ipv4_to_string(std::uint32_t ip);
// Parses dotted-quad IPv4 ("127.0.0.1"); false on bad syntax.
bool parse_ipv4(const std::string& s, std::uint32_t& ip);
// Whether `ip` (host order) can be an interface's own unicast address: not 0.0.0.0, not
// broadcast, not multicast (224/4) or reserved (240/4).
bool is_unicast_ipv4(std::uint32_t ip);
// The primary IPv4 address (host order) of the kernel interface `name` ("eth0"), as OFA dapl's
// "eth0 0" names an interface; false with `error` when there is no such interface or it has no
// IPv4 address.
bool interface_ipv4(const std::string& name, std::uint32_t& ip, std::string& error);
// The MTU of the kernel interface that holds `ip` (host order), 0 when no interface has it.
std::uint32_t interface_mtu(std::uint32_t ip);
// `s` with control characters and bytes outside printable ASCII as \xNN (a second pass changes nothing), for error
// messages that quote what a user or a file gave.
std::string printable(std::string_view s);
// Whether a pcap tap may write `path`: false, with `error`, for a path inside /proc, /sys or /dev
// or one that exists and is not a regular file (a tap writes frames, it must not overwrite
// anything else the process can reach).
bool pcap_path_ok(const std::string& path, std::string& error);
// Parses a whole decimal number in [lo, hi]; false (out untouched) on bad syntax or range.
// The config-string parsers (impairment plans here, the DAT provider's ia_params) share it.
bool parse_uint(std::string_view v, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out);
template <typename T>
bool parse_uint(std::string_view v, T lo, T hi, T& out) {
  std::uint64_t x = 0;
  if (!parse_uint(v, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi), x)) return false;
  out = static_cast<T>(x);
  return true;
}

// What the IP ID does to a datagram's last four bytes (a little-endian CRC its IP header enters,
// as RoCEv2's ICRC): the value to XOR into them when the datagram of `size` bytes carries IP ID
// `id` instead of 0. Given by the layer that computed the CRC; the netdev knows no CRC.
using IpIdSeal = std::uint32_t (*)(std::size_t size, std::uint16_t id);

// One datagram, gathered from up to three pieces (header, payload straight from registered
// memory, trailer) so the sender need not copy the payload.
struct TxFrame {
  NetAddr to;
  std::span<const std::uint8_t> head;
  std::span<const std::uint8_t> body;
  std::span<const std::uint8_t> tail;
  std::uint16_t from_port = 0;  // the UDP source port, one source_port() granted (0: the netdev's own)
  // Set when the frame's last four bytes were computed for IP ID 0: a netdev that sends it with
  // another ID (udp: the k-th datagram of a UDP GSO send carries ID k) corrects them in its own
  // copy as it sends; the frame's memory stays as given.
  IpIdSeal seal = nullptr;
  std::size_t size() const { return head.size() + body.size() + tail.size(); }
};

struct RxFrame {
  NetAddr from;
  std::uint8_t* buf = nullptr;  // caller-provided, `cap` bytes
  std::size_t cap = 0;
  std::size_t len = 0;  // filled by rx_burst
  // Set by a backend that hands over its own memory instead of copying into buf (udp: the
  // datagrams of one coalesced UDP GRO receive; dpdk: the received mbuf's data): the datagram is
  // there, valid until the next rx_burst. A caller reads bytes(), and clears data before it passes the entry in again.
  const std::uint8_t* data = nullptr;
  std::span<const std::uint8_t> bytes() const { return {data ? data : buf, len}; }
  // Ready for the next rx_burst: its buffer's whole `capacity` again, nothing lent.
  void reuse(std::size_t capacity) {
    cap = capacity;
    data = nullptr;
  }
};

struct NetdevStats {
  std::uint64_t tx_frames = 0, tx_bytes = 0, tx_dropped = 0;
  std::uint64_t rx_frames = 0, rx_bytes = 0, rx_truncated = 0;
  std::uint64_t tx_gso_sends = 0;  // udp: GSO sends (each carried a run of tx_frames)
  std::uint64_t rx_coalesced = 0;  // udp: datagrams that came in a coalesced (UDP GRO) receive of several
};

// The counters behind NetdevStats: a backend may send from one thread while another reads.
struct AtomicNetdevStats {
  std::atomic<std::uint64_t> tx_frames{0}, tx_bytes{0}, tx_dropped{0};
  std::atomic<std::uint64_t> rx_frames{0}, rx_bytes{0}, rx_truncated{0};
  std::atomic<std::uint64_t> tx_gso_sends{0}, rx_coalesced{0};
  NetdevStats snapshot() const {
    return {tx_frames.load(std::memory_order_relaxed),    tx_bytes.load(std::memory_order_relaxed),
            tx_dropped.load(std::memory_order_relaxed),   rx_frames.load(std::memory_order_relaxed),
            rx_bytes.load(std::memory_order_relaxed),     rx_truncated.load(std::memory_order_relaxed),
            tx_gso_sends.load(std::memory_order_relaxed), rx_coalesced.load(std::memory_order_relaxed)};
  }
};

// A seeded impairment plan, applied to every datagram a netdev sends. The same seed and the
// same sequence of sends give the same decisions.
struct ImpairPlan {
  std::uint64_t seed = 1;
  double drop = 0;             // probability a datagram is lost
  double dup = 0;              // probability it is sent twice
  double corrupt = 0;          // probability one byte of it is flipped
  std::uint32_t reorder = 0;   // datagrams held and released in random order within a window of this many
  std::uint32_t delay_us = 0;  // every datagram held this long
  bool active() const { return drop > 0 || dup > 0 || corrupt > 0 || reorder > 1 || delay_us > 0; }
};
// Parses `key=value` items (seed, drop, dup, reorder, delay, corrupt) separated by `sep` over
// `plan`. False with `error` naming the bad item.
bool parse_impair(std::string_view spec, char sep, ImpairPlan& plan, std::string& error);
std::string to_string(const ImpairPlan& p);

struct ImpairStats {
  std::uint64_t sent = 0, dropped = 0, duplicated = 0, corrupted = 0, reordered = 0;
};

// A peer the network reported unreachable (ICMP destination unreachable for a datagram sent to it).
struct Unreachable {
  NetAddr peer;
  bool port = false;  // port unreachable (nothing receives there); else host or network unreachable
  friend bool operator==(const Unreachable&, const Unreachable&) = default;
};

// What the progress engine blocks on.
class Waitable {
 public:
  virtual ~Waitable() = default;
  // Blocks until something may be ready, wake() is called, or the timeout passes.
  virtual void wait_rx(std::chrono::microseconds timeout) = 0;
  // Ends a wait_rx in another thread early. Safe from any thread.
  virtual void wake() = 0;
};

// Whether a wait_rx in this thread ended on a signal (EINTR) since the last call, which clears
// it: a consumer thread that waits by driving the engine (ibv_get_cq_event) returns EINTR as the
// read() it stands for would (qperf ends its tests with SIGALRM). Backends that block in the
// kernel set it (note_wait_interrupted).
bool take_wait_interrupted();
void note_wait_interrupted();
// Blocks in the calling thread the signals an application handles, not the faults: for the
// threads the library starts. A signal that landed there would run the application's handler on
// it and interrupt nothing the application waits in (qperf's SIGALRM must end the consumer's
// blocking wait); memory faults on registered memory are still caught there (run_guarded).
void block_async_signals();

class Netdev : public Waitable {
 public:
  // The address peers reach this netdev at (the real bound port).
  virtual NetAddr local_addr() const = 0;
  // Largest datagram payload this netdev carries.
  virtual std::size_t max_datagram() const = 0;
  // Sends up to frames.size() datagrams; returns how many were accepted. Never blocks.
  virtual std::size_t tx_burst(std::span<const TxFrame> frames) = 0;
  // Receives up to out.size() datagrams into the callers' buffers (or lends its own memory:
  // RxFrame::data); returns how many. Never blocks. A datagram longer than its entry's cap is
  // dropped and counted (rx_truncated). A backend may exchange the buffers (buf and cap) among
  // the entries: each entry still names one of the buffers given, the first ones filled.
  virtual std::size_t rx_burst(std::span<RxFrame> out) = 0;
  virtual NetdevStats stats() const = 0;
  // Bytes the receive side can hold before it drops (the kernel socket buffer for udp).
  virtual std::size_t rx_buffer_bytes() const = 0;
  // What an impairment plan did (zero without one).
  virtual ImpairStats impair_stats() const { return {}; }
  // Whether reports of unreachable peers wait (cheap: the engine asks after every receive round).
  virtual bool errors_pending() const { return false; }
  // Takes up to out.size() of the reports waiting; how many. Called from the thread that calls
  // tx_burst and rx_burst.
  virtual std::size_t unreachable(std::span<Unreachable> out) {
    (void)out;
    return 0;
  }
  // The UDP source port datagrams may carry (TxFrame::from_port) when a sender asks for `wanted`
  // (RoCEv2 spreads QPs over source ports for ECMP, as rxe does): `wanted` when this netdev can
  // send from it, else its own port. Called from the thread that calls tx_burst.
  virtual std::uint16_t source_port(std::uint16_t wanted) {
    (void)wanted;
    return local_addr().port;
  }
  // A connection to `peer` begins (up) or ends (down); every up is matched by one down, and
  // several connections may share a peer. A backend may keep per-peer state while a peer has
  // connections (udp: a socket connected to it, which saves the kernel a route lookup per
  // datagram); the default ignores the hint. Called from the thread that calls tx_burst and
  // rx_burst, never at the same time as them.
  virtual void peer_hint(NetAddr peer, bool up) {
    (void)peer;
    (void)up;
  }
};

// ---- Byte streams (TCP) ----

// A TCP connection of a StreamNetdev; never 0, not reused while the netdev lives.
using StreamId = std::uint32_t;

enum class StreamEventKind : std::uint8_t {
  accepted,        // a connection came in on a listening port (id is new)
  connected,       // a connect() completed
  connect_failed,  // a connect() failed (error: errno, e.g. ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH)
  readable,        // bytes (or the end of the stream) wait to be read
  writable,        // the socket takes bytes again (after want_writable)
  closed,          // the connection ended (error: 0 for the peer's orderly close, else errno); id is gone
};

struct StreamEvent {
  StreamEventKind kind = StreamEventKind::readable;
  StreamId id = 0;
  NetAddr peer{};                // accepted, connected: the remote address
  std::uint16_t local_port = 0;  // accepted: the listening port it came in on; connected: our port
  int error = 0;
};

class StreamNetdev : public Waitable {
 public:
  // The local IPv4 address (host order) connections are made from and listened on.
  virtual std::uint32_t local_ip() const = 0;
  // Listens on TCP `port` of local_ip() (0: a free port); returns the port bound, 0 with `error`.
  virtual std::uint16_t listen(std::uint16_t port, std::string& error) = 0;
  virtual void stop_listen(std::uint16_t port) = 0;
  // Starts a non-blocking connect (TCP_NODELAY set); the outcome comes as a connected or
  // connect_failed event. 0 with `error` when it cannot even start.
  virtual StreamId connect(NetAddr to, std::string& error) = 0;
  // Writes what the socket takes now of `pieces`, in order (one gathered send); returns the bytes
  // taken (possibly fewer than offered, possibly 0), or -1 when the connection is broken (a
  // closed event follows). Never blocks.
  virtual std::ptrdiff_t write(StreamId id, std::span<const std::span<const std::uint8_t>> pieces) = 0;
  // Reads what is there, up to buf.size(); 0 when nothing is there now; -1 when the stream ended
  // or broke (a closed event follows). Never blocks.
  virtual std::ptrdiff_t read(StreamId id, std::span<std::uint8_t> buf) = 0;
  // Asks for one writable event when the socket takes bytes again (after a short write).
  virtual void want_writable(StreamId id) = 0;
  // hold: the connection is not reported readable (nor its end) until released; what the peer
  // sends waits in the kernel, and TCP's window pushes back on it. For a request the consumer
  // has not decided on: nothing behind it is read into memory meanwhile.
  virtual void hold_reads(StreamId id, bool hold) = 0;
  // Closes the connection: orderly (FIN after what was written) or abortive (RST). No event follows.
  virtual void close(StreamId id, bool abort) = 0;
  // The events since the last call, up to out.size(); never blocks. A connection with bytes
  // waiting is reported readable at each call until they are read (level-triggered).
  virtual std::size_t events(std::span<StreamEvent> out) = 0;
  // The connection's TCP maximum segment size (TCP_MAXSEG), for one FPDU per segment.
  virtual std::size_t mss(StreamId id) const = 0;
  // The caller reads this connection whenever it is reported readable, and a read that finds
  // nothing costs it no more than the system call (its data phase). So the netdev may report it
  // readable at an events() call without asking the kernel first, when that saves a system call
  // (a spinning receiver then makes one per round, as a spin on recv does); events() still asks
  // the kernel every few calls, and at the first call after a wait_rx.
  virtual void spin_read(StreamId id) { (void)id; }
  // Liveness of a connection: after `idle` without traffic, a probe every `interval`; `probes`
  // unanswered (or data unacknowledged for idle + interval * probes) end it with a closed event
  // (ETIMEDOUT). idle 0 turns it off. False when the socket refused the options.
  virtual bool keepalive(StreamId id, std::chrono::milliseconds idle, std::chrono::milliseconds interval, int probes) {
    (void)id;
    (void)idle;
    (void)interval;
    (void)probes;
    return false;
  }
  virtual NetdevStats stats() const = 0;
};

// Kernel TCP sockets on cfg.ip (Boost.Asio sockets, non-blocking; epoll and an eventfd for the
// wait). cfg.pcap: every connection's bytes are written there as TCP segments of a synthesized
// flow (handshake included), so Wireshark's iWARP dissectors decode them. nullptr with `error`.
struct NetdevConfig;
std::unique_ptr<StreamNetdev> make_tcp_netdev(const NetdevConfig& cfg, std::string& error);

// What the dpdk backend puts in a sent datagram's UDP checksum (dpdk_tx_udp_csum=).
enum class TxUdpCsum : std::uint8_t {
  automatic,  // "auto": the port's checksum offload where it has one, else 0. Both wires carry
              // their own end-to-end CRC (the framing's CRC32c, RoCEv2's ICRC), and rxe sends
              // RoCEv2 with 0 too; a software sum is a second pass over every byte sent.
  software,   // "sw": computed here over the whole datagram
  zero,       // "0": always 0 ("no checksum", RFC 768)
};

// What the dpdk backend needs (netdev=dpdk). Grammar of the config keys: see parse_netdev_item.
struct DpdkConfig {
  std::string vdev;              // devargs of the virtual device used as the port, e.g.
                                 // "net_memif0,role=server,socket=/tmp/x/memif.sock"
  std::string pci;               // or a PCI device bound to vfio-pci: "0000:03:00.0[,devargs]"
  int port = -1;                 // port id; -1 = the vdev's / PCI device's port, else port 0
  std::vector<std::string> eal;  // extra EAL arguments (checked against a known set)
  int lcore = -1;                // -l; -1 = the CPU the opening thread runs on
  std::string file_prefix;       // --file-prefix; "" = softrnic_<pid>
  std::uint32_t mem_mb = 256;    // -m
  bool hugepages = false;        // false: --no-huge
  std::uint16_t rx_desc = 1024, tx_desc = 1024;
  std::string mac;                 // source MAC; "" = the port's own
  std::uint32_t mtu = 1500;        // IP MTU; datagrams up to mtu - 28
  std::vector<std::string> neigh;  // static neighbours "IPv4@MAC"
  std::uint32_t link_timeout_ms = 5000;
  bool check_udp_checksum = false;  // drop received frames with a bad UDP checksum
  TxUdpCsum tx_udp_csum = TxUdpCsum::automatic;
  friend bool operator==(const DpdkConfig&, const DpdkConfig&) = default;
};

struct NetdevConfig {
  std::string kind = "udp";  // "udp", "loopback" or "dpdk"
  std::string ip = "127.0.0.1";
  std::uint16_t port = 5041;
  bool port_fixed = false;  // fail rather than take the next free port
  // Largest datagram; 0 = automatic: 65000 on 127.0.0.0/8 (loopback carries 64 KiB datagrams
  // without fragmenting), 1472 elsewhere (one Ethernet frame).
  std::size_t max_datagram = 0;
  std::size_t socket_buffer = 8 << 20;  // SO_RCVBUF / SO_SNDBUF request (udp; forced when root)
  // udp: a run of equal-sized datagrams to one peer leaves in one system call as one UDP GSO
  // send (UDP_SEGMENT), where the kernel takes it; else (or false) in one sendmmsg. With
  // dont_fragment it also decides the UDP checksum: Linux refuses GSO on a socket that sends
  // checksum 0, so with GSO the kernel fills it in (offloaded; a receiver checks it or ignores
  // it), and without GSO the datagrams carry 0, as rxe's do.
  bool udp_gso = true;
  // Every datagram with DF set and sent from an unconnected socket (udp: no per-peer sockets).
  // RoCEv2 needs it: its ICRC covers the IP ID, which Linux then sets to 0 for a datagram sent
  // alone and to 0, 1, 2, ... for the datagrams of one GSO send (TxFrame::seal).
  bool dont_fragment = false;
  // udp, with udp_gso and dont_fragment (a RoCEv2 device): a datagram with a shorter one behind it
  // (a reply and the ACK riding behind it) leaves as one GSO send too, and UDP_GRO stays on, so
  // that such a pair arrives and is read whole. A receiver that reads without UDP_GRO makes its
  // kernel cut the pair apart, which costs more than a sendmmsg of the two: this is for peers that
  // do the same (softrnic's RoCEv2 devices; the kernel cuts GSO sends on their way to a NIC).
  bool udp_gso_pairs = true;
  ImpairPlan impair;  // applied on send when active()
  std::string pcap;   // a pcap tap writes every datagram sent and received here
  DpdkConfig dpdk;    // netdev=dpdk only
};

// Applies one `key=value` item of a netdev configuration string (the DAT provider's ia_params
// and SOFTRNIC_NETDEV share it). Values cannot hold ',' or blanks: in dpdk_vdev and dpdk_pci a
// ';' stands for ','; dpdk_eal holds EAL arguments separated by ';'.
//   netdev=udp|loopback|dpdk  ip=A.B.C.D  port=N  port_fixed=0|1  max_datagram=N  udp_gso=0|1  udp_gso_pairs=0|1
//   pcap=FILE
//   dpdk_vdev=DEVARGS  dpdk_pci=DEVARGS  dpdk_port=N  dpdk_eal=ARG;ARG  dpdk_lcore=N
//   dpdk_prefix=NAME  dpdk_mem=MB  dpdk_huge=0|1  dpdk_rxd=N  dpdk_txd=N  dpdk_link_timeout_ms=N
//   dpdk_udp_csum=0|1  dpdk_tx_udp_csum=auto|sw|0  mac=XX:XX:XX:XX:XX:XX  mtu=N  neigh=IPv4@MAC[;IPv4@MAC...]
//   (repeatable)
// Returns `unknown` for keys that are not netdev keys; `bad` with `error` naming the item.
enum class ItemResult { ok, unknown, bad };
ItemResult parse_netdev_item(std::string_view key, std::string_view value, NetdevConfig& cfg, std::string& error);

// Checks the dpdk part of a configuration without touching DPDK: the EAL arguments against the
// known set, the vdev against the known PMDs, MAC and neighbour syntax, sizes. False with `error`.
bool validate_dpdk_config(const NetdevConfig& cfg, std::string& error);
// The EAL argument vector the dpdk backend would hand to rte_eal_init (argv[0] included), with
// the defaults filled in (-l, --file-prefix, --no-huge -m, --no-pci, --vdev with the memif
// defaults bsize=9216 and socket-abstract=no). False with `error` when validation fails.
bool dpdk_eal_args(const NetdevConfig& cfg, std::vector<std::string>& args, std::string& error);
// True when this build has the dpdk backend.
bool dpdk_available();

// Makes a netdev from its configuration (wrapped in the impairment plan when it is active);
// nullptr with `error` set on failure.
std::unique_ptr<Netdev> make_netdev(const NetdevConfig& cfg, std::string& error);

// A netdev that can hold what it is asked to send, for scripted arrival orders: while holding,
// datagrams that `hold_if` selects wait until release() or discard(); the rest pass.
class HoldingNetdev : public Netdev {
 public:
  struct Held {
    NetAddr to;
    std::vector<std::uint8_t> bytes;
    std::uint16_t from_port = 0;  // the frame's TxFrame::from_port
  };
  virtual void set_holding(bool on) = 0;
  virtual std::vector<Held> held() const = 0;
  // Sends (or drops) the held datagrams at these indexes of held(), in this order.
  virtual void release(const std::vector<std::size_t>& indexes) = 0;
  virtual void discard(const std::vector<std::size_t>& indexes) = 0;
};
std::unique_ptr<HoldingNetdev> make_holding(std::unique_ptr<Netdev> inner,
                                            std::function<bool(std::span<const std::uint8_t>)> hold_if);

// Wraps `inner` in a pcap tap that writes every datagram sent and received to `path`
// (LINKTYPE_ETHERNET, synthesized Ethernet/IPv4/UDP headers). nullptr with `error`.
// id_zero: the synthesized IPv4 headers carry ID 0 (DF datagrams: RoCEv2's ICRC covers the ID).
std::unique_ptr<Netdev> make_pcap_tap(std::unique_ptr<Netdev> inner, const std::string& path, std::string& error,
                                      bool id_zero = false);

// Wraps `inner` so that every send goes through `plan`.
std::unique_ptr<Netdev> make_impaired(std::unique_ptr<Netdev> inner, const ImpairPlan& plan);

}  // namespace softrnic::netdev
