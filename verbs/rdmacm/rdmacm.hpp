// librdmacm's objects: event channels, events and CM ids over softrnic's connection manager
// (the IB CM with rdma_cm's CMA header on RoCEv2, MPA on iWARP), reached through the devices
// and QPs of softrnic's libibverbs (../src/abi.hpp: the same build, so the same layout).
// librdmacm calls the soft_rnic Device only through its virtual interface: the objects and
// state behind it live in libibverbs.so.1, once per process.
#pragma once

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "abi.hpp"

namespace softrnic::verbs::cm {

// An event, with the private data its param.conn.private_data points to.
struct Event {
  rdma_cm_event ev{};
  std::vector<std::uint8_t> pd;
};

// An event channel: its events in order, and a pipe carrying a byte per event whose read end is
// the channel's fd (a program polls or epolls it; with O_NONBLOCK set, rdma_get_cm_event fails
// with EAGAIN when nothing is pending).
struct EventChannel {
  rdma_event_channel ch{};
  int wr = -1;
  std::mutex mu;
  std::deque<Event*> q;
  int readers = 0;         // threads in rdma_get_cm_event on it (under mu)
  bool destroyed = false;  // rdma_destroy_event_channel came while readers were in (under mu)
  std::size_t owed = 0;    // events queued whose byte the full pipe did not take (under mu)
};

EventChannel* new_channel();  // nullptr and errno on failure
void free_channel(EventChannel* c);
void post(EventChannel* c, Event* e);
// Frees the events still queued for `id` (one that is destroyed).
void drop_events_of(EventChannel* c, const rdma_cm_id* id);

struct Id;

// What softrnic's callbacks (a QP's connection events, a listener's requests: progress thread,
// device lock held) reach: the id while it lives. rdma_destroy_id clears it.
struct Sink final : CmSink {
  std::mutex mu;
  Id* id = nullptr;
  void on_event(const CmEvent& e) override;
};

struct Id {
  rdma_cm_id id{};
  EventChannel* ch = nullptr;   // where its events go (changed by rdma_migrate_id, under sink->mu)
  bool sync = false;            // made without a channel (rdma_create_ep): its calls wait for their event
  EventChannel* own = nullptr;  // a sync id's private channel
  std::shared_ptr<Sink> sink = std::make_shared<Sink>();
  Context* ctx = nullptr;      // its device, once bound or resolved (id.verbs)
  bool bound = false;          // rdma_bind_addr or rdma_resolve_addr gave it its source address
  bool routed = false;         // rdma_resolve_route done
  std::uint16_t picked = 0;    // the port rdma_bind_addr picked for it (it asked for port 0)
  ConnRequest* req = nullptr;  // a passive id's request, until accepted or rejected
  std::vector<std::pair<Context*, std::uint64_t>> listens;  // (device, port) it listens on
  bool ended = false;                                       // DISCONNECTED was reported
  bool own_cqs = false;                                     // rdma_create_qp made its CQs and channels
  // A connection without a QP on the id (rdma_connect or rdma_accept with conn_param.qp_num, as
  // UCX's rdmacm wire-up connects): softrnic's CM runs a connection with a QP, so the id gets a
  // carrier QP of its own that carries the connection (never data), destroyed with the id. The
  // active side hears CONNECT_RESPONSE (then rdma_establish) instead of ESTABLISHED.
  ibv_qp* carrier = nullptr;
  ibv_cq* carrier_cq = nullptr;
  bool active = false;  // rdma_connect was called on it
  // rdma_create_ep on a passive id: each request's id gets a QP like this (rdma_get_request).
  std::optional<ibv_qp_init_attr> child_attr;
  ibv_pd* child_pd = nullptr;
  // Its events the program got and has not acked: rdma_destroy_id waits for them (as rdma_cm
  // does), so a thread that handles an event of the id never finds the id, or its channel,
  // gone under it.
  std::mutex ev_mu;
  std::condition_variable ev_cv;
  int unacked = 0;
};

inline Id* id_of(rdma_cm_id* id) {
  return reinterpret_cast<Id*>(id);
}

// The process's softrnic devices, opened at first use and kept open (rdma_get_devices).
std::vector<Context*> contexts();
// The device an address is on: the one with that IPv4 address, or nullptr.
Context* context_at(std::uint32_t ip);
// The device a connection to `dst` leaves from: the one at that address (a peer in this
// process), else the first (softrnic has one link per device and no routing table).
Context* route_to(std::uint32_t dst);
// The PD rdma_create_qp uses when given none: one per device.
ibv_pd* default_pd(Context* c);

// A failure as librdmacm reports it: -1, errno set.
inline int fail(int e) {
  errno = e;
  return -1;
}

// A sync id's wait for the event its call started: 0, or -1 with errno from the event's status.
int complete(Id* id);

std::uint32_t ip_of(const sockaddr* a);  // host order; 0 for anything but AF_INET
std::uint16_t port_of(const sockaddr* a);

}  // namespace softrnic::verbs::cm
