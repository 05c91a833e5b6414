// softrnic_bench: one measurement through the DAT 2.0 API between two processes (a server and a
// client), for tools/bench/bench.py, which runs every case several times beside the peers and
// prints the tables. The client prints one JSON line with its figures; the server prints
// "READY <ip>:<port>" once it listens, serves one connection and prints its CPU time as JSON.
//
// Tests (all with --size bytes):
//   pingpong  Send/Receive round trips (--iters, after a warm-up): round-trip percentiles.
//   write_bw  RDMA Writes streamed into the server's memory, --window outstanding: MB/s.
//   read_bw   RDMA Reads streamed from the server's memory, --window (capped by the ORD): MB/s.
//   msgrate   Sends of --size with --window outstanding and receive credits: messages/s.
//   idle      a connected pair doing nothing for --iters milliseconds: CPU use, % of one core.
// CPU per message = the process's user+system time (progress thread included) / messages.
#include <arpa/inet.h>
#include <dat2/udat.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr DAT_TIMEOUT kWait = 30'000'000;  // 30 s: nothing here waits longer
constexpr std::size_t kCtl = 64;           // control messages (done, credits)

struct Options {
  std::string role, ia = "softrnic_iwarp", host = "127.0.0.1", test = "pingpong", poll = "busy";
  std::uint16_t port = 0;  // the server's IA port (its READY line)
  std::uint64_t qual = 0xB3C4;
  std::size_t size = 64;
  std::size_t iters = 10000;
  std::size_t window = 16;
  std::size_t warmup = 200;
  bool signaled = false;   // ping-pong Sends ask for their completion (as most DAT consumers post)
  bool wait_send = false;  // ... and each side waits for it before it looks for the reply (perftest's order)
};

[[noreturn]] void die(const char* what, DAT_RETURN r) {
  const char *major = "", *minor = "";
  dat_strerror(r, &major, &minor);
  std::fprintf(stderr, "softrnic_bench: %s: %s %s (0x%x)\n", what, major, minor, r);
  std::exit(1);
}
void check(DAT_RETURN r, const char* what) {
  if (r != DAT_SUCCESS) die(what, r);
}
[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "softrnic_bench: %s\n", what.c_str());
  std::exit(1);
}

double cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Where the client may read and write: the server's accept private data.
struct Target {
  DAT_UINT64 va;
  DAT_UINT32 rmr_context;
  DAT_UINT32 length;
};

struct Node {
  const Options& o;
  DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
  DAT_EVD_HANDLE async = DAT_HANDLE_NULL, req = DAT_HANDLE_NULL, rcv = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL,
                 cr = DAT_HANDLE_NULL;
  DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;  // --poll cno: the DTO EVDs notify it
  DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
  DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
  DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
  DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
  DAT_LMR_CONTEXT lctx = 0;
  DAT_RMR_CONTEXT rctx = 0;
  std::size_t slots;       // message slots (window and credits)
  std::vector<char> data;  // RDMA target / source / message slots
  std::vector<char> ctl;   // control messages
  DAT_LMR_HANDLE ctl_lmr = DAT_HANDLE_NULL;
  DAT_LMR_CONTEXT ctl_ctx = 0;

  explicit Node(const Options& opt)
      : o(opt),
        slots(std::max<std::size_t>(opt.window, 1) * 2),
        data(std::max<std::size_t>(opt.size, 1) * slots),
        ctl(kCtl * (slots + 2)) {}

  void open() {
    check(dat_ia_open(const_cast<char*>(o.ia.c_str()), 8, &async, &ia), "dat_ia_open");
    check(dat_pz_create(ia, &pz), "dat_pz_create");
    const auto qlen = static_cast<DAT_COUNT>(slots * 2 + 16);
    if (o.poll == "cno") check(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), "dat_cno_create");
    check(dat_evd_create(ia, qlen, cno, DAT_EVD_DTO_FLAG, &req), "dat_evd_create(request)");
    check(dat_evd_create(ia, qlen, cno, DAT_EVD_DTO_FLAG, &rcv), "dat_evd_create(receive)");
    check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), "dat_evd_create(connection)");
    DAT_EP_ATTR at{};
    at.service_type = DAT_SERVICE_TYPE_RC;
    at.max_recv_dtos = at.max_request_dtos = static_cast<DAT_COUNT>(2 * slots + 8);  // messages + control
    at.max_recv_iov = at.max_request_iov = 1;
    at.max_rdma_read_in = at.max_rdma_read_out = 16;
    check(dat_ep_create(ia, pz, rcv, req, conn, &at, &ep), "dat_ep_create");
    reg(data, lmr, lctx, &rctx);
    DAT_RMR_CONTEXT unused;
    reg(ctl, ctl_lmr, ctl_ctx, &unused);
  }

  void reg(std::vector<char>& mem, DAT_LMR_HANDLE& h, DAT_LMR_CONTEXT& lc, DAT_RMR_CONTEXT* rc) {
    DAT_REGION_DESCRIPTION r;
    r.for_va = mem.data();
    DAT_VLEN len;
    DAT_VADDR addr;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, mem.size(), pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &h, &lc,
                         rc, &len, &addr),
          "dat_lmr_create");
  }

  DAT_LMR_TRIPLET slot(std::size_t i, std::size_t len) const {
    DAT_LMR_TRIPLET t;
    t.lmr_context = lctx;
    t.virtual_address = reinterpret_cast<DAT_VADDR>(data.data() + (i % slots) * std::max<std::size_t>(o.size, 1));
    t.segment_length = static_cast<DAT_SEG_LENGTH>(len);
    return t;
  }
  DAT_LMR_TRIPLET ctl_slot(std::size_t i) const {
    DAT_LMR_TRIPLET t;
    t.lmr_context = ctl_ctx;
    t.virtual_address = reinterpret_cast<DAT_VADDR>(ctl.data() + (i % (slots + 2)) * kCtl);
    t.segment_length = kCtl;
    return t;
  }

  // Next event of an EVD: spinning on dat_evd_dequeue (which runs the progress engine), blocking
  // in dat_evd_wait, or (cno) the event-driven pattern: dequeue, and when the EVD is empty block
  // in dat_cno_wait until the CNO is triggered (by an event of either DTO EVD), then dequeue again.
  DAT_EVENT next(DAT_EVD_HANDLE evd, const char* what) {
    DAT_EVENT ev;
    if (o.poll == "cno") {
      for (;;) {
        const DAT_RETURN r = dat_evd_dequeue(evd, &ev);
        if (r == DAT_SUCCESS) break;
        if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY) die(what, r);
        DAT_EVD_HANDLE woke;
        check(dat_cno_wait(cno, kWait, &woke), what);
      }
    } else if (o.poll == "busy") {
      const auto end = Clock::now() + std::chrono::microseconds(kWait);
      for (std::uint64_t n = 0;; ++n) {
        const DAT_RETURN r = dat_evd_dequeue(evd, &ev);
        if (r == DAT_SUCCESS) break;
        if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY) die(what, r);
        if ((n & 1023) == 0 && Clock::now() > end) fail(std::string(what) + ": timed out");
      }
    } else {
      DAT_COUNT nmore;
      check(dat_evd_wait(evd, kWait, 1, &ev, &nmore), what);
    }
    return ev;
  }
  const DAT_DTO_COMPLETION_EVENT_DATA& dto(DAT_EVENT& ev, const char* what) {
    if (ev.event_number != DAT_DTO_COMPLETION_EVENT) fail(std::string(what) + ": not a DTO completion");
    const auto& d = ev.event_data.dto_completion_event_data;
    if (d.status != DAT_DTO_SUCCESS) fail(std::string(what) + ": completion status " + std::to_string(d.status));
    return d;
  }
  std::uint64_t wait_dto(DAT_EVD_HANDLE evd, const char* what) {
    DAT_EVENT ev = next(evd, what);
    return dto(ev, what).user_cookie.as_64;
  }
  // Takes the completions `evd` holds now, each checked.
  void reap(DAT_EVD_HANDLE evd, const char* what) {
    for (DAT_EVENT ev; dat_evd_dequeue(evd, &ev) == DAT_SUCCESS;) dto(ev, what);
  }

  void post_recv(const DAT_LMR_TRIPLET& t, std::uint64_t cookie) {
    DAT_DTO_COOKIE c;
    c.as_64 = cookie;
    check(dat_ep_post_recv(ep, 1, const_cast<DAT_LMR_TRIPLET*>(&t), c, DAT_COMPLETION_DEFAULT_FLAG),
          "dat_ep_post_recv");
  }
  void post_send(const DAT_LMR_TRIPLET& t, std::uint64_t cookie, bool signaled) {
    DAT_DTO_COOKIE c;
    c.as_64 = cookie;
    check(dat_ep_post_send(ep, 1, const_cast<DAT_LMR_TRIPLET*>(&t), c,
                           signaled ? DAT_COMPLETION_DEFAULT_FLAG : DAT_COMPLETION_SUPPRESS_FLAG),
          "dat_ep_post_send");
  }

  void disconnect() {
    dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG);
    DAT_EVENT ev;
    DAT_COUNT nmore;
    dat_evd_wait(conn, 2'000'000, 1, &ev, &nmore);
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
  }
};

double pct(std::vector<double>& v, double p) {
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// ---- server ----
int serve(const Options& o) {
  Node n(o);
  n.open();
  check(dat_evd_create(n.ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &n.cr), "dat_evd_create(cr)");
  check(dat_psp_create(n.ia, o.qual, n.cr, DAT_PSP_CONSUMER_FLAG, &n.psp), "dat_psp_create");
  // Receives before the client can send: message slots for ping-pong and msgrate, control slots.
  const bool messages = o.test == "pingpong" || o.test == "msgrate";
  if (messages)
    for (std::size_t i = 0; i < n.slots; ++i) n.post_recv(n.slot(i, o.size), i);
  else
    n.post_recv(n.ctl_slot(0), 1u << 30);  // "done"
  DAT_IA_ATTR a;
  check(dat_ia_query(n.ia, nullptr, DAT_IA_FIELD_ALL, &a, 0, nullptr), "dat_ia_query");
  const auto* sa = reinterpret_cast<const sockaddr_in*>(a.ia_address_ptr);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
  std::printf("READY %s:%u\n", ip, ntohs(sa->sin_port));
  std::fflush(stdout);
  DAT_EVENT ev;
  DAT_COUNT nmore;
  check(dat_evd_wait(n.cr, kWait, 1, &ev, &nmore), "waiting for the client");
  if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT) fail("not a connection request");
  const Target t{reinterpret_cast<DAT_UINT64>(n.data.data()), n.rctx, static_cast<DAT_UINT32>(n.data.size())};
  check(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, n.ep, sizeof t, const_cast<Target*>(&t)),
        "dat_cr_accept");
  check(dat_evd_wait(n.conn, kWait, 1, &ev, &nmore), "waiting for the connection");
  if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) fail("connection not established");
  const double cpu0 = cpu_us();
  std::size_t msgs = 0;
  if (o.test == "pingpong") {
    // Echo every message back from the slot it arrived in, then post that slot again (the reply
    // first: reposting the buffer is not part of the round trip).
    const std::size_t total = o.iters + o.warmup;
    for (std::size_t i = 0; i < total; ++i) {
      const std::uint64_t s = n.wait_dto(n.rcv, "ping");
      n.post_send(n.slot(s, o.size), s, o.signaled);
      n.post_recv(n.slot(s, o.size), s);
      if (o.wait_send)
        n.wait_dto(n.req, "echo sent");
      else if (o.signaled)
        n.reap(n.req, "echo sent");  // (the previous echo's: the ping carried its ack)
    }
    msgs = total;
  } else if (o.test == "msgrate") {
    // Repost each buffer and return a credit message every `window` receives.
    const std::size_t total = o.iters;
    std::size_t since = 0;
    for (std::size_t i = 0; i < total; ++i) {
      const std::uint64_t s = n.wait_dto(n.rcv, "message");
      n.post_recv(n.slot(s, o.size), s);
      if (++since == o.window || i + 1 == total) {
        n.post_send(n.ctl_slot(i), 0, false);
        since = 0;
      }
    }
    msgs = total;
  } else {
    n.wait_dto(n.rcv, "done");
    msgs = o.iters;
  }
  if (o.test == "idle") {
    std::printf("{\"cpu_us\":%.1f,\"cpu_pct\":%.3f}\n", cpu_us() - cpu0,
                (cpu_us() - cpu0) / (static_cast<double>(o.iters) * 1e3) * 100);
    std::fflush(stdout);
    dat_evd_wait(n.conn, 5'000'000, 1, &ev, &nmore);
    dat_ia_close(n.ia, DAT_CLOSE_ABRUPT_FLAG);
    return 0;
  }
  std::printf("{\"cpu_us\":%.1f,\"msgs\":%zu}\n", cpu_us() - cpu0, msgs);
  std::fflush(stdout);
  // The client disconnects; wait for it, so our last frames are acknowledged first.
  dat_evd_wait(n.conn, 5'000'000, 1, &ev, &nmore);
  dat_ia_close(n.ia, DAT_CLOSE_ABRUPT_FLAG);
  return 0;
}

// ---- client ----

// Connects to the server; returns where it lets us read and write.
Target connect_to_server(Node& n, const Options& o) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(o.port);
  if (inet_pton(AF_INET, o.host.c_str(), &to.sin_addr) != 1) fail("bad --host " + o.host);
  check(dat_ep_connect(n.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), o.qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                       DAT_CONNECT_DEFAULT_FLAG),
        "dat_ep_connect");
  DAT_EVENT ev;
  DAT_COUNT nmore;
  check(dat_evd_wait(n.conn, kWait, 1, &ev, &nmore), "waiting for the connection");
  if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) fail("connection not established");
  Target t{};
  const auto& cd = ev.event_data.connect_event_data;
  if (cd.private_data_size < static_cast<DAT_COUNT>(sizeof t)) fail("no target in the accept private data");
  std::memcpy(&t, cd.private_data, sizeof t);
  return t;
}

void client_pingpong(Node& n, const Options& o) {
  // Echoes arrive in our message slots: repost them as they come.
  for (std::size_t i = 0; i < n.slots; ++i) n.post_recv(n.slot(i, o.size), i);
  std::vector<double> rtt;
  rtt.reserve(o.iters);
  double cpu0 = 0;
  Clock::time_point start{}, prev{};
  const std::size_t total = o.iters + o.warmup;
  for (std::size_t i = 0; i < total; ++i) {
    if (i == o.warmup) {
      cpu0 = cpu_us();
      start = Clock::now();
    }
    const auto t0 = Clock::now();
    // perftest's loop (--wait-send) is timed as perftest times it: from one post to the next,
    // the repost included
    if (o.wait_send && i > o.warmup) rtt.push_back(std::chrono::duration<double, std::micro>(t0 - prev).count());
    prev = t0;
    n.post_send(n.slot(i, o.size), i, o.signaled);
    if (o.wait_send) n.wait_dto(n.req, "ping sent");  // (its ACK: on RC, the Send completes then)
    const std::uint64_t s = n.wait_dto(n.rcv, "pong");
    const auto t1 = Clock::now();
    n.post_recv(n.slot(s, o.size), s);
    if (o.wait_send) continue;
    if (o.signaled) n.reap(n.req, "ping sent");
    if (i >= o.warmup) rtt.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (o.wait_send) rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - prev).count());
  const double cpu = cpu_us() - cpu0;
  // period: the loop's time per round trip, reposts and reaping included (perftest's latency
  // figures are periods: the time from one post to the next)
  const double period = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  const auto [mn, mx] = std::minmax_element(rtt.begin(), rtt.end());
  const double lo = *mn, hi = *mx;
  const double mean = std::accumulate(rtt.begin(), rtt.end(), 0.0) / static_cast<double>(rtt.size());
  std::printf(
      "{\"median_us\":%.3f,\"mean_us\":%.3f,\"period_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"min_us\":%.3f,"
      "\"max_us\":%.3f,\"iters\":%zu,\"cpu_us_per_msg\":%.3f}\n",
      pct(rtt, 0.5), mean, period / static_cast<double>(o.iters), pct(rtt, 0.99), pct(rtt, 0.999), lo, hi, rtt.size(),
      cpu / static_cast<double>(o.iters));
}

// Posts RDMA Write or Read number `i` of the stream (the target's buffer used round-robin).
void post_rdma(Node& n, const Options& o, const Target& t, bool write, std::size_t i) {
  const DAT_LMR_TRIPLET l = n.slot(i, o.size);
  DAT_RMR_TRIPLET r;
  r.rmr_context = t.rmr_context;
  r.virtual_address = t.va + (i % (t.length / std::max<std::size_t>(o.size, 1))) * o.size;
  r.segment_length = static_cast<DAT_SEG_LENGTH>(o.size);
  DAT_DTO_COOKIE c;
  c.as_64 = i;
  const DAT_RETURN rr =
      write ? dat_ep_post_rdma_write(n.ep, 1, const_cast<DAT_LMR_TRIPLET*>(&l), c, &r, DAT_COMPLETION_DEFAULT_FLAG)
            : dat_ep_post_rdma_read(n.ep, 1, const_cast<DAT_LMR_TRIPLET*>(&l), c, &r, DAT_COMPLETION_DEFAULT_FLAG);
  check(rr, write ? "dat_ep_post_rdma_write" : "dat_ep_post_rdma_read");
}

void client_rdma_bw(Node& n, const Options& o, const Target& t) {
  const bool write = o.test == "write_bw";
  const std::size_t window = write ? o.window : std::min<std::size_t>(o.window, 16);
  const double cpu0 = cpu_us();
  const auto t0 = Clock::now();
  std::size_t posted = 0, done = 0;
  while (done < o.iters) {
    for (; posted < o.iters && posted - done < window; ++posted) post_rdma(n, o, t, write, posted);
    n.wait_dto(n.req, write ? "RDMA Write" : "RDMA Read");
    ++done;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_us() - cpu0;
  n.post_send(n.ctl_slot(0), 0, true);  // done
  n.wait_dto(n.req, "done");
  const double bytes = static_cast<double>(o.iters) * static_cast<double>(o.size);
  std::printf("{\"mbps\":%.1f,\"msgs_per_s\":%.0f,\"cpu_us_per_msg\":%.3f}\n", bytes / secs / 1e6,
              static_cast<double>(o.iters) / secs, cpu / static_cast<double>(o.iters));
}

// Connected, nothing to do for --iters ms: what the progress threads cost (% of one core).
void client_idle(Node& n, const Options& o) {
  const double cpu0 = cpu_us();
  std::this_thread::sleep_for(std::chrono::milliseconds(o.iters));
  const double cpu = cpu_us() - cpu0;
  n.post_send(n.ctl_slot(0), 0, true);  // done
  n.wait_dto(n.req, "done");
  std::printf("{\"cpu_pct\":%.3f,\"idle_ms\":%zu}\n", cpu / (static_cast<double>(o.iters) * 1e3) * 100, o.iters);
}

void client_msgrate(Node& n, const Options& o) {
  // The server posted 2 x window receives and returns a credit message every `window`
  // receives it reposted: never more than that outstanding, so no Send finds no buffer.
  const double cpu0 = cpu_us();
  const auto t0 = Clock::now();
  std::size_t sent = 0, credited = 0;
  while (sent < o.iters) {
    while (sent < o.iters && sent - credited < n.slots) {
      n.post_send(n.slot(sent, o.size), sent, false);
      ++sent;
    }
    if (sent < o.iters || credited < o.iters) {
      n.wait_dto(n.rcv, "credit");
      n.post_recv(n.ctl_slot(credited / o.window), 1u << 30);
      credited = std::min(o.iters, credited + o.window);
    }
  }
  while (credited < o.iters) {
    n.wait_dto(n.rcv, "credit");
    credited = std::min(o.iters, credited + o.window);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_us() - cpu0;
  std::printf("{\"mbps\":%.1f,\"msgs_per_s\":%.0f,\"cpu_us_per_msg\":%.3f}\n",
              static_cast<double>(o.iters * o.size) / secs / 1e6, static_cast<double>(o.iters) / secs,
              cpu / static_cast<double>(o.iters));
}

int client(const Options& o) {
  Node n(o);
  n.open();
  // Credit messages (msgrate); ping-pong echoes go to message slots, posted below.
  if (o.test == "msgrate")
    for (std::size_t i = 0; i < n.slots; ++i) n.post_recv(n.ctl_slot(i), 1u << 30);
  const Target t = connect_to_server(n, o);
  if (o.test == "write_bw" || o.test == "read_bw")
    if (t.length < o.size) fail("server buffer too small");

  if (o.test == "pingpong") {
    client_pingpong(n, o);
  } else if (o.test == "write_bw" || o.test == "read_bw") {
    client_rdma_bw(n, o, t);
  } else if (o.test == "idle") {
    client_idle(n, o);
  } else if (o.test == "msgrate") {
    client_msgrate(n, o);
  }
  std::fflush(stdout);
  n.disconnect();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"softrnic_bench: one DAT measurement between a server and a client process"};
  app.add_option("role", o.role, "server or client")->required()->check(CLI::IsMember({"server", "client"}));
  app.add_option("--ia", o.ia, "IA name in the dat.conf that DAT_OVERRIDE names");
  app.add_option("--host", o.host, "server IA address (client)");
  app.add_option("--port", o.port, "server IA port, from its READY line (client)");
  app.add_option("--qual", o.qual, "connection qualifier");
  app.add_option("--test", o.test, "pingpong, write_bw, read_bw or msgrate")
      ->check(CLI::IsMember({"pingpong", "write_bw", "read_bw", "msgrate", "idle"}));
  app.add_option("--size", o.size, "message size in bytes")->check(CLI::Range(std::size_t{0}, std::size_t{1} << 26));
  app.add_option("--iters", o.iters, "measured iterations / messages")->check(CLI::Range(1, 100'000'000));
  app.add_option("--window", o.window, "operations outstanding (bandwidth, msgrate)")->check(CLI::Range(1, 1024));
  app.add_option("--warmup", o.warmup, "ping-pong warm-up round trips");
  app.add_flag("--signaled", o.signaled,
               "ping-pong: each Send asks for its completion (DAT_COMPLETION_DEFAULT_FLAG, as most DAT consumers "
               "post), reaped after the round trip; else suppressed");
  app.add_flag("--wait-send", o.wait_send,
               "ping-pong: each Send is signaled and each side waits for its completion (on RC its ACK) before it "
               "looks for the reply, as perftest's ib_send_lat does; timed as perftest times it, from one post to the "
               "next");
  app.add_option("--poll", o.poll,
                 "busy (spin on dat_evd_dequeue), wait (dat_evd_wait) or cno (dequeue; when empty, dat_cno_wait)")
      ->check(CLI::IsMember({"busy", "wait", "cno"}));
  CLI11_PARSE(app, argc, argv);
  o.signaled = o.signaled || o.wait_send;
  if (o.role == "client" && o.port == 0) fail("--port: the server's port (its READY line) is needed");
  if (o.test == "pingpong" && o.size == 0) fail("--size: ping-pong needs at least one byte");
  if (o.test == "idle") o.poll = "wait";  // an idle consumer blocks; what is left is the stack's own cost
  return o.role == "server" ? serve(o) : client(o);
}
