#!/usr/bin/env bash
# softrnic_info against a live pair with a known MSN gap: softrnic_scenario --info holds B's
# receive side at spec_msn_gaps.scn's point (fragments of MSNs 19, 22, 23 after 18 completed:
# allocated 3, span 5) and pauses; softrnic_info must show exactly that, in its tables and in its
# JSON, whose keys are checked against schema 2 (a stable schema: a key added or renamed fails).
#   usage: softrnic_info_test.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: softrnic_info_test.sh BUILD_DIR}
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/softrnic-info.XXXXXX)
scn_pid=""
trap '[[ -n $scn_pid ]] && kill "$scn_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
export SOFTRNIC_INFO_DIR=$work/run
cat >"$work/gap.scn" <<'SCN'
srq 64
srq_post 40 4096
connect
send 18
reap 18
hold on
send 5 3000
deliver first=19,22,23
expect allocated=3 span=5 completions=0 available=19 outstanding=22
pause 60
SCN
"$build/tools/softrnic_scenario" --info "$work/gap.scn" >"$work/scn.log" 2>&1 &
scn_pid=$!
for _ in $(seq 1 200); do grep -q '^paused' "$work/scn.log" && break; sleep 0.05; done
grep -q '^paused' "$work/scn.log" || { cat "$work/scn.log"; fail "the scenario did not reach its pause"; }

"$build/tools/softrnic_info" --conf "$build/dat.conf" >"$work/table.txt" 2>&1 || { cat "$work/table.txt"; fail "softrnic_info exited $?"; }
"$build/tools/softrnic_info" --conf "$build/dat.conf" --json >"$work/info.json" 2>&1 || fail "softrnic_info --json exited $?"
"$build/tools/softrnic_info" --conf "$build/dat.conf" --watch 0.2 --count 2 >"$work/watch.txt" 2>&1 || fail "--watch --count 2 exited $?"
cat "$work/table.txt"
python3 - "$work/info.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
bad = []
def keys(obj, want, what):
    got = sorted(obj.keys())
    if got != sorted(want):
        bad.append(f"{what} keys {got}, schema 2 has {sorted(want)}")
keys(d, ["schema", "dat_conf", "ias", "limits", "socket_dir", "live", "unanswered"], "document")
if d["schema"] != 2: bad.append(f"schema {d['schema']}")
keys(d["limits"], ["max_qp", "max_qp_wr", "max_sge", "max_cqe", "max_mr", "max_mr_size", "max_msg_size", "max_pd",
                   "max_rdma_read"], "limits")
ias = {i["name"]: i for i in d["ias"]}
if ias.get("softrnic_roce", {}).get("wire") != "roce-v2": bad.append(f"softrnic_roce in dat.conf: {ias.get('softrnic_roce')}")
keys(ias["softrnic_iwarp"], ["name", "library", "softrnic", "wire", "netdev", "ip", "port"], "dat.conf IA")
live = {l["ia"]: l for l in d["live"]}
if sorted(live) != ["scenario_a", "scenario_b"]: bad.append(f"live IAs {sorted(live)}, want scenario_a and scenario_b")
else:
    a, b = live["scenario_a"], live["scenario_b"]
    keys(b, ["schema", "pid", "ia", "wire", "netdev", "address", "counters", "qps", "socket"], "live IA")
    keys(b["counters"], ["tx_frames", "rx_frames", "retransmits", "rx_duplicates", "rx_out_of_order", "rx_bad_frames",
                         "rx_unknown_qp", "rx_dropped_datagrams", "terminates_sent", "terminates_received", "fatal_naks_sent",
                         "fatal_naks_received", "dead_peers", "memory_faults"],
         "IA counters")
    if len(b["qps"]) != 1 or len(a["qps"]) != 1: bad.append(f"QPs: A {len(a['qps'])}, B {len(b['qps'])}, want 1 each")
    else:
        qb, qa = b["qps"][0], a["qps"][0]
        keys(qb, ["qpn", "state", "local", "peer", "msn_expected", "recv_queued", "placed_not_completed",
                  "recv_allocated", "recv_span", "send_queued", "counters", "srq"], "QP")
        keys(qb["counters"], ["tx_frames", "rx_frames", "retransmits", "rx_duplicates", "rx_out_of_order",
                              "rx_beyond_window", "rack_retransmits", "spurious_retransmits", "terminates_sent",
                              "terminates_received", "fatal_naks_sent", "fatal_naks_received"], "QP counters")
        keys(qb["srq"], ["available", "outstanding", "allocated", "completed", "max_wr", "low_watermark"], "SRQ")
        want_b = {"state": "RTS", "peer": "127.0.0.1:40000", "msn_expected": 19, "placed_not_completed": 3,
                  "recv_allocated": 3, "recv_span": 5}
        for k, v in want_b.items():
            if qb[k] != v: bad.append(f"B's QP {k} = {qb[k]}, want {v}")
        for k, v in {"available": 19, "outstanding": 22, "allocated": 3}.items():
            if qb["srq"][k] != v: bad.append(f"B's SRQ {k} = {qb['srq'][k]}, want {v}")
        if qb["counters"]["rx_out_of_order"] < 1: bad.append("B counted no out-of-order arrival")
        if qa["send_queued"] != 5: bad.append(f"A's send_queued {qa['send_queued']}, want 5 (held)")
        if qa["srq"] is not None: bad.append("A's QP has no SRQ")
        print(f"B QP[{qb['qpn']}]: MSN expected {qb['msn_expected']}, placed not completed {qb['placed_not_completed']}, "
              f"allocated {qb['recv_allocated']}, span {qb['recv_span']}, SRQ {qb['srq']['available']}/{qb['srq']['outstanding']}; "
              f"A: {qa['send_queued']} sends queued")
for b_ in bad: print("FAIL:", b_)
sys.exit(1 if bad else 0)
PY
grep -qE '^ +[0-9]+ +RTS +127\.0\.0\.1:40000 +19 +3 +3 +5 +19/22 ' "$work/table.txt" || fail "the table has no row for B's QP with 19 3 3 5 19/22"
[[ $(grep -c '^Live IAs' "$work/watch.txt") == 2 ]] || fail "--watch --count 2 did not print twice"
# a stopped process answers nothing: softrnic_info reports it within its 2 s bounds, not hangs
kill -STOP "$scn_pid"
t0=$(date +%s)
stopped=$(timeout 20 "$build/tools/softrnic_info" --conf "$build/dat.conf") || fail "softrnic_info with a stopped process: exit $?"
kill -CONT "$scn_pid"
(($(date +%s) - t0 <= 10)) || fail "softrnic_info took $(($(date +%s) - t0)) s with a stopped process"
[[ $(grep -c 'no answer from' <<<"$stopped") == 2 ]] || { echo "$stopped"; fail "the stopped process's 2 IAs are not reported unanswered"; }
echo "a stopped process: its 2 IAs reported unanswered in $(($(date +%s) - t0)) s"
# what another process's socket says is text to check, not to trust: not JSON, not an object,
# another schema, or keys missing and of the wrong type must not crash the tool
python3 - "$SOFTRNIC_INFO_DIR" <<'PY' &
import os, socket, sys, threading, time
answers = {"1-junk-0.sock": b"\x00\xffnot json", "2-array-0.sock": b"[1,2]", "3-schema-0.sock": b'{"schema":99}',
           "4-odd-0.sock": b'{"schema":2,"ia":"odd","counters":[],"qps":[{"qpn":"a","srq":5,"counters":null},7]}'}
socks = []
for name, text in answers.items():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(sys.argv[1], name)); s.listen(4); socks.append((s, text))
def serve(s, text):
    while True:
        c, _ = s.accept(); c.sendall(text); c.close()
for s, t in socks: threading.Thread(target=serve, args=(s, t), daemon=True).start()
open(os.path.join(sys.argv[1], "ready"), "w").close()
time.sleep(30)
PY
fake=$!
for _ in $(seq 1 100); do [[ -e $SOFTRNIC_INFO_DIR/ready ]] && break; sleep 0.05; done
odd=$("$build/tools/softrnic_info" --conf "$build/dat.conf" 2>&1) || { echo "$odd"; kill $fake; fail "softrnic_info on hostile sockets: exit $?"; }
"$build/tools/softrnic_info" --conf "$build/dat.conf" --json >/dev/null 2>&1 || { kill $fake; fail "--json on hostile sockets"; }
kill $fake 2>/dev/null; wait $fake 2>/dev/null
rm -f "$SOFTRNIC_INFO_DIR"/[1-4]-*.sock "$SOFTRNIC_INFO_DIR/ready"
[[ $(grep -c 'not a softrnic snapshot of schema 2' <<<"$odd") == 3 ]] || { echo "$odd"; fail "junk, an array and schema 99 are not all refused"; }
grep -qE '^ +a +- +- ' <<<"$odd" || { echo "$odd"; fail "the odd snapshot's QP row is not shown with '-' for what it lacks"; }
echo "hostile sockets: 3 refused, 1 shown with what it lacks as '-'"
kill "$scn_pid" 2>/dev/null; wait "$scn_pid" 2>/dev/null; scn_pid=""
# a killed process leaves its sockets: softrnic_info reports and removes them
sleep 0.2
left=$(ls "$SOFTRNIC_INFO_DIR" 2>/dev/null | wc -l)
gone=$("$build/tools/softrnic_info" --conf "$build/dat.conf" | grep -c 'is gone, socket removed')
[[ $left == 2 && $gone == 2 && -z $(ls "$SOFTRNIC_INFO_DIR") ]] || fail "stale sockets: $left left, $gone removed, now: $(ls "$SOFTRNIC_INFO_DIR")"
echo "a killed process's 2 sockets: reported and removed"
echo "PASS: softrnic_info shows the live MSN gap (tables, JSON schema 2, --watch)"
