// Shared receive queues, and the receive-side queries and watermarks of EPs.
#include <cstring>

#include "api.hpp"

namespace softrnic::dat {

void post_async(Ia* ia, DAT_EVENT_NUMBER number, DAT_HANDLE handle, DAT_COUNT reason) {
  Evd* evd = ia->async_evd;
  if (!evd) return;
  DAT_EVENT e;
  std::memset(&e, 0, sizeof e);
  e.event_number = number;
  e.evd_handle = evd;
  e.event_data.asynch_error_event_data.dat_handle = handle;
  e.event_data.asynch_error_event_data.reason = reason;
  evd->post(e);
}

DAT_RETURN srq_create(DAT_IA_HANDLE h, DAT_PZ_HANDLE pz_h, DAT_SRQ_ATTR* attr, DAT_SRQ_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  Pz* pz = get<Pz>(pz_h, Kind::pz);
  if (!pz || pz->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
  if (!attr) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
  const Limits& l = ia->dev->limits();
  if (attr->max_recv_dtos < 1 || attr->max_recv_dtos > static_cast<DAT_COUNT>(l.max_qp_wr) || attr->max_recv_iov < 0 ||
      attr->max_recv_iov > static_cast<DAT_COUNT>(l.max_sge) || attr->low_watermark < 0 ||
      attr->low_watermark > attr->max_recv_dtos)
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  SrqObj* so = make<SrqObj>(ia, ia->provider);
  so->pz = pz;
  so->max_recv_iov = attr->max_recv_iov ? attr->max_recv_iov : 1;
  SrqInit init;
  init.pd = pz->pd;
  init.max_wr = static_cast<std::uint32_t>(attr->max_recv_dtos);
  init.max_sge = static_cast<std::uint32_t>(so->max_recv_iov);
  init.on_low_watermark = [so](Srq*) {
    post_async(so->ia, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, so, DAT_SRQ_LOW_WATERMARK_EVENT);
  };
  if (ia->dev->create_srq(init, so->srq) != Status::ok) {
    destroy(so);
    return err(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
  }
  pz->users++;
  // A low watermark given at creation is set like dat_srq_set_lw (0: none).
  if (attr->low_watermark > 0) ia->dev->set_srq_low_watermark(so->srq, static_cast<std::uint32_t>(attr->low_watermark));
  *out = so;
  return DAT_SUCCESS;
}

DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie) {
  std::lock_guard lk(api_mutex());
  SrqObj* so = get<SrqObj>(h, Kind::srq);
  if (!so) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
  if (n < 0 || n > so->max_recv_iov) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (n > 0 && !iov) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  SgeList sgl;
  for (DAT_COUNT i = 0; i < n; ++i)
    sgl.push_back(Sge{iov[i].lmr_context, iov[i].virtual_address, iov[i].segment_length});
  return to_dat(so->ia->dev->post_srq_recv(so->srq, RecvWr{cookie.as_64, {sgl.data(), sgl.size()}}),
                {.resource = DAT_RESOURCE_SRQ});
}

DAT_RETURN srq_query(DAT_SRQ_HANDLE h, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM* p) {
  std::lock_guard lk(api_mutex());
  SrqObj* so = get<SrqObj>(h, Kind::srq);
  if (!so) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
  if (mask_outside(mask, DAT_SRQ_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  const SrqCounts c = so->ia->dev->srq_counts(so->srq);  // one snapshot
  p->ia_handle = consumer_ia_handle(so->ia);
  p->srq_state = DAT_SRQ_STATE_OPERATIONAL;
  p->pz_handle = so->pz;
  p->max_recv_dtos = static_cast<DAT_COUNT>(c.max_wr);
  p->max_recv_iov = so->max_recv_iov;
  p->low_watermark = static_cast<DAT_COUNT>(c.low_watermark);
  p->available_dto_count = static_cast<DAT_COUNT>(c.available);
  p->outstanding_dto_count = static_cast<DAT_COUNT>(c.outstanding);
  return DAT_SUCCESS;
}

DAT_RETURN srq_resize(DAT_SRQ_HANDLE h, DAT_COUNT n) {
  std::lock_guard lk(api_mutex());
  SrqObj* so = get<SrqObj>(h, Kind::srq);
  if (!so) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
  if (n < 1) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  // An invalid state: below the buffers outstanding.
  return to_dat(so->ia->dev->resize_srq(so->srq, static_cast<std::uint32_t>(n)), {.arg = DAT_INVALID_ARG2});
}

DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE h, DAT_COUNT lw) {
  std::lock_guard lk(api_mutex());
  SrqObj* so = get<SrqObj>(h, Kind::srq);
  if (!so) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
  if (lw < 0) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (so->ia->dev->set_srq_low_watermark(so->srq, static_cast<std::uint32_t>(lw)) != Status::ok)
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);  // above max_recv_dtos
  return DAT_SUCCESS;
}

void free_srq(SrqObj* so) {
  so->ia->dev->destroy_srq(so->srq);
  so->pz->users--;
  destroy(so);
}

DAT_RETURN srq_free(DAT_SRQ_HANDLE h) {
  std::lock_guard lk(api_mutex());
  SrqObj* so = get<SrqObj>(h, Kind::srq);
  if (!so) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
  if (so->ep_refs > 0) return err(DAT_INVALID_STATE);  // EPs still use it
  free_srq(so);
  return DAT_SUCCESS;
}

DAT_RETURN ep_recv_query(DAT_EP_HANDLE h, DAT_COUNT* nbufs_allocated, DAT_COUNT* bufs_alloc_span) {
  std::lock_guard lk(api_mutex());
  Ep* ep = get<Ep>(h, Kind::ep);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  // One snapshot: count and span together (an EP without its QP yet holds no buffer).
  const RecvCounts c = ep->qp ? ep->ia->dev->recv_counts(ep->qp) : RecvCounts{};
  if (nbufs_allocated) *nbufs_allocated = static_cast<DAT_COUNT>(c.allocated);
  if (bufs_alloc_span) *bufs_alloc_span = static_cast<DAT_COUNT>(c.span);
  return DAT_SUCCESS;
}

DAT_RETURN ep_set_watermark(DAT_EP_HANDLE h, DAT_COUNT soft, DAT_COUNT hard) {
  std::lock_guard lk(api_mutex());
  Ep* ep = get<Ep>(h, Kind::ep);
  if (!ep) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  const auto conv = [](DAT_COUNT v) {
    return v == DAT_WATERMARK_INFINITE ? kNoWatermarkValue : static_cast<std::uint32_t>(v);
  };
  if (soft < 0 && soft != DAT_WATERMARK_INFINITE) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (hard < 0 && hard != DAT_WATERMARK_INFINITE) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (!ep->qp)
    return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);  // a provider-created EP without PZ and EVDs yet
  ep->ia->dev->set_recv_watermarks(ep->qp, conv(soft), conv(hard));
  return DAT_SUCCESS;
}

}  // namespace softrnic::dat
