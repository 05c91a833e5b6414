// Backend constructors, private to the netdev module.
#pragma once

#include "softrnic/netdev/netdev.hpp"

namespace softrnic::netdev {

std::unique_ptr<Netdev> make_udp(const NetdevConfig& cfg, std::string& error);
std::unique_ptr<Netdev> make_loopback(const NetdevConfig& cfg, std::string& error);

}  // namespace softrnic::netdev
