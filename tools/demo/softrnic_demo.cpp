// softrnic_demo: two processes on loopback talk through the DAT 2.0 API over softrnic.
//
// The parent process is the client, a forked child the server. The server listens, accepts the
// connection and hands the client (in its accept private data) where it may RDMA Write; the
// client sends three messages, writes 1 MiB into the server's memory, tells the server with one
// more message, and disconnects. Each side prints what happened.
#include <arpa/inet.h>
#include <dat2/udat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr DAT_CONN_QUAL kQual = 0x5151;
constexpr DAT_TIMEOUT kWait = 20'000'000;  // 20 s
constexpr std::size_t kWriteLen = 1 << 20;
constexpr std::size_t kMsgLen = 256;
constexpr int kMessages = 3;

const char* g_role = "demo";

void say(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::printf("[%s] ", g_role);
  std::vprintf(fmt, ap);
  std::printf("\n");
  std::fflush(stdout);
  va_end(ap);
}

[[noreturn]] void die(const char* what, DAT_RETURN r) {
  const char* major = "";
  const char* minor = "";
  dat_strerror(r, &major, &minor);
  say("FAILED: %s: %s %s (0x%x)", what, major, minor, r);
  std::exit(1);
}

void check(DAT_RETURN r, const char* what) {
  if (r != DAT_SUCCESS) die(what, r);
}

// What the server tells the client in its accept private data.
struct Target {
  DAT_UINT64 va;
  DAT_UINT32 rmr_context;
  DAT_UINT32 length;
};

struct Node {
  DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
  DAT_EVD_HANDLE async = DAT_HANDLE_NULL, req = DAT_HANDLE_NULL, rcv = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL,
                 cr = DAT_HANDLE_NULL;
  DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
  DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
  DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
  DAT_LMR_CONTEXT lctx = 0;
  DAT_RMR_CONTEXT rctx = 0;
  std::vector<char> mem = std::vector<char>(kWriteLen + (kMessages + 1) * kMsgLen);

  char* msg(int i) { return mem.data() + kWriteLen + static_cast<std::size_t>(i) * kMsgLen; }

  void open(const char* ia_name) {
    check(dat_ia_open(const_cast<char*>(ia_name), 8, &async, &ia), "dat_ia_open");
    DAT_IA_ATTR a;
    check(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &a, 0, nullptr), "dat_ia_query");
    const auto* sa = reinterpret_cast<const sockaddr_in*>(a.ia_address_ptr);
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
    // adapter_name is the IA's name (dat_ia_query(3DAT)): name the wire instead.
    say("opened IA %s at %s:%u (%s)", ia_name, ip, ntohs(sa->sin_port),
        a.num_transport_attr > 0 ? a.transport_attr[0].value : a.adapter_name);
    check(dat_pz_create(ia, &pz), "dat_pz_create");
    check(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req), "dat_evd_create(request)");
    check(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv), "dat_evd_create(receive)");
    check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), "dat_evd_create(connection)");
    check(dat_ep_create(ia, pz, rcv, req, conn, nullptr, &ep), "dat_ep_create");
    DAT_REGION_DESCRIPTION r;
    r.for_va = mem.data();
    DAT_VLEN len;
    DAT_VADDR addr;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, mem.size(), pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr,
                         &lctx, &rctx, &len, &addr),
          "dat_lmr_create");
    say("registered %zu bytes: lmr_context 0x%x, rmr_context 0x%x", mem.size(), lctx, rctx);
  }

  DAT_LMR_TRIPLET iov(char* p, std::size_t len) {
    DAT_LMR_TRIPLET t;
    t.lmr_context = lctx;
    t.virtual_address = reinterpret_cast<DAT_VADDR>(p);
    t.segment_length = static_cast<DAT_SEG_LENGTH>(len);
    return t;
  }

  DAT_EVENT wait(DAT_EVD_HANDLE evd, const char* what) {
    DAT_EVENT ev;
    DAT_COUNT nmore;
    check(dat_evd_wait(evd, kWait, 1, &ev, &nmore), what);
    return ev;
  }

  DAT_DTO_COMPLETION_EVENT_DATA dto(DAT_EVD_HANDLE evd, const char* what) {
    const DAT_EVENT ev = wait(evd, what);
    if (ev.event_number != DAT_DTO_COMPLETION_EVENT) die(what, DAT_INTERNAL_ERROR);
    const auto& d = ev.event_data.dto_completion_event_data;
    if (d.status != DAT_DTO_SUCCESS) {
      say("FAILED: %s completed with status %d", what, d.status);
      std::exit(1);
    }
    return d;
  }

  void close() {
    check(dat_ep_free(ep), "dat_ep_free");
    check(dat_lmr_free(lmr), "dat_lmr_free");
    if (cr) check(dat_evd_free(cr), "dat_evd_free(cr)");
    check(dat_evd_free(conn), "dat_evd_free(conn)");
    check(dat_evd_free(rcv), "dat_evd_free(rcv)");
    check(dat_evd_free(req), "dat_evd_free(req)");
    check(dat_pz_free(pz), "dat_pz_free");
    check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
  }
};

int server(const char* ia_name, int ready_fd) {
  g_role = "server";
  Node n;
  n.open(ia_name);
  for (int i = 0; i <= kMessages; ++i) {
    DAT_LMR_TRIPLET t = n.iov(n.msg(i), kMsgLen);
    DAT_DTO_COOKIE c;
    c.as_64 = static_cast<DAT_UINT64>(i);
    check(dat_ep_post_recv(n.ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
  }
  say("posted %d receive buffers of %zu bytes", kMessages + 1, kMsgLen);
  check(dat_evd_create(n.ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &n.cr), "dat_evd_create(cr)");
  DAT_PSP_HANDLE psp;
  check(dat_psp_create(n.ia, kQual, n.cr, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
  // Tell the client our address (IP and the UDP port the netdev actually bound).
  DAT_IA_ATTR a;
  check(dat_ia_query(n.ia, nullptr, DAT_IA_FIELD_ALL, &a, 0, nullptr), "dat_ia_query");
  sockaddr_in me;
  std::memcpy(&me, a.ia_address_ptr, sizeof me);
  if (write(ready_fd, &me, sizeof me) != sizeof me) return 1;
  close(ready_fd);
  say("listening on conn_qual 0x%llx", static_cast<unsigned long long>(kQual));

  const DAT_EVENT cr = n.wait(n.cr, "wait for a connection request");
  DAT_CR_PARAM p;
  check(dat_cr_query(cr.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &p), "dat_cr_query");
  say("connection request with %d bytes of private data: \"%.*s\"", p.private_data_size, p.private_data_size,
      static_cast<const char*>(p.private_data));
  Target t{reinterpret_cast<DAT_UINT64>(n.mem.data()), n.rctx, static_cast<DAT_UINT32>(kWriteLen)};
  check(dat_cr_accept(cr.event_data.cr_arrival_event_data.cr_handle, n.ep, sizeof t, &t), "dat_cr_accept");
  if (n.wait(n.conn, "wait for the connection").event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
    die("connection", DAT_INTERNAL_ERROR);
  say("connected; told the client to write at va 0x%llx, rmr_context 0x%x, %u bytes",
      static_cast<unsigned long long>(t.va), t.rmr_context, t.length);

  for (int i = 0; i < kMessages; ++i) {
    const auto d = n.dto(n.rcv, "receive");
    say("received message %llu (%u bytes): \"%s\"", static_cast<unsigned long long>(d.user_cookie.as_64),
        d.transfered_length, n.msg(static_cast<int>(d.user_cookie.as_64)));
  }
  const auto d = n.dto(n.rcv, "receive");
  say("received \"%s\"", n.msg(static_cast<int>(d.user_cookie.as_64)));
  std::size_t good = 0;
  for (std::size_t i = 0; i < kWriteLen; ++i) good += n.mem[i] == static_cast<char>('A' + i % 26);
  say("RDMA Write landed: %zu of %zu bytes match the client's pattern (first bytes \"%.26s\")", good, kWriteLen,
      n.mem.data());
  if (good != kWriteLen) return 1;

  if (n.wait(n.conn, "wait for the disconnect").event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
    die("disconnect", DAT_INTERNAL_ERROR);
  say("the client disconnected");
  check(dat_psp_free(psp), "dat_psp_free");
  n.close();
  say("closed");
  return 0;
}

int client(const char* ia_name, const sockaddr_in& server_addr) {
  g_role = "client";
  Node n;
  n.open(ia_name);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &server_addr.sin_addr, ip, sizeof ip);
  const char hello[] = "hello from the client";
  say("connecting to %s:%u conn_qual 0x%llx", ip, ntohs(server_addr.sin_port), static_cast<unsigned long long>(kQual));
  check(dat_ep_connect(n.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(const_cast<sockaddr_in*>(&server_addr)), kQual, kWait,
                       sizeof hello, const_cast<char*>(hello), DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
        "dat_ep_connect");
  const DAT_EVENT ev = n.wait(n.conn, "wait for the connection");
  if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) die("connection", DAT_INTERNAL_ERROR);
  Target t{};
  std::memcpy(&t, ev.event_data.connect_event_data.private_data, sizeof t);
  say("connected; the server's private data says: write at va 0x%llx, rmr_context 0x%x, %u bytes",
      static_cast<unsigned long long>(t.va), t.rmr_context, t.length);

  for (int i = 0; i < kMessages; ++i) {
    std::snprintf(n.msg(i), kMsgLen, "message %d: Send/Receive over iWARP-on-UDP", i);
    DAT_LMR_TRIPLET s = n.iov(n.msg(i), std::strlen(n.msg(i)) + 1);
    DAT_DTO_COOKIE c;
    c.as_64 = static_cast<DAT_UINT64>(i);
    check(dat_ep_post_send(n.ep, 1, &s, c, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
    const auto d = n.dto(n.req, "send");
    say("sent message %d (%u bytes)", i, d.transfered_length);
  }
  for (std::size_t i = 0; i < kWriteLen; ++i) n.mem[i] = static_cast<char>('A' + i % 26);
  DAT_LMR_TRIPLET w = n.iov(n.mem.data(), kWriteLen);
  DAT_RMR_TRIPLET r;
  r.rmr_context = t.rmr_context;
  r.virtual_address = t.va;
  r.segment_length = t.length;
  DAT_DTO_COOKIE c;
  c.as_64 = 100;
  check(dat_ep_post_rdma_write(n.ep, 1, &w, c, &r, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_rdma_write");
  const auto d = n.dto(n.req, "RDMA Write");
  say("RDMA Write of %u bytes completed", d.transfered_length);
  std::snprintf(n.msg(kMessages), kMsgLen, "done: 1 MiB written");
  DAT_LMR_TRIPLET s = n.iov(n.msg(kMessages), std::strlen(n.msg(kMessages)) + 1);
  c.as_64 = 101;
  check(dat_ep_post_send(n.ep, 1, &s, c, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
  n.dto(n.req, "send");
  check(dat_ep_disconnect(n.ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
  if (n.wait(n.conn, "wait for the disconnect").event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
    die("disconnect", DAT_INTERNAL_ERROR);
  say("disconnected");
  n.close();
  say("closed");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* ia_name = argc > 1 ? argv[1] : "softrnic_iwarp";
  // libdat2 reads DAT_OVERRIDE before main(): set it and start again.
  if (!std::getenv("DAT_OVERRIDE")) {
    setenv("DAT_OVERRIDE", SOFTRNIC_DAT_CONF, 1);
    execv("/proc/self/exe", argv);
    std::perror("execv");
    return 1;
  }
  std::printf("softrnic demo: two processes, IA %s, dat.conf %s\n", ia_name, std::getenv("DAT_OVERRIDE"));
  std::fflush(stdout);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::_Exit(server(ia_name, fds[1]));
  }
  close(fds[1]);
  sockaddr_in addr{};
  if (read(fds[0], &addr, sizeof addr) != sizeof addr) {
    std::printf("demo: FAILED (the server did not start)\n");
    waitpid(pid, nullptr, 0);
    return 1;
  }
  const int rc = client(ia_name, addr);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool ok = rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::printf("demo: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
