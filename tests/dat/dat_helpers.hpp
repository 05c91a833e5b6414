// What the DAT consumer tests share (test_dat_api.cpp, test_seed_pages.cpp): an IA with a PZ, an
// EP with its EVDs and one LMR, and a connection of two EPs inside one IA.
#pragma once

#include <arpa/inet.h>
#include <dat2/udat.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace dattest {

constexpr DAT_TIMEOUT kWait = 5'000'000;  // 5 s
constexpr DAT_CONN_QUAL kQual = 4242;

inline DAT_RETURN type_of(DAT_RETURN r) {
  return DAT_GET_TYPE(r);
}

struct Ia {
  std::string name;
  DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
  DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
  DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
  explicit Ia(const char* ia_name = "softrnic_loopback") : name(ia_name) {
    EXPECT_EQ(dat_ia_open(const_cast<char*>(ia_name), 8, &async, &ia), DAT_SUCCESS);
    EXPECT_NE(async, DAT_HANDLE_NULL) << "the provider creates the async EVD";
    EXPECT_EQ(dat_pz_create(ia, &pz), DAT_SUCCESS);
  }
  ~Ia() {
    if (ia) {
      EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    }
  }
};

struct End {
  DAT_EVD_HANDLE req = DAT_HANDLE_NULL, rcv = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL;
  DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
  std::vector<char> buf = std::vector<char>(1 << 16);
  DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
  DAT_LMR_CONTEXT lctx = 0;
  DAT_RMR_CONTEXT rctx = 0;

  void make(Ia& ia, const DAT_EP_ATTR* attr = nullptr) {
    ASSERT_EQ(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req), DAT_SUCCESS);
    ASSERT_EQ(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv), DAT_SUCCESS);
    ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS);
    ASSERT_EQ(dat_ep_create(ia.ia, ia.pz, rcv, req, conn, attr, &ep), DAT_SUCCESS);
    DAT_REGION_DESCRIPTION r;
    r.for_va = buf.data();
    DAT_VLEN len;
    DAT_VADDR addr;
    ASSERT_EQ(dat_lmr_create(ia.ia, DAT_MEM_TYPE_VIRTUAL, r, buf.size(), ia.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                             &lmr, &lctx, &rctx, &len, &addr),
              DAT_SUCCESS);
    EXPECT_EQ(len, buf.size());
    EXPECT_EQ(addr, reinterpret_cast<DAT_VADDR>(buf.data()));
  }
  DAT_LMR_TRIPLET iov(std::size_t off, DAT_SEG_LENGTH len) {
    DAT_LMR_TRIPLET t;
    t.lmr_context = lctx;
    t.virtual_address = reinterpret_cast<DAT_VADDR>(buf.data() + off);
    t.segment_length = len;
    return t;
  }
};

inline DAT_EVENT wait_event(DAT_EVD_HANDLE evd) {
  DAT_EVENT ev;
  std::memset(&ev, 0, sizeof ev);
  DAT_COUNT nmore = 0;
  EXPECT_EQ(dat_evd_wait(evd, kWait, 1, &ev, &nmore), DAT_SUCCESS);
  return ev;
}

// Private data as a connection event or CR reports it: the `sent` bytes whole. On RoCEv2 the IB
// CM's private data fields have fixed sizes (REQ 92 less rdma_cm's 36-byte header, REP 196, REJ
// 148), so the consumer's bytes come zero-padded to the field, as OFA dapl reports them too.
inline void expect_private_data(const Ia& ia, DAT_COUNT size, const void* data, const unsigned char* sent,
                                int sent_size) {
  if (ia.name.rfind("softrnic_roce", 0) == 0) {
    ASSERT_GE(size, sent_size);
    const auto* d = static_cast<const unsigned char*>(data);
    for (DAT_COUNT i = sent_size; i < size; ++i) {
      ASSERT_EQ(d[i], 0) << "padding at " << i;
    }
  } else {
    ASSERT_EQ(size, sent_size);
  }
  if (sent_size > 0) {
    EXPECT_EQ(0, std::memcmp(data, sent, static_cast<std::size_t>(sent_size)));
  }
}

inline sockaddr_in ia_address(DAT_IA_HANDLE ia) {
  DAT_IA_ATTR a;
  EXPECT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &a, 0, nullptr), DAT_SUCCESS);
  sockaddr_in s;
  std::memcpy(&s, a.ia_address_ptr, sizeof s);
  return s;
}

// Connects a (active) to b (passive) inside one IA, with `pd_size` bytes of private data each
// way (the consumer edits the CR's in place before accepting).
inline void connect(Ia& ia, End& a, End& b, DAT_PSP_HANDLE& psp, DAT_EVD_HANDLE& cr_evd, int pd_size = 64) {
  ASSERT_EQ(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), DAT_SUCCESS);
  ASSERT_EQ(dat_psp_create(ia.ia, kQual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
  sockaddr_in to = ia_address(ia.ia);
  std::vector<unsigned char> pd(static_cast<std::size_t>(pd_size));
  std::iota(pd.begin(), pd.end(), 1);
  ASSERT_EQ(dat_ep_connect(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), kQual, kWait, pd_size, pd.data(),
                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
            DAT_SUCCESS);
  const DAT_EVENT cr = wait_event(cr_evd);
  ASSERT_EQ(cr.event_number, DAT_CONNECTION_REQUEST_EVENT);
  EXPECT_EQ(cr.event_data.cr_arrival_event_data.conn_qual, kQual);
  EXPECT_EQ(cr.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
  DAT_CR_PARAM p;
  ASSERT_EQ(dat_cr_query(cr.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &p), DAT_SUCCESS);
  expect_private_data(ia, p.private_data_size, p.private_data, pd.data(), pd_size);
  auto* mine = static_cast<unsigned char*>(p.private_data);
  for (int i = 0; i < pd_size; ++i) mine[i]++;  // consumers may edit the CR's private data in place
  ASSERT_EQ(dat_cr_accept(cr.event_data.cr_arrival_event_data.cr_handle, b.ep, pd_size, p.private_data), DAT_SUCCESS);
  const DAT_EVENT ea = wait_event(a.conn);
  ASSERT_EQ(ea.event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
  std::vector<unsigned char> edited(pd);
  for (auto& c : edited) c++;
  expect_private_data(ia, ea.event_data.connect_event_data.private_data_size,
                      ea.event_data.connect_event_data.private_data, edited.data(), pd_size);
  const DAT_EVENT eb = wait_event(b.conn);
  ASSERT_EQ(eb.event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
}

// A software event carrying `p` (dat_evd_post_se).
inline DAT_EVENT software_event(void* p) {
  DAT_EVENT se;
  std::memset(&se, 0, sizeof se);
  se.event_number = DAT_SOFTWARE_EVENT;
  se.event_data.software_event_data.pointer = p;
  return se;
}

// The SRQ's whole parameter set (dat_srq_query).
inline DAT_SRQ_PARAM srq_param(DAT_SRQ_HANDLE srq) {
  DAT_SRQ_PARAM p;
  std::memset(&p, 0, sizeof p);
  EXPECT_EQ(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p), DAT_SUCCESS);
  return p;
}

}  // namespace dattest
