// RoCEv2 UD (IBTA vol. 1 9.8.3, annex A17): a UD QP's Sends go as one UD SEND Only packet each
// (BTH + DETH: the Q_Key and our QPN) to the address and QPN their work request names, and
// complete once sent: UD has no acknowledgement, no retransmission and no RNR. A datagram to a
// UD QP that carries its Q_Key takes the next receive buffer, behind the 40-byte GRH a verbs
// consumer expects there (RoCEv2 over IPv4: the IPv4 header in its last 20 bytes, as rxe writes
// it); with no buffer posted it is dropped.
#include <array>

#include "queues.hpp"
#include "roce.hpp"

namespace softrnic::roce {

namespace w = wire::roce;

namespace {

constexpr std::size_t kGrhLen = 40;

// The GRH of a datagram from `src` to `dst` with `payload_len` payload bytes: 20 zero bytes, then
// the IPv4 header the datagram came in (rdma-core's ibv_init_ah_from_wc reads the version, the
// header checksum and the addresses from it).
std::array<std::uint8_t, kGrhLen> grh_of(std::uint32_t src, std::uint32_t dst, std::size_t payload_len) {
  std::array<std::uint8_t, kGrhLen> g{};
  std::uint8_t* h = g.data() + 20;
  const std::size_t total = 20 + 8 + w::kBthLen + w::kDethLen + payload_len + w::pad_of(payload_len) + w::kIcrcLen;
  h[0] = 0x45;  // version 4, 5 words
  h[2] = static_cast<std::uint8_t>(total >> 8);
  h[3] = static_cast<std::uint8_t>(total);
  h[6] = 0x40;  // don't fragment
  h[8] = 64;    // TTL
  h[9] = 17;    // UDP
  for (int i = 0; i < 4; ++i) {
    h[12 + i] = static_cast<std::uint8_t>(src >> (24 - 8 * i));
    h[16 + i] = static_cast<std::uint8_t>(dst >> (24 - 8 * i));
  }
  std::uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<std::uint32_t>(h[i] << 8 | h[i + 1]);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  h[10] = static_cast<std::uint8_t>(~sum >> 8);
  h[11] = static_cast<std::uint8_t>(~sum);
  return g;
}

}  // namespace

void Roce::issue_datagram(Qp& qp, const WaitingWr& wr) {
  RoceQp& s = st(qp);
  SendWqe& wqe = *wr.wqe;
  wqe.issued = true;
  wqe.sgl = wr.sgl;
  w::Packet p;
  p.opcode = wr.opcode == SendOpcode::send_imm ? w::Opcode::ud_send_only_imm : w::Opcode::ud_send_only;
  p.solicited = wr.opcode == SendOpcode::send_solicited;
  p.dest_qpn = wr.ud.qpn;
  p.psn = static_cast<std::uint32_t>(s.next_psn & w::kPsnMask);
  p.deth = w::Deth{wr.ud.qkey, qp.qpn};
  if (wr.opcode == SendOpcode::send_imm) p.imm = wr.imm;
  s.dst = wire_addr(wr.ud.ip);  // (send_packet sends to the QP's dst)
  const bool sent = send_packet(qp, p, wr.sgl, 0, static_cast<std::uint32_t>(wr.total), qp.init.pd, false);
  s.next_psn = s.tx_psn = s.una_psn = s.ack_through = s.next_psn + 1;
  wqe.end_pos = s.next_psn;
  if (!sent) {
    complete_error(qp, WcStatus::local_protection_error, kRegionFreed);
    return;
  }
  qp.ctr.tx_frames++;
  complete_sends(qp, s.next_psn);
}

void Roce::on_datagram(Qp& qp, NetAddr from, const w::Packet& p) {
  const RoceQp& s = st(qp);
  const bool ud_send = p.opcode == w::Opcode::ud_send_only || p.opcode == w::Opcode::ud_send_only_imm;
  if (!ud_send || !p.deth || p.deth->qkey != s.qkey || (qp.state != QpState::rtr && qp.state != QpState::rts)) {
    ctx_.ctr.rx_dropped_datagrams++;
    return;
  }
  qp.ctr.rx_frames++;
  const auto grh = grh_of(from.ip, self_.ip, p.payload.size());
  const Datagram d{grh, p.payload, p.deth->src_qpn, from.ip, p.imm, p.solicited};
  if (!receive_datagram(ctx_, qp, d)) ctx_.ctr.rx_dropped_datagrams++;
}

}  // namespace softrnic::roce
