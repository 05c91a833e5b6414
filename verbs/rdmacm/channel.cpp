// Event channels and events: rdma_create_event_channel, rdma_get_cm_event, rdma_ack_cm_event,
// rdma_migrate_id, rdma_event_str, and the events softrnic's connection manager raises.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "rdmacm.hpp"

namespace softrnic::verbs::cm {

EventChannel* new_channel() {
  auto* c = new EventChannel;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    const int e = errno;
    delete c;
    errno = e;
    return nullptr;
  }
  c->ch.fd = fds[0];
  c->wr = fds[1];
  ::fcntl(c->wr, F_SETFL, O_NONBLOCK);  // (post() never blocks: see owed)
  return c;
}

void free_channel(EventChannel* c) {
  {
    std::lock_guard lk(c->mu);
    for (Event* e : c->q) delete e;
    c->q.clear();
    // A thread still in rdma_get_cm_event (rping's event thread when its main thread ends)
    // stays blocked, as on rdma_cm's device file, instead of waking to an error the program
    // would report (rping exits 255 on it): the channel stays whole for it, and the last such
    // thread to leave frees it (leave_channel).
    if (c->readers > 0) {
      c->destroyed = true;
      return;
    }
  }
  ::close(c->ch.fd);
  ::close(c->wr);
  delete c;
}

namespace {

// A thread enters rdma_get_cm_event on `c`.
void enter_channel(EventChannel* c) {
  std::lock_guard lk(c->mu);
  c->readers++;
}

// It leaves: the channel is freed if it was destroyed meanwhile and this was the last one in.
void leave_channel(EventChannel* c) {
  {
    std::lock_guard lk(c->mu);
    if (--c->readers > 0 || !c->destroyed) return;
  }
  free_channel(c);  // (no reader left: it frees now)
}

// A thread in rdma_get_cm_event on a channel destroyed meanwhile, woken by the byte of an event
// dropped with its id: blocked for good, as a read of rdma_cm's device file would be.
[[noreturn]] void block_for_good() {
  for (;;) ::pause();
}

}  // namespace

void post(EventChannel* c, Event* e) {
  if (e->pd.empty()) {
    e->ev.param.conn.private_data = nullptr;
  } else {
    e->ev.param.conn.private_data = e->pd.data();
    e->ev.param.conn.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(e->pd.size(), 255));
  }
  std::lock_guard lk(c->mu);
  c->q.push_back(e);
  const char b = 'e';
  // A full pipe (64 KiB of events nobody reads, as a flood of connection requests to a listener
  // that does not take them would leave) must not block the engine that posts: the byte is
  // owed, and the reader writes it once it has made room (rdma_get_cm_event).
  if (::write(c->wr, &b, 1) != 1) c->owed++;
}

void drop_events_of(EventChannel* c, const rdma_cm_id* id) {
  std::lock_guard lk(c->mu);
  const std::size_t dropped = std::erase_if(c->q, [id](Event* e) {
    if (e->ev.id != id) return false;
    delete e;
    return true;
  });
  c->owed -= std::min(c->owed, dropped);  // (bytes not owed for events gone)
}

namespace {

// RoCEv2's IB CM rejects with a reason (IB_CM_REJ_CONSUMER_DEFINED 28, _INVALID_SERVICE_ID 8:
// nothing listens), as Linux rdma_cm reports it; iWARP's refusal is -ECONNREFUSED (as on siw).
int reject_status(const Id& id, CmEventType t) {
  if (id.ctx && id.ctx->dev->wire() != Wire::roce) return -ECONNREFUSED;
  return t == CmEventType::rejected ? 28 : 8;
}

}  // namespace

void Sink::on_event(const CmEvent& e) {
  std::lock_guard lk(mu);
  if (!id) return;
  auto* ev = new Event;
  ev->ev.id = &id->id;
  switch (e.type) {
    case CmEventType::established:
      // (a connection without a QP: the active side hears the REP, then calls rdma_establish)
      ev->ev.event = id->carrier && id->active ? RDMA_CM_EVENT_CONNECT_RESPONSE : RDMA_CM_EVENT_ESTABLISHED;
      ev->pd = e.private_data;
      break;
    case CmEventType::rejected:
    case CmEventType::no_listener:
      ev->ev.event = RDMA_CM_EVENT_REJECTED;
      ev->ev.status = reject_status(*id, e.type);
      ev->pd = e.private_data;
      break;
    case CmEventType::unreachable:
    case CmEventType::host_unreachable:
      ev->ev.event = RDMA_CM_EVENT_UNREACHABLE;
      ev->ev.status = e.type == CmEventType::unreachable ? -ETIMEDOUT : -EHOSTUNREACH;
      break;
    case CmEventType::disconnected:
    case CmEventType::broken:
      if (id->ended) {
        delete ev;
        return;
      }
      id->ended = true;
      ev->ev.event = RDMA_CM_EVENT_DISCONNECTED;
      break;
  }
  post(id->ch, ev);
}

int complete(Id* id) {
  if (!id->sync) return 0;
  if (id->id.event) rdma_ack_cm_event(std::exchange(id->id.event, nullptr));
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(id->ch ? &id->ch->ch : nullptr, &ev) != 0) return -1;
  const int status = ev->status;
  const rdma_cm_event_type type = ev->event;
  rdma_ack_cm_event(ev);
  if (status == 0 && type != RDMA_CM_EVENT_REJECTED) return 0;
  if (type == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
  return fail(status < 0 ? -status : status);
}

}  // namespace softrnic::verbs::cm

using namespace softrnic::verbs::cm;

extern "C" {

rdma_event_channel* rdma_create_event_channel() {
  EventChannel* c = new_channel();
  return c ? &c->ch : nullptr;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel) free_channel(reinterpret_cast<EventChannel*>(channel));
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) return fail(EINVAL);
  auto* c = reinterpret_cast<EventChannel*>(channel);
  enter_channel(c);
  const struct Leave {
    EventChannel* c;
    ~Leave() { leave_channel(c); }
  } leave{c};
  for (;;) {
    char b;
    const ssize_t r = ::read(c->ch.fd, &b, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;  // (EAGAIN on a non-blocking channel, EBADF on a closed one)
    if (r == 0) return fail(EBADF);
    std::unique_lock lk(c->mu);
    if (c->destroyed) {
      lk.unlock();  // (not held while it blocks)
      // (A non-blocking reader says there is nothing, as it would before the next event.)
      if (::fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK) return fail(EAGAIN);
      block_for_good();
    }
    if (c->q.empty()) continue;  // the event of an id destroyed meanwhile
    *event = &c->q.front()->ev;
    c->q.pop_front();
    if (c->owed > 0 && ::write(c->wr, &b, 1) == 1) c->owed--;  // (the byte this read made room for)
    Id* d = id_of((*event)->id);
    std::lock_guard el(d->ev_mu);
    d->unacked++;
    return 0;
  }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return fail(EINVAL);
  Id* d = id_of(event->id);
  delete reinterpret_cast<Event*>(event);  // (ev is Event's first member)
  std::lock_guard lk(d->ev_mu);
  d->unacked--;
  d->ev_cv.notify_all();
  return 0;
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  Id* d = id_of(id);
  EventChannel* to = channel ? reinterpret_cast<EventChannel*>(channel) : nullptr;
  if (!to) {  // a sync id from now on, on a channel of its own
    if (!d->own && !(d->own = new_channel())) return -1;
    to = d->own;
  }
  std::lock_guard lk(d->sink->mu);
  EventChannel* from = d->ch;
  if (from && from != to) {
    std::lock_guard fl(from->mu);
    std::erase_if(from->q, [&](Event* e) {
      if (e->ev.id != id) return false;
      post(to, e);
      return true;
    });
  }
  d->ch = to;
  d->sync = !channel;
  id->channel = &to->ch;
  return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

}  // extern "C"
