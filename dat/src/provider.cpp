// Registration with libdat2, and the provider's function table: every slot first points to one
// DAT_NOT_IMPLEMENTED function of the slot's own type, then the implemented ones are set.

#include <cstdarg>
#include <cstring>
#include <list>

#include "api.hpp"

namespace softrnic::dat {
namespace {

template <typename F>
struct NotImpl;
template <typename... A>
struct NotImpl<DAT_RETURN (*)(A...)> {
  static DAT_RETURN fn(A...) { return not_implemented(); }
};
template <typename F>
void not_impl(F& slot) {
  slot = &NotImpl<F>::fn;
}

struct Entry {
  DAT_PROVIDER table{};
  std::string name;
  std::string params;
  DAT_PROVIDER_INFO info{};
  bool registered = false;
};

std::mutex g_mu;
std::list<Entry>& entries() {
  static std::list<Entry>* e = new std::list<Entry>;
  return *e;
}

void fill(DAT_PROVIDER& p) {
  // All slots (udat_redirection.h order), not implemented until set below.
  not_impl(p.ia_open_func);
  not_impl(p.ia_query_func);
  not_impl(p.ia_close_func);
  not_impl(p.set_consumer_context_func);
  not_impl(p.get_consumer_context_func);
  not_impl(p.get_handle_type_func);
  not_impl(p.cno_create_func);
  not_impl(p.cno_modify_agent_func);
  not_impl(p.cno_query_func);
  not_impl(p.cno_free_func);
  not_impl(p.cno_wait_func);
  not_impl(p.cr_query_func);
  not_impl(p.cr_accept_func);
  not_impl(p.cr_reject_func);
  not_impl(p.cr_handoff_func);
  not_impl(p.evd_create_func);
  not_impl(p.evd_query_func);
  not_impl(p.evd_modify_cno_func);
  not_impl(p.evd_enable_func);
  not_impl(p.evd_disable_func);
  not_impl(p.evd_wait_func);
  not_impl(p.evd_resize_func);
  not_impl(p.evd_post_se_func);
  not_impl(p.evd_dequeue_func);
  not_impl(p.evd_free_func);
  not_impl(p.ep_create_func);
  not_impl(p.ep_query_func);
  not_impl(p.ep_modify_func);
  not_impl(p.ep_connect_func);
  not_impl(p.ep_dup_connect_func);
  not_impl(p.ep_disconnect_func);
  not_impl(p.ep_post_send_func);
  not_impl(p.ep_post_recv_func);
  not_impl(p.ep_post_rdma_read_func);
  not_impl(p.ep_post_rdma_write_func);
  not_impl(p.ep_get_status_func);
  not_impl(p.ep_free_func);
  not_impl(p.lmr_create_func);
  not_impl(p.lmr_query_func);
  not_impl(p.lmr_free_func);
  not_impl(p.rmr_create_func);
  not_impl(p.rmr_query_func);
  not_impl(p.rmr_bind_func);
  not_impl(p.rmr_free_func);
  not_impl(p.psp_create_func);
  not_impl(p.psp_query_func);
  not_impl(p.psp_free_func);
  not_impl(p.rsp_create_func);
  not_impl(p.rsp_query_func);
  not_impl(p.rsp_free_func);
  not_impl(p.pz_create_func);
  not_impl(p.pz_query_func);
  not_impl(p.pz_free_func);
  not_impl(p.psp_create_any_func);
  not_impl(p.ep_reset_func);
  not_impl(p.evd_set_unwaitable_func);
  not_impl(p.evd_clear_unwaitable_func);
  not_impl(p.lmr_sync_rdma_read_func);
  not_impl(p.lmr_sync_rdma_write_func);
  not_impl(p.ep_create_with_srq_func);
  not_impl(p.ep_recv_query_func);
  not_impl(p.ep_set_watermark_func);
  not_impl(p.srq_create_func);
  not_impl(p.srq_free_func);
  not_impl(p.srq_post_recv_func);
  not_impl(p.srq_query_func);
  not_impl(p.srq_resize_func);
  not_impl(p.srq_set_lw_func);
  not_impl(p.csp_create_func);
  not_impl(p.csp_query_func);
  not_impl(p.csp_free_func);
  not_impl(p.ep_common_connect_func);
  not_impl(p.rmr_create_for_ep_func);
  not_impl(p.ep_post_send_with_invalidate_func);
  not_impl(p.ep_post_rdma_read_to_rmr_func);
  not_impl(p.cno_fd_create_func);
  not_impl(p.cno_trigger_func);
  not_impl(p.ia_ha_related_func);

  // Implemented (docs/dat-coverage.md lists both sets).
  p.ia_open_func = ia_open;
  p.handle_extendedop_func = extension_op;
  p.ia_query_func = ia_query;
  p.ia_close_func = ia_close;
  p.set_consumer_context_func = set_consumer_context;
  p.get_consumer_context_func = get_consumer_context;
  p.get_handle_type_func = get_handle_type;
  p.cno_create_func = cno_create;
  p.cno_query_func = cno_query;
  p.cno_free_func = cno_free;
  p.cno_fd_create_func = cno_fd_create;
  p.cno_trigger_func = cno_trigger;
  p.cno_modify_agent_func = cno_modify_agent;
  p.cno_wait_func = cno_wait;
  p.cr_query_func = cr_query;
  p.cr_accept_func = cr_accept;
  p.cr_reject_func = cr_reject;
  p.evd_create_func = evd_create;
  p.evd_query_func = evd_query;
  p.evd_enable_func = evd_enable;
  p.evd_set_unwaitable_func = evd_set_unwaitable;
  p.evd_clear_unwaitable_func = evd_clear_unwaitable;
  p.evd_resize_func = evd_resize;
  p.evd_modify_cno_func = evd_modify_cno;
  p.evd_disable_func = evd_disable;
  p.evd_wait_func = evd_wait;
  p.evd_post_se_func = evd_post_se;
  p.evd_dequeue_func = evd_dequeue;
  p.evd_free_func = evd_free;
  p.ep_create_func = ep_create;
  p.ep_query_func = ep_query;
  p.ep_connect_func = ep_connect;
  p.ep_disconnect_func = ep_disconnect;
  p.ep_post_send_func = ep_post_send;
  p.ep_post_recv_func = ep_post_recv;
  p.ep_post_rdma_write_func = ep_post_rdma_write;
  p.ep_post_rdma_read_func = ep_post_rdma_read;
  p.ep_post_rdma_read_to_rmr_func = ep_post_rdma_read_to_rmr;
  p.ep_free_func = ep_free;
  p.ep_get_status_func = ep_get_status;
  p.ep_reset_func = ep_reset;
  p.ep_modify_func = ep_modify;
  p.lmr_sync_rdma_read_func = lmr_sync_rdma;
  p.lmr_sync_rdma_write_func = lmr_sync_rdma;
  p.psp_create_any_func = psp_create_any;
  p.cr_handoff_func = cr_handoff;
  p.ep_dup_connect_func = ep_dup_connect;
  p.rsp_create_func = rsp_create;
  p.rsp_query_func = rsp_query;
  p.rsp_free_func = rsp_free;
  p.rmr_create_func = rmr_create;
  p.rmr_create_for_ep_func = rmr_create;
  p.rmr_query_func = rmr_query;
  p.rmr_free_func = rmr_free;
  p.rmr_bind_func = rmr_bind;
  p.ep_post_send_with_invalidate_func = ep_post_send_with_invalidate;
  p.lmr_create_func = lmr_create;
  p.lmr_query_func = lmr_query;
  p.lmr_free_func = lmr_free;
  p.psp_create_func = psp_create;
  p.psp_query_func = psp_query;
  p.psp_free_func = psp_free;
  p.pz_create_func = pz_create;
  p.pz_query_func = pz_query;
  p.pz_free_func = pz_free;
  p.srq_create_func = srq_create;
  p.srq_post_recv_func = srq_post_recv;
  p.srq_query_func = srq_query;
  p.srq_resize_func = srq_resize;
  p.srq_set_lw_func = srq_set_lw;
  p.srq_free_func = srq_free;
  p.ep_create_with_srq_func = ep_create_with_srq;
  p.ep_recv_query_func = ep_recv_query;
  p.ep_set_watermark_func = ep_set_watermark;
}

}  // namespace

DAT_PROVIDER* provider_for(const char* name, std::string* params) {
  std::lock_guard lk(g_mu);
  for (Entry& e : entries()) {
    if (e.name == name) {
      if (params) *params = e.params;
      return &e.table;
    }
  }
  return nullptr;
}

}  // namespace softrnic::dat

using softrnic::dat::Entry;

extern "C" {

__attribute__((visibility("default"))) void dat_provider_init(const DAT_PROVIDER_INFO* info, const char* ia_params) {
  if (!info) return;
  std::lock_guard lk(softrnic::dat::g_mu);
  auto& list = softrnic::dat::entries();
  Entry* entry = nullptr;
  for (Entry& e : list)
    if (e.name == info->ia_name) entry = &e;
  if (!entry) {
    entry = &list.emplace_back();
    entry->name = info->ia_name;
    softrnic::dat::fill(entry->table);
    entry->table.device_name = entry->name.c_str();
    entry->table.extension = nullptr;
  }
  if (entry->registered) return;
  entry->params = ia_params ? ia_params : "";
  entry->info = *info;
  entry->registered = dat_registry_add_provider(&entry->table, &entry->info) == DAT_SUCCESS;
}

__attribute__((visibility("default"))) void dat_provider_fini(const DAT_PROVIDER_INFO* info) {
  if (!info) return;
  std::lock_guard lk(softrnic::dat::g_mu);
  auto& list = softrnic::dat::entries();
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (it->name == info->ia_name && it->registered) {
      dat_registry_remove_provider(&it->table, &it->info);
      it->registered = false;
      // The entry stays: objects that outlive the IA (quarantined handles) still point to it.
      return;
    }
  }
}

}  // extern "C"
