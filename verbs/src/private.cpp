// What libibverbs exports for providers (IBVERBS_PRIVATE_34) and the verbs softrnic does not
// offer. The providers Debian ships beside programs (libmlx5, libefa: perftest, UCX and libfabric
// load them) import the private symbols and call verbs_register_driver_34 from their
// constructors: they must resolve and do nothing, since no device of this library is one of
// theirs (VDevice::ops). The kernel command helpers (ibv_cmd_*) answer EOPNOTSUPP: there is no
// kernel. The other verbs answer as rdma-core does for a provider without them (docs/verbs.md).
#include <cerrno>
#include <cstdarg>

#include "abi.hpp"

using softrnic::verbs::fail;

extern "C" {

// ---- provider interface (IBVERBS_PRIVATE_34) ----

bool verbs_allow_disassociate_destroy = false;

void verbs_register_driver_34(void*) {}
void verbs_set_ops(void*, const void*) {}
void verbs_init_cq(void*, void*, void*, void*) {}
void verbs_uninit_context(void*) {}
void __verbs_log(void*, const char*, ...) {}
void* verbs_open_device(ibv_device*, void*) {
  return fail<void>(EOPNOTSUPP);
}
void* _verbs_init_and_alloc_context(ibv_device*, int, std::size_t, std::size_t, std::uint32_t) {
  return fail<void>(EOPNOTSUPP);
}
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void*) {
  return num_attrs;
}
int execute_ioctl(void*, void*) {
  return EOPNOTSUPP;
}
int ibv_read_ibdev_sysfs_file(char*, std::size_t, void*, const char*, ...) {
  errno = ENOENT;
  return -1;
}

// The kernel's uverbs commands: no kernel to send them to.
int ibv_cmd_advise_mr(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_alloc_dm(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_alloc_mw(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_alloc_pd(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_attach_mcast(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_close_xrcd(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_ah(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_counters(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_cq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_cq_ex(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_flow(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_flow_action_esp(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_qp(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_qp_ex(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_qp_ex2(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_rwq_ind_table(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_srq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_srq_ex(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_create_wq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_dealloc_mw(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_dealloc_pd(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_dereg_mr(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_ah(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_counters(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_cq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_flow(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_flow_action(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_qp(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_rwq_ind_table(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_srq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_destroy_wq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_detach_mcast(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_free_dm(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_get_context(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_cq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_flow_action_esp(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_qp(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_qp_ex(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_srq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_modify_wq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_open_qp(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_open_xrcd(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_poll_cq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_post_recv(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_post_send(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_post_srq_recv(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_context(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_device_any(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_mr(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_port(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_qp(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_query_srq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_read_counters(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_reg_dm_mr(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_reg_dmabuf_mr(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_reg_mr(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_req_notify_cq(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_rereg_mr(...) {
  return EOPNOTSUPP;
}
int ibv_cmd_resize_cq(...) {
  return EOPNOTSUPP;
}

// Marshalling of the kernel's structs (infiniband/marshall.h): nothing of softrnic's passes
// through them; a copy leaves the destination as it was.
void ibv_copy_qp_attr_from_kern(void*, void*) {}
void ibv_copy_ah_attr_from_kern(void*, void*) {}
void ibv_copy_path_rec_from_kern(void*, void*) {}
void ibv_copy_path_rec_to_kern(void*, void*) {}

// ---- verbs softrnic does not offer ----

// Multicast and address handles from a received GRH belong to UD QPs: softrnic has RC only.
int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return EOPNOTSUPP;
}
ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) {
  return fail<ibv_ah>(EOPNOTSUPP);
}
int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) {
  errno = EOPNOTSUPP;
  return -1;
}
// No kernel neighbour table resolves a RoCE GID to a MAC here.
int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) {
  return EOPNOTSUPP;
}
// Enhanced connection establishment: an mlx5 extension.
int ibv_query_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
int ibv_set_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
// 0: no promise that a Write's data lands in order (rdma-core's answer without a provider's).
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 0;
}
// Sharing objects between processes through a kernel file descriptor.
ibv_context* ibv_import_device(int) {
  return fail<ibv_context>(EOPNOTSUPP);
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  return fail<ibv_pd>(EOPNOTSUPP);
}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  return fail<ibv_mr>(EOPNOTSUPP);
}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  return fail<ibv_dm>(EOPNOTSUPP);
}
void ibv_unimport_pd(ibv_pd*) {}
void ibv_unimport_mr(ibv_mr*) {}
void ibv_unimport_dm(ibv_dm*) {}

}  // extern "C"
