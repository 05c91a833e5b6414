// NetAddr <-> sockaddr_in, for the kernel-socket backends (udp, tcp).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include "softrnic/netdev/netdev.hpp"

namespace softrnic::netdev {

inline sockaddr_in to_sockaddr(const NetAddr& a) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_addr.s_addr = htonl(a.ip);
  s.sin_port = htons(a.port);
  return s;
}

inline NetAddr from_sockaddr(const sockaddr_in& s) {
  return NetAddr{ntohl(s.sin_addr.s_addr), ntohs(s.sin_port)};
}

}  // namespace softrnic::netdev
