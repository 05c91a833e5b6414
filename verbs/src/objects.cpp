// Protection domains, memory regions, completion channels and queues, shared receive queues and
// address handles: each a softrnic object behind the struct the header defines.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "abi.hpp"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace softrnic;
using namespace softrnic::verbs;

namespace {

// IBTA o10-37: remote write or atomic access needs local write.
bool access_of(unsigned flags, Access& out) {
  constexpr unsigned kKnown =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if ((flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(flags & IBV_ACCESS_LOCAL_WRITE)) return false;
  // The optional flags (IBV_ACCESS_OPTIONAL_RANGE, relaxed ordering) may be ignored; others not.
  if (flags & ~(kKnown | IBV_ACCESS_OPTIONAL_RANGE)) return false;
  out = Access::local_read;
  if (flags & IBV_ACCESS_LOCAL_WRITE) out = out | Access::local_write;
  if (flags & IBV_ACCESS_REMOTE_WRITE) out = out | Access::remote_write;
  if (flags & IBV_ACCESS_REMOTE_READ) out = out | Access::remote_read;
  if (flags & IBV_ACCESS_REMOTE_ATOMIC) out = out | Access::remote_atomic;
  return true;
}

Context* ctx_pd(ibv_pd* pd) {
  return ctx_of(pd->context);
}

// One event down the channel's pipe.
void to_pipe(Channel* ch, ibv_cq* cq) {
  {
    std::lock_guard lk(ch->mu);
    ch->pending++;  // (before the write: a reader that sees it finds the pointer, or waits for it in the read)
  }
  if (::write(ch->wr, &cq, sizeof cq) != static_cast<ssize_t>(sizeof cq)) {
    // The pipe holds one pointer per armed CQ at most, far below its capacity.
  }
}

// A completion of the CQ: one event down its channel if it was armed. The fence orders the
// completion's publication before the look at `armed`, as ibv_req_notify_cq's store of `armed`
// (seq_cst) comes before the consumer's poll: else each side may see the other's old value (a
// store buffer lets a load pass an earlier store, on x86 too), the consumer finding the CQ empty
// and this finding it unarmed, and the event is lost (ibv_rc_pingpong -e hung both ends).
void cq_notify(VCq* v) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!v->armed.load(std::memory_order_relaxed) || !v->armed.exchange(false)) return;
  ibv_cq* cq = &v->cq;
  Channel* ch = v->channel;
  if (ch->waiter->driven_here()) {
    // Raised in the round of the very thread that waits for it in ibv_get_cq_event: handed over
    // without the pipe's write and read (two system calls per message on a blocking ping-pong).
    std::lock_guard lk(ch->mu);
    ch->direct.push_back(cq);
  } else {
    to_pipe(ch, cq);
  }
  ch->waiter->notify();  // (for a direct one too: the drive must not block now, CompletionChannel::notify)
}

}  // namespace

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  Pd* p = ctx_of(context)->dev->alloc_pd();
  if (!p) return fail<ibv_pd>(ENOMEM);
  auto* v = new VPd;
  v->pd.context = context;
  v->p = p;
  return &v->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  auto* v = reinterpret_cast<VPd*>(pd);
  if (const Status s = ctx_pd(pd)->dev->dealloc_pd(v->p); s != Status::ok) return to_errno(s);
  delete v;
  return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  Access a;
  if (!access_of(access, a)) return fail<ibv_mr>(EINVAL);
  // softrnic addresses a region by the virtual address it was registered at.
  if (iova != reinterpret_cast<std::uintptr_t>(addr)) return fail<ibv_mr>(EOPNOTSUPP);
  Mr* m = nullptr;
  if (const Status s = ctx_pd(pd)->dev->reg_mr(reinterpret_cast<VPd*>(pd)->p, addr, length, a, m); s != Status::ok) {
    // A range not mapped, or not with the access asked (the only way a valid PD's registration
    // is refused as a bad parameter): EFAULT, as rxe's pinning of the pages fails.
    const bool unmapped = s == Status::invalid_param || s == Status::protection_violation;
    return fail<ibv_mr>(unmapped ? EFAULT : to_errno(s));
  }
  auto* v = new VMr;
  const MrInfo info = ctx_pd(pd)->dev->query_mr(m);
  v->m = m;
  v->mr.context = pd->context;
  v->mr.pd = pd;
  v->mr.addr = addr;
  v->mr.length = length;
  v->mr.lkey = v->mr.rkey = info.stag;
  return &v->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail<ibv_mr>(EOPNOTSUPP);  // no device memory to map
}

int ibv_dereg_mr(ibv_mr* mr) {
  auto* v = reinterpret_cast<VMr*>(mr);
  if (const Status s = ctx_of(mr->context)->dev->dereg_mr(v->m); s != Status::ok) return to_errno(s);
  delete v;
  return 0;
}

int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  auto* ch = new Channel;
  ch->waiter = ctx_of(context)->dev->create_channel();
  ch->ch.context = context;
  ch->ch.fd = fds[0];
  ch->ch.refcnt = 0;
  ch->wr = fds[1];
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  auto* ch = reinterpret_cast<Channel*>(channel);
  if (channel->refcnt) return EBUSY;
  ch->waiter->interrupt();
  ::close(ch->ch.fd);
  ::close(ch->wr);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  Context* c = ctx_of(context);
  if (cqe <= 0 || static_cast<std::uint32_t>(cqe) > c->dev->limits().max_cqe) return fail<ibv_cq>(EINVAL);
  auto* v = new VCq;
  v->ctx = c;
  v->channel = reinterpret_cast<Channel*>(channel);
  v->c = c->dev->create_cq(static_cast<std::uint32_t>(cqe),
                           channel ? std::function<void()>([v] { cq_notify(v); }) : std::function<void()>());
  if (!v->c) {
    delete v;
    return fail<ibv_cq>(ENOMEM);
  }
  ibv_cq& cq = v->cq;
  cq.context = context;
  cq.channel = channel;
  cq.cq_context = cq_context;
  cq.cqe = cqe;
  pthread_mutex_init(&cq.mutex, nullptr);
  pthread_cond_init(&cq.cond, nullptr);
  if (channel) channel->refcnt++;
  return &cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
  auto* v = reinterpret_cast<VCq*>(cq);
  if (const Status s = v->ctx->dev->destroy_cq(v->c); s != Status::ok) return to_errno(s);
  if (cq->channel) cq->channel->refcnt--;
  delete v;
  return 0;
}

int ibv_resize_cq(ibv_cq*, int) {
  return EOPNOTSUPP;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  auto* ch = reinterpret_cast<Channel*>(channel);
  const int fl = ::fcntl(channel->fd, F_GETFL);
  if (fl < 0) return -1;  // (EBADF)
  ibv_cq* got = nullptr;
  if (!(fl & O_NONBLOCK)) {
    // Until an event is there, drive the engine; once another thread drives it, block in the
    // read instead. A signal ends either as it ends a read (qperf ends its tests with SIGALRM).
    std::unique_lock lk(ch->mu);
    bool another_drives = false;
    while (ch->direct.empty() && ch->pending == 0 && !another_drives)
      if (!ch->waiter->wait_step(lk, std::nullopt, another_drives) && ch->direct.empty()) {
        errno = EINTR;
        return -1;
      }
    if (!ch->direct.empty()) {
      got = ch->direct.front();
      // (Several CQs of the channel completed in that round: the others go down the pipe, where
      // poll() and the next call see them.)
      std::vector<ibv_cq*> rest(ch->direct.begin() + 1, ch->direct.end());
      ch->direct.clear();
      lk.unlock();
      for (ibv_cq* other : rest) to_pipe(ch, other);
    }
  }
  if (!got) {
    if (::read(channel->fd, &got, sizeof got) != static_cast<ssize_t>(sizeof got)) return -1;
    std::lock_guard lk(ch->mu);
    if (ch->pending) ch->pending--;
  }
  *cq = got;
  *cq_context = got->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  Context* c = ctx_pd(pd);
  auto* v = new VSrq;
  SrqInit si;
  si.pd = reinterpret_cast<VPd*>(pd)->p;
  si.max_wr = init->attr.max_wr;
  si.max_sge = init->attr.max_sge ? init->attr.max_sge : 1;
  si.on_low_watermark = [v](Srq*) {
    v->limit.store(0);  // (one event per arming)
    raise_async(v->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, &v->srq);
  };
  if (const Status s = c->dev->create_srq(si, v->s); s != Status::ok) {
    delete v;
    return fail<ibv_srq>(to_errno(s));
  }
  v->ctx = c;
  v->max_wr = si.max_wr;
  v->max_sge = si.max_sge;
  ibv_srq& srq = v->srq;
  srq.context = pd->context;
  srq.srq_context = init->srq_context;
  srq.pd = pd;
  pthread_mutex_init(&srq.mutex, nullptr);
  pthread_cond_init(&srq.cond, nullptr);
  if (init->attr.srq_limit) {
    v->limit = init->attr.srq_limit;
    c->dev->set_srq_low_watermark(v->s, init->attr.srq_limit);
  }
  return &srq;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  auto* v = reinterpret_cast<VSrq*>(srq);
  Device* dev = v->ctx->dev;
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) {
    if (const Status s = dev->resize_srq(v->s, attr->max_wr); s != Status::ok) return to_errno(s);
    v->max_wr = attr->max_wr;
  }
  if (mask & IBV_SRQ_LIMIT) {
    if (attr->srq_limit > v->max_wr) return EINVAL;
    v->limit = attr->srq_limit;
    if (const Status s = dev->set_srq_low_watermark(v->s, attr->srq_limit); s != Status::ok) return to_errno(s);
  }
  return 0;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  auto* v = reinterpret_cast<VSrq*>(srq);
  attr->max_wr = v->max_wr;
  attr->max_sge = v->max_sge;
  attr->srq_limit = v->limit.load();
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  auto* v = reinterpret_cast<VSrq*>(srq);
  if (const Status s = v->ctx->dev->destroy_srq(v->s); s != Status::ok) return to_errno(s);
  delete v;
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  // RoCEv2 reaches an IPv4 address: the GRH's destination GID must be ::ffff:a.b.c.d.
  std::uint32_t ip = 0;
  if (!attr->is_global || !ipv4_of(attr->grh.dgid, ip)) return fail<ibv_ah>(EINVAL);
  auto* v = new VAh;
  v->ah.context = pd->context;
  v->ah.pd = pd;
  v->to.ip = ip;
  return &v->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  delete reinterpret_cast<VAh*>(ah);
  return 0;
}

}  // extern "C"
