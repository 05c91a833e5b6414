// iWARP's standard lower layer: MPA (RFC 5044, enhanced connection set-up of RFC 6581) over a
// kernel TCP connection (netdev::StreamNetdev). A wire (core::Transport) and iWARP's lower layer:
// - mpa_cm.cpp: TCP connect/listen, the MPA request/reply exchange (revisions 1 and 2, private
//   data, reject, IRD/ORD, peer-to-peer RTR, CRC and markers negotiated), timeouts as siw's,
//   graceful and abortive close;
// - mpa_stream.cpp: FPDUs sized to the MSS (one per TCP segment, as siw), written gathered,
//   completed when the socket has taken them; received through a resumable reassembler (any
//   FPDU length across reads), CRC32c checked when negotiated.
// Positions: one per FPDU; everything received is delivered at once (TCP keeps order), and what
// the socket has taken counts as acknowledged (as siw completes a Send once TCP took it).
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine.hpp"
#include "rdmap.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/wire/mpa.hpp"
#include "timer_queue.hpp"
#include "transport.hpp"

namespace softrnic::mpa {

// What this side asks for in the MPA exchange (DeviceConfig::mpa).
struct Settings {
  std::uint8_t revision = 2;  // 1 or 2 (2: RFC 6581 enhanced, IRD/ORD and RTR)
  bool crc = true;            // ask for CRC32c (on when either side asks)
  bool markers = false;       // ask the peer to insert markers toward us
  bool peer_to_peer = true;   // initiator: offer the peer-to-peer RTR (a zero-length Write)
};

// One FPDU queued for the socket: its whole image (length field, DDP/RDMAP headers, payload,
// pad, CRC; markers when the peer asked for them) is built at its first transmission, so a
// partial write resumes from the image whatever happens to the consumer's memory meanwhile.
struct TxFpdu {
  std::array<std::uint8_t, 64> head{};  // DDP/RDMAP headers (without the MPA length field)
  std::uint8_t head_len = 0;
  SglRef sgl;
  std::uint64_t sgl_off = 0;
  std::uint32_t len = 0;
  std::vector<std::uint8_t> image;  // built at first transmission
  std::size_t written = 0;          // bytes of image the socket has taken
};

enum class Phase : std::uint8_t {
  idle,
  tcp_connecting,  // initiator: the TCP connect is under way
  wait_reply,      // initiator: our MPA request is out
  established,     // FPDUs flow (the responder's wait for the initiator's first FPDU aside)
};

struct Request;

struct Conn final : iwarp::IwarpQp {
  netdev::StreamId sid = 0;
  Phase phase = Phase::idle;
  bool initiator = false;
  std::uint64_t conn_qual = 0;
  std::vector<std::uint8_t> cm_private;  // initiator: our request's private data
  Clock::time_point cm_deadline{};
  std::vector<std::uint8_t> hs;  // handshake bytes read so far (initiator: the reply)
  Request* req = nullptr;        // responder: the request we accepted

  // Negotiated.
  bool crc = false;
  bool tx_markers = false;        // we insert markers (the peer asked)
  bool rx_markers = false;        // the peer inserts markers (we asked)
  bool send_write_rtr = false;    // initiator: our first FPDU is a zero-length Write (RTR)
  bool wait_first = false;        // responder: no FPDU of ours before the initiator's first
  bool absorb_write_rtr = false;  // responder: the initiator's first FPDU is a zero-length Write RTR
  std::size_t mss = 1460;
  std::optional<wire::MpaRx> rx;

  // Send side: one position per FPDU.
  std::deque<TxFpdu> txq;
  Pos tx_queued = 0, tx_done = 0;
  std::uint64_t tx_stream = 0;  // bytes sent since SeqStart (marker positions)
  bool want_writable = false;
  bool close_when_sent = false;  // a Terminate or a graceful close: the connection ends after txq
  bool abort_when_sent = false;
  // Receive side.
  Pos rx_count = 0;
  bool local_error = false;
};

// A TCP connection that came in on a listening port, and the MPA request read from it.
struct Request final : ConnRequest {
  netdev::StreamId sid = 0;
  NetAddr from{};
  std::uint64_t conn_qual = 0;
  Clock::time_point arrived{};  // its TCP connection (the request must be whole within kRequestTimeout)
  std::vector<std::uint8_t> bytes;
  bool complete = false;  // the request arrived: the consumer has it
  // The request's contents.
  std::uint8_t revision = 0;
  bool crc = false, markers = false;
  std::optional<wire::MpaEnhanced> enhanced;
  std::vector<std::uint8_t> private_data;
};

// The TCP port of a conn_qual (OFA dapl's cma mapping); 0 for none.
std::uint16_t port_of(std::uint64_t conn_qual);

class Mpa final : public iwarp::Transport, public engine::Pollable {
 public:
  Mpa(Ctx& ctx, netdev::StreamNetdev& nd, const Settings& s);
  ~Mpa() override;

  // core::Transport (issue, acked_pos and fatal: iwarp::Transport)
  std::unique_ptr<TransportQp> make_qp_state() override { return std::make_unique<Conn>(); }
  void reset(Qp& qp) override;
  void destroy(Qp& qp) override;
  Status connect(Qp& qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                 std::chrono::milliseconds timeout) override;
  Status listen(std::uint64_t conn_qual, std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) override;
  Status stop_listen(std::uint64_t conn_qual) override;
  Status accept(ConnRequest* req, Qp& qp, std::span<const std::uint8_t> pd) override;
  Status reject(ConnRequest* req, std::span<const std::uint8_t> pd) override;
  Status disconnect(Qp& qp, bool graceful) override;
  void kick(Qp& qp) override { pump(qp); }
  Pos tx_pos(const Qp& qp) const override { return conn(qp).tx_queued; }
  void send_queue_drained(Qp& qp) override { graceful_close(qp); }
  void flush(Qp& qp) override;
  void closed(Qp& qp) override;
  void close_all() override;
  bool lingering() const override { return false; }

  // iwarp::LowerLayer
  void send_segment(Qp& qp, std::initializer_list<std::span<const std::uint8_t>> hdr, const SglRef& sgl,
                    std::uint64_t off, std::uint32_t len, bool awaited = false) override;
  std::size_t max_payload(const Qp& qp, std::size_t hdr_len) const override;
  Pos delivered(const Qp& qp) const override { return conn(qp).rx_count; }
  Pos acked(const Qp& qp) const override { return conn(qp).tx_done; }
  void hold_acks_from(Qp&, Pos) override {}  // TCP cannot take back what it acknowledged

  // engine::Pollable
  std::size_t poll(std::optional<Clock::time_point> now) override;
  std::chrono::microseconds next_wait() override;

 private:
  static Conn& conn(Qp& qp) { return static_cast<Conn&>(*qp.t); }
  static const Conn& conn(const Qp& qp) { return static_cast<const Conn&>(*qp.t); }

  // mpa_cm.cpp
  void on_accepted(const netdev::StreamEvent& e);
  void on_connected(Qp& qp);
  void on_connect_failed(Qp& qp, int error);
  void request_bytes(Request& r);
  void read_request(Request& r);
  void read_reply(Qp& qp);
  void established(Qp& qp, std::span<const std::uint8_t> after);
  // The consumer's graceful disconnect: what is posted goes first, then TCP's close.
  Status begin_graceful_close(Qp& qp);
  void graceful_close(Qp& qp);
  void end_stream(Qp& qp, bool abort);
  void drop_request(Request* r);
  void timers(Clock::time_point now);
  void rearm(Qp& qp);
  bool known_req(const ConnRequest* r) const;
  void send_raw(netdev::StreamId sid, std::span<const std::uint8_t> bytes);

  // mpa_stream.cpp
  void pump(Qp& qp);
  // The FPDU's bytes; nullptr, or why it cannot be built (what the Terminate then says).
  const char* build_image(Qp& qp, TxFpdu& f);
  bool read_stream(Qp& qp);  // true when bytes (or the end) were read
  void take(Qp& qp, std::span<const std::uint8_t> bytes);
  void on_closed(Qp& qp, int error);
  void stream_broken(Qp& qp, std::string reason);

  Ctx& ctx_;
  netdev::StreamNetdev& nd_;
  Settings set_;
  struct Listener {
    std::uint64_t conn_qual = 0;
    std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request;
  };
  std::map<std::uint16_t, Listener> listeners_;          // by TCP port (port_of)
  std::vector<Request*> reqs_;                           // connections in, their requests
  std::unordered_map<netdev::StreamId, Qp*> by_stream_;  // connections of QPs
  engine::TimerQueue timers_;
  std::vector<std::uint8_t> rx_buf_;
  std::vector<netdev::StreamEvent> events_;
};

}  // namespace softrnic::mpa
