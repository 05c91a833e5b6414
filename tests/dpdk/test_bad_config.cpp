// Bad dpdk configuration through dat_ia_open: a clear error (and a stderr message naming the
// problem), never an abort. Every case is an IA of the dat.conf the build writes for this test
// (DAT_OVERRIDE); ctest runs each case in its own process (EAL is once per process).
#include <dat2/udat.h>
#include <gtest/gtest.h>

#include <string>

namespace {

struct Result {
  DAT_RETURN ret;
  std::string err;
};

Result open_ia(const char* name, DAT_IA_HANDLE* out = nullptr) {
  DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
  DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
  testing::internal::CaptureStderr();
  std::string n = name;
  const DAT_RETURN r = dat_ia_open(n.data(), 8, &async, &ia);
  Result res{r, testing::internal::GetCapturedStderr()};
  if (out)
    *out = ia;
  else if (r == DAT_SUCCESS)
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
  return res;
}

void expect_invalid(const char* name, const char* msg) {
  const Result r = open_ia(name);
  EXPECT_EQ(DAT_GET_TYPE(r.ret), DAT_INVALID_PARAMETER) << name << ": " << std::hex << r.ret;
  EXPECT_NE(r.err.find(msg), std::string::npos) << name << " stderr: " << r.err;
}

// A failure while bringing the device up (EAL, port, link): an error return with a message.
// (The provider maps every device-open failure to one status; accept the internal ones.)
void expect_device_error(const char* name, const char* msg) {
  const Result r = open_ia(name);
  const auto t = DAT_GET_TYPE(r.ret);
  EXPECT_TRUE(t == DAT_INTERNAL_ERROR || t == DAT_INSUFFICIENT_RESOURCES) << name << ": " << std::hex << r.ret;
  EXPECT_NE(r.err.find(msg), std::string::npos) << name << " stderr: " << r.err;
}

// (a macro: GTEST_SKIP must run in the test body to end the test)
#define NEED_DPDK() \
  if (!SOFTRNIC_HAVE_DPDK) GTEST_SKIP() << "SKIPPED: softrnic was built without DPDK"

}  // namespace

TEST(DpdkBadConfig, UnknownVdev) {
  expect_invalid("bad_vdev", "dpdk vdev 'net_bogus0': unknown PMD");
}
TEST(DpdkBadConfig, WrongMacSyntax) {
  expect_invalid("bad_mac", "bad value '02:00:00:00:00' for mac");
}
TEST(DpdkBadConfig, EalHelpWouldExitTheProcess) {
  expect_invalid("bad_eal_help", "unsupported EAL argument '--help'");
}
TEST(DpdkBadConfig, MemifWithoutSocket) {
  expect_invalid("bad_memif", "net_memif needs socket=");
}
TEST(DpdkBadConfig, MissingInterface) {
  NEED_DPDK();
  expect_device_error("bad_iface", "interface 'softrnic_none0' of net_af_packet0 not found");
}
TEST(DpdkBadConfig, EalFails) {
  NEED_DPDK();
  expect_device_error("eal_fails", "EAL initialisation failed");
  // EAL cannot be initialised again in this process: the next dpdk IA is told so.
  expect_device_error("null_port", "cannot initialise it again");
}
TEST(DpdkBadConfig, PortWithoutLink) {
  NEED_DPDK();
  expect_device_error("no_link", "no server listening on");
}
TEST(DpdkBadConfig, PciDeviceMissing) {
  NEED_DPDK();
  expect_device_error("no_pci", "no port for device '0000:ff:1f.7'");
}
TEST(DpdkBadConfig, OneDpdkIaPerProcess) {
  NEED_DPDK();
  DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
  const Result ok = open_ia("null_port", &ia);
  ASSERT_EQ(ok.ret, DAT_SUCCESS) << ok.err;
  expect_device_error("null_port", "already in use by another IA in this process");
  EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
  expect_device_error("null_port", "cannot initialise it again");
  // The udp netdev still works in this process.
  const Result udp = open_ia("udp_ok");
  EXPECT_EQ(udp.ret, DAT_SUCCESS) << udp.err;
}
