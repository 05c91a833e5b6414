#include "softrnic/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace softrnic::log {
namespace {

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && *v != '0';
}

constexpr int kUnset = -2;
std::atomic<int> g_level{kUnset};
std::mutex g_sink_mu;
std::function<void(Level, const std::string&)> g_sink;  // under g_sink_mu
std::atomic<bool> g_has_sink{false};

void emit(Level l, const std::string& s) {
  if (g_has_sink.load(std::memory_order_acquire)) {
    std::lock_guard lk(g_sink_mu);
    if (g_sink) {
      g_sink(l, s);
      return;
    }
  }
  // One write: lines of concurrent threads stay whole. stderr may be closed: nothing to do then.
  const char* p = s.data();
  std::size_t n = s.size();
  while (n) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

int init_level(bool first) {
  Level l = Level::warn;
  std::string bad;
  if (const char* v = std::getenv("SOFTRNIC_LOG"); v && *v) {
    if (!parse_level(v, l)) {
      bad = v;
      l = Level::warn;
    }
  } else if (env_on("SOFTRNIC_TRACE")) {
    l = Level::debug;  // the older switch
  }
  if (first) {
    int expected = kUnset;  // a set_level that came first wins
    g_level.compare_exchange_strong(expected, static_cast<int>(l));
  } else {
    g_level.store(static_cast<int>(l));
  }
  if (!bad.empty()) {
    std::string printable;
    for (const char c : bad) printable += (c >= 0x20 && c < 0x7F) ? c : '?';
    emit(Level::warn,
         "softrnic: SOFTRNIC_LOG=" + printable + ": not off, error, warn, info, debug or trace; using warn\n");
  }
  return g_level.load();
}

}  // namespace

Level level() noexcept {
  int v = g_level.load(std::memory_order_relaxed);
  if (v == kUnset) v = init_level(true);
  return static_cast<Level>(v);
}

void reload_from_env() noexcept {
  init_level(false);
}

void set_level(Level l) noexcept {
  g_level.store(static_cast<int>(l), std::memory_order_relaxed);
}

bool parse_level(std::string_view s, Level& out) noexcept {
  if (s == "off" || s == "none")
    out = Level::off;
  else if (s == "error")
    out = Level::error;
  else if (s == "warn" || s == "warning")
    out = Level::warn;
  else if (s == "info")
    out = Level::info;
  else if (s == "debug")
    out = Level::debug;
  else if (s == "trace")
    out = Level::trace;
  else
    return false;
  return true;
}

std::string_view to_string(Level l) noexcept {
  switch (l) {
    case Level::off: return "off";
    case Level::error: return "error";
    case Level::warn: return "warn";
    case Level::info: return "info";
    case Level::debug: return "debug";
    case Level::trace: return "trace";
  }
  return "?";
}

bool stats_wanted() noexcept {
  static const bool env = env_on("SOFTRNIC_STATS");
  return env || enabled(Level::info);
}

namespace {

std::string format(std::string_view who, std::string_view text) {
  std::string s = "softrnic";
  if (!who.empty()) s.append(" ").append(who);
  s.append(": ").append(text).push_back('\n');
  return s;
}

}  // namespace

void line(Level l, std::string_view who, std::string_view text) {
  if (enabled(l)) emit(l, format(who, text));
}

void line_always(std::string_view who, std::string_view text) {
  emit(Level::info, format(who, text));
}

std::string qp_who(std::string_view name, std::uint32_t qpn) {
  std::string s(name);
  if (!s.empty()) s += ' ';
  return s + "QP[" + std::to_string(qpn) + "]";
}

void set_sink(std::function<void(Level, const std::string&)> sink) {
  std::lock_guard lk(g_sink_mu);
  g_sink = std::move(sink);
  g_has_sink.store(static_cast<bool>(g_sink), std::memory_order_release);
}

}  // namespace softrnic::log
