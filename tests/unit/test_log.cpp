// The log switch (SOFTRNIC_LOG and the older SOFTRNIC_TRACE) and the line format.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "softrnic/log.hpp"

using namespace softrnic;

namespace {

struct Captured {
  std::vector<std::pair<log::Level, std::string>> lines;
  Captured() {
    log::set_sink([this](log::Level l, const std::string& s) { lines.emplace_back(l, s); });
  }
  ~Captured() { log::set_sink(nullptr); }
};

// The level a fresh process picks from its environment (the level is read once per process).
std::string level_in_child(const char* log, const char* trace) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDERR_FILENO);  // a bad value's warning goes there
    if (log)
      ::setenv("SOFTRNIC_LOG", log, 1);
    else
      ::unsetenv("SOFTRNIC_LOG");
    if (trace)
      ::setenv("SOFTRNIC_TRACE", trace, 1);
    else
      ::unsetenv("SOFTRNIC_TRACE");
    log::reload_from_env();
    const std::string s = "level=" + std::string(log::to_string(log::level())) + "\n";
    (void)!::write(fds[1], s.data(), s.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  return out;
}

}  // namespace

TEST(Log, LevelsParse) {
  log::Level l{};
  for (const auto& [s, want] : std::vector<std::pair<const char*, log::Level>>{{"off", log::Level::off},
                                                                               {"error", log::Level::error},
                                                                               {"warn", log::Level::warn},
                                                                               {"warning", log::Level::warn},
                                                                               {"info", log::Level::info},
                                                                               {"debug", log::Level::debug},
                                                                               {"trace", log::Level::trace}}) {
    ASSERT_TRUE(log::parse_level(s, l)) << s;
    EXPECT_EQ(l, want) << s;
  }
  for (const char* bad : {"", "WARN", "3", "verbose", "debug "}) EXPECT_FALSE(log::parse_level(bad, l)) << bad;
}

TEST(Log, LinesCarryTheirPrefixAndOnlyEnabledLevelsShow) {
  const log::Level before = log::level();
  Captured c;
  log::set_level(log::Level::warn);
  log::line(log::Level::warn, log::qp_who("softrnic_iwarp", 12), "broken (peer 10.0.0.2:5041): retry limit");
  log::line(log::Level::info, "softrnic_iwarp", "not shown at warn");
  SOFTRNIC_LOG_AT(debug, "x", std::string("not built either"));
  log::line(log::Level::error, "", "no who");
  log::line_always("dpdk net_memif0", "counters");
  log::set_level(log::Level::off);
  log::line(log::Level::error, "x", "nothing at off");
  log::set_level(before);
  ASSERT_EQ(c.lines.size(), 3u);
  EXPECT_EQ(c.lines[0].second, "softrnic softrnic_iwarp QP[12]: broken (peer 10.0.0.2:5041): retry limit\n");
  EXPECT_EQ(c.lines[0].first, log::Level::warn);
  EXPECT_EQ(c.lines[1].second, "softrnic: no who\n");
  EXPECT_EQ(c.lines[2].second, "softrnic dpdk net_memif0: counters\n");
  EXPECT_EQ(log::qp_who("", 7), "QP[7]");
}

TEST(Log, TheEnvironmentChoosesTheLevel) {
  EXPECT_EQ(level_in_child(nullptr, nullptr), "level=warn\n");
  EXPECT_EQ(level_in_child("debug", nullptr), "level=debug\n");
  EXPECT_EQ(level_in_child("off", "1"), "level=off\n") << "SOFTRNIC_LOG wins over the older switch";
  EXPECT_EQ(level_in_child(nullptr, "1"), "level=debug\n") << "SOFTRNIC_TRACE=1 still means debug";
  EXPECT_EQ(level_in_child(nullptr, "0"), "level=warn\n");
  EXPECT_EQ(level_in_child("loud\x01", nullptr),
            "softrnic: SOFTRNIC_LOG=loud?: not off, error, warn, info, debug or trace; using warn\nlevel=warn\n");
}
