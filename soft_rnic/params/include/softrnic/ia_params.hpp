// A device's configuration: the `ia_params` string of an IA's dat.conf line (dat/), the same
// grammar the verbs door will read from SOFTRNIC_VERBS.
//
// Grammar: whitespace- or comma-separated `key=value` items.
//   wire=udp|tcp          iWARP over the project's UDP framing (default), or over MPA/TCP
//                         (RFC 5044/6581: Linux siw, iWARP NICs; kernel TCP on ip=, the
//                         listening TCP port of a PSP is its conn_qual; port= is not used)
//   mpa_rev=1|2  mpa_crc=0|1  mpa_markers=0|1  mpa_p2p=0|1   what the MPA exchange asks for
//                         (defaults 2, 1, 0, 1): revision, CRC32c, markers toward us, and as
//                         initiator the peer-to-peer RTR (a zero-length Write)
//   netdev=udp|loopback|dpdk  the datagram backend (default udp; wire=tcp takes the kernel's)
//   ip=A.B.C.D            address to bind (default 127.0.0.1)
//   port=N                first UDP port to try (default 5041; the next free one is taken)
//   port_fixed=0|1        fail instead of taking the next free port (default 0)
//   max_datagram=N        largest datagram (default: 65000 on 127/8, 1472 elsewhere)
//   busy_poll=0|1         progress thread spins instead of sleeping (default 0)
//   wait_spin_us=N        a blocking wait (dat_evd_wait, ibv_get_cq_event) polls this long before
//                         it sleeps in the kernel (0..10000; default 50)
//   batch_posts=0|1       posts made while the consumer polls go out together at its next poll (default 1)
//   min_rto_us=N          retransmission timeout floor in microseconds (default 5000)
//   retry_limit=N         retransmissions before the connection breaks (default 12)
//   connect_timeout_ms=N  used when dat_ep_connect gives DAT_TIMEOUT_INFINITE (default 20000)
//   srq_alloc=arrival|gap_fill  how SRQ EPs take buffers for messages ahead of a gap (default arrival)
//   impair=K=V:K=V...     an impairment plan (keys of SOFTRNIC_IMPAIR, ':'-separated)
//   pcap=FILE             a pcap tap: every datagram sent and received goes to FILE
// netdev=dpdk keys (netdev::parse_netdev_item; values hold no ',' or blanks, so ';' stands in):
//   dpdk_vdev=net_memif0;role=server;socket=/tmp/d/memif.sock   the virtual device (';' -> ',')
//   dpdk_pci=0000:03:00.0   a NIC bound to vfio-pci (';' -> ',' for devargs)   dpdk_port=N
//   dpdk_eal=--log-level=debug;-n;4   extra EAL arguments, ';'-separated, from a known set
//   dpdk_lcore=N  dpdk_prefix=NAME  dpdk_mem=MB  dpdk_huge=0|1  dpdk_rxd=N  dpdk_txd=N
//   dpdk_link_timeout_ms=N  dpdk_udp_csum=0|1  mac=02:00:00:00:00:01  mtu=N
//   neigh=10.0.0.2@02:00:00:00:00:02[;IP@MAC...]  (static neighbours; repeatable)
// ip= is the dpdk port's own IPv4 address (it answers ARP for it); port= its UDP port.
//
// Environment (per process, applied by apply_env after parse_ia_params):
//   SOFTRNIC_NETDEV  the netdev keys above in the same grammar (blank- or comma-separated);
//                    replaces the netdev choice and all its keys of ia_params (not impair), so
//                    two processes sharing one dat.conf line can take the two ends of a memif
//                    pair. Other keys are an error.
//   SOFTRNIC_PCAP=FILE  enables the pcap tap (as pcap=FILE).
//   SOFTRNIC_IMPAIR  (`key=value[,key=value...]`: seed, drop, dup, reorder, delay, corrupt)
//                    replaces the plan of ia_params for the process.
#pragma once

#include <string>
#include <string_view>

#include "softrnic/rnic.hpp"

namespace softrnic::params {

// Parses `params` over the defaults in `cfg`. False with `error` naming the bad item.
bool parse_ia_params(std::string_view params, DeviceConfig& cfg, std::string& error);

// Applies SOFTRNIC_IMPAIR from the environment, if set. False with `error` on bad syntax.
bool apply_impair_env(DeviceConfig& cfg, std::string& error);

// Parses a SOFTRNIC_NETDEV value (netdev keys only) over `nd`. False with `error` naming the item.
bool parse_netdev_spec(std::string_view spec, netdev::NetdevConfig& nd, std::string& error);

// Applies every per-process environment override (SOFTRNIC_NETDEV, SOFTRNIC_PCAP,
// SOFTRNIC_IMPAIR) over `cfg`; what
// dat_ia_open calls after parse_ia_params. False with `error` naming the bad variable.
bool apply_env(DeviceConfig& cfg, std::string& error);

}  // namespace softrnic::params
