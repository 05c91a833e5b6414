// bad_masks.c: the dat_*_query calls with raw masks, compiled as C (see there).
#pragma once

#include <dat2/udat.h>

#ifdef __cplusplus
extern "C" {
#endif

DAT_RETURN bad_mask_ia_query(DAT_IA_HANDLE ia, unsigned long long ia_mask, unsigned long long pr_mask, DAT_IA_ATTR* a,
                             DAT_PROVIDER_ATTR* p);
DAT_RETURN bad_mask_ep_query(DAT_EP_HANDLE h, unsigned long long mask, DAT_EP_PARAM* p);
DAT_RETURN bad_mask_srq_query(DAT_SRQ_HANDLE h, int mask, DAT_SRQ_PARAM* p);
DAT_RETURN bad_mask_evd_query(DAT_EVD_HANDLE h, int mask, DAT_EVD_PARAM* p);
DAT_RETURN bad_mask_cr_query(DAT_CR_HANDLE h, int mask, DAT_CR_PARAM* p);
DAT_RETURN bad_mask_psp_query(DAT_PSP_HANDLE h, int mask, DAT_PSP_PARAM* p);
DAT_RETURN bad_mask_rsp_query(DAT_RSP_HANDLE h, int mask, DAT_RSP_PARAM* p);
DAT_RETURN bad_mask_pz_query(DAT_PZ_HANDLE h, int mask, DAT_PZ_PARAM* p);
DAT_RETURN bad_mask_lmr_query(DAT_LMR_HANDLE h, int mask, DAT_LMR_PARAM* p);
DAT_RETURN bad_mask_rmr_query(DAT_RMR_HANDLE h, int mask, DAT_RMR_PARAM* p);
DAT_RETURN bad_mask_cno_query(DAT_CNO_HANDLE h, int mask, DAT_CNO_PARAM* p);

#ifdef __cplusplus
}
#endif
