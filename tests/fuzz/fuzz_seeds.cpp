// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from real traffic:
//   fuzz_seeds OUTDIR [capture.pcap ...]
// Two RNICs over the loopback netdev run a session (connect, Sends of one and several segments,
// RDMA Write, RDMA Read, a window bound and invalidated by a Send with Invalidate, a graceful
// close, a Terminate after a write to a bad STag, an abrupt close, a rejected request); every
// datagram they send is recorded. Datagrams from pcap files (a capture of scripts/demo.sh with
// SOFTRNIC_PCAP=file.pcap, say) are added to the framing corpora. From them: datagrams (frame),
// DDP segments (ddp), Ethernet frames as the pcap tap and the dpdk netdev write them plus ARP
// (ethernet), frame lists in fuzz_pcap's format (pcap), programs of fuzz_stateful (stateful) and
// configuration strings from README's tables (ia_params). At most a few dozen files per target.
#include <pcap/pcap.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ethernet.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/rnic.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/udp_frame.hpp"
#include "stateful_ops.hpp"

using namespace softrnic;
namespace w = softrnic::wire;
namespace nd = softrnic::netdev;
namespace eth = softrnic::netdev::eth;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using Bytes = std::vector<std::uint8_t>;

struct Dgram {
  nd::NetAddr from, to;
  Bytes bytes;
};

class Recorder final : public nd::Netdev {
 public:
  Recorder(std::unique_ptr<nd::Netdev> inner, std::vector<Dgram>& out, std::mutex& mu)
      : inner_(std::move(inner)), out_(out), mu_(mu) {}
  nd::NetAddr local_addr() const override { return inner_->local_addr(); }
  std::size_t max_datagram() const override { return inner_->max_datagram(); }
  std::size_t rx_buffer_bytes() const override { return inner_->rx_buffer_bytes(); }
  nd::NetdevStats stats() const override { return inner_->stats(); }
  std::size_t rx_burst(std::span<nd::RxFrame> out) override { return inner_->rx_burst(out); }
  void wait_rx(std::chrono::microseconds t) override { inner_->wait_rx(t); }
  void wake() override { inner_->wake(); }
  std::size_t tx_burst(std::span<const nd::TxFrame> frames) override {
    {
      std::lock_guard lk(mu_);
      for (const auto& f : frames) {
        Dgram d{inner_->local_addr(), f.to, {}};
        for (auto part : {f.head, f.body, f.tail}) d.bytes.insert(d.bytes.end(), part.begin(), part.end());
        out_.push_back(std::move(d));
      }
    }
    return inner_->tx_burst(frames);
  }

 private:
  std::unique_ptr<nd::Netdev> inner_;
  std::vector<Dgram>& out_;
  std::mutex& mu_;
};

void die(const std::string& what) {
  std::fprintf(stderr, "fuzz_seeds: %s\n", what.c_str());
  std::exit(1);
}

template <typename Pred>
void wait_for(Device& a, Device& b, Pred pred, const char* what) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    a.progress();
    b.progress();
    if (std::chrono::steady_clock::now() > until) die(std::string("timed out waiting for ") + what);
    std::this_thread::sleep_for(50us);
  }
}

// The session. Returns every datagram sent, in order.
std::vector<Dgram> record_session() {
  std::vector<Dgram> rec;
  std::mutex mu;
  const auto make = [&](std::uint16_t port) {
    nd::NetdevConfig c;
    c.kind = "loopback";
    c.port = port;
    c.max_datagram = 1472;
    std::string e;
    auto inner = nd::make_netdev(c, e);
    if (!inner) die(e);
    DeviceConfig dc;
    return Device::open(dc, std::make_unique<Recorder>(std::move(inner), rec, mu));
  };
  std::vector<std::uint8_t> amem(1 << 16, 0x11), bmem(1 << 16, 0x22);
  {
    auto a = make(46100);
    auto b = make(46200);
    Pd* pa = a->alloc_pd();
    Pd* pb = b->alloc_pd();
    Mr *ma = nullptr, *mb = nullptr, *mw = nullptr;
    if (a->reg_mr(pa, amem.data(), amem.size(), Access::local_write | Access::local_read | Access::remote_read, ma) !=
            Status::ok ||
        b->reg_mr(pb, bmem.data(), bmem.size(),
                  Access::local_write | Access::local_read | Access::remote_write | Access::remote_read,
                  mb) != Status::ok ||
        b->alloc_mw(pb, mw) != Status::ok)
      die("registration failed");
    Cq* ca = a->create_cq(1024, nullptr);
    Cq* cb = b->create_cq(1024, nullptr);
    std::mutex rmu;
    std::vector<ConnRequest*> reqs;
    b->listen(0x5eed, [&](ConnRequest* r, const ConnRequestInfo&) {
      std::lock_guard lk(rmu);
      reqs.push_back(r);
    });
    const auto take_req = [&] {
      std::lock_guard lk(rmu);
      ConnRequest* r = reqs.empty() ? nullptr : reqs.front();
      if (r) reqs.erase(reqs.begin());
      return r;
    };
    std::size_t wcs_a = 0, wcs_b = 0;
    const auto reap = [&] {
      Wc wc[64];
      wcs_a += a->poll_cq(ca, wc);
      wcs_b += b->poll_cq(cb, wc);
    };
    for (int conn = 0; conn < 4; ++conn) {
      QpInit qi;
      qi.pd = pa;
      qi.send_cq = qi.recv_cq = ca;
      qi.ord = qi.ird = 4;
      qi.max_sge = 2;
      Qp *qa = nullptr, *qb = nullptr;
      a->create_qp(qi, qa);
      qi.pd = pb;
      qi.send_cq = qi.recv_cq = cb;
      b->create_qp(qi, qb);
      const std::uint32_t sb = b->query_mr(mb).stag, sa = a->query_mr(ma).stag;
      for (int i = 0; i < 8; ++i) {
        const Sge g{sb, reinterpret_cast<std::uintptr_t>(bmem.data()) + 4096u * i, 4096};
        b->post_recv(qb, RecvWr{static_cast<std::uint64_t>(100 + i), {&g, 1}});
      }
      const std::uint8_t pdata[] = {'s', 'e', 'e', 'd', static_cast<std::uint8_t>(conn)};
      a->connect(qa, b->address(), 0x5eed, pdata, 2000ms);
      ConnRequest* r = nullptr;
      wait_for(
          *a, *b, [&] { return (r = take_req()) != nullptr; }, "the request");
      if (conn == 3) {  // a rejected request, then the same QP pair is not used again
        b->reject(r, pdata);
        wait_for(
            *a, *b, [&] { return a->qp_state(qa) != QpState::idle; }, "the reject");
        reap();
        a->destroy_qp(qa);
        b->destroy_qp(qb);
        break;
      }
      b->accept(r, qb, pdata);
      wait_for(
          *a, *b, [&] { return a->qp_state(qa) == QpState::rts; }, "the connection");
      const auto base_a = reinterpret_cast<std::uintptr_t>(amem.data());
      const auto base_b = reinterpret_cast<std::uintptr_t>(bmem.data());
      std::size_t posted = 0;
      const auto send = [&](SendOpcode op, std::uint32_t len, std::uint32_t rkey = 0, std::uint64_t raddr = 0,
                            std::uint32_t inv = 0) {
        const Sge g{sa, base_a + 128, len};
        SendWr wr{posted + 1, op, {&g, 1}};
        wr.rkey = rkey;
        wr.remote_addr = raddr;
        wr.invalidate_stag = inv;
        if (a->post_send(qa, wr) == Status::ok) posted++;
        wait_for(
            *a, *b,
            [&] {
              reap();
              return wcs_a >= posted || a->qp_state(qa) != QpState::rts;
            },
            "a completion");
      };
      if (conn == 0) {
        send(SendOpcode::send, 64);
        send(SendOpcode::send_solicited, 3000);  // three segments
        send(SendOpcode::send, 0);
        send(SendOpcode::rdma_write, 2000, sb, base_b + 8192);
        send(SendOpcode::rdma_read, 1500, b->query_mr(mb).stag, base_b + 100);
        send(SendOpcode::rdma_read, 0, b->query_mr(mb).stag, base_b);
        b->bind_mw(qb, mw, mb, base_b + 16384, 4096, Access::remote_write, 7, true);
        send(SendOpcode::rdma_write, 100, b->query_mr(mw).stag, base_b + 16384);
        send(SendOpcode::send_invalidate, 32, 0, 0, b->query_mr(mw).stag);
        // B answers: a Send from B to A (A posts a receive first).
        const Sge ga{sa, base_a + 8192, 4096};
        a->post_recv(qa, RecvWr{900, {&ga, 1}});
        const Sge gb{sb, base_b + 40000, 200};
        b->post_send(qb, SendWr{901, SendOpcode::send, {&gb, 1}});
        wait_for(
            *a, *b,
            [&] {
              reap();
              return wcs_a > posted;
            },
            "B's send");
        a->disconnect(qa, true);  // graceful
        wait_for(
            *a, *b, [&] { return a->qp_state(qa) != QpState::closing && a->qp_state(qa) != QpState::rts; },
            "the graceful close");
      } else if (conn == 1) {
        send(SendOpcode::send, 10);
        send(SendOpcode::rdma_write, 10, sb ^ 0x100, base_b);  // a bad STag: B sends a Terminate
        wait_for(
            *a, *b, [&] { return a->qp_state(qa) != QpState::rts; }, "the Terminate");
      } else {
        send(SendOpcode::send, 10);
        a->disconnect(qa, false);  // abrupt: reset
      }
      std::this_thread::sleep_for(20ms);
      for (int i = 0; i < 20; ++i) {
        a->progress();
        b->progress();
        reap();
        std::this_thread::sleep_for(1ms);
      }
      a->destroy_qp(qa);
      b->destroy_qp(qb);
    }
    // A request to a conn_qual nobody listens on.
    QpInit qi;
    qi.pd = pa;
    qi.send_cq = qi.recv_cq = ca;
    Qp* qa = nullptr;
    a->create_qp(qi, qa);
    a->connect(qa, b->address(), 0x7777, {}, 2000ms);
    wait_for(
        *a, *b, [&] { return a->qp_state(qa) != QpState::idle; }, "the no-listener reject");
    a->destroy_qp(qa);
  }  // the devices close here (resets and their answers are recorded too)
  return rec;
}

std::vector<Bytes> read_pcap_datagrams(const std::string& path) {
  char ebuf[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), ebuf);
  if (!p) die(path + ": " + ebuf);
  std::vector<Bytes> out;
  pcap_pkthdr* h;
  const u_char* d;
  while (pcap_next_ex(p, &h, &d) == 1) {
    const auto pf = eth::parse_frame({d, h->caplen}, false);
    if (pf.kind == eth::FrameKind::udp) out.emplace_back(d + pf.payload_off, d + pf.payload_off + pf.payload_len);
  }
  pcap_close(p);
  return out;
}

// A short name for a datagram: frame type, then the CM op or the RDMAP opcode.
std::string describe(const Bytes& d) {
  w::FrameHeader h;
  std::span<const std::uint8_t> body;
  if (w::open_frame(d, h, body) != w::FrameError::none) return "bad";
  switch (h.type) {
    case w::FrameType::ack: return body.empty() ? "ack" : "ack_sack";
    case w::FrameType::stream_ctrl: return "stream_ctrl";
    case w::FrameType::cm: return body.empty() ? "cm" : "cm_op" + std::to_string(body[0]);
    case w::FrameType::ddp: {
      w::DdpSegment s;
      if (w::decode_ddp(body, s) != w::DecodeError::none) return "ddp_bad";
      std::string n(w::opcode_info(s.opcode).name);
      for (char& c : n) c = c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return "ddp_" + n + (s.last ? "" : "_more");
    }
  }
  return "other";
}

class Writer {
 public:
  explicit Writer(fs::path dir) : dir_(std::move(dir)) {}
  void put(const std::string& target, const std::string& name, const Bytes& b) {
    const fs::path d = dir_ / target;
    fs::create_directories(d);
    const fs::path f = d / (name.size() > 60 ? name.substr(0, 60) : name);
    std::ofstream(f, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    counts_[target]++;
  }
  void put(const std::string& target, const std::string& name, const std::string& s) {
    put(target, name, Bytes(s.begin(), s.end()));
  }
  void summary() const {
    for (const auto& [t, n] : counts_) std::printf("fuzz_seeds: %-10s %zu files\n", t.c_str(), n);
  }

 private:
  fs::path dir_;
  std::map<std::string, std::size_t> counts_;
};

Bytes frame_of(const w::FrameHeader& h, const Bytes& body) {
  Bytes d(w::kFrameOverhead + body.size());
  w::write_frame_header(d, h);
  std::memcpy(d.data() + w::kFrameHeaderLen, body.data(), body.size());
  w::seal_frame(d, w::kFrameHeaderLen + body.size());
  return d;
}

void framing_corpora(Writer& out, const std::vector<Dgram>& session, const std::vector<Bytes>& captured) {
  // frame: one datagram of each kind (the first two), capped.
  std::map<std::string, int> seen;
  std::vector<std::pair<std::string, Bytes>> picked;
  const auto pick = [&](const std::string& prefix, const Bytes& d) {
    const std::string k = describe(d);
    if (seen[prefix + k]++ >= 2 || picked.size() >= 40) return;
    picked.emplace_back(prefix + k + "_" + std::to_string(seen[prefix + k]), d);
  };
  for (const auto& d : session) pick("", d.bytes);
  for (const auto& d : captured) pick("capture_", d);
  // Hand-made: an ACK with SACK blocks, a bad version, a bad type, a bad CRC, too short.
  const std::vector<w::SackRange> blocks = {{100, 104}, {110, 111}, {0xFFFFFFF0u, 5}};
  Bytes sack(4 + 8 * blocks.size());
  w::encode_sack(sack, blocks);
  picked.emplace_back("made_ack_3_blocks", frame_of({w::FrameType::ack, w::kFlagAckValid, 5, 6, 0, 100}, sack));
  Bytes bad = picked.front().second;
  bad[0] = 0x21;
  w::seal_frame(bad, bad.size() - 4);
  picked.emplace_back("made_bad_version", bad);
  bad[0] = 0x17;
  w::seal_frame(bad, bad.size() - 4);
  picked.emplace_back("made_bad_type", bad);
  bad = picked.front().second;
  bad.back() ^= 1;
  picked.emplace_back("made_bad_crc", bad);
  picked.emplace_back("made_short", Bytes(bad.begin(), bad.begin() + 23));
  for (const auto& [n, d] : picked) out.put("frame", n, d);

  // ddp: the body of one DDP frame per opcode, and made ones (a Terminate, bad versions, a bad QN).
  std::set<std::string> ddp_seen;
  for (const auto& [n, d] : picked) {
    w::FrameHeader h;
    std::span<const std::uint8_t> body;
    if (w::open_frame(d, h, body) != w::FrameError::none || h.type != w::FrameType::ddp) continue;
    const std::string k = describe(d);
    if (!ddp_seen.insert(k).second) continue;
    out.put("ddp", k, Bytes(body.begin(), body.begin() + std::min<std::size_t>(body.size(), 96)));
  }
  Bytes t(sizeof(w::DdpUntaggedHdr) + sizeof(w::TerminateHdr));
  w::encode_untagged(t, w::RdmapOpcode::terminate, true, w::kQnTerminate, 1, 0);
  const auto th = w::encode_terminate({w::TermLayer::ddp, 1, 2, true, false});
  std::memcpy(t.data() + sizeof(w::DdpUntaggedHdr), &th, sizeof th);
  out.put("ddp", "made_terminate", t);
  Bytes v = t;
  v[0] = static_cast<std::uint8_t>((v[0] & ~3) | 2);
  out.put("ddp", "made_bad_ddp_version", v);
  v = t;
  v[1] = static_cast<std::uint8_t>(v[1] & 0x3F);
  out.put("ddp", "made_bad_rdmap_version", v);
  Bytes q(sizeof(w::DdpUntaggedHdr) + 8, 0xAB);
  w::encode_untagged(q, w::RdmapOpcode::send, true, 3, 1, 0);
  out.put("ddp", "made_bad_qn", q);
  Bytes rr(sizeof(w::DdpUntaggedHdr) + sizeof(w::ReadRequestHdr));
  w::encode_untagged(rr, w::RdmapOpcode::read_request, true, w::kQnReadRequest, 1, 0);
  const w::ReadRequestHdr rh{w::Be32(0x100), w::Be64(0x1000), w::Be32(4096), w::Be32(0x200), w::Be64(0x2000)};
  std::memcpy(rr.data() + sizeof(w::DdpUntaggedHdr), &rh, sizeof rh);
  out.put("ddp", "made_read_request", rr);

  // ethernet: the datagrams as Ethernet frames (as the pcap tap and the dpdk netdev write them),
  // ARP request and reply, and broken ones.
  int k = 0;
  Bytes first_udp;
  for (const auto& [n, d] : picked) {
    if (n.rfind("made_", 0) == 0 || k >= 14) continue;
    Bytes f(eth::kUdpHeaders + d.size());
    const nd::NetAddr src{0x0A4E0001, 5041}, dst{0x0A4E0002, 5042};
    eth::write_udp_headers(f.data(), {eth::mac_from_ip(src.ip), eth::mac_from_ip(dst.ip), src, dst},
                           static_cast<std::uint16_t>(k), {d});
    std::memcpy(f.data() + eth::kUdpHeaders, d.data(), d.size());
    if (first_udp.empty()) first_udp = f;
    out.put("ethernet", "udp_" + n, f);
    ++k;
  }
  for (const auto op : {eth::ArpOp::request, eth::ArpOp::reply}) {
    Bytes f(eth::kMinFrame);
    eth::Arp a{op, eth::mac_from_ip(0x0A4E0001), op == eth::ArpOp::reply ? eth::mac_from_ip(0x0A4E0002) : eth::Mac{},
               0x0A4E0001, 0x0A4E0002};
    eth::write_arp_frame(f.data(), op == eth::ArpOp::request ? eth::kBroadcast : eth::mac_from_ip(0x0A4E0002), a);
    out.put("ethernet", op == eth::ArpOp::request ? "arp_request" : "arp_reply", f);
  }
  Bytes frag = first_udp;
  frag[eth::kEthHdr + 6] |= 0x20;  // MF (the header checksum is now wrong too)
  out.put("ethernet", "bad_fragment", frag);
  Bytes opts = first_udp;
  opts[eth::kEthHdr] = 0x46;  // IHL 6: the UDP header moves
  out.put("ethernet", "bad_ihl", opts);
  Bytes csum = first_udp;
  csum.back() ^= 0xFF;  // payload changed: UDP checksum wrong
  out.put("ethernet", "bad_udp_checksum", csum);
  Bytes vlan = first_udp;
  vlan[12] = 0x81;
  vlan[13] = 0x00;
  out.put("ethernet", "vlan_tag", vlan);

  // pcap: lists of frames in fuzz_pcap's format (ctl: way & 3 | length >> 8 << 2; length & 0xFF).
  const auto rec = [](Bytes& b, std::uint8_t way, const Bytes& d) {
    const std::size_t n = std::min<std::size_t>(d.size(), 0x3FFF);
    b.push_back(static_cast<std::uint8_t>(way | (n >> 8) << 2));
    b.push_back(static_cast<std::uint8_t>(n));
    b.insert(b.end(), d.begin(), d.begin() + static_cast<std::ptrdiff_t>(n));
  };
  for (std::uint8_t way = 0; way < 4; ++way) {
    Bytes b;
    int n = 0;
    for (const auto& [name, d] : picked)
      if (n++ % 4 == way) rec(b, way, d);
    out.put("pcap", "way" + std::to_string(way), b);
  }
  Bytes mixed;
  for (std::size_t i = 0; i < picked.size() && i < 12; ++i)
    rec(mixed, static_cast<std::uint8_t>(i % 4), picked[i].second);
  rec(mixed, 0, {});
  rec(mixed, 2, {});
  out.put("pcap", "mixed", mixed);
  Bytes big;
  rec(big, 1, Bytes(9000, 0x5A));
  rec(big, 2, Bytes(1472, 0xA5));
  out.put("pcap", "big", big);
  Bytes snap = {0xFA, 3};  // fuzz_pcap: and a frame longer than the snapshot length
  rec(snap, 0, Bytes(100, 0x42));
  out.put("pcap", "regress_over_snaplen", snap);
}

void stateful_corpus(Writer& out) {
  using fuzzops::Program;
  const auto pre = [](std::uint8_t flags, std::uint8_t nrecv_a, std::uint8_t nrecv_b) {
    Program p;
    p.u8(flags).u8(2).u8(2).u8(nrecv_a).u8(nrecv_b);
    return p;
  };
  // Header fields of injected frames: sel 0 = live values, seq = what the target expects.
  const auto hdr = [](Program& p, std::uint8_t sel = 0, std::uint16_t ds = 0, std::uint16_t da = 0) {
    p.u8(sel).u16(ds).u16(da);
  };
  const auto progress = [](Program& p, std::uint8_t n = 3) { p.u8(fuzzops::kProgress).u8(n); };
  {
    Program p = pre(0, 2, 4);
    p.u8(fuzzops::kPostSend).u8(0).u8(0).u16(100).u16(0).u16(0).u8(0);  // Send 0 -> 1
    progress(p);
    p.u8(fuzzops::kPostSend).u8(0).u8(2).u16(3000).u16(10).u16(20).u8(0);  // RDMA Write
    progress(p);
    p.u8(fuzzops::kPostSend).u8(0).u8(3).u16(1500).u16(0).u16(0).u8(0);  // RDMA Read
    progress(p);
    p.u8(fuzzops::kPostSend).u8(1).u8(0).u16(50).u16(0).u16(0).u8(0);  // Send 1 -> 0
    progress(p);
    p.u8(fuzzops::kDisconnect).u8(0).u8(1);
    progress(p);
    out.put("stateful", "legit_traffic", p.b);
  }
  {
    Program p = pre(1, 0, 6);  // SRQ on side 1
    for (int i = 0; i < 3; ++i) p.u8(fuzzops::kPostSend).u8(0).u8(1).u16(200).u16(0).u16(0).u8(0);
    progress(p, 4);
    out.put("stateful", "srq_sends", p.b);
  }
  // DDP segments toward side 1 for each kind (sel % 10), live header.
  for (std::uint8_t kind = 0; kind < 10; ++kind) {
    Program p = pre(kind & 1, 1, 4);
    p.u8(fuzzops::kInjectDdp).u8(1);
    hdr(p);
    p.u8(kind).u16(64).u8(0xEE).u8(0).u16(0);  // sel, len, fill, msn delta, mo
    switch (kind) {
      case 0:
      case 1: p.u8(0).u16(16); break;  // stag_to: rw region + 16
      case 2:
      case 3:
      case 4:
      case 5: p.u8(0); break;                               // invalidate the window's STag
      case 6: p.u8(0).u16(0).u16(256).u8(1).u16(0); break;  // Read Request of 256 from ro
      case 7: p.u32(0x12020000); break;                     // Terminate
      case 8: p.u8(3).u8(1); break;                         // Send on QN 1
      default:                                              // raw control bytes: 2 + 16 of them
        p.u8(16).u8(0x41).u8(0x43);
        for (int i = 0; i < 16; ++i) p.u8(0);
        break;
    }
    progress(p);
    out.put("stateful", "ddp_kind" + std::to_string(kind), p.b);
  }
  {
    Program p = pre(0, 0, 2);
    p.u8(fuzzops::kInjectDdp).u8(1);
    hdr(p);
    p.u8(0).u16(100).u8(0x77).u8(0).u16(0).u8(0x80 | 0).u32(8190);  // write across the rw region's end
    progress(p);
    out.put("stateful", "write_across_end", p.b);
  }
  {
    Program p = pre(0, 0, 2);
    p.u8(fuzzops::kPostSend).u8(1).u8(0).u16(3000).u16(0).u16(0).u8(0);  // side 1 sends: frames in flight
    p.u8(fuzzops::kInjectAck).u8(1);
    hdr(p);
    p.u8(3).u8(4);  // 3 SACK blocks from 4 below what side 1 sent: (start delta, length - 1, 0)
    p.u8(0).u8(1).u8(0).u8(2).u8(0).u8(0).u8(4).u8(1).u8(0);
    progress(p);
    out.put("stateful", "sack_blocks", p.b);
  }
  for (std::uint8_t op = 1; op <= 8; ++op) {
    Program p = pre(0, 0, 2);
    p.u8(fuzzops::kAcceptNext).u8(1);
    p.u8(fuzzops::kInjectCm).u8(1).u8(op == 1 ? 0x04 : 0).u8(op - 1).u8(0).u8(0).u8(4).u8(2).u8(2);
    p.u8('f').u8('u').u8('z').u8('z');
    progress(p);
    out.put("stateful", "cm_op" + std::to_string(op), p.b);
  }
  {
    Program p = pre(0, 0, 2);
    p.u8(fuzzops::kInjectStreamCtrl).u8(1);
    hdr(p);
    p.u8(0);
    progress(p);
    out.put("stateful", "stream_disconnect", p.b);
  }
  {
    Program p = pre(0, 0, 2);
    p.u8(fuzzops::kBindWindow).u8(1).u16(1024).u16(512);
    progress(p, 1);
    p.u8(fuzzops::kInjectDdp).u8(1);
    hdr(p);
    p.u8(0).u16(100).u8(0x99).u8(0).u16(0).u8(3).u16(0);              // a write through the window
    p.u8(fuzzops::kPostSend).u8(0).u8(5).u16(8).u16(0).u16(0).u8(0);  // Send with Invalidate
    progress(p);
    out.put("stateful", "window", p.b);
  }
  {
    Program p = pre(0, 0, 2);
    p.u8(fuzzops::kDropOwn).u8(0).u8(1);
    p.u8(fuzzops::kPostSend).u8(0).u8(0).u16(100).u16(0).u16(0).u8(0);
    p.u8(fuzzops::kInjectFrame).u8(1).u8(0);
    hdr(p, 2 << 2, 0xFFFF);  // the sender's last sequence number again
    p.u16(30);
    for (int i = 0; i < 30; ++i) p.u8(static_cast<std::uint8_t>(i));
    progress(p);
    out.put("stateful", "drop_and_frame", p.b);
  }
  {
    Program p = pre(0, 0, 2);  // side 0's data is lost: retransmissions after the RTO
    p.u8(fuzzops::kDropOwn).u8(0).u8(1);
    p.u8(fuzzops::kPostSend).u8(0).u8(0).u16(2000).u16(0).u16(0).u8(0);
    p.u8(fuzzops::kWait).u8(3);
    progress(p);
    p.u8(fuzzops::kDropOwn).u8(0).u8(0);
    p.u8(fuzzops::kWait).u8(3);
    progress(p);
    out.put("stateful", "retransmit", p.b);
  }
  {
    Program p = pre(1 | 2 | 4, 0, 6);  // SRQ, gap_fill, watermarks soft 2 / hard 4
    for (const std::uint8_t d : std::initializer_list<std::uint8_t>{2, 0, 5}) {
      p.u8(fuzzops::kInjectDdp).u8(1);
      hdr(p, 0, d);
      p.u8(2).u16(32).u8(0x33).u8(d).u16(0).u8(0);  // a Send with MSN 1 + d
    }
    progress(p);
    out.put("stateful", "srq_gap_fill_watermarks", p.b);
  }
  {
    Program p = pre(0, 1, 2);
    p.u8(fuzzops::kPostSend).u8(0).u8(0).u16(100).u16(0).u16(0).u8(0);
    p.u8(fuzzops::kDisconnect).u8(1).u8(2);  // side 1: modify_qp to error
    progress(p);
    out.put("stateful", "modify_error", p.b);
  }
  {
    Program p = pre(0, 0, 2);
    p.u8(fuzzops::kInjectRaw).u8(1).u8(1).u16(40);
    for (int i = 0; i < 40; ++i) p.u8(static_cast<std::uint8_t>(0x10 + i));
    progress(p);
    out.put("stateful", "raw_sealed", p.b);
  }
}

void ia_params_corpus(Writer& out) {
  const char* items[] = {
      "netdev=udp ip=127.0.0.1 port=5041",
      "netdev=loopback ip=127.0.0.1 port=5041",
      "netdev=udp,ip=10.0.0.1,port=6000,port_fixed=1,max_datagram=1472,busy_poll=1",
      "min_rto_us=5000 retry_limit=12 connect_timeout_ms=20000 srq_alloc=gap_fill",
      "impair=seed=1:drop=0.02:reorder=8",
      "impair=seed=7:dup=0.5:corrupt=0.001:delay=100",
      "seed=1,drop=0.02,reorder=8",
      "pcap=/tmp/x.pcap",
      "netdev=dpdk ip=10.78.0.1 dpdk_vdev=net_memif0;role=server;socket=/tmp/d/memif.sock dpdk_lcore=1 mtu=9000",
      "netdev=dpdk ip=10.77.0.11 dpdk_vdev=net_af_packet0;iface=t_va;framesz=8192;blocksz=8192 mtu=8000",
      "netdev=dpdk ip=10.77.0.11 dpdk_vdev=net_af_xdp0;iface=t_va;start_queue=0;queue_count=1",
      "netdev=dpdk ip=192.168.10.5 dpdk_pci=0000:03:00.0 dpdk_huge=1 dpdk_lcore=2 mtu=9000 "
      "neigh=192.168.10.6@3c:fd:fe:00:00:02",
      "netdev=dpdk ip=10.78.0.2 mac=02:00:00:00:00:02 neigh=10.78.0.1@02:00:00:00:00:01;10.78.0.3@02-00-00-00-00-03",
      "netdev=dpdk ip=10.0.0.1 dpdk_eal=--log-level=pmd.net.memif:debug;--iova-mode=va;-n;4 dpdk_prefix=srt_x "
      "dpdk_mem=512 dpdk_rxd=512 dpdk_txd=2048 dpdk_link_timeout_ms=1000 dpdk_udp_csum=1 dpdk_port=0",
      "netdev=dpdk ip=10.0.0.1 dpdk_eal=--in-memory dpdk_huge=1 dpdk_eal=--vdev=net_null0",
      "netdev=dpdk ip=10.0.0.1 dpdk_vdev=net_memif0;socket=/tmp/m.sock;bsize=512 mtu=1500",
      "port=0",
      "ip=256.1.1.1",
      "mac=01:00:00:00:00:01",
      "=x",
      "busy_poll",
      "192.168.1.1",
      "00:11:22:aa:BB:cc",
      "10.0.0.2@02:00:00:00:00:02",
      "65535",
  };
  int i = 0;
  for (const char* s : items) out.put("ia_params", "readme_" + std::to_string(i++), std::string(s));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUTDIR [capture.pcap ...]\n");
    return 2;
  }
  Writer out(argv[1]);
  const auto session = record_session();
  std::vector<Bytes> captured;
  for (int i = 2; i < argc; ++i) {
    auto d = read_pcap_datagrams(argv[i]);
    captured.insert(captured.end(), d.begin(), d.end());
  }
  std::printf("fuzz_seeds: %zu datagrams recorded, %zu from captures\n", session.size(), captured.size());
  framing_corpora(out, session, captured);
  stateful_corpus(out);
  ia_params_corpus(out);
  out.summary();
  return 0;
}
