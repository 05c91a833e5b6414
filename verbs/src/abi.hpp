// The objects behind libibverbs' handles. Each begins with the struct Debian 12's <infiniband/
// verbs.h> defines, so the header's inline verbs (ibv_post_send, ibv_poll_cq, verbs_get_ctx_op
// and the rest) read what they expect at the offsets they were compiled with; what softrnic
// needs follows. The static_asserts pin the sizes and offsets those inline verbs fix
// (../shared/docs/verbs-facts.md).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "softrnic/info.hpp"
#include "softrnic/rnic.hpp"

namespace softrnic::verbs {

static_assert(sizeof(ibv_device) == 664 && offsetof(ibv_device, node_type) == 16 &&
              offsetof(ibv_device, transport_type) == 20 && offsetof(ibv_device, name) == 24 &&
              offsetof(ibv_device, ibdev_path) == 408);
static_assert(sizeof(ibv_context) == 328 && offsetof(ibv_context, ops) == 8 &&
              offsetof(ibv_context, ops.poll_cq) == 96 && offsetof(ibv_context, ops.req_notify_cq) == 104 &&
              offsetof(ibv_context, ops.post_srq_recv) == 168 && offsetof(ibv_context, ops.post_send) == 208 &&
              offsetof(ibv_context, ops.post_recv) == 216 && offsetof(ibv_context, cmd_fd) == 264 &&
              offsetof(ibv_context, async_fd) == 268 && offsetof(ibv_context, abi_compat) == 320);
static_assert(sizeof(verbs_context) == 648 && offsetof(verbs_context, sz) == 312 &&
              offsetof(verbs_context, context) == 320 && offsetof(verbs_context, query_device_ex) == 216 &&
              offsetof(verbs_context, create_cq_ex) == 200);
static_assert(sizeof(ibv_cq) == 128 && sizeof(ibv_qp) == 160 && offsetof(ibv_qp, qp_num) == 52 &&
              offsetof(ibv_qp, state) == 56 && sizeof(ibv_wc) == 48 && sizeof(ibv_send_wr) == 128 &&
              sizeof(ibv_port_attr) == 52 && sizeof(ibv_device_attr) == 232 && sizeof(ibv_device_attr_ex) == 400 &&
              sizeof(ibv_qp_attr) == 144);

struct Registry;
struct Context;

// One device of the list (SOFTRNIC_VERBS): rdma-core's struct verbs_device, whose first member is
// the ibv_device a program holds. Its `ops` (at 664) stays NULL: mlx5dv_is_supported and
// efadv's checks compare it with their own and find the device is not theirs.
struct VDevice {
  ibv_device dev{};
  const void* ops = nullptr;  // struct verbs_device_ops *
  std::uint8_t verbs_device_rest[40]{};
  // softrnic's own
  DeviceConfig cfg;
  std::mutex mu;  // the opened device and its users
  std::unique_ptr<Device> opened;
  std::unique_ptr<info::Publisher> publisher;  // softrnic_info's window into it
  int users = 0;
};
static_assert(offsetof(VDevice, ops) == 664);

// An opened device (ibv_open_device): rdma-core's verbs_context, whose last member is the
// ibv_context a program holds, with abi_compat and sz set so verbs_get_ctx_op finds the
// extended verbs it offers (query_port, query_device_ex) and NULL for the rest.
struct Context {
  verbs_context vctx{};
  VDevice* vdev = nullptr;
  Device* dev = nullptr;
  int async_wr = -1;  // the write end of the async event pipe (context.async_fd reads it)
};

struct VPd {
  ibv_pd pd{};
  Pd* p = nullptr;
};

struct VMr {
  ibv_mr mr{};
  Mr* m = nullptr;
};

struct Channel {
  ibv_comp_channel ch{};
  int wr = -1;  // the write end of the pipe whose read end is ch.fd
  // A blocking ibv_get_cq_event waits through the device's CompletionChannel: it drives the
  // engine itself, blocked in the netdev, so the frame that completes its CQ wakes it directly
  // (one thread hand-off per message instead of two, as dat_evd_wait); a signal ends that wait
  // as it ends the read of the pipe. `pending`: events written (or about to be) to the pipe and
  // not yet read; `direct`: events the waiter's own round raised, handed to it without the pipe;
  // both under `mu`.
  std::unique_ptr<CompletionChannel> waiter;
  std::mutex mu;
  std::uint64_t pending = 0;
  std::vector<ibv_cq*> direct;
};

struct VCq {
  ibv_cq cq{};
  Cq* c = nullptr;
  Context* ctx = nullptr;
  Channel* channel = nullptr;
  // Armed by ibv_req_notify_cq: the next completion sends one event down the channel.
  std::atomic<bool> armed{false};
};

struct VSrq {
  ibv_srq srq{};
  Srq* s = nullptr;
  Context* ctx = nullptr;
  std::uint32_t max_wr = 0, max_sge = 0;
  std::atomic<std::uint32_t> limit{0};  // the armed srq_limit (0: none)
};

// Where a QP's connection events go besides the async fd: librdmacm's id that connects it
// (verbs/rdmacm). Called in the progress thread or a Device call, under the device lock: it may
// not call the Device.
struct CmSink {
  virtual ~CmSink() = default;
  virtual void on_event(const CmEvent& e) = 0;
};

// A QP: its verbs state beside softrnic's (RESET and INIT are both softrnic's idle), the
// attributes the consumer set (ibv_query_qp returns them) and a bounce buffer for inline data.
struct VQp {
  ibv_qp qp{};
  Qp* q = nullptr;
  Context* ctx = nullptr;
  ibv_qp_cap cap{};
  bool sig_all = false;
  bool init = false;  // in INIT (softrnic idle): not RESET
  ibv_qp_attr attr{};
  // Inline sends: their data is copied at post time into slot (n % max_send_wr) of this region;
  // a send queue holds at most max_send_wr work requests and completes them in order, so a slot
  // is free again when its turn comes.
  std::vector<std::uint8_t> inline_buf;
  Mr* inline_mr = nullptr;
  std::uint64_t inline_next = 0;
  std::mutex cm_mu;            // guards cm
  std::shared_ptr<CmSink> cm;  // librdmacm's id, while one connects the QP
  // librdmacm's carrier of a connection without a QP (rdmacm.hpp, Id::carrier): the consumer
  // never saw it, so its events stay off the async fd.
  bool carrier = false;
};

struct VAh {
  ibv_ah ah{};
  NetAddr to{};
};

// A path MTU in bytes (Device::path_mtu: 256 ... 4096) as the verbs enum.
inline ibv_mtu mtu_enum(std::uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}

// What a post or a verb's Status is as an errno (rxe's where it has one).
inline int to_errno(Status s) {
  switch (s) {
    case Status::ok: return 0;
    case Status::insufficient_resources: return ENOMEM;
    case Status::in_use: return EBUSY;
    case Status::not_found: return ENOENT;
    case Status::privileges_violation: return EFAULT;  // rxe: the pages could not be pinned
    case Status::invalid_param:
    case Status::invalid_state:
    case Status::protection_violation:
    case Status::length_error: return EINVAL;
  }
  return EINVAL;
}

// A verb's failure as rdma-core reports it for those that return an object: NULL, errno set.
template <typename T>
T* fail(int e) {
  errno = e;
  return nullptr;
}

// The IPv4 address of a RoCEv2 GID ::ffff:a.b.c.d; false for any other GID (softrnic has no
// IPv6 path).
bool ipv4_of(const ibv_gid& g, std::uint32_t& ip);

inline Context* ctx_of(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}

// The device list (registry.cpp).
std::vector<VDevice*>& devices(std::string& error);

// Async events (a record on the context's async pipe).
void raise_async(Context* ctx, ibv_event_type type, void* element);

// The ops table every context gets (qp.cpp, cq.cpp).
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);

}  // namespace softrnic::verbs
