// The IA's configuration: the `ia_params` string of its dat.conf line.
//
// Grammar: whitespace- or comma-separated `key=value` items.
//   netdev=udp|loopback   the datagram backend (default udp)
//   ip=A.B.C.D            address to bind (default 127.0.0.1)
//   port=N                first UDP port to try (default 5041; the next free one is taken)
//   port_fixed=0|1        fail instead of taking the next free port (default 0)
//   max_datagram=N        largest datagram (default: 65000 on 127/8, 1472 elsewhere)
//   busy_poll=0|1         progress thread spins instead of sleeping (default 0)
//   min_rto_us=N          retransmission timeout floor in microseconds (default 5000)
//   retry_limit=N         retransmissions before the connection breaks (default 12)
//   connect_timeout_ms=N  used when dat_ep_connect gives DAT_TIMEOUT_INFINITE (default 20000)
//   srq_alloc=arrival|gap_fill  how SRQ EPs take buffers for messages ahead of a gap (default arrival)
//   impair=K=V:K=V...     an impairment plan (keys of SOFTRNIC_IMPAIR, ':'-separated)
//
// The environment variable SOFTRNIC_IMPAIR (`key=value[,key=value...]`: seed, drop, dup,
// reorder, delay, corrupt) replaces the plan of ia_params for the process.
#pragma once

#include <string>
#include <string_view>

#include "softrnic/rnic.hpp"

namespace softrnic::dat {

// Parses `params` over the defaults in `cfg`. False with `error` naming the bad item.
bool parse_ia_params(std::string_view params, DeviceConfig& cfg, std::string& error);

// Applies SOFTRNIC_IMPAIR from the environment, if set. False with `error` on bad syntax.
bool apply_impair_env(DeviceConfig& cfg, std::string& error);

// Applies every per-process environment override (SOFTRNIC_IMPAIR, ...) over `cfg`; what
// dat_ia_open calls after parse_ia_params. False with `error` naming the bad variable.
bool apply_env(DeviceConfig& cfg, std::string& error);

}  // namespace softrnic::dat
