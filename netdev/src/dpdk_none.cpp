// Stands in for the dpdk backend in builds without libdpdk (pkg-config found none).
#include "backends.hpp"

namespace softrnic::netdev {

bool dpdk_available() {
  return false;
}

std::unique_ptr<Netdev> make_dpdk(const NetdevConfig&, std::string& error) {
  error = "dpdk netdev: softrnic was built without DPDK (install libdpdk-dev and rebuild)";
  return nullptr;
}

}  // namespace softrnic::netdev
