/* The dat_*_query calls with a parameter mask of any value, as a C consumer may pass one. Most
 * masks are enum types; in C an int converts to them whatever its value, while in C++ a value
 * outside the enum's range is undefined (and UBSan says so): the tests call these from C++. */
#include "bad_masks.h"

DAT_RETURN bad_mask_ia_query(DAT_IA_HANDLE ia, unsigned long long ia_mask, unsigned long long pr_mask, DAT_IA_ATTR* a,
                             DAT_PROVIDER_ATTR* p) {
  return dat_ia_query(ia, NULL, (DAT_IA_ATTR_MASK)ia_mask, a, (DAT_PROVIDER_ATTR_MASK)pr_mask, p);
}

DAT_RETURN bad_mask_ep_query(DAT_EP_HANDLE h, unsigned long long mask, DAT_EP_PARAM* p) {
  return dat_ep_query(h, (DAT_EP_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_srq_query(DAT_SRQ_HANDLE h, int mask, DAT_SRQ_PARAM* p) {
  return dat_srq_query(h, (DAT_SRQ_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_evd_query(DAT_EVD_HANDLE h, int mask, DAT_EVD_PARAM* p) {
  return dat_evd_query(h, (DAT_EVD_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_cr_query(DAT_CR_HANDLE h, int mask, DAT_CR_PARAM* p) {
  return dat_cr_query(h, (DAT_CR_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_psp_query(DAT_PSP_HANDLE h, int mask, DAT_PSP_PARAM* p) {
  return dat_psp_query(h, (DAT_PSP_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_rsp_query(DAT_RSP_HANDLE h, int mask, DAT_RSP_PARAM* p) {
  return dat_rsp_query(h, (DAT_RSP_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_pz_query(DAT_PZ_HANDLE h, int mask, DAT_PZ_PARAM* p) {
  return dat_pz_query(h, (DAT_PZ_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_lmr_query(DAT_LMR_HANDLE h, int mask, DAT_LMR_PARAM* p) {
  return dat_lmr_query(h, (DAT_LMR_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_rmr_query(DAT_RMR_HANDLE h, int mask, DAT_RMR_PARAM* p) {
  return dat_rmr_query(h, (DAT_RMR_PARAM_MASK)mask, p);
}

DAT_RETURN bad_mask_cno_query(DAT_CNO_HANDLE h, int mask, DAT_CNO_PARAM* p) {
  return dat_cno_query(h, (DAT_CNO_PARAM_MASK)mask, p);
}
