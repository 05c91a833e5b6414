#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "softrnic/ia_params.hpp"

using namespace softrnic;

TEST(IaParams, DefaultsAndOverrides) {
  DeviceConfig c;
  std::string e;
  ASSERT_TRUE(params::parse_ia_params("", c, e)) << e;
  EXPECT_EQ(c.netdev.kind, "udp");
  EXPECT_EQ(c.wait_spin, std::chrono::microseconds(50));
  EXPECT_EQ(c.netdev.port, 5041);
  ASSERT_TRUE(
      params::parse_ia_params("netdev=loopback ip=10.1.2.3,port=6000 port_fixed=1 max_datagram=1472 "
                              "busy_poll=yes min_rto_us=500 retry_limit=3 connect_timeout_ms=250 udp_gso_pairs=0 "
                              "wait_spin_us=0",
                              c, e))
      << e;
  EXPECT_FALSE(c.netdev.udp_gso_pairs);
  EXPECT_EQ(c.netdev.kind, "loopback");
  EXPECT_EQ(c.netdev.ip, "10.1.2.3");
  EXPECT_EQ(c.netdev.port, 6000);
  EXPECT_TRUE(c.netdev.port_fixed);
  EXPECT_EQ(c.netdev.max_datagram, 1472u);
  EXPECT_TRUE(c.busy_poll);
  EXPECT_EQ(c.wait_spin, std::chrono::microseconds(0));
  EXPECT_EQ(c.min_rto.count(), 500);
  EXPECT_EQ(c.retry_limit, 3);
  EXPECT_EQ(c.connect_timeout.count(), 250);
  ASSERT_TRUE(params::parse_ia_params(
      "srq_alloc=gap_fill impair=seed=7:drop=0.05:dup=0.02:reorder=16:delay=100:corrupt=0.01", c, e))
      << e;
  EXPECT_EQ(c.alloc_policy, AllocPolicy::gap_fill);
  EXPECT_EQ(c.netdev.impair.seed, 7u);
  EXPECT_DOUBLE_EQ(c.netdev.impair.drop, 0.05);
  EXPECT_DOUBLE_EQ(c.netdev.impair.dup, 0.02);
  EXPECT_EQ(c.netdev.impair.reorder, 16u);
  EXPECT_EQ(c.netdev.impair.delay_us, 100u);
  EXPECT_DOUBLE_EQ(c.netdev.impair.corrupt, 0.01);
}

TEST(IaParams, ImpairEnvironmentReplacesThePlan) {
  DeviceConfig c;
  std::string e;
  ASSERT_TRUE(params::parse_ia_params("impair=drop=0.5", c, e));
  setenv("SOFTRNIC_IMPAIR", "reorder=8,drop=0.02,seed=1", 1);
  ASSERT_TRUE(params::apply_impair_env(c, e)) << e;
  EXPECT_DOUBLE_EQ(c.netdev.impair.drop, 0.02);
  EXPECT_EQ(c.netdev.impair.reorder, 8u);
  EXPECT_EQ(c.netdev.impair.seed, 1u);
  setenv("SOFTRNIC_IMPAIR", "reorder=8;drop=0.02", 1);
  EXPECT_FALSE(params::apply_impair_env(c, e));
  EXPECT_NE(e.find("SOFTRNIC_IMPAIR: impairment: bad value"), std::string::npos) << e;
  unsetenv("SOFTRNIC_IMPAIR");
}

TEST(IaParams, ClearErrors) {
  struct Case {
    const char* in;
    const char* msg;
  } cases[] = {
      {"netdev=tcp", "bad value 'tcp' for netdev"},
      {"ip=1.2.3", "bad value '1.2.3' for ip"},
      {"ip=1.2.3.256", "bad value '1.2.3.256' for ip"},
      {"port=0", "bad value '0' for port"},
      {"port=70000", "bad value '70000' for port"},
      {"max_datagram=100", "bad value '100' for max_datagram"},
      {"bogus=1", "unknown key 'bogus'"},
      {"port", "'port' is not key=value"},
      {"=5", "'=5' is not key=value"},
      {"busy_poll=maybe", "bad value 'maybe' for busy_poll"},
      {"wait_spin_us=10001", "bad value '10001' for wait_spin_us"},
      {"wait_spin_us=-1", "bad value '-1' for wait_spin_us"},
      {"srq_alloc=random", "bad value 'random' for srq_alloc"},
      {"impair=drop=2", "impairment: bad value '2' for drop"},
      {"impair=jitter=5", "impairment: unknown key 'jitter'"},
  };
  for (const auto& c : cases) {
    DeviceConfig cfg;
    std::string e;
    EXPECT_FALSE(params::parse_ia_params(c.in, cfg, e)) << c.in;
    EXPECT_NE(e.find(c.msg), std::string::npos) << c.in << " -> " << e;
  }
}

TEST(IaParams, DpdkKeys) {
  DeviceConfig c;
  std::string e;
  ASSERT_TRUE(
      params::parse_ia_params("netdev=dpdk ip=10.78.0.1 dpdk_vdev=net_memif0;role=server;socket=/tmp/m/memif.sock "
                              "dpdk_eal=--log-level=info dpdk_lcore=1 dpdk_prefix=srv mtu=9000 mac=02:00:00:00:00:01 "
                              "neigh=10.78.0.2@02:00:00:00:00:02 pcap=/tmp/srv.pcap busy_poll=1",
                              c, e))
      << e;
  EXPECT_EQ(c.netdev.kind, "dpdk");
  EXPECT_EQ(c.netdev.ip, "10.78.0.1");
  EXPECT_EQ(c.netdev.dpdk.vdev, "net_memif0,role=server,socket=/tmp/m/memif.sock");
  EXPECT_EQ(c.netdev.dpdk.eal, std::vector<std::string>{"--log-level=info"});
  EXPECT_EQ(c.netdev.dpdk.lcore, 1);
  EXPECT_EQ(c.netdev.dpdk.mtu, 9000u);
  EXPECT_EQ(c.netdev.dpdk.mac, "02:00:00:00:00:01");
  EXPECT_EQ(c.netdev.dpdk.neigh, std::vector<std::string>{"10.78.0.2@02:00:00:00:00:02"});
  EXPECT_EQ(c.netdev.pcap, "/tmp/srv.pcap");
  EXPECT_TRUE(c.busy_poll);
  for (auto [in, msg] : {std::pair{"mac=02:00:00:00:00", "ia_params: bad value '02:00:00:00:00' for mac"},
                         std::pair{"neigh=10.0.0.1", "ia_params: neighbour '10.0.0.1' is not IPv4@MAC"},
                         std::pair{"netdev=dpdk2", "ia_params: bad value 'dpdk2' for netdev"}}) {
    DeviceConfig d;
    EXPECT_FALSE(params::parse_ia_params(in, d, e)) << in;
    EXPECT_NE(e.find(msg), std::string::npos) << in << " -> " << e;
  }
}

TEST(IaParams, NetdevEnvironmentReplacesTheNetdev) {
  DeviceConfig c;
  std::string e;
  ASSERT_TRUE(params::parse_ia_params(
      "netdev=dpdk ip=10.78.0.1 dpdk_vdev=net_memif0;role=server;socket=/tmp/m/memif.sock mtu=9000 "
      "impair=drop=0.5 busy_poll=1",
      c, e))
      << e;
  setenv("SOFTRNIC_NETDEV",
         "netdev=dpdk,ip=10.78.0.2 dpdk_vdev=net_memif0;role=client;socket=/tmp/m/memif.sock dpdk_lcore=0", 1);
  setenv("SOFTRNIC_PCAP", "/tmp/cli.pcap", 1);
  ASSERT_TRUE(params::apply_env(c, e)) << e;
  EXPECT_EQ(c.netdev.kind, "dpdk");
  EXPECT_EQ(c.netdev.ip, "10.78.0.2");
  EXPECT_EQ(c.netdev.dpdk.vdev, "net_memif0,role=client,socket=/tmp/m/memif.sock");
  EXPECT_EQ(c.netdev.dpdk.lcore, 0);
  EXPECT_EQ(c.netdev.dpdk.mtu, 1500u);          // replaced: back to the default
  EXPECT_DOUBLE_EQ(c.netdev.impair.drop, 0.5);  // the impairment plan stays
  EXPECT_TRUE(c.busy_poll);                     // not a netdev key: untouched
  EXPECT_EQ(c.netdev.pcap, "/tmp/cli.pcap");
  unsetenv("SOFTRNIC_PCAP");

  setenv("SOFTRNIC_NETDEV", "netdev=udp busy_poll=1", 1);
  EXPECT_FALSE(params::apply_env(c, e));
  EXPECT_NE(e.find("SOFTRNIC_NETDEV: 'busy_poll' is not a netdev key"), std::string::npos) << e;
  setenv("SOFTRNIC_NETDEV", "netdev=dpdk mac=zz", 1);
  EXPECT_FALSE(params::apply_env(c, e));
  EXPECT_NE(e.find("SOFTRNIC_NETDEV: bad value 'zz' for mac"), std::string::npos) << e;
  setenv("SOFTRNIC_NETDEV", "udp", 1);
  EXPECT_FALSE(params::apply_env(c, e));
  EXPECT_NE(e.find("SOFTRNIC_NETDEV: 'udp' is not key=value"), std::string::npos) << e;
  unsetenv("SOFTRNIC_NETDEV");
  setenv("SOFTRNIC_PCAP", "", 1);
  EXPECT_FALSE(params::apply_env(c, e));
  EXPECT_NE(e.find("SOFTRNIC_PCAP"), std::string::npos) << e;
  unsetenv("SOFTRNIC_PCAP");
  // SOFTRNIC_IMPAIR still applies through apply_env.
  setenv("SOFTRNIC_IMPAIR", "reorder=4", 1);
  ASSERT_TRUE(params::apply_env(c, e)) << e;
  EXPECT_EQ(c.netdev.impair.reorder, 4u);
  unsetenv("SOFTRNIC_IMPAIR");
}

TEST(IaParams, DpdkSettingsAreCheckedBeforeTheDeviceOpens) {
  struct Case {
    const char *params, *msg;
  } cases[] = {
      {"netdev=dpdk ip=10.78.0.1 dpdk_vdev=net_bogus0", "netdev=dpdk: dpdk vdev 'net_bogus0': unknown PMD"},
      {"netdev=dpdk ip=10.78.0.1 dpdk_vdev=net_memif0", "net_memif needs socket="},
      {"netdev=dpdk ip=10.78.0.1 dpdk_eal=--help", "unsupported EAL argument '--help'"},
      {"netdev=udp mtu=9000", "apply only to netdev=dpdk"},
  };
  for (const auto& c : cases) {
    DeviceConfig cfg;
    std::string e;
    ASSERT_TRUE(params::parse_ia_params(c.params, cfg, e)) << c.params << ": " << e;
    EXPECT_FALSE(params::apply_env(cfg, e)) << c.params;
    EXPECT_NE(e.find(c.msg), std::string::npos) << c.params << " -> " << e;
  }
}

// Issue 13: configuration that was accepted and should not have been.
TEST(IaParams, AnRnicAddressMustBeUnicast) {
  for (const char* ip : {"0.0.0.0", "255.255.255.255", "224.0.0.1", "239.1.2.3", "240.0.0.1"}) {
    DeviceConfig c;
    std::string e;
    EXPECT_FALSE(params::parse_ia_params(std::string("ip=") + ip, c, e)) << ip;
    EXPECT_NE(e.find("not a unicast IPv4 address"), std::string::npos) << ip << " -> " << e;
  }
  DeviceConfig c;
  std::string e;
  EXPECT_TRUE(params::parse_ia_params("ip=10.0.0.1", c, e)) << e;
}

// Issue 16: an interface's name stands for its address, as OFA dapl's "eth0 0".
TEST(IaParams, AnInterfaceNameIsItsAddress) {
  DeviceConfig c;
  std::string e;
  ASSERT_TRUE(params::parse_ia_params("wire=roce ip=lo", c, e)) << e;
  EXPECT_EQ(c.netdev.ip, "127.0.0.1");
  EXPECT_FALSE(params::parse_ia_params("ip=nosuchif0", c, e));
  EXPECT_NE(e.find("ip=nosuchif0: not an IPv4 address, and no network interface 'nosuchif0'"), std::string::npos) << e;
  EXPECT_FALSE(params::parse_ia_params("ip=averyveryverylongname", c, e));
  EXPECT_NE(e.find("cannot be a network interface's name"), std::string::npos) << e;
  EXPECT_FALSE(params::parse_ia_params("ip=1.2.3", c, e));
  EXPECT_NE(e.find("bad value '1.2.3' for ip"), std::string::npos) << e;
}

// An interface without an IPv4 address: lo of a fresh network namespace (root only).
TEST(IaParams, AnInterfaceWithoutAnAddressIsAClearError) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace)";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string msg;
    if (::unshare(CLONE_NEWNET) != 0) {
      msg = "SKIP unshare failed";
    } else {
      DeviceConfig cc;
      msg = params::parse_ia_params("ip=lo", cc, msg) ? "accepted " + cc.netdev.ip : msg;
    }
    (void)!::write(fds[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (got.rfind("SKIP", 0) == 0) GTEST_SKIP() << got;
  EXPECT_NE(got.find("ip=lo: not an IPv4 address, and network interface 'lo' has no IPv4 address"), std::string::npos)
      << got;
}

TEST(IaParams, PcapRefusesSpecialFiles) {
  for (const char* p : {"/proc/self/mem", "/dev/null", "/sys/kernel/x.pcap", "/tmp", "/nonexistent-dir/x.pcap"}) {
    DeviceConfig c;
    std::string e;
    EXPECT_FALSE(params::parse_ia_params(std::string("pcap=") + p, c, e)) << p;
    EXPECT_NE(e.find("pcap"), std::string::npos) << p << " -> " << e;
  }
  DeviceConfig c;
  std::string e;
  EXPECT_TRUE(params::parse_ia_params("pcap=/tmp/softrnic-test-ok.pcap", c, e)) << e;
  setenv("SOFTRNIC_PCAP", "/proc/self/mem", 1);
  EXPECT_FALSE(params::apply_env(c, e));
  EXPECT_NE(e.find("SOFTRNIC_PCAP"), std::string::npos) << e;
  unsetenv("SOFTRNIC_PCAP");
}

TEST(IaParams, AKeyGivenTwiceIsAnError) {
  DeviceConfig c;
  std::string e;
  EXPECT_FALSE(params::parse_ia_params("port=6000 retry_limit=3 port=7000", c, e));
  EXPECT_NE(e.find("'port' is given more than once"), std::string::npos) << e;
  EXPECT_FALSE(params::parse_ia_params("busy_poll=1,busy_poll=0", c, e));
  netdev::NetdevConfig nd;
  EXPECT_FALSE(params::parse_netdev_spec("netdev=udp netdev=loopback", nd, e));
  EXPECT_NE(e.find("more than once"), std::string::npos) << e;
}

TEST(IaParams, BooleansTakeTheDocumentedWordsOnly) {
  DeviceConfig c;
  std::string e;
  for (const char* v : {"0", "1", "true", "false", "yes", "no"})
    EXPECT_TRUE(params::parse_ia_params(std::string("port_fixed=") + v, c, e)) << v;
  for (const char* v : {"2", "on", "YES", ""})
    EXPECT_FALSE(params::parse_ia_params(std::string("port_fixed=") + v, c, e)) << v;
}

TEST(IaParams, ControlCharactersAreEscapedInErrors) {
  DeviceConfig c;
  std::string e;
  EXPECT_FALSE(params::parse_ia_params(std::string("netdev=\x1b[2Jevil\x07"), c, e));
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << "raw escape echoed";
  EXPECT_EQ(e.find('\x07'), std::string::npos);
  EXPECT_NE(e.find("\\x1b[2Jevil\\x07"), std::string::npos) << e;
  EXPECT_FALSE(params::parse_ia_params(std::string("bogus\x01key=1"), c, e));
  EXPECT_NE(e.find("bogus\\x01key"), std::string::npos) << e;
}

TEST(IaParams, KeepaliveKeys) {
  DeviceConfig c;
  std::string e;
  EXPECT_EQ(c.keepalive_idle.count(), 5000) << "on by default, well under a minute";
  ASSERT_TRUE(params::parse_ia_params(
      "keepalive_ms=2000 keepalive_interval_ms=250 keepalive_probes=3 connect_no_answer_ms=1500", c, e))
      << e;
  EXPECT_EQ(c.keepalive_idle.count(), 2000);
  EXPECT_EQ(c.keepalive_interval.count(), 250);
  EXPECT_EQ(c.keepalive_probes, 3);
  EXPECT_EQ(c.connect_no_answer.count(), 1500);
  ASSERT_TRUE(params::parse_ia_params("keepalive_ms=0", c, e)) << e;
  EXPECT_EQ(c.keepalive_idle.count(), 0) << "0 turns it off";
  EXPECT_FALSE(params::parse_ia_params("keepalive_probes=0", c, e));
}

TEST(IaParams, WireTcpAndMpaKeys) {
  DeviceConfig c;
  std::string e;
  ASSERT_TRUE(params::parse_ia_params("", c, e)) << e;
  EXPECT_EQ(c.wire, Wire::udp);
  EXPECT_EQ(c.mpa, MpaConfig{});
  ASSERT_TRUE(params::parse_ia_params("wire=tcp ip=10.0.0.5 mpa_rev=1 mpa_crc=0 mpa_markers=1 mpa_p2p=no", c, e)) << e;
  EXPECT_EQ(c.wire, Wire::tcp);
  EXPECT_EQ(c.mpa, (MpaConfig{1, false, true, false}));
  for (const char* bad : {"wire=rdma", "mpa_rev=3", "mpa_rev=0", "mpa_crc=maybe", "wire=tcp wire=udp"}) {
    DeviceConfig d;
    EXPECT_FALSE(params::parse_ia_params(bad, d, e)) << bad;
    EXPECT_FALSE(e.empty()) << bad;
  }
  // An impairment plan or a datagram-only netdev on the TCP wire: a clear error at open.
  for (const char* p : {"wire=tcp impair=drop=0.1", "wire=tcp netdev=loopback"}) {
    DeviceConfig d;
    ASSERT_TRUE(params::parse_ia_params(p, d, e)) << p << ": " << e;
    EXPECT_FALSE(Device::open(d, e)) << p;
    EXPECT_NE(e.find("wire=tcp"), std::string::npos) << e;
  }
}
