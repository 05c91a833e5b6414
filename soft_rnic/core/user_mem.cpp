#include "user_mem.hpp"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace softrnic {
namespace {

std::string read_self_maps() {
  std::string out;
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[16384];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  ::close(fd);
  return out;
}

// The guard of the copy this thread is running (nullptr outside run_guarded).
thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_prev_segv {};
struct sigaction g_prev_bus {};
std::once_flag g_installed;

void on_fault(int sig, siginfo_t* si, void* ctx) {
  if (sigjmp_buf* j = t_guard) {
    t_guard = nullptr;
    siglongjmp(*j, 1);
  }
  // Not ours: whoever handled it before (a sanitizer, the consumer), else the default action,
  // which the faulting instruction triggers again on return.
  const struct sigaction& prev = sig == SIGSEGV ? g_prev_segv : g_prev_bus;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) {
      prev.sa_sigaction(sig, si, ctx);
      return;
    }
  } else if (prev.sa_handler == SIG_IGN) {
    return;
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
}

void install() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER: the handler leaves by siglongjmp without restoring a signal mask (no system call
  // per guarded copy), so the signal must not be blocked while it runs. SA_ONSTACK: a consumer's
  // alternate stack, if it has one, serves its own overflows as before.
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  ::sigaction(SIGSEGV, &sa, &g_prev_segv);
  ::sigaction(SIGBUS, &sa, &g_prev_bus);
}

}  // namespace

Status check_mapping(std::uintptr_t addr, std::uint64_t len, bool write) {
  if (len == 0) return Status::ok;
  const std::uint64_t end = addr + len;
  if (end < addr) return Status::invalid_param;
  const std::string maps = read_self_maps();
  if (maps.empty()) return Status::ok;  // no procfs: nothing to check against
  std::uint64_t at = addr;              // the first byte not yet found mapped
  std::size_t pos = 0;
  // Lines are sorted by address: "start-end perms offset dev inode path".
  while (pos < maps.size() && at < end) {
    const std::size_t nl = maps.find('\n', pos);
    const std::string line = maps.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? maps.size() : nl + 1;
    std::uint64_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s", &lo, &hi, perms) != 3) continue;
    if (hi <= at) continue;
    if (lo > at) return Status::invalid_param;  // a hole
    if (perms[0] != 'r' || (write && perms[1] != 'w')) return Status::protection_violation;
    at = hi;
  }
  return at >= end ? Status::ok : Status::invalid_param;
}

bool run_guarded(void (*fn)(void*), void* arg) {
  std::call_once(g_installed, install);
  sigjmp_buf jb;
  if (sigsetjmp(jb, 0) != 0) return false;  // t_guard was cleared by the handler
  t_guard = &jb;
  fn(arg);
  t_guard = nullptr;
  return true;
}

bool guarded_copy(void* dst, const void* src, std::size_t n) {
  struct Args {
    void* dst;
    const void* src;
    std::size_t n;
  } a{dst, src, n};
  return run_guarded(
      [](void* p) {
        auto* x = static_cast<Args*>(p);
        std::memcpy(x->dst, x->src, x->n);
      },
      &a);
}

}  // namespace softrnic
