// A RoCEv2 device's netdev seen from outside: what the device sends is recorded (every packet's
// headers, and the IB CM messages decoded), datagrams from any source can be injected into its
// receive path (RC requests, CM messages, each with its ICRC as its sender computes it), and the
// link can freeze (a stopped process: nothing leaves, what arrives waits) or die (nothing leaves,
// nothing arrives). Shared by the RoCEv2 attack and responder tests.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "harness.hpp"
#include "roce_pair.hpp"
#include "softrnic/wire/ib_cm.hpp"
#include "softrnic/wire/roce.hpp"

namespace softrnic::testing {

class RoceTap final : public ForwardingNetdev {
 public:
  struct Mad {
    netdev::NetAddr to;
    wire::ibcm::MadHdr h;
    wire::ibcm::Message m;
  };
  // A packet the device sent: its headers (the payload dropped), where it went.
  struct Sent {
    netdev::NetAddr to;
    wire::roce::Packet p;
  };
  using ForwardingNetdev::ForwardingNetdev;

  std::size_t tx_burst(std::span<const netdev::TxFrame> frames) override {
    for (const auto& f : frames) record(f);
    if (frozen || dead) return frames.size();
    return inner_->tx_burst(frames);
  }
  std::size_t rx_burst(std::span<netdev::RxFrame> out) override {
    if (dead) {
      inner_->rx_burst(out);
      return 0;
    }
    if (frozen) return 0;
    std::size_t n = 0;
    {
      std::lock_guard lk(mu_);
      for (; n < out.size() && !injected_.empty(); ++n) {
        auto& [from, d] = injected_.front();
        std::memcpy(out[n].buf, d.data(), d.size());
        out[n].len = d.size();
        out[n].data = nullptr;
        out[n].from = from;
        injected_.erase(injected_.begin());
      }
    }
    return n + inner_->rx_burst(out.subspan(n));
  }
  void wait_rx(std::chrono::microseconds t) override {
    if (frozen) {
      std::this_thread::sleep_for(std::min<std::chrono::microseconds>(t, std::chrono::milliseconds(1)));
      return;
    }
    inner_->wait_rx(t);
  }

  // A packet as its sender builds it, from `from`: headers, payload, pad, ICRC.
  void inject(netdev::NetAddr from, const wire::roce::Packet& p, std::span<const std::uint8_t> payload = {}) {
    namespace w = wire::roce;
    std::array<std::uint8_t, w::kMaxHeaderLen> hdr{};
    const std::size_t hl = w::build_headers(p, payload.size(), hdr);
    ASSERT_GT(hl, 0u);
    std::vector<std::uint8_t> d(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(hl));
    d.insert(d.end(), payload.begin(), payload.end());
    d.resize(d.size() + w::pad_of(payload.size()), 0);
    const std::span<const std::uint8_t> pieces[] = {d};
    const std::uint32_t crc = w::icrc(w::IcrcAddr{from.ip, local_addr().ip, from.port, local_addr().port}, pieces);
    for (int i = 0; i < 4; ++i) d.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
    {
      std::lock_guard lk(mu_);
      injected_.emplace_back(from, std::move(d));
    }
    inner_->wake();
  }
  // A CM message as its sender builds it: a UD Send to QP1.
  void inject(netdev::NetAddr from, const wire::ibcm::Message& m, std::uint64_t tid) {
    namespace w = wire::roce;
    std::array<std::uint8_t, wire::ibcm::kMadLen> mad{};
    ASSERT_EQ(wire::ibcm::build(m, tid, mad), wire::ibcm::kMadLen);
    w::Packet p;
    p.opcode = w::Opcode::ud_send_only;
    p.dest_qpn = w::kGsiQpn;
    p.deth = w::Deth{w::kGsiQkey, w::kGsiQpn};
    inject(from, p, mad);
  }

  // The last CM message of type M the device sent, with its MAD header.
  template <class M>
  std::optional<std::pair<wire::ibcm::MadHdr, M>> sent() const {
    std::lock_guard lk(mu_);
    for (auto it = mads_.rbegin(); it != mads_.rend(); ++it)
      if (const M* m = std::get_if<M>(&it->m)) return std::pair{it->h, *m};
    return std::nullopt;
  }
  // Every RC packet the device sent so far.
  std::vector<Sent> packets() const {
    std::lock_guard lk(mu_);
    return packets_;
  }
  // Waits up to `t` for the device to send an Acknowledge packet (an ACK or a NAK), the first one
  // or the first naming `psn`.
  std::optional<Sent> wait_ack(std::optional<std::uint32_t> psn = std::nullopt,
                               std::chrono::milliseconds t = std::chrono::milliseconds(5000)) const {
    const auto end = std::chrono::steady_clock::now() + t;
    do {
      for (const Sent& s : packets())
        if (s.p.opcode == wire::roce::Opcode::ack && (!psn || s.p.psn == *psn)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } while (std::chrono::steady_clock::now() < end);
    return std::nullopt;
  }

  std::atomic<bool> frozen{false}, dead{false};

 private:
  void record(const netdev::TxFrame& f) {
    namespace w = wire::roce;
    std::vector<std::uint8_t> b;
    for (auto part : {f.head, f.body, f.tail}) b.insert(b.end(), part.begin(), part.end());
    w::Packet p;
    if (w::parse(b, p) != w::ParseError::ok) return;
    if (p.dest_qpn != w::kGsiQpn) {
      p.payload = {};
      std::lock_guard lk(mu_);
      packets_.push_back({f.to, p});
      return;
    }
    if (p.payload.size() < wire::ibcm::kMadLen) return;
    Mad mad{f.to, {}, {}};
    if (wire::ibcm::parse(p.payload.first(wire::ibcm::kMadLen), mad.h, mad.m) != wire::ibcm::CmError::ok) return;
    std::lock_guard lk(mu_);
    mads_.push_back(mad);
  }

  mutable std::mutex mu_;
  std::vector<Mad> mads_;
  std::vector<Sent> packets_;
  std::vector<std::pair<netdev::NetAddr, std::vector<std::uint8_t>>> injected_;
};

// `side`, opened after this, sends and receives through a RoceTap; `tap` is set to it then.
inline void tap(RoceSide& side, RoceTap*& tap) {
  side.wrap = [&tap](std::unique_ptr<netdev::Netdev> nd) {
    auto t = std::make_unique<RoceTap>(std::move(nd));
    tap = t.get();
    return t;
  };
}

}  // namespace softrnic::testing
