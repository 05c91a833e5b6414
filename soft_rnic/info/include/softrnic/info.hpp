// A window into live devices (softrnic_info, docs/info.md).
//
// A device's Publisher listens on a unix socket, <dir>/<pid>-<name>-<n>.sock, and answers each
// connection with one JSON snapshot of the device (Device::info: every QP's state, peer, MSN
// expected, messages placed but not completed, receive and SRQ counts, counters) and closes it.
// Nothing on the data path: a thread asleep in poll() until someone asks, and one snapshot under
// the device lock per question. The socket is the owner's only (mode 0600).
//
// <dir>: SOFTRNIC_INFO_DIR if set; else /run/softrnic for root; else $XDG_RUNTIME_DIR/softrnic;
// else /tmp/softrnic-<uid>. SOFTRNIC_INFO=0 turns publishing off.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "softrnic/rnic.hpp"

namespace softrnic::info {

// The JSON document's schema version ("schema" in every snapshot).
inline constexpr int kSchema = 2;

std::string socket_dir();
// Whether SOFTRNIC_INFO allows publishing (unset or not "0").
bool publishing_enabled();

// One snapshot as the JSON text a Publisher sends.
std::string to_json(const DeviceInfo& d, long pid);

class Publisher {
 public:
  // Publishes `dev` (which must outlive the Publisher) under `dev.info().name`. Null with `error`
  // when the directory or socket cannot be made.
  static std::unique_ptr<Publisher> start(const Device& dev, std::string& error);
  virtual ~Publisher() = default;
  virtual const std::string& path() const = 0;
};

// The reading side: the sockets in `dir`, and one snapshot from one of them.
std::vector<std::string> list_sockets(const std::string& dir);
// False with `error` ("stale" when nothing listens there any more).
bool fetch(const std::string& socket_path, std::string& json, std::string& error);

}  // namespace softrnic::info
