// A pcap file writer (libpcap's pcap_dump, LINKTYPE_ETHERNET) shared by the pcap tap decorator
// and the dpdk backend (which writes its real frames).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

namespace softrnic::netdev {

class PcapWriter {
 public:
  // nullptr with `error` when the file cannot be created.
  static std::unique_ptr<PcapWriter> open(const std::string& path, std::string& error);
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  // Appends one Ethernet frame (the whole frame is kept, up to the snapshot length of 256 KiB).
  // Safe from any thread.
  void write(std::span<const std::uint8_t> frame);
  // Appends a frame given as pieces (headers, then payload pieces).
  void write(std::initializer_list<std::span<const std::uint8_t>> pieces);
  std::uint64_t frames() const;

 private:
  PcapWriter() = default;
  mutable std::mutex mu_;
  void* dead_ = nullptr;    // pcap_t*
  void* dumper_ = nullptr;  // pcap_dumper_t*
  std::uint64_t frames_ = 0;
};

}  // namespace softrnic::netdev
