// RC queue pairs: creation, the RESET → INIT → RTR → RTS → ERR moves of ibv_modify_qp, the post
// and poll paths the header's inline verbs call through the context's ops.
//
// The moves map onto softrnic's QP machine (soft_rnic/core/qp_state.hpp): RESET and INIT are
// softrnic's idle, RTR is Device::roce_rtr (the peer's path), RTS Device::roce_rts, ERR
// Device::modify_qp(error), RESET from anywhere else Device::modify_qp(idle) after error.
#include <cerrno>
#include <cstring>
#include <utility>

#include "abi.hpp"

using namespace softrnic;
using namespace softrnic::verbs;

namespace {

constexpr std::uint32_t kMaxInline = 512;

Device* dev_of(VQp* v) {
  return v->ctx->dev;
}

ibv_qp_state state_of(VQp* v) {
  switch (dev_of(v)->qp_state(v->q)) {
    case QpState::idle: return v->init ? IBV_QPS_INIT : IBV_QPS_RESET;
    case QpState::rtr: return IBV_QPS_RTR;
    case QpState::rts: return IBV_QPS_RTS;
    case QpState::closing: return IBV_QPS_SQD;
    case QpState::terminate: return IBV_QPS_SQE;
    case QpState::error: return IBV_QPS_ERR;
  }
  return IBV_QPS_ERR;
}

// The connection broke (retries spent, the peer's fatal NAK): the consumer hears it on the
// async fd, and a QP on an SRQ also that its last receive is done (IBTA 11.6.3.1).
void on_qp_event(VQp* v, const CmEvent& e) {
  std::shared_ptr<CmSink> cm;
  {
    std::lock_guard lk(v->cm_mu);
    cm = v->cm;
  }
  if (cm) cm->on_event(e);
  if (v->carrier || (e.type != CmEventType::broken && e.type != CmEventType::disconnected)) return;
  if (e.type == CmEventType::broken) raise_async(v->ctx, IBV_EVENT_QP_FATAL, &v->qp);
  if (v->qp.srq) raise_async(v->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &v->qp);
}

bool setup_inline(VQp* v, VPd* pd) {
  if (v->cap.max_inline_data == 0) return true;
  v->inline_buf.resize(std::size_t{v->cap.max_inline_data} * v->cap.max_send_wr);
  return dev_of(v)->reg_mr(pd->p, v->inline_buf.data(), v->inline_buf.size(), Access::local_read, v->inline_mr) ==
         Status::ok;
}

bool valid_caps(const ibv_qp_init_attr* a, const Limits& l) {
  const ibv_qp_cap& c = a->cap;
  return c.max_send_wr <= l.max_qp_wr && c.max_recv_wr <= l.max_qp_wr && c.max_send_sge <= l.max_sge &&
         c.max_recv_sge <= l.max_sge && c.max_inline_data <= kMaxInline && a->send_cq && a->recv_cq;
}

std::uint32_t mtu_bytes(ibv_mtu m) {
  return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

int to_rtr(VQp* v, const ibv_qp_attr* a, int mask) {
  constexpr int kNeeded =
      IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if ((mask & kNeeded) != kNeeded) return EINVAL;
  // iWARP connects only through its CM (as on siw); a RoCEv2 path needs an IPv4 GID.
  if (dev_of(v)->wire() != Wire::roce) return EINVAL;
  RoceRtr r;
  if (!a->ah_attr.is_global || !ipv4_of(a->ah_attr.grh.dgid, r.remote.addr.ip)) return EINVAL;
  r.remote.qpn = a->dest_qp_num;
  r.remote.psn = a->rq_psn;
  r.remote.mtu = mtu_bytes(a->path_mtu);
  if (!r.remote.mtu) return EINVAL;
  r.ird = a->max_dest_rd_atomic;
  r.min_rnr_timer = a->min_rnr_timer;
  return to_errno(dev_of(v)->roce_rtr(v->q, r));
}

int to_rts(VQp* v, const ibv_qp_attr* a, int mask) {
  constexpr int kNeeded =
      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  if ((mask & kNeeded) != kNeeded) return EINVAL;
  RoceRts t;
  t.sq_psn = a->sq_psn;
  // More Reads outstanding than softrnic keeps is taken as its most: perftest asks for the peer's
  // own figure (rxe's 128), and rxe, which would refuse more than its own, never meets a smaller one.
  t.ord = std::min<std::uint32_t>(a->max_rd_atomic, dev_of(v)->limits().max_rd);
  if (a->timeout) t.timeout = a->timeout;  // (0: no timeout in IBTA terms; the device's own here)
  t.retry_cnt = a->retry_cnt;
  t.rnr_retry = a->rnr_retry;
  return to_errno(dev_of(v)->roce_rts(v->q, t));
}

int to_reset(VQp* v) {
  Device* dev = dev_of(v);
  if (dev->qp_state(v->q) != QpState::idle) {
    if (dev->qp_state(v->q) != QpState::error) dev->modify_qp(v->q, QpState::error);
    if (const Status s = dev->modify_qp(v->q, QpState::idle); s != Status::ok) return to_errno(s);
  }
  v->init = false;
  return 0;
}

// What a move from RESET to INIT must set: a UD QP its Q_Key where an RC QP its access flags.
int init_mask(const VQp* v) {
  return IBV_QP_PKEY_INDEX | IBV_QP_PORT | (v->qp.qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
}

// A UD QP's Q_Key: this modify's, else the one INIT set.
std::uint32_t qkey_of(const VQp* v, const ibv_qp_attr* a, int mask) {
  return mask & IBV_QP_QKEY ? a->qkey : v->attr.qkey;
}

int ud_to_rts(VQp* v, const ibv_qp_attr* a, int mask) {
  if (!(mask & IBV_QP_SQ_PSN)) return EINVAL;
  RoceRts t;
  t.sq_psn = a->sq_psn;
  return to_errno(dev_of(v)->roce_rts(v->q, t));
}

int move(VQp* v, const ibv_qp_attr* a, int mask) {
  const ibv_qp_state cur = state_of(v);
  switch (a->qp_state) {
    case IBV_QPS_RESET: return to_reset(v);
    case IBV_QPS_INIT:
      if (cur != IBV_QPS_RESET && cur != IBV_QPS_INIT) return EINVAL;
      if (cur == IBV_QPS_RESET && (mask & init_mask(v)) != init_mask(v)) return EINVAL;
      if ((mask & IBV_QP_PORT) && a->port_num != 1) return EINVAL;
      v->init = true;
      return 0;
    case IBV_QPS_RTR:
      if (cur != IBV_QPS_INIT) return EINVAL;
      return v->qp.qp_type == IBV_QPT_UD ? to_errno(dev_of(v)->roce_ud_rtr(v->q, qkey_of(v, a, mask)))
                                         : to_rtr(v, a, mask);
    case IBV_QPS_RTS:
      if (cur == IBV_QPS_RTS) return 0;
      if (cur != IBV_QPS_RTR) return EINVAL;
      return v->qp.qp_type == IBV_QPT_UD ? ud_to_rts(v, a, mask) : to_rts(v, a, mask);
    case IBV_QPS_ERR:
      if (cur == IBV_QPS_ERR) return 0;
      if (const Status s = dev_of(v)->modify_qp(v->q, QpState::error); s != Status::ok) return to_errno(s);
      if (v->qp.srq) raise_async(v->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &v->qp);  // (IBTA 11.6.3.1)
      return 0;
    default: return EINVAL;  // SQD, SQE: not a consumer's move here (docs/verbs.md)
  }
}

void remember(VQp* v, const ibv_qp_attr* a, int mask) {
  ibv_qp_attr& s = v->attr;
  if (mask & IBV_QP_ACCESS_FLAGS) s.qp_access_flags = a->qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) s.pkey_index = a->pkey_index;
  if (mask & IBV_QP_PORT) s.port_num = a->port_num;
  if (mask & IBV_QP_AV) s.ah_attr = a->ah_attr;
  if (mask & IBV_QP_PATH_MTU) s.path_mtu = a->path_mtu;
  if (mask & IBV_QP_DEST_QPN) s.dest_qp_num = a->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) s.rq_psn = a->rq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = a->max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) s.min_rnr_timer = a->min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) s.sq_psn = a->sq_psn;
  if (mask & IBV_QP_TIMEOUT) s.timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT) s.retry_cnt = a->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) s.rnr_retry = a->rnr_retry;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s.max_rd_atomic = a->max_rd_atomic;
  if (mask & IBV_QP_QKEY) s.qkey = a->qkey;
}

ibv_wc_opcode wc_opcode(WcOpcode o) {
  switch (o) {
    case WcOpcode::send: return IBV_WC_SEND;
    case WcOpcode::rdma_write:
    case WcOpcode::rdma_write_imm: return IBV_WC_RDMA_WRITE;
    case WcOpcode::rdma_read: return IBV_WC_RDMA_READ;
    case WcOpcode::recv: return IBV_WC_RECV;
    case WcOpcode::recv_rdma_imm: return IBV_WC_RECV_RDMA_WITH_IMM;
    case WcOpcode::bind: return IBV_WC_BIND_MW;
    case WcOpcode::cmp_swap: return IBV_WC_COMP_SWAP;
    case WcOpcode::fetch_add: return IBV_WC_FETCH_ADD;
  }
  return IBV_WC_SEND;
}

ibv_wc_status wc_status(WcStatus s) {
  switch (s) {
    case WcStatus::success: return IBV_WC_SUCCESS;
    case WcStatus::flushed: return IBV_WC_WR_FLUSH_ERR;
    case WcStatus::local_length_error: return IBV_WC_LOC_LEN_ERR;
    case WcStatus::local_protection_error: return IBV_WC_LOC_PROT_ERR;
    case WcStatus::remote_access_error: return IBV_WC_REM_ACCESS_ERR;
    case WcStatus::remote_operation_error: return IBV_WC_REM_OP_ERR;
    case WcStatus::transport_error: return IBV_WC_RETRY_EXC_ERR;
    case WcStatus::remote_invalid_request: return IBV_WC_REM_INV_REQ_ERR;
    case WcStatus::rnr_retry_exceeded: return IBV_WC_RNR_RETRY_EXC_ERR;
  }
  return IBV_WC_GENERAL_ERR;
}

void to_ibv_wc(const Wc& w, ibv_wc& o) {
  std::memset(&o, 0, sizeof o);
  o.wr_id = w.wr_id;
  o.status = wc_status(w.status);
  o.opcode = wc_opcode(w.opcode);
  o.byte_len = w.byte_len;
  auto* v = static_cast<VQp*>(w.qp_context);
  o.qp_num = v ? v->qp.qp_num : 0;
  o.src_qp = v ? v->attr.dest_qp_num : 0;
  if (v && v->qp.qp_type == IBV_QPT_UD && w.opcode == WcOpcode::recv) {
    o.src_qp = w.src_qp;
    if (w.status == WcStatus::success) o.wc_flags |= IBV_WC_GRH;  // (the buffer's first 40 bytes)
    // The L3 header the GRH holds, as mlx5 reports it in the SL bits (2: IPv4): UCX's UD reads it
    // to find the destination address in the GRH (rxe reports 0, and UCX then drops the datagram).
    o.sl = 2;
  }
  if (w.with_imm) {
    o.wc_flags |= IBV_WC_WITH_IMM;
    o.imm_data = w.imm;
  } else if (w.invalidated_stag) {
    o.wc_flags |= IBV_WC_WITH_INV;
    o.invalidated_rkey = w.invalidated_stag;
  }
}

// A work request's SGE list as softrnic's, into `out` (room for any QP's max_sge); EINVAL for more
// than `max`, as rxe answers.
int to_sges(const ibv_sge* list, int num, std::uint32_t max, Sge* out) {
  if (num < 0 || static_cast<std::uint32_t>(num) > max) return EINVAL;
  for (int i = 0; i < num; ++i) out[i] = Sge{list[i].lkey, list[i].addr, list[i].length};
  return 0;
}

// One ibv_recv_wr as softrnic's, its SGEs into `sges`.
int to_recv_wr(const ibv_recv_wr* wr, std::uint32_t max_sge, Sge* sges, RecvWr& out) {
  if (const int e = to_sges(wr->sg_list, wr->num_sge, max_sge, sges)) return e;
  out = RecvWr{wr->wr_id, {sges, static_cast<std::size_t>(wr->num_sge)}};
  return 0;
}

// One ibv_send_wr as softrnic's (its SGEs into `sges`; inline data copied into the QP's region).
int to_send_wr(VQp* v, const ibv_send_wr* wr, SendWr& out, Sge* sges) {
  if (const int e = to_sges(wr->sg_list, wr->num_sge, v->cap.max_send_sge, sges)) return e;
  std::size_t n = static_cast<std::size_t>(wr->num_sge);
  out.wr_id = wr->wr_id;
  out.signaled = v->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
  out.fence = (wr->send_flags & IBV_SEND_FENCE) != 0;
  switch (wr->opcode) {
    case IBV_WR_SEND:
      out.opcode = wr->send_flags & IBV_SEND_SOLICITED ? SendOpcode::send_solicited : SendOpcode::send;
      break;
    case IBV_WR_SEND_WITH_IMM:
      out.opcode = SendOpcode::send_imm;
      out.imm = wr->imm_data;
      break;
    case IBV_WR_SEND_WITH_INV:
      out.opcode = SendOpcode::send_invalidate;
      out.invalidate_stag = wr->invalidate_rkey;
      break;
    case IBV_WR_RDMA_WRITE: out.opcode = SendOpcode::rdma_write; break;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      out.opcode = SendOpcode::rdma_write_imm;
      out.imm = wr->imm_data;
      break;
    case IBV_WR_RDMA_READ: out.opcode = SendOpcode::rdma_read; break;
    case IBV_WR_ATOMIC_CMP_AND_SWP: out.opcode = SendOpcode::cmp_swap; break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: out.opcode = SendOpcode::fetch_add; break;
    default: return EINVAL;
  }
  if (v->qp.qp_type == IBV_QPT_UD) {
    // The AH's address and the peer's QPN; a Q_Key with its high bit set is the QP's own (IBTA 10.2.5).
    if (!wr->wr.ud.ah) return EINVAL;
    out.ud.ip = reinterpret_cast<const VAh*>(wr->wr.ud.ah)->to.ip;
    out.ud.qpn = wr->wr.ud.remote_qpn;
    out.ud.qkey = wr->wr.ud.remote_qkey & 0x80000000u ? v->attr.qkey : wr->wr.ud.remote_qkey;
  } else if (out.opcode == SendOpcode::cmp_swap || out.opcode == SendOpcode::fetch_add) {
    out.rkey = wr->wr.atomic.rkey;
    out.remote_addr = wr->wr.atomic.remote_addr;
    out.compare_add = wr->wr.atomic.compare_add;
    out.swap = wr->wr.atomic.swap;
  } else {
    out.rkey = wr->wr.rdma.rkey;
    out.remote_addr = wr->wr.rdma.remote_addr;
  }
  if (wr->send_flags & IBV_SEND_INLINE && out.opcode != SendOpcode::rdma_read && out.opcode != SendOpcode::cmp_swap &&
      out.opcode != SendOpcode::fetch_add) {
    std::uint64_t len = 0;
    for (std::size_t i = 0; i < n; ++i) len += sges[i].length;
    if (len > v->cap.max_inline_data) return EINVAL;
    const std::uint64_t slot = v->inline_next++ % v->cap.max_send_wr;
    std::uint8_t* at = v->inline_buf.data() + slot * v->cap.max_inline_data;
    std::uint64_t off = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::memcpy(at + off, reinterpret_cast<const void*>(sges[i].addr), sges[i].length);
      off += sges[i].length;
    }
    sges[0] = Sge{dev_of(v)->query_mr(v->inline_mr).stag, reinterpret_cast<std::uintptr_t>(at),
                  static_cast<std::uint32_t>(len)};
    n = len ? 1 : 0;
  }
  out.sgl = std::span<const Sge>(sges, n);
  return 0;
}

}  // namespace

namespace softrnic::verbs {

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  auto* v = reinterpret_cast<VQp*>(qp);
  Sge sges[32];
  for (; wr; wr = wr->next) {
    SendWr w;
    int e = to_send_wr(v, wr, w, sges);
    if (!e) e = to_errno(dev_of(v)->post_send(v->q, w));
    if (e) {
      *bad = wr;
      return e;
    }
  }
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  auto* v = reinterpret_cast<VQp*>(qp);
  Sge sges[32];
  for (; wr; wr = wr->next) {
    RecvWr r;
    int e = to_recv_wr(wr, v->cap.max_recv_sge, sges, r);
    if (!e && !v->init && dev_of(v)->qp_state(v->q) == QpState::idle) e = EINVAL;  // RESET takes none
    if (!e) e = to_errno(dev_of(v)->post_recv(v->q, r));
    if (e) {
      *bad = wr;
      return e;
    }
  }
  return 0;
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  auto* v = reinterpret_cast<VSrq*>(srq);
  Sge sges[32];
  for (; wr; wr = wr->next) {
    RecvWr r;
    int e = to_recv_wr(wr, v->max_sge, sges, r);
    if (!e) e = to_errno(v->ctx->dev->post_srq_recv(v->s, r));
    if (e) {
      *bad = wr;
      return e;
    }
  }
  return 0;
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* out) {
  auto* v = reinterpret_cast<VCq*>(cq);
  Device* dev = v->ctx->dev;
  // A consumer that spins on the CQ drives the engine itself (the progress thread stands back
  // while it does); one about to wait on the CQ's completion channel (it armed the CQ: it polls
  // once more before it sleeps) announces nothing, or the engine would wait for it while it
  // sleeps (as dat_evd_dequeue with a CNO). A CQ with a channel that is polled unarmed is spun
  // on: UCX makes its CQs with channels, and arms them only when its worker goes to sleep.
  const bool will_sleep = v->channel && v->armed.load(std::memory_order_relaxed);
  if (dev->cq_empty(v->c)) dev->progress(will_sleep ? std::chrono::microseconds(0) : std::chrono::microseconds(2000));
  int got = 0;
  Wc wc[16];
  while (got < n) {
    const std::size_t k = dev->poll_cq(v->c, std::span<Wc>(wc, std::min<std::size_t>(16, n - got)));
    // The SRQ buffers taken off, told once per run of one SRQ (srq_reaped takes the device lock).
    Srq* srq = nullptr;
    std::uint32_t reaped = 0;
    for (std::size_t i = 0; i < k; ++i) {
      to_ibv_wc(wc[i], out[got++]);
      if (wc[i].srq != srq && reaped) dev->srq_reaped(srq, std::exchange(reaped, 0));
      srq = wc[i].srq;
      if (srq) reaped++;
    }
    if (reaped) dev->srq_reaped(srq, reaped);
    if (k < 16) break;
  }
  return got;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  auto* v = reinterpret_cast<VCq*>(cq);
  if (!v->channel) return EINVAL;
  v->ctx->dev->set_cq_notify_solicited(v->c, solicited_only != 0);
  v->armed.store(true, std::memory_order_seq_cst);  // (before the consumer's poll: cq_notify)
  return 0;
}

}  // namespace softrnic::verbs

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  Context* c = ctx_of(pd->context);
  // RC, and UD on RoCEv2 without an SRQ (docs/verbs.md): as rxe, and siw has no UD.
  const bool ud = a->qp_type == IBV_QPT_UD;
  if (a->qp_type != IBV_QPT_RC && !ud) return fail<ibv_qp>(EOPNOTSUPP);
  if (ud && (c->dev->wire() != Wire::roce || a->srq)) return fail<ibv_qp>(EOPNOTSUPP);
  if (!valid_caps(a, c->dev->limits())) return fail<ibv_qp>(EINVAL);
  auto* v = new VQp;
  v->ctx = c;
  v->cap = a->cap;
  v->cap.max_send_wr = std::max<std::uint32_t>(v->cap.max_send_wr, 1);
  v->cap.max_send_sge = std::max<std::uint32_t>(v->cap.max_send_sge, 1);
  v->cap.max_recv_sge = std::max<std::uint32_t>(v->cap.max_recv_sge, 1);
  if (a->srq) v->cap.max_recv_wr = 0;
  v->sig_all = a->sq_sig_all != 0;
  QpInit init;
  init.type = ud ? QpType::ud : QpType::rc;
  init.pd = reinterpret_cast<VPd*>(pd)->p;
  init.send_cq = reinterpret_cast<VCq*>(a->send_cq)->c;
  init.recv_cq = reinterpret_cast<VCq*>(a->recv_cq)->c;
  init.max_send_wr = v->cap.max_send_wr;
  init.max_recv_wr = std::max<std::uint32_t>(v->cap.max_recv_wr, 1);
  init.max_sge = std::max(v->cap.max_send_sge, v->cap.max_recv_sge);
  init.context = v;
  init.srq = a->srq ? reinterpret_cast<VSrq*>(a->srq)->s : nullptr;
  init.on_event = [v](Qp*, const CmEvent& e) { on_qp_event(v, e); };
  init.errors_complete = true;
  Status s = c->dev->create_qp(init, v->q);
  if (s == Status::ok && !setup_inline(v, reinterpret_cast<VPd*>(pd))) s = Status::insufficient_resources;
  if (s == Status::ok) s = c->dev->set_qp_access(v->q, Access::none);  // (until INIT sets qp_access_flags, as rxe)
  if (s != Status::ok) {
    if (v->q) c->dev->destroy_qp(v->q);
    delete v;
    return fail<ibv_qp>(to_errno(s));
  }
  ibv_qp& qp = v->qp;
  qp.context = pd->context;
  qp.qp_context = a->qp_context;
  qp.pd = pd;
  qp.send_cq = a->send_cq;
  qp.recv_cq = a->recv_cq;
  qp.srq = a->srq;
  qp.qp_num = c->dev->qp_num(v->q);
  qp.state = IBV_QPS_RESET;
  qp.qp_type = a->qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  v->attr.cap = a->cap = v->cap;
  return &qp;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  auto* v = reinterpret_cast<VQp*>(qp);
  if (mask & IBV_QP_ACCESS_FLAGS) {
    Access remote = Access::none;
    if (attr->qp_access_flags & IBV_ACCESS_REMOTE_READ) remote = remote | Access::remote_read;
    if (attr->qp_access_flags & IBV_ACCESS_REMOTE_WRITE) remote = remote | Access::remote_write;
    if (attr->qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) remote = remote | Access::remote_atomic;
    if (const Status s = dev_of(v)->set_qp_access(v->q, remote); s != Status::ok) return to_errno(s);
  }
  if (mask & IBV_QP_STATE) {
    if (const int e = move(v, attr, mask)) return e;
    qp->state = attr->qp_state;
  }
  remember(v, attr, mask);
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  auto* v = reinterpret_cast<VQp*>(qp);
  *attr = v->attr;
  attr->qp_state = attr->cur_qp_state = state_of(v);
  attr->cap = v->cap;
  if (init) {
    std::memset(init, 0, sizeof *init);
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->srq = qp->srq;
    init->cap = v->cap;
    init->qp_type = qp->qp_type;
    init->sq_sig_all = v->sig_all;
  }
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  auto* v = reinterpret_cast<VQp*>(qp);
  Device* dev = dev_of(v);
  if (const Status s = dev->destroy_qp(v->q); s != Status::ok) return to_errno(s);
  if (v->inline_mr) dev->dereg_mr(v->inline_mr);
  delete v;
  return 0;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) {
  return nullptr;  // created without ibv_create_qp_ex: no ibv_wr_* interface (as rdma-core answers)
}

}  // extern "C"
