// When a post's frames leave (device_impl.hpp): at once, or with the next engine round's doorbell.
#include <algorithm>

#include "device_impl.hpp"
#include "queues.hpp"

namespace softrnic {

std::size_t DeviceImpl::poll(std::optional<Clock::time_point> now) {
  ring_doorbell();
  return pollable_->poll(now);
}

void DeviceImpl::doorbell(Qp& qp) {
  // (A post to a QP with nothing else outstanding, as in a ping-pong, leaves at once: there
  // is nothing to batch it with, and the check of the engine's state reads the clock.)
  // (The udp wire and RoCEv2 send a run of deferred frames in one burst (RoCEv2: sendmmsg on
  // the QP's source port); MPA/TCP in one gathered write of its FPDUs. A RoCEv2 client whose
  // last requests are still unacknowledged when it disconnects relies on the peer's DREQ
  // handling (roce/cm.cpp, on_dreq) to have them acknowledged first.)
  // A consumer that has just taken several completions (a stream over many QPs reposting on
  // each) is batched even when each QP is idle, but for its first post after that poll: that
  // one goes at once and keeps the peer busy while the rest are posted (deferring it too slows
  // a single QP's 64 B stream measurably).
  // On MPA/TCP a request completes as the socket takes its bytes, inside the post: its QP is
  // always idle, and a consumer that takes one completion and reposts one, with more waiting
  // in its CQ, made one write system call (one TCP segment) per post, 4 KiB Writes at 0.11x
  // kernel TCP. Its posts wait for the doorbell whenever the consumer left completions in its
  // CQ (it comes back for them, and its poll that finds the CQ empty rings).
  const bool several = polled_several_.load(std::memory_order_relaxed);
  const bool batch = ctx_.cfg.wire == Wire::tcp
                         ? several
                         : qp.sq.size() > 1 || (several && idle_posts_.fetch_add(1, std::memory_order_relaxed) > 0);
  if (ctx_.cfg.batch_posts && batch && engine_->defers_posts()) {
    if (!qp.doorbell) {
      qp.doorbell = true;
      doorbell_.push_back(&qp);
    }
    if (++doorbell_posts_ < kDoorbellPosts) return;
    ring_doorbell();
    return;
  }
  qp.transport->kick(qp);
}

void DeviceImpl::off_doorbell(Qp& qp) {
  if (!qp.doorbell) return;
  qp.doorbell = false;
  std::erase(doorbell_, &qp);
}

void DeviceImpl::ring_doorbell() {
  if (doorbell_.empty()) return;
  doorbell_posts_ = 0;
  for (Qp* q : doorbell_) q->doorbell = false;
  transport_->kick_all(doorbell_);
  doorbell_.clear();
}

}  // namespace softrnic
