// The provider's entry points (the DAT_PROVIDER table slots we implement), by object.
#pragma once

#include "objects.hpp"

namespace softrnic::dat {

// ia.cpp
DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE* async_evd, DAT_IA_HANDLE* ia);
DAT_RETURN ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE* async_evd, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR* ia_attr,
                    DAT_PROVIDER_ATTR_MASK pr_mask, DAT_PROVIDER_ATTR* pr_attr);
DAT_RETURN ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags);
DAT_RETURN set_consumer_context(DAT_HANDLE h, DAT_CONTEXT c);
DAT_RETURN get_consumer_context(DAT_HANDLE h, DAT_CONTEXT* c);
DAT_RETURN get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE* t);

// mem.cpp
DAT_RETURN pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE* pz);
DAT_RETURN pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM* p);
DAT_RETURN pz_free(DAT_PZ_HANDLE pz);
DAT_RETURN lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                      DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va_type, DAT_LMR_HANDLE* lmr,
                      DAT_LMR_CONTEXT* lmr_context, DAT_RMR_CONTEXT* rmr_context, DAT_VLEN* reg_len,
                      DAT_VADDR* reg_addr);
DAT_RETURN lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM* p);
DAT_RETURN lmr_free(DAT_LMR_HANDLE lmr);
void free_pz(Pz* pz);
void free_lmr(Lmr* lmr);

// evd.cpp
DAT_RETURN evd_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags, DAT_EVD_HANDLE* evd);
DAT_RETURN evd_query(DAT_EVD_HANDLE evd, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM* p);
DAT_RETURN evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT* ev, DAT_COUNT* nmore);
DAT_RETURN evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT* ev);
DAT_RETURN evd_free(DAT_EVD_HANDLE evd);
DAT_RETURN evd_enable(DAT_EVD_HANDLE evd);
DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE evd);
DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE evd);
DAT_RETURN evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen);
DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno);
DAT_RETURN evd_disable(DAT_EVD_HANDLE evd);
DAT_RETURN evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT* ev);
DAT_RETURN cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE* cno);
DAT_RETURN cno_query(DAT_CNO_HANDLE cno, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM* p);
DAT_RETURN cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout, DAT_EVD_HANDLE* evd);
DAT_RETURN cno_free(DAT_CNO_HANDLE cno);
DAT_RETURN cno_fd_create(DAT_IA_HANDLE ia, DAT_FD* fd, DAT_CNO_HANDLE* cno);
DAT_RETURN cno_trigger(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE* evd);
DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE cno, DAT_OS_WAIT_PROXY_AGENT agent);
Evd* new_evd(Ia* ia, DAT_COUNT qlen, Cno* cno, DAT_EVD_FLAGS flags);
void free_evd(Evd* evd);
void free_cno(Cno* cno);

// ep.cpp
DAT_RETURN ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd, DAT_EVD_HANDLE req_evd,
                     DAT_EVD_HANDLE conn_evd, const DAT_EP_ATTR* attr, DAT_EP_HANDLE* ep);
DAT_RETURN ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM* p);
DAT_RETURN ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                      DAT_COUNT pd_size, const DAT_PVOID pd, DAT_QOS qos, DAT_CONNECT_FLAGS flags);
DAT_RETURN ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags);
DAT_RETURN ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags);
DAT_RETURN ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags);
DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                             const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags);
DAT_RETURN extension_op(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list args);
DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                              const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags);
DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET* local, DAT_DTO_COOKIE cookie,
                                    const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags);
DAT_RETURN ep_free(DAT_EP_HANDLE ep);
DAT_RETURN ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE* state, DAT_BOOLEAN* recv_idle, DAT_BOOLEAN* req_idle);
DAT_RETURN ep_reset(DAT_EP_HANDLE ep);
DAT_RETURN ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM* p);
Ep* new_provider_ep(Ia* ia);
DAT_RETURN ready_provider_ep(Ep* ep);
DAT_RETURN lmr_sync_rdma(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET* segments, DAT_VLEN n);
DAT_RETURN psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL* qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                          DAT_PSP_HANDLE* psp);
void free_ep(Ep* ep);
void on_cm_event(Ep* ep, const CmEvent& ev);

// cm.cpp
DAT_RETURN psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                      DAT_PSP_HANDLE* psp);
DAT_RETURN psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM* p);
DAT_RETURN psp_free(DAT_PSP_HANDLE psp);
DAT_RETURN cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM* p);
DAT_RETURN cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT pd_size, const DAT_PVOID pd);
DAT_RETURN cr_reject(DAT_CR_HANDLE cr, DAT_COUNT pd_size, const DAT_PVOID pd);
void free_psp(Psp* psp);
DAT_RETURN cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL qual);
DAT_RETURN ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT timeout, DAT_COUNT pd_size,
                          const DAT_PVOID pd, DAT_QOS qos);
DAT_RETURN rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd, DAT_RSP_HANDLE* rsp);
DAT_RETURN rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM* p);
DAT_RETURN rsp_free(DAT_RSP_HANDLE rsp);
void free_rsp(Rsp* rsp);
DAT_RETURN rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE* rmr);
DAT_RETURN rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM* p);
DAT_RETURN rmr_free(DAT_RMR_HANDLE rmr);
DAT_RETURN rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET* t, DAT_MEM_PRIV_FLAGS priv,
                    DAT_VA_TYPE va_type, DAT_EP_HANDLE ep, DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                    DAT_RMR_CONTEXT* ctx);
DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                                        DAT_COMPLETION_FLAGS flags, DAT_BOOLEAN invalidate,
                                        DAT_RMR_CONTEXT rmr_context);
void free_rmr(Rmr* rmr);
void free_cr(Cr* cr);

// srq.cpp
DAT_RETURN srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR* attr, DAT_SRQ_HANDLE* srq);
DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie);
DAT_RETURN srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM* p);
DAT_RETURN srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT n);
DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT lw);
DAT_RETURN srq_free(DAT_SRQ_HANDLE srq);
DAT_RETURN ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT* nbufs_allocated, DAT_COUNT* bufs_alloc_span);
DAT_RETURN ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft, DAT_COUNT hard);
DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd, DAT_EVD_HANDLE req_evd,
                              DAT_EVD_HANDLE conn_evd, DAT_SRQ_HANDLE srq, const DAT_EP_ATTR* attr, DAT_EP_HANDLE* ep);
void free_srq(SrqObj* srq);
// Queues an asynchronous event on the IA's async EVD (if it has one).
void post_async(Ia* ia, DAT_EVENT_NUMBER number, DAT_HANDLE handle, DAT_COUNT reason);

// provider.cpp: the table for an IA name, and its ia_params.
DAT_PROVIDER* provider_for(const char* name, std::string* params);

}  // namespace softrnic::dat
