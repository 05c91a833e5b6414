// The pcap tap: a decorator that writes every datagram a netdev sends or receives to a pcap
// file, wrapped in synthesized Ethernet/IPv4/UDP headers (MACs 02:00:<IPv4 address>, the real
// addresses and ports, correct checksums) so Wireshark and tshark decode it like a wire capture.
#include "pcap_tap.hpp"

#include <pcap/pcap.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "backends.hpp"
#include "ethernet.hpp"

namespace softrnic::netdev {

namespace {
constexpr int kSnapLen = 262144;
constexpr std::uint64_t kFlushEvery = 64;
}  // namespace

std::unique_ptr<PcapWriter> PcapWriter::open(const std::string& path, std::string& error) {
  std::unique_ptr<PcapWriter> w(new PcapWriter);
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, kSnapLen);
  if (!dead) {
    error = "pcap tap: pcap_open_dead failed";
    return nullptr;
  }
  w->dead_ = dead;
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  if (!d) {
    error = "pcap tap: cannot create '" + path + "': " + pcap_geterr(dead);
    return nullptr;
  }
  w->dumper_ = d;
  return w;
}

PcapWriter::~PcapWriter() {
  if (dumper_) pcap_dump_close(static_cast<pcap_dumper_t*>(dumper_));
  if (dead_) pcap_close(static_cast<pcap_t*>(dead_));
}

void PcapWriter::write(std::span<const std::uint8_t> frame) {
  write({frame});
}

void PcapWriter::write(std::initializer_list<std::span<const std::uint8_t>> pieces) {
  std::size_t len = 0;
  for (auto p : pieces) len += p.size();
  pcap_pkthdr h{};
  ::gettimeofday(&h.ts, nullptr);
  h.len = static_cast<bpf_u_int32>(len);
  // Only the snapshot length is kept of a longer frame, as a capture would: libpcap refuses a
  // record longer than the file's snapshot length, and the rest of the file with it.
  h.caplen = static_cast<bpf_u_int32>(std::min<std::size_t>(len, kSnapLen));
  std::lock_guard lk(mu_);
  auto* d = static_cast<pcap_dumper_t*>(dumper_);
  if (pieces.size() == 1) {
    pcap_dump(reinterpret_cast<u_char*>(d), &h, pieces.begin()->data());
  } else {
    static thread_local std::vector<std::uint8_t> buf;
    buf.clear();
    for (auto p : pieces) buf.insert(buf.end(), p.begin(), p.end());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, buf.data());
  }
  if (++frames_ % kFlushEvery == 0) pcap_dump_flush(d);
}

std::uint64_t PcapWriter::frames() const {
  std::lock_guard lk(mu_);
  return frames_;
}

namespace {

class PcapTapNetdev final : public Netdev {
 public:
  PcapTapNetdev(std::unique_ptr<Netdev> inner, std::unique_ptr<PcapWriter> w, bool id_zero)
      : inner_(std::move(inner)), w_(std::move(w)), id_zero_(id_zero) {}

  NetAddr local_addr() const override { return inner_->local_addr(); }
  std::size_t max_datagram() const override { return inner_->max_datagram(); }
  std::size_t rx_buffer_bytes() const override { return inner_->rx_buffer_bytes(); }
  NetdevStats stats() const override { return inner_->stats(); }
  ImpairStats impair_stats() const override { return inner_->impair_stats(); }
  void wait_rx(std::chrono::microseconds timeout) override { inner_->wait_rx(timeout); }
  void wake() override { inner_->wake(); }
  void peer_hint(NetAddr peer, bool up) override { inner_->peer_hint(peer, up); }
  bool errors_pending() const override { return inner_->errors_pending(); }
  std::size_t unreachable(std::span<Unreachable> out) override { return inner_->unreachable(out); }
  std::uint16_t source_port(std::uint16_t wanted) override { return inner_->source_port(wanted); }

  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    const std::size_t n = inner_->tx_burst(frames);
    const NetAddr me = inner_->local_addr();
    for (std::size_t i = 0; i < n; ++i) {
      const TxFrame& f = frames[i];
      const NetAddr from{me.ip, f.from_port ? f.from_port : me.port};
      record(from, f.to, {f.head, f.body, f.tail});
    }
    return n;
  }

  std::size_t rx_burst(std::span<RxFrame> out) override {
    const std::size_t n = inner_->rx_burst(out);
    const NetAddr me = inner_->local_addr();
    for (std::size_t i = 0; i < n; ++i) record(out[i].from, me, {out[i].bytes()});
    return n;
  }

 private:
  void record(NetAddr from, NetAddr to, std::initializer_list<std::span<const std::uint8_t>> payload) {
    std::uint8_t hdr[eth::kUdpHeaders];
    const eth::UdpFrameAddrs a{eth::mac_from_ip(from.ip), eth::mac_from_ip(to.ip), from, to};
    // (DF datagrams: IP ID 0, as the kernel and the dpdk netdev send them; RoCEv2's ICRC covers it.)
    const auto id =
        id_zero_ ? std::uint16_t{0} : static_cast<std::uint16_t>(ip_id_.fetch_add(1, std::memory_order_relaxed));
    eth::write_udp_headers(hdr, a, id, payload);
    std::span<const std::uint8_t> p[3];
    std::size_t k = 0;
    for (auto s : payload) p[k++] = s;
    if (k == 1)
      w_->write({std::span<const std::uint8_t>(hdr), p[0]});
    else
      w_->write({std::span<const std::uint8_t>(hdr), p[0], p[1], p[2]});
  }

  std::unique_ptr<Netdev> inner_;
  std::unique_ptr<PcapWriter> w_;
  std::atomic<std::uint32_t> ip_id_{1};
  bool id_zero_ = false;
};

}  // namespace

std::unique_ptr<Netdev> make_pcap_tap(std::unique_ptr<Netdev> inner, const std::string& path, std::string& error,
                                      bool id_zero) {
  auto w = PcapWriter::open(path, error);
  if (!w) return nullptr;
  return std::make_unique<PcapTapNetdev>(std::move(inner), std::move(w), id_zero);
}

}  // namespace softrnic::netdev
