// IA open/query/close and the calls that take any handle.
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "api.hpp"
#include "softrnic/ia_params.hpp"
#include "softrnic/log.hpp"

namespace softrnic::dat {
namespace {

// The IB MTU (256..4096) a link of `ip_mtu` bytes carries whole, as ib_mtu_int_to_enum() picks it.
std::uint32_t ib_mtu_of(std::uint32_t ip_mtu) {
  for (const std::uint32_t m : {4096u, 2048u, 1024u, 512u})
    if (ip_mtu >= m) return m;
  return 256;
}

// The IP MTU of the IA's link: the kernel interface of its address (udp netdev, both wires), the
// DPDK port's, none for the in-process loopback netdev; on the udp wire no more than its
// datagrams carry (RoCEv2's too).
std::uint32_t link_mtu(const DeviceConfig& cfg, std::uint32_t ip) {
  std::uint32_t mtu = 65536;
  if (cfg.netdev.kind == "udp") {
    if (const std::uint32_t m = netdev::interface_mtu(ip)) mtu = m;
  } else if (cfg.netdev.kind == "dpdk") {
    mtu = cfg.netdev.dpdk.mtu;
  }
  if (cfg.wire != Wire::tcp && cfg.netdev.max_datagram)
    mtu = std::min<std::uint32_t>(mtu, static_cast<std::uint32_t>(cfg.netdev.max_datagram + 28));
  return mtu;
}

void copy_name(char* dst, const std::string& s) {
  std::snprintf(dst, DAT_NAME_MAX_LENGTH, "%s", s.c_str());
}

}  // namespace

DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE* async_evd, DAT_IA_HANDLE* ia_out) {
  if (!name || !ia_out || !async_evd) return err(DAT_INVALID_PARAMETER);
  std::string params;
  DAT_PROVIDER* prov = provider_for(name, &params);
  if (!prov) return err(DAT_PROVIDER_NOT_FOUND);
  DeviceConfig cfg;
  std::string error;
  cfg.name = name;
  if (!params::parse_ia_params(params, cfg, error) || !params::apply_env(cfg, error)) {
    log::line(log::Level::error, name, "dat_ia_open: " + error);
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
  }
  std::lock_guard lk(api_mutex());
  if (*async_evd != DAT_HANDLE_NULL && !is_live(*async_evd, Kind::evd))
    return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
  auto dev = Device::open(cfg, error);
  if (!dev) {
    log::line(log::Level::error, name, "dat_ia_open: " + error);
    return err(DAT_INSUFFICIENT_RESOURCES);
  }
  Ia* ia = make<Ia>(nullptr, prov);
  ia->ia = ia;
  ia->name = name;
  const NetAddr a = dev->address();
  ia->addr.sin_family = AF_INET;
  ia->addr.sin_addr.s_addr = htonl(a.ip);
  ia->addr.sin_port = htons(a.port);
  ia->base_port = cfg.netdev.port;
  ia->transport_mtu = std::to_string(ib_mtu_of(link_mtu(cfg, a.ip)));
  ia->address = to_string(a);
  if (info::publishing_enabled()) {
    std::string perr;
    ia->publisher = info::Publisher::start(*dev, perr);
    if (!ia->publisher) log::line(log::Level::warn, name, "softrnic_info cannot see this IA: " + perr);
  }
  SOFTRNIC_LOG_AT(info, ia->name,
                  std::string("open: ") +
                      (cfg.wire == Wire::tcp    ? "iWARP over MPA/TCP"
                       : cfg.wire == Wire::roce ? "RoCEv2"
                                                : "iWARP over UDP") +
                      " on the " + (cfg.wire == Wire::tcp ? std::string("kernel TCP") : cfg.netdev.kind) + " netdev, " +
                      to_string(a) + ", IB MTU " + ia->transport_mtu);
  ia->provider_attrs = {
      {const_cast<char*>("DAT_IB_RDMA_READ"), const_cast<char*>("TRUE")},
      {const_cast<char*>("DAT_IB_TRANSPORT_MTU"), ia->transport_mtu.data()},
      {const_cast<char*>("SOFTRNIC_ADDRESS"), ia->address.data()},
      {const_cast<char*>("SOFTRNIC_TRANSPORT"), const_cast<char*>(cfg.wire == Wire::tcp    ? "iwarp-mpa-tcp"
                                                                  : cfg.wire == Wire::roce ? "roce-v2"
                                                                                           : "iwarp-udp")},
  };
  if (cfg.wire == Wire::roce) {
    // The DAT IB extensions, as OFA dapl's cma provider names them: immediate data and atomics.
    for (const char* attr :
         {"DAT_EXTENSION_INTERFACE", "DAT_IB_IMMED_DATA", "DAT_IB_FETCH_AND_ADD", "DAT_IB_CMP_AND_SWAP"})
      ia->provider_attrs.push_back({const_cast<char*>(attr), const_cast<char*>("TRUE")});
  }
  ia->dev = std::move(dev);
  if (*async_evd == DAT_HANDLE_NULL) {
    ia->async_evd =
        new_evd(ia, async_qlen > 0 ? async_qlen : 8, nullptr, static_cast<DAT_EVD_FLAGS>(DAT_EVD_ASYNC_FLAG));
    ia->own_async_evd = true;
    *async_evd = ia->async_evd;
  } else {
    ia->async_evd = static_cast<Evd*>(*async_evd);
  }
  *ia_out = ia;
  return DAT_SUCCESS;
}

namespace {

void fill_ia_attr(Ia* ia, DAT_IA_ATTR* a) {
  const Limits& l = ia->dev->limits();
  std::memset(a, 0, sizeof *a);
  // dat_ia_query(3DAT): "The name of the IA controlled by the Provider. The same as
  // ia_name_ptr": the dat.conf name the consumer opened. (Its address is the provider-specific
  // attribute SOFTRNIC_ADDRESS.)
  copy_name(a->adapter_name, ia->name);
  copy_name(a->vendor_name, "softrnic");
  a->hardware_version_major = 0;
  a->hardware_version_minor = 1;
  a->firmware_version_major = 0;
  a->firmware_version_minor = 1;
  a->ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ia->addr);
  a->max_eps = static_cast<DAT_COUNT>(l.max_qp);
  a->max_dto_per_ep = static_cast<DAT_COUNT>(l.max_qp_wr);
  a->max_rdma_read_per_ep_in = static_cast<DAT_COUNT>(l.max_rd);
  a->max_rdma_read_per_ep_out = static_cast<DAT_COUNT>(l.max_rd);
  a->max_evds = kMaxEvds;
  a->max_evd_qlen = kMaxEvdQlen;
  a->max_iov_segments_per_dto = static_cast<DAT_COUNT>(l.max_sge);
  a->max_lmrs = static_cast<DAT_COUNT>(l.max_mr);
  a->max_lmr_block_size = static_cast<DAT_SEG_LENGTH>(std::min<std::uint64_t>(l.max_mr_size, 0xFFFFFFFFu));
  a->max_lmr_virtual_address = ~DAT_VADDR{0};
  a->max_pzs = static_cast<DAT_COUNT>(l.max_pd);
  a->max_message_size = l.max_msg_size;
  a->max_rdma_size = l.max_msg_size;
  a->max_rmrs = static_cast<DAT_COUNT>(l.max_mr);  // windows share the regions' STag slots
  a->max_rmr_target_address = ~DAT_VADDR{0};
  a->max_srqs = static_cast<DAT_COUNT>(l.max_qp);
  a->max_ep_per_srq = static_cast<DAT_COUNT>(l.max_qp);
  a->max_recv_per_srq = static_cast<DAT_COUNT>(l.max_qp_wr);
  a->max_iov_segments_per_rdma_read = static_cast<DAT_COUNT>(l.max_sge);  // a scatter list (internal STag)
  a->max_iov_segments_per_rdma_write = static_cast<DAT_COUNT>(l.max_sge);
  a->max_rdma_read_in = static_cast<DAT_COUNT>(l.max_rd * l.max_qp);
  a->max_rdma_read_out = static_cast<DAT_COUNT>(l.max_rd * l.max_qp);
  a->max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
  a->max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
  a->zb_supported = DAT_FALSE;
  // The DAT IB extensions (immediate data, atomics) on the RoCEv2 wire only: libdat2 passes
  // dat_extension_op through only when this says so.
  const bool ib_ext = ia->dev->wire() == Wire::roce;
  a->extension_supported = ib_ext ? DAT_EXTENSION_IB : DAT_EXTENSION_NONE;
  a->extension_version = ib_ext ? DAT_IB_EXTENSION_VERSION : 0;
  // The wire, named (OFA dapl names its transport in the provider name only).
  static DAT_NAMED_ATTR udp_attr{const_cast<char*>("transport"),
                                 const_cast<char*>("iWARP over UDP (softrnic framing)")};
  static DAT_NAMED_ATTR tcp_attr{const_cast<char*>("transport"), const_cast<char*>("iWARP over MPA/TCP (RFC 5044)")};
  static DAT_NAMED_ATTR roce_attr{const_cast<char*>("transport"),
                                  const_cast<char*>("RoCEv2 (InfiniBand RC over UDP 4791, IB CM)")};
  a->num_transport_attr = 1;
  a->transport_attr = ia->dev->wire() == Wire::tcp ? &tcp_attr : ia->dev->wire() == Wire::roce ? &roce_attr : &udp_attr;
  a->num_vendor_attr = 0;
  a->vendor_attr = nullptr;
}

void fill_provider_attr(Ia* ia, DAT_PROVIDER_ATTR* p) {
  const Limits& l = ia->dev->limits();
  std::memset(static_cast<void*>(p), 0, sizeof *p);
  copy_name(p->provider_name, ia->name);
  p->provider_version_major = 0;
  p->provider_version_minor = 1;
  p->dapl_version_major = 2;
  p->dapl_version_minor = 0;
  // dat_ia_query(3DAT): "All Providers must support" the three (mem.cpp, lmr_create).
  p->lmr_mem_types_supported =
      static_cast<DAT_MEM_TYPE>(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL);
  p->iov_ownership_on_return = DAT_IOV_CONSUMER;
  p->dat_qos_supported = DAT_QOS_BEST_EFFORT;
  p->completion_flags_supported = static_cast<DAT_COMPLETION_FLAGS>(
      DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
      DAT_COMPLETION_BARRIER_FENCE_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG);
  p->is_thread_safe = DAT_FALSE;
  p->max_private_data_size = static_cast<DAT_COUNT>(l.max_private_data);
  p->supports_multipath = DAT_FALSE;
  p->ep_creator = DAT_PSP_CREATES_EP_IFASKED;  // DAT_PSP_PROVIDER_FLAG
  p->pz_support = DAT_PZ_UNIQUE;
  p->optimal_buffer_alignment = 64;
  // Every event stream can share one EVD with every other.
  auto* merge = const_cast<DAT_BOOLEAN(*)[6]>(p->evd_stream_merging_supported);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) merge[i][j] = DAT_TRUE;
  // SRQs, their low watermark and the EP high watermarks, SRQ EPs in another PZ, and real
  // answers from dat_srq_query and dat_ep_recv_query (both counts of each).
  p->srq_supported = DAT_TRUE;
  p->srq_watermarks_supported = 1;
  p->srq_ep_pz_difference_supported = DAT_TRUE;
  p->srq_info_supported = 1;
  p->ep_recv_info_supported = 1;
  p->lmr_sync_req = DAT_FALSE;
  p->dto_async_return_guaranteed = DAT_FALSE;
  p->rdma_write_for_rdma_read_req = DAT_FALSE;
  p->rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
  p->rmr_scope_supported = DAT_RMR_SCOPE_EP;
  p->is_signal_safe = DAT_FALSE;
  p->ha_supported = DAT_FALSE;
  p->ha_loadbalancing = DAT_HA_LB_NONE;
  p->num_provider_specific_attr = static_cast<DAT_COUNT>(ia->provider_attrs.size());
  p->provider_specific_attr = ia->provider_attrs.data();
}

}  // namespace

DAT_RETURN ia_query(DAT_IA_HANDLE h, DAT_EVD_HANDLE* async_evd, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR* a,
                    DAT_PROVIDER_ATTR_MASK pr_mask, DAT_PROVIDER_ATTR* p) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  // dat_ia_query(3DAT): an invalid mask is DAT_INVALID_PARAMETER.
  if (mask_outside(ia_mask, DAT_IA_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (mask_outside(pr_mask, DAT_PROVIDER_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  // A mask asking for fields with nowhere to put them (NULL with mask 0 is how libdat2 asks
  // for one of the two only).
  if (ia_mask && !a) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
  if (pr_mask && !p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
  if (async_evd) *async_evd = ia->async_evd;
  if (a) fill_ia_attr(ia, a);
  if (p) fill_provider_attr(ia, p);
  return DAT_SUCCESS;
}

DAT_RETURN ia_close(DAT_IA_HANDLE h, DAT_CLOSE_FLAGS flags) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  auto children = children_of(ia);
  if (flags == DAT_CLOSE_GRACEFUL_FLAG) {
    for (Obj* o : children)
      if (!(ia->own_async_evd && o == ia->async_evd)) return err(DAT_INVALID_STATE);
  }
  // Abrupt: free everything the IA holds, users before what they use.
  // Service points first, so no new connection request arrives meanwhile.
  for (Kind k :
       {Kind::psp, Kind::rsp, Kind::ep, Kind::cr, Kind::srq, Kind::rmr, Kind::lmr, Kind::evd, Kind::cno, Kind::pz}) {
    for (Obj* o : children_of(ia)) {
      if (o->kind != k) continue;
      switch (k) {
        case Kind::ep: free_ep(static_cast<Ep*>(o)); break;
        case Kind::cr: free_cr(static_cast<Cr*>(o)); break;
        case Kind::psp: free_psp(static_cast<Psp*>(o)); break;
        case Kind::lmr: free_lmr(static_cast<Lmr*>(o)); break;
        case Kind::evd: free_evd(static_cast<Evd*>(o)); break;
        case Kind::cno: free_cno(static_cast<Cno*>(o)); break;
        case Kind::pz: free_pz(static_cast<Pz*>(o)); break;
        case Kind::srq: free_srq(static_cast<SrqObj*>(o)); break;
        case Kind::rsp: free_rsp(static_cast<Rsp*>(o)); break;
        case Kind::rmr: free_rmr(static_cast<Rmr*>(o)); break;
        case Kind::ia: break;
      }
    }
  }
  if (log::stats_wanted()) {
    const DeviceCounters c = ia->dev->counters();
    auto n = [](std::uint64_t v) { return std::to_string(v); };
    log::line_always(ia->name, "closing (" + to_string(ia->dev->address()) + "): tx_frames " + n(c.tx_frames) +
                                   " rx_frames " + n(c.rx_frames) + " retransmits " + n(c.retransmits) +
                                   " rx_duplicates " + n(c.rx_duplicates) + " rx_out_of_order " + n(c.rx_out_of_order) +
                                   " rx_bad_frames " + n(c.rx_bad_frames) + " rx_unknown_qp " + n(c.rx_unknown_qp) +
                                   " terminates_sent " + n(c.terminates_sent) + " terminates_received " +
                                   n(c.terminates_received) + " fatal_naks_sent " + n(c.fatal_naks_sent) +
                                   " fatal_naks_received " + n(c.fatal_naks_received) + " rx_bad_acks " +
                                   n(c.rx_bad_acks) + " challenge_acks " + n(c.challenge_acks) + " cookies_sent " +
                                   n(c.cookies_sent) + " rx_bad_cookies " + n(c.rx_bad_cookies) + " rx_stray_cm " +
                                   n(c.rx_stray_cm) + " keepalive_probes " + n(c.keepalive_probes) + " dead_peers " +
                                   n(c.dead_peers) + " memory_faults " + n(c.memory_faults));
  }
  ia->publisher.reset();  // before the device it reads
  ia->dev.reset();        // stops the progress thread
  destroy(ia);
  return DAT_SUCCESS;
}

DAT_RETURN set_consumer_context(DAT_HANDLE h, DAT_CONTEXT c) {
  std::lock_guard lk(api_mutex());
  Obj* o = find_live(h);
  if (!o) return err(DAT_INVALID_HANDLE);
  o->context = c;
  return DAT_SUCCESS;
}

DAT_RETURN get_consumer_context(DAT_HANDLE h, DAT_CONTEXT* c) {
  std::lock_guard lk(api_mutex());
  Obj* o = find_live(h);
  if (!o) return err(DAT_INVALID_HANDLE);
  if (!c) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  *c = o->context;
  return DAT_SUCCESS;
}

DAT_RETURN get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE* t) {
  std::lock_guard lk(api_mutex());
  Obj* o = find_live(h);
  if (!o) return err(DAT_INVALID_HANDLE);
  if (!t) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  switch (o->kind) {
    case Kind::ia: *t = DAT_HANDLE_TYPE_IA; break;
    case Kind::pz: *t = DAT_HANDLE_TYPE_PZ; break;
    case Kind::lmr: *t = DAT_HANDLE_TYPE_LMR; break;
    case Kind::evd: *t = DAT_HANDLE_TYPE_EVD; break;
    case Kind::cno: *t = DAT_HANDLE_TYPE_CNO; break;
    case Kind::ep: *t = DAT_HANDLE_TYPE_EP; break;
    case Kind::psp: *t = DAT_HANDLE_TYPE_PSP; break;
    case Kind::cr: *t = DAT_HANDLE_TYPE_CR; break;
    case Kind::srq: *t = DAT_HANDLE_TYPE_SRQ; break;
    case Kind::rsp: *t = DAT_HANDLE_TYPE_RSP; break;
    case Kind::rmr: *t = DAT_HANDLE_TYPE_RMR; break;
  }
  return DAT_SUCCESS;
}

}  // namespace softrnic::dat
