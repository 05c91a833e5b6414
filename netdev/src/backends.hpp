// Backend constructors, private to the netdev module.
#pragma once

#include "softrnic/netdev/netdev.hpp"

namespace softrnic::netdev {

std::unique_ptr<Netdev> make_udp(const NetdevConfig& cfg, std::string& error);
std::unique_ptr<Netdev> make_loopback(const NetdevConfig& cfg, std::string& error);
// dpdk.cpp, or dpdk_none.cpp in builds without DPDK.
std::unique_ptr<Netdev> make_dpdk(const NetdevConfig& cfg, std::string& error);

}  // namespace softrnic::netdev
