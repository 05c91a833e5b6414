// softrnic_scenario: replays an out-of-order arrival script on two soft RNICs in one process
// (A sends, B receives) over the loopback netdev, and prints after each step what the receive
// queries return and which completions came out. Format: docs/scenarios/README.md.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "softrnic/info.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/rnic.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/udp_frame.hpp"

using namespace softrnic;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kQual = 1;
constexpr std::uint32_t kBufMax = 1 << 16;

struct Segment {
  bool ddp = false;
  bool tagged = false;
  std::uint32_t msn = 0;
  std::uint32_t mo = 0;
  bool last = false;
  std::size_t len = 0;
};

Segment decode(std::span<const std::uint8_t> dgram) {
  Segment s;
  wire::FrameHeader h;
  std::span<const std::uint8_t> body;
  if (wire::open_frame(dgram, h, body) != wire::FrameError::none || h.type != wire::FrameType::ddp) return s;
  wire::DdpSegment d;
  if (wire::decode_ddp(body, d) != wire::DecodeError::none) return s;
  s.ddp = true;
  s.tagged = d.tagged;
  s.msn = d.msn;
  s.mo = d.mo;
  s.last = d.last;
  s.len = d.payload.size();
  return s;
}

class Runner {
 public:
  Runner(AllocPolicy policy, std::size_t max_datagram, bool publish)
      : policy_(policy), max_datagram_(max_datagram), publish_(publish) {}

  int run(std::istream& in) {
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      const auto hash = line.find('#');
      if (hash != std::string::npos) line.erase(hash);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
      std::size_t start = 0;
      while (start < line.size() && std::isspace(static_cast<unsigned char>(line[start]))) ++start;
      if (start == line.size()) continue;
      line = line.substr(start);
      std::printf("step %d: %s\n", n, line.c_str());
      std::istringstream words(line);
      std::string cmd;
      words >> cmd;
      std::vector<std::string> args;
      for (std::string w; words >> w;) args.push_back(w);
      if (!step(cmd, args)) {
        std::printf("  ERROR at line %d\n", n);
        return 2;
      }
    }
    std::printf("scenario: %s (%d expectation%s checked, %d failed)\n", failed_ ? "FAILED" : "PASSED", checked_,
                checked_ == 1 ? "" : "s", failed_);
    return failed_ ? 1 : 0;
  }

 private:
  bool fail(const std::string& why) {
    std::printf("  ERROR: %s\n", why.c_str());
    return false;
  }

  bool need_setup() {
    if (a_) return true;
    std::string e;
    const auto make = [&](std::uint16_t port, netdev::HoldingNetdev*& h, const char* name) -> std::unique_ptr<Device> {
      netdev::NetdevConfig nc;
      nc.kind = "loopback";
      nc.port = port;
      nc.max_datagram = max_datagram_;
      auto inner = netdev::make_netdev(nc, e);
      if (!inner) return nullptr;
      auto hold = netdev::make_holding(std::move(inner), [](std::span<const std::uint8_t> d) { return decode(d).ddp; });
      h = hold.get();
      DeviceConfig c;
      c.name = name;
      c.netdev.kind = "loopback";  // (what softrnic_info reports; the netdev is given below)
      c.alloc_policy = policy_;
      c.initial_rto = c.min_rto = std::chrono::microseconds(600'000'000);  // nothing resent during the script
      return Device::open(c, std::move(hold));
    };
    a_ = make(40000, hold_a_, "scenario_a");
    b_ = make(40100, hold_b_, "scenario_b");
    if (!a_ || !b_) return fail("cannot open the two RNICs: " + e);
    if (publish_) {
      // softrnic_info's window into both (--info)
      pub_a_ = info::Publisher::start(*a_, e);
      if (pub_a_) pub_b_ = info::Publisher::start(*b_, e);
      if (!pub_b_) return fail("cannot publish for softrnic_info: " + e);
      std::printf("softrnic_info: %s %s\n", pub_a_->path().c_str(), pub_b_->path().c_str());
    }
    pa_ = a_->alloc_pd();
    pb_ = b_->alloc_pd();
    a_scq_ = a_->create_cq(4096, nullptr);
    a_rcq_ = a_->create_cq(16, nullptr);
    b_scq_ = b_->create_cq(16, nullptr);
    b_rcq_ = b_->create_cq(4096, nullptr);
    amem_.resize(1 << 22);
    bmem_.resize(1 << 22);
    a_->reg_mr(pa_, amem_.data(), amem_.size(), Access::local_read | Access::local_write, amr_);
    b_->reg_mr(pb_, bmem_.data(), bmem_.size(), Access::local_write | Access::remote_write, bmr_);
    return true;
  }

  bool need_qps() {
    if (qa_) return true;
    if (!need_setup()) return false;
    QpInit ia;
    ia.pd = pa_;
    ia.send_cq = a_scq_;
    ia.recv_cq = a_rcq_;
    ia.max_send_wr = 4096;
    ia.max_sge = 1;
    ia.on_event = [this](Qp*, const CmEvent& ev) {
      note("A: connection " + std::string(to_string(ev.type)) + " " + ev.reason);
    };
    if (a_->create_qp(ia, qa_) != Status::ok) return fail("create QP A");
    QpInit ib;
    ib.pd = pb_;
    ib.send_cq = b_scq_;
    ib.recv_cq = b_rcq_;
    ib.max_recv_wr = 4096;
    ib.max_sge = 1;
    ib.srq = srq_;
    ib.on_event = [this](Qp*, const CmEvent& ev) {
      if (ev.type == CmEventType::broken) broken_events_++;
      note("B: connection " + std::string(to_string(ev.type)) + " " + ev.reason);
    };
    ib.on_soft_watermark = [this](Qp*) { note("B: soft high watermark exceeded (async event)"), soft_events_++; };
    if (b_->create_qp(ib, qb_) != Status::ok) return fail("create QP B");
    return true;
  }

  void note(const std::string& s) {
    std::lock_guard lk(mu_);
    notes_.push_back(s);
  }

  void flush_notes() {
    std::lock_guard lk(mu_);
    for (auto& n : notes_) std::printf("  event: %s\n", n.c_str());
    notes_.clear();
  }

  // Waits until B has taken in everything sent to it so far.
  void settle() {
    for (int i = 0; i < 2000; ++i) {
      const auto rx = b_->counters().rx_frames;
      if (rx >= b_expected_rx_) break;
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(5ms);  // acknowledgements back to A
    flush_notes();
  }

  std::uint32_t parse_u(const std::string& s) { return static_cast<std::uint32_t>(std::stoul(s)); }

  bool post_buffers(std::uint32_t n, std::uint32_t size, bool to_srq) {
    for (std::uint32_t i = 0; i < n; ++i) {
      if (next_buf_ + size > bmem_.size() / 2) next_buf_ = 0;
      const Sge g{b_->query_mr(bmr_).stag, reinterpret_cast<std::uintptr_t>(bmem_.data()) + next_buf_, size};
      const RecvWr wr{next_buf_, {&g, 1}};
      const Status s = to_srq ? b_->post_srq_recv(srq_, wr) : b_->post_recv(qb_, wr);
      if (s != Status::ok) return fail("post: " + std::string(to_string(s)));
      next_buf_ += size;
    }
    return true;
  }

  void print_queries() {
    const RecvCounts rc = b_->recv_counts(qb_);
    last_allocated_ = rc.allocated;
    last_span_ = rc.span;
    std::printf("  recv_query(B): nbufs_allocated=%u bufs_alloc_span=%u\n", rc.allocated, rc.span);
    if (srq_) {
      const SrqCounts sc = b_->srq_counts(srq_);
      last_available_ = sc.available;
      last_outstanding_ = sc.outstanding;
      std::printf("  srq_query(B): available_dto_count=%u outstanding_dto_count=%u\n", sc.available, sc.outstanding);
    }
    pending_ = static_cast<std::uint32_t>(b_->cq_count(b_rcq_));
    std::printf("  completions waiting at B: %u\n", pending_);
  }

  void print_held() {
    const auto held = hold_a_->held();
    std::printf("  held A->B:");
    if (held.empty()) std::printf(" none");
    for (std::size_t i = 0; i < held.size(); ++i) {
      const Segment s = decode(held[i].bytes);
      if (s.tagged)
        std::printf(" [%zu: write %zuB]", i, s.len);
      else
        std::printf(" [%zu: msn %u mo %u%s]", i, s.msn, s.mo, s.last ? " L" : "");
    }
    std::printf("\n");
  }

  // Indexes of held segments matching "all" or "msn=19,22" (all segments of each, in that order).
  bool select(const std::vector<std::string>& args, std::vector<std::size_t>& out) {
    const auto held = hold_a_->held();
    if (args.empty()) return fail("say which: all | msn=N[,N...] | first=N[,N...] | seg=I[,I...]");
    if (args[0] == "all") {
      for (std::size_t i = 0; i < held.size(); ++i) out.push_back(i);
      return true;
    }
    const auto eq = args[0].find('=');
    if (eq == std::string::npos) return fail("expected msn=... or seg=...");
    const std::string key = args[0].substr(0, eq);
    std::stringstream list(args[0].substr(eq + 1));
    for (std::string item; std::getline(list, item, ',');) {
      const std::uint32_t v = parse_u(item);
      if (key == "seg") {
        if (v >= held.size()) return fail("no held segment " + item);
        out.push_back(v);
      } else if (key == "msn" || key == "first") {
        // msn=N: every held segment of message N; first=N: only its segment at offset 0.
        bool any = false;
        for (std::size_t i = 0; i < held.size(); ++i) {
          const Segment s = decode(held[i].bytes);
          if (!s.tagged && s.msn == v && (key == "msn" || s.mo == 0)) out.push_back(i), any = true;
        }
        if (!any) return fail("no held segment of MSN " + item);
      } else {
        return fail("unknown selector " + key);
      }
    }
    return true;
  }

  bool expect(const std::vector<std::string>& args) {
    for (const std::string& a : args) {
      const auto eq = a.find('=');
      if (eq == std::string::npos) return fail("expect takes key=value");
      const std::string key = a.substr(0, eq);
      const std::uint32_t want = parse_u(a.substr(eq + 1));
      std::uint32_t got;
      if (key == "allocated")
        got = last_allocated_;
      else if (key == "span")
        got = last_span_;
      else if (key == "available")
        got = last_available_;
      else if (key == "outstanding")
        got = last_outstanding_;
      else if (key == "completions")
        got = pending_;
      else if (key == "reaped")
        got = last_reaped_;
      else if (key == "lw_events")
        got = lw_events_;
      else if (key == "soft_events")
        got = soft_events_;
      else if (key == "broken")
        got = broken_events_;
      else
        return fail("unknown expectation " + key);
      ++checked_;
      if (got != want) {
        ++failed_;
        std::printf("  EXPECT FAILED: %s is %u, expected %u\n", key.c_str(), got, want);
      } else {
        std::printf("  expect %s=%u: ok\n", key.c_str(), want);
      }
    }
    return true;
  }

  bool step(const std::string& cmd, const std::vector<std::string>& args) {
    if (cmd == "srq") return do_srq(args);
    if (cmd == "srq_post" || cmd == "recv_post") return do_post(cmd == "srq_post", args);
    if (cmd == "lw") return do_lw(args);
    if (cmd == "watermark") return do_watermark(args);
    if (cmd == "connect") return do_connect();
    if (cmd == "hold") return do_hold(args);
    if (cmd == "send" || cmd == "write") return do_send_or_write(cmd == "send", args);
    if (cmd == "deliver" || cmd == "drop") return do_deliver_or_drop(cmd == "deliver", args);
    if (cmd == "query") return do_query();
    if (cmd == "reap") return do_reap(args);
    if (cmd == "expect") return expect(args);
    if (cmd == "pause") return do_pause(args);
    if (cmd == "disconnect") return do_disconnect(args);
    return fail("unknown command '" + cmd + "'");
  }

  bool do_srq(const std::vector<std::string>& args) {
    if (qa_) return fail("srq must come before connect or post");
    if (!need_setup()) return false;
    SrqInit si;
    si.pd = pb_;
    si.max_wr = args.empty() ? 64 : parse_u(args[0]);
    si.max_sge = 1;
    si.on_low_watermark = [this](Srq*) { note("B: SRQ low watermark (async event)"), lw_events_++; };
    if (b_->create_srq(si, srq_) != Status::ok) return fail("create SRQ");
    std::printf("  SRQ of %u entries\n", si.max_wr);
    return true;
  }

  bool do_post(bool to_srq, const std::vector<std::string>& args) {
    if (!need_qps()) return false;
    if (to_srq && !srq_) return fail("no SRQ");
    if (!to_srq && srq_) return fail("B's EP uses the SRQ");
    const std::uint32_t n = args.empty() ? 1 : parse_u(args[0]);
    const std::uint32_t size = args.size() > 1 ? parse_u(args[1]) : 256;
    if (!post_buffers(n, size, to_srq)) return false;
    print_queries();
    return true;
  }

  bool do_lw(const std::vector<std::string>& args) {
    if (!srq_) return fail("no SRQ");
    b_->set_srq_low_watermark(srq_, parse_u(args.at(0)));
    flush_notes();
    return true;
  }

  bool do_watermark(const std::vector<std::string>& args) {
    if (!need_qps()) return false;
    b_->set_recv_watermarks(qb_, parse_u(args.at(0)), args.size() > 1 ? parse_u(args[1]) : ~0u);
    flush_notes();
    return true;
  }

  bool do_connect() {
    if (!need_qps()) return false;
    b_->listen(kQual, [this](ConnRequest* r, const ConnRequestInfo&) {
      std::lock_guard lk(mu_);
      req_ = r;
    });
    a_->connect(qa_, b_->address(), kQual, {}, 5000ms);
    for (int i = 0; i < 5000; ++i) {
      {
        std::lock_guard lk(mu_);
        if (req_) break;
      }
      std::this_thread::sleep_for(1ms);
    }
    if (!req_ || b_->accept(req_, qb_, {}) != Status::ok) return fail("connection request not seen");
    for (int i = 0; i < 5000 && (a_->qp_state(qa_) != QpState::rts); ++i) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    b_expected_rx_ = b_->counters().rx_frames;
    flush_notes();
    return true;
  }

  bool do_hold(const std::vector<std::string>& args) {
    if (!need_qps()) return false;
    hold_a_->set_holding(args.empty() || args[0] != "off");
    return true;
  }

  // send [N [SIZE]]: N Sends from A; write [SIZE]: one RDMA Write.
  bool do_send_or_write(bool send, const std::vector<std::string>& args) {
    if (!need_qps()) return false;
    const std::uint32_t n = send ? (args.empty() ? 1 : parse_u(args[0])) : 1;
    const std::uint32_t size =
        send ? (args.size() > 1 ? parse_u(args[1]) : 64) : (args.empty() ? 64 : parse_u(args[0]));
    if (size > kBufMax) return fail("size over 64 KiB");
    for (std::uint32_t i = 0; i < n; ++i)
      if (!post_from_a(send, size)) return false;
    if (send) std::printf("  A posted %u Send%s of %u bytes (MSN up to %u)\n", n, n == 1 ? "" : "s", size, msn_);
    settle();
    print_held();
    print_queries();
    return true;
  }

  // One Send (numbered by its MSN in its text) or RDMA Write from A's next source buffer.
  bool post_from_a(bool send, std::uint32_t size) {
    std::uint8_t* src = amem_.data() + (next_src_ % 64) * kBufMax;
    next_src_++;
    SendWr wr;
    if (send) {
      ++msn_;
      std::snprintf(reinterpret_cast<char*>(src), size, "message %u", msn_);
    }
    const Sge g{a_->query_mr(amr_).stag, reinterpret_cast<std::uintptr_t>(src), size};
    wr.wr_id = msn_;
    wr.sgl = {&g, 1};
    if (!send) {
      wr.opcode = SendOpcode::rdma_write;
      wr.rkey = b_->query_mr(bmr_).stag;
      wr.remote_addr = reinterpret_cast<std::uintptr_t>(bmem_.data()) + bmem_.size() / 2;
    }
    const std::uint64_t before = a_->counters().tx_frames;
    if (a_->post_send(qa_, wr) != Status::ok) return fail("post_send");
    const std::uint64_t frames = a_->counters().tx_frames - before;
    b_expected_rx_ += frames;  // what passed A's holding layer now travels to B
    return true;
  }

  bool do_deliver_or_drop(bool deliver, const std::vector<std::string>& args) {
    if (!need_qps()) return false;
    std::vector<std::size_t> idx;
    if (!select(args, idx)) return false;
    if (deliver) {
      hold_a_->release(idx);
      b_expected_rx_ += idx.size();
    } else {
      hold_a_->discard(idx);
    }
    settle();
    print_held();
    print_queries();
    return true;
  }

  bool do_query() {
    if (!need_qps()) return false;
    settle();
    print_queries();
    return true;
  }

  bool do_reap(const std::vector<std::string>& args) {
    if (!need_qps()) return false;
    const bool all = args.empty() || args[0] == "all";
    const std::uint32_t want = all ? ~0u : parse_u(args[0]);
    last_reaped_ = 0;
    Wc wc;
    while (last_reaped_ < want && b_->poll_cq(b_rcq_, {&wc, 1}) == 1) {
      ++last_reaped_;
      const char* text = reinterpret_cast<const char*>(bmem_.data() + wc.wr_id);
      std::printf("  completion: %s, %u bytes, buffer %llu: \"%.*s\"\n", std::string(to_string(wc.status)).c_str(),
                  wc.byte_len, static_cast<unsigned long long>(wc.wr_id),
                  static_cast<int>(wc.status == WcStatus::success ? std::min<std::uint32_t>(wc.byte_len, 40) : 0),
                  text);
      if (wc.srq) b_->srq_reaped(wc.srq, 1);
    }
    print_queries();
    return true;
  }

  // Time for softrnic_info (--info) to look at the devices as they are now.
  bool do_pause(const std::vector<std::string>& args) {
    const double s = args.empty() ? 1.0 : std::strtod(args[0].c_str(), nullptr);
    if (!(s > 0 && s <= 600)) return fail("pause takes 0 < SECONDS <= 600");
    std::printf("paused %g s\n", s);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
    return true;
  }

  bool do_disconnect(const std::vector<std::string>& args) {
    if (!need_qps()) return false;
    a_->disconnect(qa_, args.empty() || args[0] != "abrupt");
    std::this_thread::sleep_for(50ms);
    flush_notes();
    print_queries();
    return true;
  }

  AllocPolicy policy_;
  std::size_t max_datagram_;
  bool publish_;
  std::unique_ptr<Device> a_, b_;
  std::unique_ptr<info::Publisher> pub_a_, pub_b_;  // after the devices: they go first
  netdev::HoldingNetdev *hold_a_ = nullptr, *hold_b_ = nullptr;
  Pd *pa_ = nullptr, *pb_ = nullptr;
  Cq *a_scq_ = nullptr, *a_rcq_ = nullptr, *b_scq_ = nullptr, *b_rcq_ = nullptr;
  Qp *qa_ = nullptr, *qb_ = nullptr;
  Srq* srq_ = nullptr;
  Mr *amr_ = nullptr, *bmr_ = nullptr;
  std::vector<std::uint8_t> amem_, bmem_;
  std::uint64_t next_buf_ = 0, next_src_ = 0, b_expected_rx_ = 0;
  std::uint32_t msn_ = 0;
  std::mutex mu_;
  ConnRequest* req_ = nullptr;
  std::vector<std::string> notes_;
  std::uint32_t last_allocated_ = 0, last_span_ = 0, last_available_ = 0, last_outstanding_ = 0, pending_ = 0,
                last_reaped_ = 0, lw_events_ = 0, soft_events_ = 0, broken_events_ = 0;
  int checked_ = 0, failed_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  AllocPolicy policy = AllocPolicy::arrival;
  std::size_t max_datagram = 1472;
  bool publish = false;
  const char* file = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--policy" && i + 1 < argc) {
      const std::string p = argv[++i];
      if (p != "arrival" && p != "gap_fill") {
        std::fprintf(stderr, "softrnic_scenario: --policy takes arrival or gap_fill\n");
        return 2;
      }
      policy = p == "arrival" ? AllocPolicy::arrival : AllocPolicy::gap_fill;
    } else if (a == "--max-datagram" && i + 1 < argc) {
      max_datagram = std::stoul(argv[++i]);
    } else if (a == "--info") {
      publish = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: softrnic_scenario [--policy arrival|gap_fill] [--max-datagram N] [--info] FILE\n");
      return 0;
    } else {
      file = argv[i];
    }
  }
  if (!file) {
    std::fprintf(stderr, "usage: softrnic_scenario [--policy arrival|gap_fill] [--max-datagram N] [--info] FILE\n");
    return 2;
  }
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "softrnic_scenario: cannot read %s\n", file);
    return 2;
  }
  std::printf("scenario %s, allocation policy %s\n", file, policy == AllocPolicy::arrival ? "arrival" : "gap_fill");
  Runner r(policy, max_datagram, publish);
  return r.run(in);
}
