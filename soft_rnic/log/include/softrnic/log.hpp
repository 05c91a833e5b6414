// Diagnostics: one switch with levels, lines prefixed with who speaks, as Linux siw prefixes its
// messages with the device and QP ("siw0: QP[12]: ...").
//
//   SOFTRNIC_LOG=off|error|warn|info|debug|trace   (default warn; read once, at the first line)
//     error  what fails a call: an IA that cannot open, a configuration refused
//     warn   what breaks a connection: Terminates sent and received, a peer found dead, a QP
//            that went to error
//     info   connection life (established, rejected, disconnected, with the peer and reason),
//            IAs opening and closing with their counters
//     debug  everything else worth a line (the DAT provider's connection events per EP, ...)
//   The older switches still work: SOFTRNIC_TRACE=1 means debug; SOFTRNIC_STATS=1 prints the
//   closing counters of IAs and DPDK ports at any level.
//
// A line is "softrnic <who>: <text>\n" ("softrnic: <text>" without a who), written with one
// write(2) so that lines of several threads do not mix; <who> is the IA's name
// ("softrnic_iwarp") and, for a QP, "QP[<qpn>]" after it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace softrnic::log {

// trace: debug and the QP state machine's every move (core/qp_state.cpp).
enum class Level : int { off = -1, error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

// The level in force (SOFTRNIC_LOG, SOFTRNIC_TRACE on first use; set_level after).
Level level() noexcept;
void set_level(Level l) noexcept;
// Reads SOFTRNIC_LOG / SOFTRNIC_TRACE again (what the first line does; for tests).
void reload_from_env() noexcept;
// "off", "error", "warn", "info", "debug", "trace" (also "warning"); false otherwise.
bool parse_level(std::string_view s, Level& out) noexcept;
std::string_view to_string(Level l) noexcept;
inline bool enabled(Level l) noexcept {
  return static_cast<int>(l) <= static_cast<int>(level());
}
// Whether SOFTRNIC_STATS asks for the closing counters (or the level is info or more).
bool stats_wanted() noexcept;

// Writes "softrnic <who>: <text>" when `l` is enabled. who: "softrnic_iwarp", "softrnic_iwarp QP[12]".
void line(Level l, std::string_view who, std::string_view text);
// The same, unconditionally (what SOFTRNIC_STATS asks for).
void line_always(std::string_view who, std::string_view text);

// "<name> QP[<qpn>]", the prefix of a QP's lines ("QP[<qpn>]" without a name).
std::string qp_who(std::string_view name, std::uint32_t qpn);

// Tests: every line goes to `sink` instead of stderr while one is set (nullptr: stderr again).
void set_sink(std::function<void(Level, const std::string&)> sink);

}  // namespace softrnic::log

// Builds the text only when the level is on: SOFTRNIC_LOG_AT(warn, who, "x " + s).
#define SOFTRNIC_LOG_AT(lvl, who, text)                                  \
  do {                                                                   \
    if (::softrnic::log::enabled(::softrnic::log::Level::lvl))           \
      ::softrnic::log::line(::softrnic::log::Level::lvl, (who), (text)); \
  } while (0)
