// The device behind the Device interface (softrnic/rnic.hpp): one class, its parts in three
// units. device.cpp: the verbs (PD, MR, CQ, QP, SRQ, connection management), each checked and
// carried out by core, the transport and the engine. post.cpp: posting without the device lock
// (the per-QP rings the lock holder takes in). doorbell.cpp: when a post's frames leave.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <unordered_set>
#include <vector>

#include "engine.hpp"
#include "objects.hpp"
#include "softrnic/rnic.hpp"

namespace softrnic {

namespace roce {
class Roce;
}

class DeviceImpl final : public Device, public engine::Pollable, engine::DeviceLock::Drain {
 public:
  DeviceImpl(const DeviceConfig& cfg, std::unique_ptr<netdev::Netdev> nd);
  DeviceImpl(const DeviceConfig& cfg, std::unique_ptr<netdev::StreamNetdev> nd);
  ~DeviceImpl() override;
  NetAddr address() const override {
    return datagram_netdev_ ? datagram_netdev_->local_addr() : NetAddr{stream_netdev_->local_ip(), 0};
  }
  Wire wire() const override { return ctx_.cfg.wire; }
  const Limits& limits() const override { return ctx_.limits; }
  DeviceCounters counters() const override;

  // ---- PD / MR ----
  Pd* alloc_pd() override;
  Status dealloc_pd(Pd* pd) override;
  Status reg_mr(Pd* pd, void* addr, std::uint64_t length, Access access, Mr*& out) override;
  Status dereg_mr(Mr* mr) override;
  Status alloc_mw(Pd* pd, Mr*& out) override;
  Status bind_mw(Qp* qp, Mr* mw, Mr* mr, std::uint64_t addr, std::uint64_t length, Access access, std::uint64_t wr_id,
                 bool signaled) override;

  MrInfo query_mr(const Mr* mr) const override { return MrInfo{mr->stag, mr->addr, mr->length, mr->access}; }

  // ---- CQ ----
  Cq* create_cq(std::uint32_t depth, std::function<void()> notify) override;
  Status destroy_cq(Cq* cq) override;
  std::size_t poll_cq(Cq* cq, std::span<Wc> out) override;
  bool cq_empty(const Cq* cq) const override {
    return cq->ring.empty() && !cq->spilled.load(std::memory_order_acquire);
  }
  std::size_t cq_count(Cq* cq) override;

  // ---- QP ----
  Status create_qp(const QpInit& init, Qp*& out) override;
  Status destroy_qp(Qp* qp) override;
  QpState qp_state(const Qp* qp) const override;
  QpCounters qp_counters(const Qp* qp) const override;
  std::pair<bool, bool> qp_idle(const Qp* qp) const override;
  Status reset_qp(Qp* qp) override;
  NetAddr qp_peer(const Qp* qp) const override;
  NetAddr qp_local(const Qp* qp) const override;
  Status modify_qp(Qp* qp, QpState to) override;

  // ---- Connection management (the transport's) ----
  Status connect(Qp* qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                 std::chrono::milliseconds timeout) override;
  Status listen(std::uint64_t conn_qual, std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) override;
  Status stop_listen(std::uint64_t conn_qual) override;
  Status accept(ConnRequest* req, Qp* qp, std::span<const std::uint8_t> pd) override;
  Status reject(ConnRequest* req, std::span<const std::uint8_t> pd) override;
  Status disconnect(Qp* qp, bool graceful) override;
  Status roce_local(const Qp* qp, RoceEndpoint& out) const override;
  Status roce_connect(Qp* qp, const RoceEndpoint& remote, std::uint32_t ord, std::uint32_t ird) override;
  std::uint32_t path_mtu() const override;
  Status roce_rtr(Qp* qp, const RoceRtr& a) override;
  Status roce_rts(Qp* qp, const RoceRts& a) override;
  Status roce_ud_rtr(Qp* qp, std::uint32_t qkey) override;
  std::uint32_t qp_num(const Qp* qp) const override;
  void set_cq_notify_solicited(Cq* cq, bool solicited_only) override;
  Status set_qp_access(Qp* qp, Access remote) override;
  Status set_qp_rd_atomic(Qp* qp, std::uint32_t ord, std::uint32_t ird) override;

  // ---- Data path ----
  // Posting: a post never waits for the device lock. When the lock is free (the usual case of a
  // consumer that drives the engine itself) the post takes it and the request goes onto sq or rq
  // at once (take_send, take_receive), on the wire if it may. When another thread holds it (the
  // progress engine in its round, another consumer, any verb), the post checks what it can
  // without it (the QP's state; its regions under the MR table's shared lock; the queue's room),
  // leaves the request on the QP's post ring and hands it to the lock (device_lock.hpp): the
  // holder takes it in when it lets go, and an arriving Send takes posted receives in itself.
  Status post_recv(Qp* qp, const RecvWr& wr) override;
  Status post_send(Qp* qp, const SendWr& wr) override;

  // ---- SRQ ----
  Status create_srq(const SrqInit& init, Srq*& out) override;
  Status destroy_srq(Srq* srq) override;
  Status post_srq_recv(Srq* srq, const RecvWr& wr) override;
  SrqCounts srq_counts(const Srq* srq) const override;
  static SrqCounts srq_counts_locked(const Srq* srq);
  Status resize_srq(Srq* srq, std::uint32_t max_wr) override;
  Status set_srq_low_watermark(Srq* srq, std::uint32_t lw) override;
  void srq_reaped(Srq* srq, std::uint32_t n) override;
  RecvCounts recv_counts(const Qp* qp) const override;
  DeviceInfo info() const override;
  Status set_recv_watermarks(Qp* qp, std::uint32_t soft, std::uint32_t hard) override;

  // ---- Progress (the engine's) ----
  std::unique_ptr<CompletionChannel> create_channel() override;
  bool progress(std::chrono::microseconds drive_for) override { return engine_->progress(drive_for); }
  bool consumer_polling() const override { return engine_->consumer_polling(); }

  // engine::Pollable: the doorbell, then the transport's round.
  std::size_t poll(std::optional<Clock::time_point> now) override;
  std::chrono::microseconds next_wait() override {
    return doorbell_.empty() && !mu_.pending() ? pollable_->next_wait() : std::chrono::microseconds(0);
  }

 private:
  // One more entry in use of a queue of `max` (sq_used, rq_used), unless it is full. (Posts to
  // one QP from several threads, and bind_mw, may race here: a compare-and-swap each.)
  static bool reserve(std::atomic<std::uint32_t>& used, std::uint32_t max);

  // Under the QP's post lock: the next free slot of one of its post rings. A full ring (the
  // device lock's holder has not taken 64 posts in yet) is taken in here, under the device lock.
  template <class T>
  T* post_slot(Qp& qp, SpscRing<T> PostRings::*ring) {
    if (!qp.own_posted) {
      const auto cap = [](std::uint32_t n) { return std::clamp<std::size_t>(n, 2, kPostRing); };
      qp.own_posted = std::make_unique<PostRings>(cap(qp.init.max_send_wr), cap(qp.init.max_recv_wr));
      qp.posted.store(qp.own_posted.get(), std::memory_order_release);
    }
    for (;;) {
      if (T* slot = ((*qp.own_posted).*ring).producer_slot()) return slot;
      std::lock_guard lk(mu_);  // (nothing that holds the device lock waits for a post lock)
      take_posts(qp);
    }
  }

  // The QP has posts on its rings: onto the device's list (once), and handed to the device lock.
  // (A QP already on the list, or taken off it and not yet cleared of `queued`, needs nothing
  // more: whoever takes the list in, or clears `queued` after this, sees this post.)
  void queue_posts(Qp& qp);
  bool has_posts() const override { return queued_.load(std::memory_order_relaxed) != nullptr; }

  // engine::DeviceLock::Drain, under the device lock: every queued QP's posts, in the order the
  // QPs were queued.
  void take_posts() override;
  // A verb about one QP takes its posts in first (device_lock.hpp): what the QP holds is state the
  // device lock guards, so a const verb may.
  void take_posts_of(const Qp* qp) const { const_cast<DeviceImpl*>(this)->take_posts(*const_cast<Qp*>(qp)); }
  // One QP's posts: its receives first (a reply to one of its sends may need them).
  void take_posts(Qp& qp);

  // What post_send checks of a request, with the MR table held still (by the device lock or its
  // shared lock): its regions, its length, what its opcode needs. `total`: its length;
  // `sink_access`: what an RDMA Read's sink must grant.
  static bool is_local_memory_error(Status s);
  static WcOpcode wc_opcode_of(const SendWr& wr);
  Status flush_post(Qp& qp, std::uint64_t wr_id, std::optional<WcOpcode> send_op);
  void fail_send(Qp& qp, const SendWr& wr, Status e);
  Status check_send(const Qp& qp, const SendWr& wr, std::uint64_t& total, Access& sink_access) const;

  // A checked request onto sq (its sq_used entry reserved), on the wire if it may go now.
  void take_send(Qp& qp, const SendWr& wr, std::uint64_t total, Access sink_access);

  // A post's frames go out at once, unless a consumer drives the engine: then they wait for its
  // next round (a consumer that polls comes back within microseconds; one that waits rings the
  // doorbell before it blocks, as next_wait() is 0 then), so a run of posts made between two
  // polls (a stream reposting on each completion it dequeues) leaves in one burst, one system
  // call on the udp netdev. kDoorbellPosts posts ring it whatever the consumer does.
  void doorbell(Qp& qp);
  // The QP's waiting posts are the transport's now (it is reset or destroyed): off the list.
  void off_doorbell(Qp& qp);
  void ring_doorbell();

  template <class T>
  void start(std::unique_ptr<T> t, netdev::Waitable& w) {
    mu_.set_drain(this);
    pollable_ = t.get();
    transport_ = std::move(t);
    waitable_ = &w;
    engine_ = std::make_unique<engine::Engine>(w, mu_, ctx_.cfg.busy_poll, ctx_.cfg.wait_spin);
    engine_->start(*this);
  }

  // Back to idle, ready for a new connection: its transport state fresh, its queues flushed.
  void reset(Qp& qp);

  Ctx ctx_;
  mutable engine::DeviceLock mu_;                        // takes posts in (take_posts) when taken and let go
  std::atomic<Qp*> queued_{nullptr};                     // QPs with posts to take in: a stack linked by Qp::next_queued
  std::unique_ptr<netdev::Netdev> datagram_netdev_;      // the datagram netdev (wire udp), or
  std::unique_ptr<netdev::StreamNetdev> stream_netdev_;  // the stream netdev (wire tcp)
  std::unique_ptr<Transport> transport_;
  roce::Roce* roce_ = nullptr;            // transport_, when the wire is RoCEv2
  engine::Pollable* pollable_ = nullptr;  // the transport's round (poll() rings the doorbell, then runs it)
  netdev::Waitable* waitable_ = nullptr;
  std::unique_ptr<engine::Engine> engine_;
  static constexpr std::uint32_t kDoorbellPosts = 32;
  static constexpr std::size_t kPostRing = 64;  // the most posts a QP's ring holds before they are taken in
  std::vector<Qp*> doorbell_;                   // QPs whose posts wait for the doorbell
  // The last poll_cq that took anything took (or left) more than one; posts to idle QPs since.
  std::atomic<bool> polled_several_{false};
  std::atomic<std::uint32_t> idle_posts_{0};
  std::uint32_t doorbell_posts_ = 0;
  std::uint32_t next_pd_ = 1;
  std::unordered_set<Pd*> pd_set_;
  std::unordered_set<Cq*> cqs_;
  std::unordered_set<Srq*> srqs_;
};

}  // namespace softrnic
