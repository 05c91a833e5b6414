// Protection zones and LMRs.

#include <cstring>

#include "api.hpp"

namespace softrnic::dat {

namespace {
constexpr int kRemoteAtomic = DAT_IB_MEM_PRIV_REMOTE_ATOMIC;  // the IB extension's privilege
}  // namespace

DAT_RETURN pz_create(DAT_IA_HANDLE h, DAT_PZ_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  Pd* pd = ia->dev->alloc_pd();
  if (!pd) return err(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
  Pz* pz = make<Pz>(ia, ia->provider);
  pz->pd = pd;
  *out = pz;
  return DAT_SUCCESS;
}

DAT_RETURN pz_query(DAT_PZ_HANDLE h, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Pz* pz = get<Pz>(h, Kind::pz);
  if (!pz) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
  if (mask_outside(mask, DAT_PZ_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  p->ia_handle = consumer_ia_handle(pz->ia);
  return DAT_SUCCESS;
}

void free_pz(Pz* pz) {
  pz->ia->dev->dealloc_pd(pz->pd);
  destroy(pz);
}

DAT_RETURN pz_free(DAT_PZ_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Pz* pz = get<Pz>(h, Kind::pz);
  if (!pz) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
  if (pz->users > 0) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
  free_pz(pz);
  return DAT_SUCCESS;
}

namespace {

// What a dat_lmr_create of any memory type registers: the consumer's virtual range.
struct Range {
  void* va = nullptr;
  DAT_VLEN length = 0;
};

// The range a region description names (dat_lmr_create(3DAT), "mem_type"), checked as far as
// the description goes; the memory itself is proved by the RNIC's registration.
// DAT_MEM_TYPE_VIRTUAL: the consumer's range. DAT_MEM_TYPE_LMR: the registered range of a live LMR
// of this IA ("Length parameter is ignored"), registered anew in the PZ and with the privileges
// given. DAT_MEM_TYPE_SHARED_VIRTUAL: the consumer's mapping of a shared region named by its
// shared_memory_id; every LMR of the IA with that id names the same region, so a second one of
// another length is DAT_INVALID_PARAMETER. No shared memory is made here: the consumer maps it
// (DAT: "using Platform-specific primitives"), the provider registers the mapping.
DAT_RETURN region_range(Ia* ia, std::uint64_t type, const DAT_REGION_DESCRIPTION& region, DAT_VLEN length, Range& out) {
  switch (type) {
    case DAT_MEM_TYPE_VIRTUAL:
      if (length == 0) return err(DAT_LENGTH_ERROR);
      if (!region.for_va) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
      out = {region.for_va, length};
      return DAT_SUCCESS;
    case DAT_MEM_TYPE_LMR: {
      const Lmr* base = get<Lmr>(region.for_lmr_handle, Kind::lmr);
      if (!base || base->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
      out = {reinterpret_cast<void*>(static_cast<std::uintptr_t>(base->param.registered_address)),
             base->param.registered_size};
      return DAT_SUCCESS;
    }
    case DAT_MEM_TYPE_SHARED_VIRTUAL: {
      const DAT_SHARED_MEMORY& sm = region.for_shared_memory;
      if (length == 0) return err(DAT_LENGTH_ERROR);
      if (!sm.virtual_address || !sm.shared_memory_id) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
      for (Obj* o : children_of(ia)) {
        if (o->kind != Kind::lmr) continue;
        const Lmr* other = static_cast<Lmr*>(o);
        if (other->param.mem_type == DAT_MEM_TYPE_SHARED_VIRTUAL &&
            std::memcmp(other->shared_id, *sm.shared_memory_id, sizeof other->shared_id) == 0 &&
            other->param.length != length)
          return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
      }
      out = {sm.virtual_address, length};
      return DAT_SUCCESS;
    }
    default: return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  }
}

}  // namespace

DAT_RETURN lmr_create(DAT_IA_HANDLE h, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                      DAT_PZ_HANDLE pz_h, DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va_type, DAT_LMR_HANDLE* out,
                      DAT_LMR_CONTEXT* lmr_context, DAT_RMR_CONTEXT* rmr_context, DAT_VLEN* reg_len,
                      DAT_VADDR* reg_addr) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  Pz* pz = get<Pz>(pz_h, Kind::pz);
  if (!pz || pz->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
  if (va_type != DAT_VA_TYPE_VA) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
  Range range;
  if (const DAT_RETURN r = region_range(ia, mask_bits(type), region, length, range); r != DAT_SUCCESS) return r;
  if (static_cast<int>(priv) & ~(static_cast<int>(DAT_MEM_PRIV_ALL_FLAG) | kRemoteAtomic))
    return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
  Access acc = Access::local_read;
  if (static_cast<int>(priv) & kRemoteAtomic) acc = acc | Access::remote_atomic;  // the IB extension's
  if (priv & DAT_MEM_PRIV_LOCAL_WRITE_FLAG) acc = acc | Access::local_write;
  if (priv & DAT_MEM_PRIV_REMOTE_READ_FLAG) acc = acc | Access::remote_read;
  if (priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) acc = acc | Access::remote_write;
  Mr* mr = nullptr;
  const Status s = ia->dev->reg_mr(pz->pd, range.va, range.length, acc, mr);
  // A length beyond ia_query's max_lmr_block_size is DAT_LENGTH_ERROR. A protection violation:
  // the range is mapped, but not with the access the privileges need (PROT_NONE, or read-only
  // memory registered for writing), the spec's DAT_PROTECTION_VIOLATION.
  const bool writes = priv & (DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
  if (s != Status::ok)
    return to_dat(s, {.resource = DAT_RESOURCE_MEMORY_REGION,
                      .arg = DAT_INVALID_ARG4,
                      .protection = writes ? DAT_PROTECTION_WRITE : DAT_PROTECTION_READ});
  const MrInfo info = ia->dev->query_mr(mr);
  Lmr* lmr = make<Lmr>(ia, ia->provider);
  lmr->pz = pz;
  lmr->mr = mr;
  pz->users++;
  DAT_LMR_PARAM& p = lmr->param;
  p.ia_handle = consumer_ia_handle(ia);
  p.mem_type = type;
  p.region_desc = region;
  p.length = type == DAT_MEM_TYPE_LMR ? range.length : length;
  if (type == DAT_MEM_TYPE_SHARED_VIRTUAL) {
    // The id is the consumer's memory: keep a copy, and report that (as OFA dapl does).
    std::memcpy(lmr->shared_id, *region.for_shared_memory.shared_memory_id, sizeof lmr->shared_id);
    p.region_desc.for_shared_memory.shared_memory_id = &lmr->shared_id;
  }
  p.pz_handle = pz;
  p.mem_priv = priv;
  p.va_type = va_type;
  p.lmr_context = info.stag;
  p.rmr_context = info.stag;
  p.registered_size = info.length;
  p.registered_address = info.addr;
  *out = lmr;
  if (lmr_context) *lmr_context = p.lmr_context;
  if (rmr_context) *rmr_context = p.rmr_context;
  if (reg_len) *reg_len = p.registered_size;
  if (reg_addr) *reg_addr = p.registered_address;
  return DAT_SUCCESS;
}

DAT_RETURN lmr_query(DAT_LMR_HANDLE h, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Lmr* lmr = get<Lmr>(h, Kind::lmr);
  if (!lmr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
  if (mask_outside(mask, DAT_LMR_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  *p = lmr->param;
  return DAT_SUCCESS;
}

// The RNIC and the consumer share coherent memory: there is nothing to flush, but the segments
// must name live LMRs of this IA (checked through the registry, never by dereferencing).
DAT_RETURN lmr_sync_rdma(DAT_IA_HANDLE h, const DAT_LMR_TRIPLET* seg, DAT_VLEN n) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  if (n > 0 && !seg) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  for (DAT_VLEN i = 0; i < n; ++i) {
    bool found = false;
    for (Obj* o : children_of(ia)) {
      if (o->kind != Kind::lmr) continue;
      const DAT_LMR_PARAM& p = static_cast<Lmr*>(o)->param;
      if (p.lmr_context == seg[i].lmr_context && seg[i].virtual_address >= p.registered_address &&
          seg[i].virtual_address + seg[i].segment_length <= p.registered_address + p.registered_size)
        found = true;
    }
    if (!found) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  }
  return DAT_SUCCESS;
}

DAT_RETURN rmr_create(DAT_PZ_HANDLE pz_h, DAT_RMR_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Pz* pz = get<Pz>(pz_h, Kind::pz);
  if (!pz) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  Mr* mw = nullptr;
  if (pz->ia->dev->alloc_mw(pz->pd, mw) != Status::ok)
    return err(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
  Rmr* rmr = make<Rmr>(pz->ia, pz->ia->provider);
  rmr->pz = pz;
  rmr->mw = mw;
  pz->users++;
  rmr->param.ia_handle = consumer_ia_handle(pz->ia);
  rmr->param.pz_handle = pz;
  rmr->param.rmr_scope = DAT_RMR_SCOPE_EP;
  rmr->param.va_type = DAT_VA_TYPE_VA;
  *out = rmr;
  return DAT_SUCCESS;
}

DAT_RETURN rmr_query(DAT_RMR_HANDLE h, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Rmr* rmr = get<Rmr>(h, Kind::rmr);
  if (!rmr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
  if (mask_outside(mask, DAT_RMR_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  *p = rmr->param;
  return DAT_SUCCESS;
}

void free_rmr(Rmr* rmr) {
  rmr->ia->dev->dereg_mr(rmr->mw);  // unbinds it too
  rmr->pz->users--;
  destroy(rmr);
}

DAT_RETURN rmr_bind(DAT_RMR_HANDLE h, DAT_LMR_HANDLE lmr_h, const DAT_LMR_TRIPLET* t, DAT_MEM_PRIV_FLAGS priv,
                    DAT_VA_TYPE va_type, DAT_EP_HANDLE ep_h, DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                    DAT_RMR_CONTEXT* ctx) {
  std::lock_guard lk(api_mutex());
  Rmr* rmr = get<Rmr>(h, Kind::rmr);
  if (!rmr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
  Ep* ep = get<Ep>(ep_h, Kind::ep);
  if (!ep || ep->ia != rmr->ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
  if (!t) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  if (va_type != DAT_VA_TYPE_VA) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  Lmr* lmr = nullptr;
  if (t->segment_length > 0) {  // 0 unbinds
    lmr = get<Lmr>(lmr_h, Kind::lmr);
    if (!lmr || lmr->ia != rmr->ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (t->lmr_context != lmr->param.lmr_context) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  }
  if (!ep->qp) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
  if (ep->pz != rmr->pz) return err(DAT_PROTECTION_VIOLATION);
  Access acc = Access::none;
  if (static_cast<int>(priv) & kRemoteAtomic) acc = acc | Access::remote_atomic;
  if (priv & DAT_MEM_PRIV_REMOTE_READ_FLAG) acc = acc | Access::remote_read;
  if (priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) acc = acc | Access::remote_write;
  const bool signaled = !(flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG));
  std::uint64_t id = 0;
  if (signaled) {
    std::lock_guard bl(rmr->ia->bind_mu);
    id = rmr->ia->next_bind++;
    rmr->ia->binds[id] = {rmr, cookie};
  }
  const Status s = rmr->ia->dev->bind_mw(ep->qp, rmr->mw, lmr ? lmr->mr : nullptr, t->virtual_address,
                                         t->segment_length, acc, id, signaled);
  if (s != Status::ok) {
    std::lock_guard bl(rmr->ia->bind_mu);
    rmr->ia->binds.erase(id);
    return to_dat(s, {.state = DAT_INVALID_STATE_EP_NOTREADY});
  }
  const MrInfo info = rmr->ia->dev->query_mr(rmr->mw);
  rmr->param.lmr_triplet = *t;
  rmr->param.mem_priv = priv;
  rmr->param.rmr_context = info.stag;
  if (ctx) *ctx = info.stag;
  return DAT_SUCCESS;
}

DAT_RETURN rmr_free(DAT_RMR_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Rmr* rmr = get<Rmr>(h, Kind::rmr);
  if (!rmr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
  free_rmr(rmr);
  return DAT_SUCCESS;
}

void free_lmr(Lmr* lmr) {
  lmr->ia->dev->dereg_mr(lmr->mr);
  lmr->pz->users--;
  destroy(lmr);
}

DAT_RETURN lmr_free(DAT_LMR_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Lmr* lmr = get<Lmr>(h, Kind::lmr);
  if (!lmr) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
  // A posted, uncompleted DTO still names the region: freeing it would let data land in
  // memory the consumer may have released.
  if (lmr->ia->dev->dereg_mr(lmr->mr) != Status::ok) return err(DAT_INVALID_STATE);
  lmr->pz->users--;
  destroy(lmr);
  return DAT_SUCCESS;
}

}  // namespace softrnic::dat
