// The device list and opened devices: ibv_get_device_list, ibv_open_device and the queries of a
// device, its port and its GID table.
//
// The list comes from SOFTRNIC_VERBS: device specs separated by '|', each in an IA's ia_params
// grammar (softrnic/ia_params.hpp) with wire=roce the default. Unset: one RoCEv2 device on
// 127.0.0.1 (a second process takes the next free loopback address, as Device::open does).
// A device opens its softrnic Device at its first ibv_open_device and closes it at its last
// ibv_close_device: every context of a process shares it.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "abi.hpp"
#include "softrnic/ia_params.hpp"
#include "softrnic/log.hpp"

// The exported names, not the header's inline wrappers of them.
#undef ibv_get_device_list
#undef ibv_query_port

namespace softrnic::verbs {
namespace {

constexpr const char* kDefaultSpec = "wire=roce ip=127.0.0.1";

std::string kind_of(Wire w) {
  return w == Wire::roce ? "roce" : w == Wire::tcp ? "iwarp" : "udp";
}

VDevice* make_device(const std::string& spec, int index, std::vector<int>& per_kind, std::string& error) {
  auto* d = new VDevice;
  d->cfg.wire = Wire::roce;
  d->cfg.connect_timeout = std::chrono::milliseconds(20000);
  if (!params::parse_ia_params(spec, d->cfg, error) || !params::apply_env(d->cfg, error)) {
    error = "SOFTRNIC_VERBS device " + std::to_string(index) + " (" + spec + "): " + error;
    delete d;
    return nullptr;
  }
  const std::string kind = kind_of(d->cfg.wire);
  const int n = per_kind[static_cast<int>(d->cfg.wire)]++;
  const std::string name = "softrnic_" + kind + std::to_string(n);
  d->cfg.name = name;
  ibv_device& dev = d->dev;
  const bool roce = d->cfg.wire == Wire::roce;
  dev.node_type = roce ? IBV_NODE_CA : IBV_NODE_RNIC;
  dev.transport_type = roce ? IBV_TRANSPORT_IB : IBV_TRANSPORT_IWARP;
  std::snprintf(dev.name, sizeof dev.name, "%s", name.c_str());
  std::snprintf(dev.dev_name, sizeof dev.dev_name, "uverbs%d", index);
  std::snprintf(dev.dev_path, sizeof dev.dev_path, "/sys/class/infiniband_verbs/uverbs%d", index);
  std::snprintf(dev.ibdev_path, sizeof dev.ibdev_path, "/sys/class/infiniband/%s", name.c_str());
  return d;
}

std::vector<VDevice*> build(std::string& error) {
  const char* env = std::getenv("SOFTRNIC_VERBS");
  std::string all = env && *env ? env : kDefaultSpec;
  std::vector<VDevice*> out;
  std::vector<int> per_kind(3, 0);
  std::size_t at = 0;
  for (int index = 0; at <= all.size(); ++index) {
    const std::size_t bar = std::min(all.find('|', at), all.size());
    VDevice* d = make_device(all.substr(at, bar - at), index, per_kind, error);
    if (!d) {
      for (VDevice* x : out) delete x;
      return {};
    }
    out.push_back(d);
    at = bar + 1;
  }
  return out;
}

}  // namespace

// The list lives as long as the process (as rdma-core's): a program may hold a device after
// ibv_free_device_list, and one still open at exit is not torn down under its threads.
std::vector<VDevice*>& devices(std::string& error) {
  static std::string* build_error = new std::string;
  static auto* list = new std::vector<VDevice*>(build(*build_error));
  error = *build_error;
  return *list;
}

bool ipv4_of(const ibv_gid& g, std::uint32_t& ip) {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  if (std::memcmp(g.raw, kMapped, 12) != 0) return false;
  ip = static_cast<std::uint32_t>(g.raw[12]) << 24 | static_cast<std::uint32_t>(g.raw[13]) << 16 |
       static_cast<std::uint32_t>(g.raw[14]) << 8 | g.raw[15];
  return true;
}

void raise_async(Context* ctx, ibv_event_type type, void* element) {
  ibv_async_event ev{};
  ev.event_type = type;
  ev.element.qp = static_cast<ibv_qp*>(element);  // (a union of pointers)
  if (::write(ctx->async_wr, &ev, sizeof ev) != static_cast<ssize_t>(sizeof ev)) {
    // A full pipe: the consumer never reads its async events (most do not); dropping one is
    // what it asked for.
  }
}

}  // namespace softrnic::verbs

using namespace softrnic;
using namespace softrnic::verbs;

namespace {

std::uint64_t guid_of(std::uint32_t ip) {
  return 0x0253465200000000ull | ip;  // 02 'S' 'F' 'R', then the IPv4 address (the RoCE CM's CA GUID)
}

bool is_roce(const Context* c) {
  return c->dev->wire() == Wire::roce;
}

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex full{};
  if (int e = ibv_query_device(context, &full.orig_attr)) return e;
  std::memcpy(attr, &full, std::min(attr_size, sizeof full));
  return 0;
}

int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr, size_t attr_size) {
  if (port != 1) return EINVAL;
  Context* c = ctx_of(context);
  const Limits& l = c->dev->limits();
  ibv_port_attr a{};
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = mtu_enum(c->dev->path_mtu());
  a.gid_tbl_len = is_roce(c) ? 2 : 1;
  a.port_cap_flags = IBV_PORT_CM_SUP;
  a.max_msg_sz = l.max_msg_size;
  a.pkey_tbl_len = 1;
  a.max_vl_num = 1;
  a.active_width = 1;   // 1X
  a.active_speed = 32;  // EDR: 25 Gb/s at 1X
  a.phys_state = 5;     // LinkUp
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  std::memcpy(attr, &a, std::min(attr_size, sizeof a));
  return 0;
}

bool gid_at(Context* c, int index, ibv_gid& gid) {
  const std::uint32_t ip = c->dev->address().ip;
  std::memset(&gid, 0, sizeof gid);
  if (index == (is_roce(c) ? 1 : 0)) {  // ::ffff:a.b.c.d
    gid.raw[10] = gid.raw[11] = 0xFF;
    for (int i = 0; i < 4; ++i) gid.raw[12 + i] = static_cast<std::uint8_t>(ip >> (24 - 8 * i));
    return true;
  }
  if (index == 0) {  // fe80::<node GUID>
    gid.raw[0] = 0xFE;
    gid.raw[1] = 0x80;
    const std::uint64_t g = guid_of(ip);
    for (int i = 0; i < 8; ++i) gid.raw[8 + i] = static_cast<std::uint8_t>(g >> (56 - 8 * i));
    return true;
  }
  return false;
}

ibv_context_ops context_ops() {
  ibv_context_ops ops{};
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.post_srq_recv = post_srq_recv;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  return ops;
}

Device* open_shared(VDevice* d) {
  std::lock_guard lk(d->mu);
  if (!d->opened) {
    std::string error;
    d->opened = Device::open(d->cfg, error);
    if (!d->opened) {
      std::fprintf(stderr, "softrnic: %s: %s\n", d->dev.name, error.c_str());
      return nullptr;
    }
    SOFTRNIC_LOG_AT(info, d->cfg.name, "open: " + kind_of(d->cfg.wire) + " on " + to_string(d->opened->address()));
    if (info::publishing_enabled()) d->publisher = info::Publisher::start(*d->opened, error);
  }
  d->users++;
  return d->opened.get();
}

// The last user closes the device, telling what its connections did (SOFTRNIC_LOG=info).
void close_shared(VDevice* d) {
  std::unique_ptr<Device> last;
  std::lock_guard lk(d->mu);
  if (--d->users > 0) return;
  d->publisher.reset();
  last = std::move(d->opened);
  const DeviceCounters c = last->counters();
  SOFTRNIC_LOG_AT(info, d->cfg.name,
                  "close: tx_frames " + std::to_string(c.tx_frames) + " rx_frames " + std::to_string(c.rx_frames) +
                      " retransmits " + std::to_string(c.retransmits) + " rx_out_of_order " +
                      std::to_string(c.rx_out_of_order) + " rx_duplicates " + std::to_string(c.rx_duplicates));
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  std::string error;
  std::vector<VDevice*>& list = devices(error);
  if (list.empty()) {
    static bool told = false;
    if (!told) std::fprintf(stderr, "softrnic: %s\n", error.c_str());
    told = true;
    errno = EINVAL;
    return nullptr;
  }
  auto** out = static_cast<ibv_device**>(std::calloc(list.size() + 1, sizeof(ibv_device*)));
  if (!out) {
    errno = ENOMEM;
    return nullptr;
  }
  for (std::size_t i = 0; i < list.size(); ++i) out[i] = &list[i]->dev;
  if (num) *num = static_cast<int>(list.size());
  return out;
}

void ibv_free_device_list(ibv_device** list) {
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  return device->name;
}

int ibv_get_device_index(ibv_device* device) {
  std::string error;
  const auto& list = devices(error);
  for (std::size_t i = 0; i < list.size(); ++i)
    if (&list[i]->dev == device) return static_cast<int>(i);
  return -1;
}

__be64 ibv_get_device_guid(ibv_device* device) {
  auto* d = reinterpret_cast<VDevice*>(device);
  std::uint32_t ip = 0;
  netdev::parse_ipv4(d->cfg.netdev.ip, ip);
  {
    std::lock_guard lk(d->mu);
    if (d->opened) ip = d->opened->address().ip;
  }
  return htobe64(guid_of(ip));
}

ibv_context* ibv_open_device(ibv_device* device) {
  auto* d = reinterpret_cast<VDevice*>(device);
  Device* dev = open_shared(d);
  if (!dev) {
    errno = ENODEV;
    return nullptr;
  }
  auto* c = new Context;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    const int e = errno;
    delete c;
    close_shared(d);
    errno = e;
    return nullptr;
  }
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  c->vdev = d;
  c->dev = dev;
  c->async_wr = fds[1];
  verbs_context& v = c->vctx;
  std::memset(&v, 0, sizeof v);
  v.sz = sizeof(verbs_context);
  v.query_port = query_port;
  v.query_device_ex = query_device_ex;
  ibv_context& ctx = v.context;
  ctx.device = device;
  ctx.ops = context_ops();
  ctx.cmd_fd = -1;
  ctx.async_fd = fds[0];
  ctx.num_comp_vectors = 1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.abi_compat = reinterpret_cast<void*>(UINTPTR_MAX);  // extended: verbs_get_ctx_op looks at sz
  return &ctx;
}

int ibv_close_device(ibv_context* context) {
  Context* c = ctx_of(context);
  ::close(context->async_fd);
  ::close(c->async_wr);
  VDevice* d = c->vdev;
  delete c;
  close_shared(d);
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  Context* c = ctx_of(context);
  const Limits& l = c->dev->limits();
  std::memset(attr, 0, sizeof *attr);
  std::snprintf(attr->fw_ver, sizeof attr->fw_ver, "softrnic %s", SOFTRNIC_VERSION);
  attr->node_guid = attr->sys_image_guid = htobe64(guid_of(c->dev->address().ip));
  attr->max_mr_size = l.max_mr_size;
  attr->page_size_cap = 0xFFFFF000;
  attr->vendor_id = 0xFFFFFF;  // none registered (rxe's is the same)
  attr->max_qp = static_cast<int>(l.max_qp);
  attr->max_qp_wr = static_cast<int>(l.max_qp_wr);
  attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_CHANGE_PHY_PORT;
  attr->max_sge = static_cast<int>(l.max_sge);
  attr->max_sge_rd = 1;
  attr->max_cq = static_cast<int>(l.max_qp * 2);
  attr->max_cqe = static_cast<int>(l.max_cqe);
  attr->max_mr = static_cast<int>(l.max_mr);
  attr->max_pd = static_cast<int>(l.max_pd);
  attr->max_qp_rd_atom = attr->max_qp_init_rd_atom = static_cast<int>(l.max_rd);
  attr->max_res_rd_atom = static_cast<int>(l.max_rd * l.max_qp);
  attr->atomic_cap = is_roce(c) ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
  attr->max_srq = static_cast<int>(l.max_qp);
  attr->max_srq_wr = static_cast<int>(l.max_qp_wr);
  attr->max_srq_sge = static_cast<int>(l.max_sge);
  attr->max_pkeys = 1;
  attr->local_ca_ack_delay = 15;
  attr->phys_port_cnt = 1;
  return 0;
}

// The compat entry (struct _compat_ibv_port_attr: ibv_port_attr up to port_cap_flags2).
int ibv_query_port(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) {
  return query_port(context, port, reinterpret_cast<ibv_port_attr*>(attr), offsetof(ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || !gid_at(ctx_of(context), index, *gid)) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  ibv_gid_entry e{};
  Context* c = ctx_of(context);
  if (port != 1 || !gid_at(c, static_cast<int>(index), e.gid)) return ENODATA;
  e.gid_index = index;
  e.port_num = port;
  e.gid_type = is_roce(c) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
  e.ndev_ifindex = 0;  // no kernel net_device carries it
  *entry = e;
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                             size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  const std::uint32_t n = is_roce(ctx_of(context)) ? 2 : 1;
  if (max_entries < n) return -EINVAL;
  for (std::uint32_t i = 0; i < n; ++i)
    _ibv_query_gid_ex(context, 1, i,
                      reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + i * entry_size), 0,
                      entry_size);
  return n;
}

// enum ibv_gid_type_sysfs (rdma-core's driver.h): 0 IB or RoCE v1, 1 RoCE v2.
int ibv_query_gid_type(ibv_context* context, uint8_t port, unsigned int index, int* type) {
  ibv_gid g;
  Context* c = ctx_of(context);
  if (port != 1 || !gid_at(c, static_cast<int>(index), g)) {
    errno = EINVAL;
    return -1;
  }
  *type = is_roce(c) ? 1 : 0;
  return 0;
}

int ibv_query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != 1 || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xFFFF);
  return 0;
}

int ibv_get_pkey_index(ibv_context*, uint8_t port, __be16 pkey) {
  if (port == 1 && (be16toh(pkey) & 0x7FFF) == 0x7FFF) return 0;
  errno = ENOENT;
  return -1;
}

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  if (::read(context->async_fd, event, sizeof *event) != static_cast<ssize_t>(sizeof *event)) return -1;
  return 0;
}

void ibv_ack_async_event(ibv_async_event*) {}

}  // extern "C"
