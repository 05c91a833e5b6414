// Fuzz target: the pcap writer (netdev/src/pcap_tap.*) and the pcap tap decorator. The input is a
// list of frames, each written one of four ways: PcapWriter::write of the whole frame, of the
// frame cut into pieces at points the input chooses, sent through a tapped loopback netdev
// (head/body/tail gathered), or received through it; an input that starts with 0xFA also writes a
// frame longer than the snapshot length (256 KiB). Then the files are read back with libpcap:
// every record is there, in order, len == the frame's length, caplen == len up to the snapshot
// length, the bytes are the frame's; the tap's records are Ethernet/IPv4/UDP frames with correct
// checksums around the datagram, with the real addresses and ports.
#include <pcap/pcap.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ethernet.hpp"
#include "fuzz_check.hpp"
#include "pcap_tap.hpp"
#include "softrnic/netdev/netdev.hpp"

namespace nd = softrnic::netdev;
namespace eth = softrnic::netdev::eth;

namespace {

struct Expected {
  std::vector<std::uint8_t> bytes;
  nd::NetAddr from, to;  // tap records
};

// In TMPDIR (/tmp): the tap's path goes through the same checks as a user's pcap= file.
std::string scratch_path(const char* what) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  return (dir / ("softrnic_fuzz_" + std::to_string(::getpid()) + "_" + what + ".pcap")).string();
}

constexpr std::size_t kSnapLen = 262144;

struct Record {
  std::size_t len;
  std::vector<std::uint8_t> bytes;  // caplen of them
};

std::vector<Record> read_pcap(const std::string& path) {
  char ebuf[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), ebuf);
  FUZZ_CHECK_MSG(p != nullptr, "%s", ebuf);
  FUZZ_CHECK(pcap_datalink(p) == DLT_EN10MB);
  std::vector<Record> out;
  pcap_pkthdr* h;
  const u_char* d;
  int r;
  while ((r = pcap_next_ex(p, &h, &d)) == 1) {
    FUZZ_CHECK_MSG(h->caplen == std::min<std::size_t>(h->len, kSnapLen), "caplen %u, len %u", h->caplen, h->len);
    out.push_back({h->len, {d, d + h->caplen}});
  }
  FUZZ_CHECK_MSG(r == PCAP_ERROR_BREAK, "pcap_next_ex: %d %s", r, pcap_geterr(p));  // end of file, no error
  pcap_close(p);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string writer_path = scratch_path("writer");
  static const std::string tap_path = scratch_path("tap");
  static const struct Cleanup {
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(writer_path, ec);
      std::filesystem::remove(tap_path, ec);
    }
  } cleanup;
  std::vector<Expected> direct, tapped;
  std::string err;
  {
    auto w = nd::PcapWriter::open(writer_path, err);
    FUZZ_CHECK_MSG(w != nullptr, "%s", err.c_str());
    nd::NetdevConfig ca;
    ca.kind = "loopback";
    ca.ip = "10.1.2.3";
    ca.port = 40000;
    ca.max_datagram = 65507;
    ca.pcap = tap_path;
    nd::NetdevConfig cb = ca;
    cb.ip = "192.168.7.9";
    cb.port = 50000;
    cb.pcap.clear();
    auto a = nd::make_netdev(ca, err);  // tapped
    FUZZ_CHECK_MSG(a != nullptr, "%s", err.c_str());
    auto b = nd::make_netdev(cb, err);
    FUZZ_CHECK_MSG(b != nullptr, "%s", err.c_str());
    std::vector<std::uint8_t> rxbuf(65536);

    std::size_t i = 0;
    for (int n = 0; n < 64 && i + 2 <= size; ++n) {
      const std::uint8_t ctl = data[i];
      const std::size_t want = static_cast<std::size_t>(data[i + 1]) | static_cast<std::size_t>(ctl >> 2) << 8;
      i += 2;
      const std::size_t len = std::min(want, size - i);
      const std::span<const std::uint8_t> frame(data + i, len);
      i += len;
      // Cut points (for pieces and the tap's head/body/tail) from the frame's own first bytes.
      const std::size_t c1 = len ? frame[0] % (len + 1) : 0;
      const std::size_t c2 = len > 1 ? c1 + frame[1] % (len - c1 + 1) : c1;
      switch (ctl & 3) {
        case 0:
          w->write(frame);
          direct.push_back({{frame.begin(), frame.end()}, {}, {}});
          break;
        case 1:
          w->write({frame.first(c1), frame.subspan(c1, c2 - c1), frame.subspan(c2)});
          direct.push_back({{frame.begin(), frame.end()}, {}, {}});
          break;
        case 2: {
          const nd::TxFrame f{b->local_addr(), frame.first(c1), frame.subspan(c1, c2 - c1), frame.subspan(c2)};
          FUZZ_CHECK(a->tx_burst({&f, 1}) == 1);
          tapped.push_back({{frame.begin(), frame.end()}, a->local_addr(), b->local_addr()});
          nd::RxFrame rf{{}, rxbuf.data(), rxbuf.size(), 0};
          FUZZ_CHECK(b->rx_burst({&rf, 1}) == 1 && rf.len == len);  // (b is not tapped)
          break;
        }
        default: {
          const nd::TxFrame f{a->local_addr(), frame, {}, {}};
          FUZZ_CHECK(b->tx_burst({&f, 1}) == 1);
          nd::RxFrame rf{{}, rxbuf.data(), rxbuf.size(), 0};
          FUZZ_CHECK(a->rx_burst({&rf, 1}) == 1 && rf.len == len);
          tapped.push_back({{frame.begin(), frame.end()}, b->local_addr(), a->local_addr()});
          break;
        }
      }
    }
    if (size >= 2 && data[0] == 0xFA) {
      std::vector<std::uint8_t> big(kSnapLen + 97 * data[1]);
      for (std::size_t k = 0; k < big.size(); k += size) std::memcpy(&big[k], data, std::min(size, big.size() - k));
      w->write(big);
      direct.push_back({std::move(big), {}, {}});
    }
    FUZZ_CHECK(w->frames() == direct.size());
  }  // the writer and the tap close their files

  const auto got = read_pcap(writer_path);
  FUZZ_CHECK_MSG(got.size() == direct.size(), "%zu records for %zu frames", got.size(), direct.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const auto& want = direct[k].bytes;
    FUZZ_CHECK(got[k].len == want.size());
    FUZZ_CHECK(got[k].bytes.size() == std::min(want.size(), kSnapLen));
    FUZZ_CHECK(std::equal(got[k].bytes.begin(), got[k].bytes.end(), want.begin()));
  }

  const auto tap = read_pcap(tap_path);
  FUZZ_CHECK_MSG(tap.size() == tapped.size(), "%zu tap records for %zu datagrams", tap.size(), tapped.size());
  for (std::size_t k = 0; k < tap.size(); ++k) {
    const Expected& x = tapped[k];
    FUZZ_CHECK(tap[k].len == eth::kUdpHeaders + x.bytes.size() && tap[k].bytes.size() == tap[k].len);
    const eth::ParsedFrame p = eth::parse_frame(tap[k].bytes, true);
    FUZZ_CHECK_MSG(p.kind == eth::FrameKind::udp, "tap record %zu parses as %s", k, eth::to_string(p.kind));
    FUZZ_CHECK(p.src == x.from && p.dst == x.to);
    FUZZ_CHECK(p.src_mac == eth::mac_from_ip(x.from.ip) && p.dst_mac == eth::mac_from_ip(x.to.ip));
    FUZZ_CHECK(p.payload_off == eth::kUdpHeaders && p.payload_len == x.bytes.size());
    FUZZ_CHECK(x.bytes.empty() ||
               std::memcmp(tap[k].bytes.data() + p.payload_off, x.bytes.data(), x.bytes.size()) == 0);
  }
  return 0;
}
