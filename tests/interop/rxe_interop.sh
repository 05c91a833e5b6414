#!/usr/bin/env bash
# Interop against Linux rxe (RoCEv2): a softrnic tool on the host side of the rdmavm referee VM
# (../shared/tools/rdmavm: Debian 12's Linux 6.1 with rdma_rxe on eth1 = 10.99.1.2, its IPv4 GID
# at index $RXE_GID_IDX, path MTU 1024) and an unmodified rdma-core tool on rxe in the guest, one
# side each. Judged by both sides: the Linux tool's exit status and its own checks, and the
# softrnic tool's data verdict.
#
#   rxe_interop.sh BUILD_DIR ROLE TOOL [--rdmavm DIR] [--keep DIR]
#
# ROLE  softrnic_client: the guest serves, softrnic connects to 10.99.1.2
#       softrnic_server: softrnic serves on 10.99.1.1, the guest connects
# TOOL  rc_pingpong (rc_pingpong_impaired: with drop 2 % and reorder 8 on softrnic's sends):
#       ibv_rc_pingpong -g IDX -s 4096 -n 200 -c (TCP 18515 address exchange, RC
#       Sends of 4 packets at MTU 1024) against BUILD_DIR/tools/softrnic_rc_pingpong. Linux's
#       client checks each page's first byte of what came back (-c); softrnic checks every
#       message (as server: each is the client's; as client: each echo is the iteration's pattern).
#       perftest_send_lat, perftest_write_bw, perftest_read_bw: perftest 4.5-0.17 WITHOUT -R
#       (ib_send_lat -s 64 -n 20, ib_write_bw / ib_read_bw -s 65536 -n 10 (-o 4), -d rxe0
#       -x IDX -F: its TCP 18515 exchange of versions, sizes, MTU and "LID:OUT:QPN:PSN:RKEY:VADDR:
#       GID:SRQN" strings, then RC Sends / RDMA Writes / RDMA Reads at MTU 1024) against
#       BUILD_DIR/tools/softrnic_perftest --roce. Judged as tests/interop/dat_interop.sh judges the
#       -R cases on siw: perftest's exit status, exactly one result line, no perftest error line,
#       softrnic_perftest's data verdict, for bw the report both sides print equal (the client's,
#       sent over TCP); where perftest cannot show what it got (its write_bw buffer allows no
#       read-back, its read_bw client checks nothing) the capture does: every RDMA Write (softrnic
#       client) or Read Response (softrnic server) payload softrnic sent carries its pattern.
#       perftest_atomic_bw, perftest_atomic_bw_cas: ib_atomic_bw without -R (-n 300 -s 8 -o 4,
#       FETCH_AND_ADD of 1 / -A CMP_AND_SWAP; 8-byte atomics cycling through 64 slots of 64 bytes)
#       against softrnic_perftest atomic_bw --roce. softrnic verifies the values: as client, every
#       value returned after a slot's first is the one predicted from the previous operation on
#       that slot (+1; its CmpSwaps compare what the slot holds and swap in new values); as server,
#       each slot's final word (FetchAdd: its pattern plus its number of adds, n in all; CmpSwap:
#       perftest's compare 0 / swap 0 leave every word unchanged) and nothing else changed. The
#       capture (both roles): consecutive atomics on a slot seen on the wire agree (the later one's
#       Atomic Acknowledge shows what the earlier one left).
#       perftest_send_lat_cm, perftest_write_bw_cm, perftest_read_bw_cm: the same tools WITH -R
#       (rdma_cm, IB CM over QP1; no -x) against softrnic_perftest --roce -R, judged the same way.
#       verbs_rc_pingpong, verbs_write_bw, verbs_read_bw: the same Debian program on both sides,
#       on the host unmodified over softrnic's libibverbs.so.1 (build/bin/softrnic_run):
#       ibv_rc_pingpong -s 4096 -n 200 -c, ib_write_bw / ib_read_bw -s 65536 -n 10 without -R.
#       verbs_write_bw_cm: ib_write_bw -R on both sides (the host's over softrnic's librdmacm).
# --keep DIR  keep logs and the capture (DIR/cap-rxe.pcap); without it they are kept only on failure
# INTEROP_TOOL_TIMEOUT  bound of each tool in seconds (default 120)
# The capture must show RoCEv2 only with valid ICRCs (../shared/tools/wirecheck/check_icrc.py).
# Exit 0 pass, 1 fail, 77 "SKIPPED: reason" when the referee cannot run.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 2; }
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[[ $# -ge 3 ]] || usage
build=$(cd "$1" && pwd) role=$2 tool=$3
shift 3
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rdmavm=${RDMAVM_DIR:-$src/../shared/tools/rdmavm}
keep=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --rdmavm) rdmavm=$2; shift 2;;
    --keep) keep=$2; shift 2;;
    *) usage;;
  esac
done
case $role in softrnic_client|softrnic_server) ;; *) usage;; esac

HOST_IP=10.99.1.1 GUEST_IP=10.99.1.2
tool_timeout=${INTEROP_TOOL_TIMEOUT:-120}
# softrnic_rc_pingpong's local ACK timeout: 537 ms (17), not ibv_rc_pingpong's 67 ms. The TCG
# referee stalls for up to ~0.65 s now and then: eight tries of 67 ms did not bridge a 0.55 s stall
# once (all of rxe's ACKs came in one burst just after softrnic's QP broke on the retry limit).
rcpp_timeout=17
case $tool in
  rc_pingpong)
    n=200 size=4096
    srv="ibv_rc_pingpong -d rxe0 -g \$RXE_GID_IDX -s $size -n $n -c"
    cli="$srv ADDR"
    h_srv="$build/tools/softrnic_rc_pingpong --local $HOST_IP -s $size -n $n -c -t $rcpp_timeout"
    # The client idles 3 s, connected, before its first Send, probing every 300 ms of silence:
    # rxe must answer the keepalive probes (our last request again, a duplicate it acknowledges
    # again), or the QP breaks after 5 unanswered (1.8 s) and the ping-pong fails.
    h_cli="$h_srv --keepalive 300 --idle 3000 ADDR"
    srv_ready_port=18515
    h_ready_line='waiting on TCP port'
    g_ok="^$n iters in [0-9.]+ seconds"
    g_bad='invalid data in page|Failed status|Couldn.t|failed'
    h_ok="^softrnic_rc_pingpong: $n iters of $size bytes, data verified"
    [[ $role == softrnic_client ]] && h_ok+=".*keepalive probes ([4-9]|[1-9][0-9]+)\\)"
    ;;
  rc_pingpong_impaired)
    # the same under an impairment plan on softrnic's side (drop 2 %, reorder within 8): rxe's
    # responder NAKs each gap, softrnic goes back N; the data must still check out on both sides
    # and softrnic must have retransmitted
    n=200 size=4096
    srv="ibv_rc_pingpong -d rxe0 -g \$RXE_GID_IDX -s $size -n $n -c"
    cli="$srv ADDR"
    h_srv="$build/tools/softrnic_rc_pingpong --local $HOST_IP -s $size -n $n -c -t $rcpp_timeout --impair drop=0.02,reorder=8,seed=7"
    h_cli="$h_srv ADDR"
    srv_ready_port=18515
    h_ready_line='waiting on TCP port'
    g_ok="^$n iters in [0-9.]+ seconds"
    g_bad='invalid data in page|Failed status|Couldn.t|failed'
    h_ok="^softrnic_rc_pingpong: $n iters of $size bytes, data verified .*retransmits [1-9]"
    ;;
  rping)
    # rdma-core's rping over rdma_cm (IB CM MADs on QP1, rping's port 7174) on both sides: on the
    # host unmodified over softrnic's librdmacm and libibverbs (softrnic_run, device on 10.99.1.1).
    # Both validate (-V) and print every ping (-v): each side's last ping must be there.
    rping_n=10 rping_size=100
    ropts_="-C $rping_n -S $rping_size -V -v"
    run_="$build/bin/softrnic_run --verbs 'wire=roce ip=$HOST_IP' --"
    srv="rping -s -a ADDR $ropts_" cli="rping -c -a ADDR $ropts_"
    h_srv="$run_ rping -s -a ADDR $ropts_" h_cli="$run_ rping -c -a ADDR $ropts_"
    srv_ready_port=7174
    h_ready_line="" h_ready_wait=2  # (rping says nothing before a client comes; rdma_cm listens on no socket)
    ping_srv="^server ping data: rdma-ping-$((rping_n - 1)): " ping_cli="^ping data: rdma-ping-$((rping_n - 1)): "
    if [[ $role == softrnic_client ]]; then g_ok=$ping_srv h_ok=$ping_cli; else g_ok=$ping_cli h_ok=$ping_srv; fi
    g_bad='mismatch|error|failed'
    ;;
  perftest_send_lat|perftest_write_bw|perftest_read_bw|perftest_atomic_bw|perftest_atomic_bw_cas|\
  perftest_send_lat_cm|perftest_write_bw_cm|perftest_read_bw_cm|perftest_atomic_bw_cm)
    # -F: the TCG guest's clock fails perftest's CPU frequency check otherwise. -x: the IPv4 GID
    # (perftest's own pick on RoCE would find it too; the index makes it explicit). _cm: -R, the
    # exchange over an rdma_cm control connection and the data connection through rdma_cm (no
    # -x: rdma_cm resolves the address itself).
    pt_tool=${tool#perftest_} pt_extra="" pt_cm=""
    [[ $pt_tool == *_cm ]] && { pt_tool=${pt_tool%_cm} pt_cm=1; }
    case $pt_tool in
      send_lat) n=20 size=64 ;;
      write_bw) n=10 size=65536 ;;
      read_bw) n=10 size=65536 pt_extra=" -o 4" ;;
      atomic_bw) n=300 size=8 pt_extra=" -o 4" pt_atype=FETCH_AND_ADD ;;
      atomic_bw_cas) pt_tool=atomic_bw n=300 size=8 pt_extra=" -o 4 -A CMP_AND_SWAP" pt_atype=CMP_AND_SWAP ;;
    esac
    if [[ -n $pt_cm ]]; then
      srv="ib_$pt_tool -R -d rxe0 -p 18515 -n $n -s $size$pt_extra -F"
      hopts_="--roce -R -p 18515 -n $n -S $size$pt_extra"
    else
      srv="ib_$pt_tool -d rxe0 -x \$RXE_GID_IDX -p 18515 -n $n -s $size$pt_extra -F"
      hopts_="--roce -p 18515 -n $n -S $size$pt_extra"
    fi
    cli="$srv ADDR"
    h_srv="$build/tools/softrnic_perftest $pt_tool -s -a $HOST_IP $hopts_"
    h_cli="$build/tools/softrnic_perftest $pt_tool -c ADDR --local $HOST_IP $hopts_ --connect-retry 30"
    srv_ready_port=18515   # perftest prints its banner before it listens (TCP, or with -R rdma_cm's)
    h_ready_line='server listening on'
    # perftest's result line (REPORT_FMT_LAT / REPORT_FMT; inf/nan when its clock is off)
    num_='[-+0-9.a-z]+'
    if [[ $pt_tool == send_lat ]]; then
      g_ok="^ $size +$n +$num_([[:space:]]+$num_){6}"
    else
      g_ok="^ $size +$n +$num_([[:space:]]+$num_){2}[[:space:]]*$"
    fi
    g_bad='Completion with error|Failed status|Failed to|Bad wc status|Couldn.t|Unable to|not compatible|Can.t produce|failed|Incompatibility'
    pt_h() { echo "^softrnic_perftest: $pt_tool $1: $n x $size B, "; }
    case $pt_tool in
      send_lat)
        pt_v="data verified \\($n messages of exactly $size B, identical payloads\\)$"
        h_ok_srv="$(pt_h server)$pt_v" h_ok_cli="$(pt_h client)$pt_v" ;;
      write_bw)
        h_ok_srv="$(pt_h server)data verified \\($size bytes written in 1 range\\(s\\), the fill replaced, the rest and the guards intact\\)$"
        h_ok_cli="$(pt_h client)completions verified \\($n Writes of $size B completed" ;;
      read_bw)
        # perftest's buffer on RoCE is REMOTE_READ only (no priming Write) and holds rand()
        # bytes: each Read must bring S bytes, replace the fill and equal the other Reads of the
        # same offset (all at offset 0 with -s 65536)
        h_ok_srv="$(pt_h server)data served \\([0-9]+ B of softrnic's pattern, unchanged; [0-9]+ frames"
        h_ok_cli="$(pt_h client)data verified \\($n Reads of $size B, the fill replaced, identical data per source offset\\)$" ;;
      atomic_bw)
        # 300 atomics on 64 slots (cycle buffer 4096 / cache line 64); perftest's buffer holds
        # rand() bytes, so the first value of each slot is unchecked at the softrnic client
        if [[ $pt_atype == FETCH_AND_ADD ]]; then
          h_ok_srv="$(pt_h server)data verified \\(64 slots each grew by its FetchAdds, $n in all = the $n adds of 1; the rest and the guards intact; [0-9]+ frames sent\\)$"
          h_ok_cli="$(pt_h client)data verified \\($n FetchAdds of 1 on 64 slots: each after a slot's first found the value before it plus 1; the first ones the peer's, unchecked\\)$"
        else
          h_ok_srv="$(pt_h server)data verified \\(64 slots after $n CmpSwaps: 0 changed, none may \\(compare 0, swap 0\\); the rest and the guards intact; [0-9]+ frames sent\\)$"
          h_ok_cli="$(pt_h client)data verified \\($n CmpSwaps on 64 slots, [0-9]+ swapped: each after a slot's first found the value swapped in before it; the first ones the peer's, unchecked\\)$"
        fi ;;
    esac
    ;;
  verbs_rc_pingpong|verbs_write_bw|verbs_read_bw|verbs_write_bw_cm)
    # The same Debian programs on both sides: on the host over softrnic's libibverbs.so.1
    # (softrnic_run, device softrnic_roce0 on 10.99.1.1, GID index 1), unmodified. Each judges
    # by itself (rc_pingpong -c checks the data on both ends); for bw both print the client's
    # report, which must agree.
    run_="$build/bin/softrnic_run --verbs 'wire=roce ip=$HOST_IP' --"
    case $tool in
      verbs_rc_pingpong)
        n=200 size=4096
        srv="ibv_rc_pingpong -d rxe0 -g \$RXE_GID_IDX -s $size -n $n -c"
        h_srv="$run_ ibv_rc_pingpong -d softrnic_roce0 -g 1 -s $size -n $n -c"
        g_ok="^$n iters in [0-9.]+ seconds" h_ok=$g_ok
        g_bad='invalid data in page|Failed status|Couldn.t|failed'
        ;;
      verbs_write_bw_cm)
        # -R: the data QP through rdma_cm (IB CM over QP1) on both sides: softrnic's librdmacm
        n=10 size=65536
        srv="ib_write_bw -d rxe0 -R -p 18515 -n $n -s $size -F"
        h_srv="$run_ ib_write_bw -d softrnic_roce0 -R -p 18515 -n $n -s $size -F"
        g_ok="^ $size +$n +[-+0-9.a-z]+([[:space:]]+[-+0-9.a-z]+){2}[[:space:]]*$" h_ok=$g_ok
        g_bad='Completion with error|Failed status|Failed to [^d]|Bad wc status|Couldn.t|Unable to|not compatible'
        h_ready_wait=2  # (rdma_cm listens on no socket the host could watch)
        # As the client, perftest 4.5 sends the data connection's REQ right after the control
        # handshake, before the slow guest listens for it again: the data gate (referee.sh).
        data_gate="ip daddr $GUEST_IP udp dport 4791 @th,352,16 0x0010"  # (the MAD attribute REQ)
        ;;
      *)
        n=10 size=65536 pt_tool=${tool#verbs_}
        srv="ib_$pt_tool -d rxe0 -x \$RXE_GID_IDX -p 18515 -n $n -s $size -F"
        h_srv="$run_ ib_$pt_tool -d softrnic_roce0 -x 1 -p 18515 -n $n -s $size -F"
        g_ok="^ $size +$n +[-+0-9.a-z]+([[:space:]]+[-+0-9.a-z]+){2}[[:space:]]*$" h_ok=$g_ok
        g_bad='Completion with error|Failed status|Failed to|Bad wc status|Couldn.t|Unable to|not compatible|failed'
        ;;
    esac
    cli="$srv ADDR" h_cli="$h_srv ADDR"
    srv_ready_port=18515
    h_ready_line=''  # (these print nothing before a client comes: the listening port says it)
    ;;
  *) usage;;
esac
: "${h_ok_srv:=$h_ok}" "${h_ok_cli:=$h_ok}"
if [[ $role == softrnic_client ]]; then h_ok=$h_ok_cli; else h_ok=$h_ok_srv; fi
fill_in() { echo "${1//ADDR/$2}"; }
for t in "${h_srv%% *}"; do [[ -x $t ]] || fail "$t not built (ninja -C $build)"; done
# How the host's server shows it is ready: its line, or (the verbs programs) its listening port.
h_ready="grep -q \"$h_ready_line\" host.log"
[[ -z $h_ready_line ]] && h_ready="ss -Hltn 'sport = :$srv_ready_port' | grep -q ."
[[ -n ${h_ready_wait:-} ]] && h_ready="sleep $h_ready_wait"
[[ $h_srv == *softrnic_run* && ! -x $build/bin/softrnic_run ]] && fail "$build/bin/softrnic_run not built"
if [[ $h_srv == *softrnic_run* ]]; then
  prog_=$(awk '{print $1}' <<<"${h_srv#*-- }")
  command -v "$prog_" >/dev/null || skip "$prog_ is not installed (Debian packages ibverbs-utils, perftest)"
fi

# shellcheck source=referee.sh
. "$src/tests/interop/referee.sh"
[[ $role == softrnic_client ]] || data_gate=""
referee_prepare ${data_gate:+nftables}

work=$(referee_workdir softrnic-rxe)
[[ -n $keep ]] && { mkdir -p "$keep"; work=$(cd "$keep" && pwd); }
share=$work/share
rm -rf "$share"; mkdir -p "$share/sig"
passed=0
finish() {
  if [[ -z $keep ]]; then
    if [[ $passed == 1 ]]; then rm -rf "$work"; else echo "interop: logs and capture kept in $work"; fi
  fi
}
trap finish EXIT

if [[ $role == softrnic_client ]]; then
  g_cmd=$(fill_in "$srv" "$GUEST_IP") h_cmd=$(fill_in "$h_cli" "$GUEST_IP")
else
  g_cmd=$(fill_in "$cli" "$HOST_IP") h_cmd=$(fill_in "$h_srv" "$HOST_IP")
fi

# the guest's job (busybox sh); its tool log goes to the 9p share (/host)
{
  echo '. /usr/lib/rdmavm/lib.sh'
  echo 'cd /tmp'
  [[ -z ${data_gate:-} ]] || guest_data_gate_fn
  if [[ $role == softrnic_client ]]; then
    cat <<EOF
timeout -k 5 $tool_timeout $g_cmd >/host/guest.log 2>&1 &
p=\$!
if rv_listening $srv_ready_port 120 >/dev/null; then rv_signal guest-ready; echo INTEROP-GUEST-READY
else rv_signal guest-failed; echo INTEROP-GUEST-FAILED; fi
${data_gate:+guest_data_gate $srv_ready_port &}
n=0
while kill -0 \$p 2>/dev/null; do
  [ -e /host/sig/host-done ] && { n=\$((n+1)); [ \$n -lt 150 ] || kill \$p; }
  sleep 0.1
done
wait \$p; rc=\$?
EOF
  else
    cat <<EOF
n=0
until [ -e /host/sig/host-ready ] || [ -e /host/sig/host-failed ]; do
  sleep 0.1; n=\$((n+1)); [ \$n -lt 1200 ] || break
done
rc=1
if [ -e /host/sig/host-ready ]; then
  timeout -k 5 $tool_timeout $g_cmd >/host/guest.log 2>&1; rc=\$?
fi
rv_signal guest-done
EOF
  fi
  cat <<'EOF'
echo "INTEROP-GUEST-TOOL-EXIT $rc"
echo "--- guest rxe0 counters"
rv_counters rxe0 2>/dev/null | tr '\n' ' ' | head -c 1500; echo
exit $rc
EOF
} >"$work/guest.sh"

# the host's side, run by run.sh inside the namespace (where 10.99.1.1 is)
{
  echo "cd $work"
  if [[ $role == softrnic_client ]]; then
    [[ -z ${data_gate:-} ]] || host_data_gate "$data_gate"
    cat <<EOF
rc=1
if [ -e $share/sig/guest-ready ]; then
  timeout -k 5 $tool_timeout $h_cmd >host.log 2>&1; rc=\$?
fi
: >$share/sig/host-done
echo "INTEROP-HOST-TOOL-EXIT \$rc"
exit \$rc
EOF
  else
    cat <<EOF
timeout -k 5 $tool_timeout $h_cmd >host.log 2>&1 &
p=\$!
for i in \$(seq 300); do
  $h_ready && break
  kill -0 \$p 2>/dev/null || break
  sleep 0.1
done
if kill -0 \$p 2>/dev/null; then : >$share/sig/host-ready; else : >$share/sig/host-failed; fi
n=0
while kill -0 \$p 2>/dev/null; do
  if [ -e $share/sig/guest-done ]; then n=\$((n+1)); [ \$n -lt 150 ] || kill \$p; fi
  sleep 0.1
done
wait \$p; rc=\$?
echo "INTEROP-HOST-TOOL-EXIT \$rc"
exit \$rc
EOF
  fi
} >"$work/host.sh"

ropts=(--timeout $((tool_timeout + 90)) --share "$share" --job "$work/guest.sh" --host "bash $work/host.sh")
[[ $role == softrnic_client ]] && ropts+=(--wait-for '^INTEROP-GUEST-(READY|FAILED)')
command -v tcpdump >/dev/null && ropts+=(--pcap "$work/cap")
echo "interop: $tool, softrnic ${role#softrnic_} (RoCEv2 on $HOST_IP) vs rxe"
echo "interop:   guest: $g_cmd"
echo "interop:   host:  $h_cmd"
t0=$SECONDS
rrc=0
referee_run "${ropts[@]}" >"$work/run.log" 2>&1 || rrc=$?
dt=$((SECONDS - t0))
if [[ $rrc == 77 ]]; then passed=1; skip "the referee did not run ($(grep -o 'SKIP: .*' "$work/run.log" | head -1))"; fi

show() { echo "--- $2"; if [[ -s $1 ]]; then tail -n 25 "$1"; else echo "(no output)"; fi; }
grep -v 'speed is unknown' "$work/run.log" | grep -E '^rdmavm|INTEROP|^---|^guest' || true
show "$share/guest.log" "guest (rxe): $g_cmd"
show "$work/host.log" "host (softrnic): $h_cmd"

ok=1 why=()
grep -q '^INTEROP-GUEST-TOOL-EXIT 0$' "$work/run.log" \
  || { ok=0; why+=("the Linux tool's exit status: $(grep -o 'INTEROP-GUEST-TOOL-EXIT.*' "$work/run.log" | head -1)"); }
g_line=$(grep -Em1 "$g_ok" "$share/guest.log" 2>/dev/null) || { ok=0; why+=("guest lacks /$g_ok/"); }
if grep -Eq "$g_bad" "$share/guest.log" 2>/dev/null; then ok=0; why+=("guest: $(grep -Em1 "$g_bad" "$share/guest.log")"); fi
h_line=$(grep -Em1 "$h_ok" "$work/host.log" 2>/dev/null) || { ok=0; why+=("host lacks /$h_ok/"); }
# (the host tool's exit status says what its log may not: a signal is 128 + its number)
[[ $ok == 1 ]] || why+=("host tool: $(grep -o 'INTEROP-HOST-TOOL-EXIT.*' "$work/run.log" | head -1)")
if [[ $tool == perftest_* ]]; then
  pt_results=$(tr '\t' ' ' <"$share/guest.log" | grep -Ec "$g_ok" || true)
  [[ $pt_results == 1 ]] || { ok=0; why+=("perftest printed $pt_results result lines, not 1"); }
  if [[ $pt_tool != send_lat ]]; then
    # both sides print the client's report (the server got it over the TCP or control connection)
    pt_g=$(tr '\t' ' ' <"$share/guest.log" | grep -Em1 "$g_ok" | tr -s ' ' || true)
    pt_hl=$(tr '\t' ' ' <"$work/host.log" | grep -Em1 "$g_ok" | tr -s ' ' || true)
    [[ -n $pt_g && $pt_g == "$pt_hl" ]] || { ok=0; why+=("the bw reports differ: perftest '$pt_g', softrnic '$pt_hl'"); }
  fi
  # What perftest cannot check, the capture can: every RDMA Write payload (softrnic client,
  # opcodes 6-8, 10) or Read Response payload (softrnic server, opcodes 13-16) softrnic sent must
  # be softrnic_perftest's pattern at its offset (byte i: (7 i + 13 (i >> 8) + 0x3c) & 0xff), the
  # offset being the packet's virtual address (the RETH of its Write, or of the Read Request its
  # PSN answers, plus one path MTU per PSN after the first) less the start of the buffer the
  # exchange advertised (softrnic's log: the peer's VAddr for Writes, its own for Reads). The
  # capture is lossy when the host is busy (tcpdump drops packets of a burst): packets whose
  # Write First / Read Request was not captured are left out. A mismatch, or nothing checked, fails.
  pt_dir="" pt_base=""
  if [[ $pt_tool == write_bw && $role == softrnic_client ]]; then
    pt_dir=write pt_base=$(grep -m1 '^ remote address:' "$work/host.log" | grep -o 'VAddr 0x[0-9a-f]*' | cut -d' ' -f2)
  elif [[ $pt_tool == read_bw && $role == softrnic_server ]]; then
    pt_dir=read pt_base=$(grep -m1 '^ local address:' "$work/host.log" | grep -o 'VAddr 0x[0-9a-f]*' | cut -d' ' -f2)
  fi
  if [[ -n $pt_dir && -z $pt_base ]]; then
    ok=0; why+=("softrnic_perftest's log shows no advertised VAddr")
  elif [[ -n $pt_dir && -s $work/cap-rxe.pcap ]] && command -v tshark >/dev/null; then
    pt_wire=$(tshark -r "$work/cap-rxe.pcap" -Y 'udp.dstport == 4791' -T fields -e ip.src -e infiniband.bth.opcode \
                -e infiniband.bth.psn -e infiniband.reth.va -e infiniband.reth.dmalen -e infiniband.bth.padcnt \
                -e data.data 2>/dev/null \
              | python3 -c '
import sys
mode, host, base, mtu = sys.argv[1], sys.argv[2], int(sys.argv[3], 16), 1024
M = 0xFFFFFF
ops = []   # (first PSN, virtual address, packets) of each Write / Read Request
pkts = []  # (PSN, payload) of what softrnic sent
for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if len(f) < 7 or not f[1]:
        continue
    src, op, psn = f[0], int(f[1]), int(f[2])
    va = int(f[3], 16) if f[3] else 0
    ln = int(f[4]) if f[4] else 0
    pad = int(f[5]) if f[5] else 0
    data = bytes.fromhex(f[6].replace(":", "")) if f[6] else b""
    if pad and len(data) >= pad:
        data = data[:-pad]
    if mode == "write" and src == host and op in (6, 7, 8, 10):
        if op in (6, 10):
            ops.append((psn, va, max(1, -(-ln // mtu))))
        pkts.append((psn, data))
    elif mode == "read" and src != host and op == 12:
        ops.append((psn, va, max(1, -(-ln // mtu))))
    elif mode == "read" and src == host and op in (13, 14, 15, 16):
        pkts.append((psn, data))
total = checked = 0
for psn, data in pkts:
    own = [va + ((psn - s) & M) * mtu for s, va, n in ops if ((psn - s) & M) < n]
    if not own:
        continue  # its Write First / Read Request is not in the capture
    off = own[-1] - base
    if off < 0:
        print("FAIL the packet of PSN %d is %d bytes before the buffer" % (psn, -off)); sys.exit()
    for j, b in enumerate(data):
        i = off + j
        if b != (i * 7 + (i >> 8) * 13 + 0x3c) & 0xff:
            print("FAIL byte %d of the packet of PSN %d (offset %d) is 0x%02x" % (j, psn, off, b)); sys.exit()
    total += len(data)
    checked += 1
if not checked:
    print("FAIL nothing checked (%d operations, %d packets captured)" % (len(ops), len(pkts))); sys.exit()
print("OK %d of %d captured packets, %d bytes" % (checked, len(pkts), total))
' "$pt_dir" "$HOST_IP" "$pt_base")
    pt_what="RDMA Write"; [[ $pt_dir == read ]] && pt_what="Read Response"
    if [[ $pt_wire == OK* ]]; then
      echo "wire: softrnic's ${pt_what}s carry its pattern: ${pt_wire#OK } (of $((n * size)) sent)"
    else
      ok=0; why+=("${pt_what}s on the wire: ${pt_wire#FAIL }")
    fi
  fi
  # Atomics on the wire (both roles): each CmpSwap / FetchAdd request (opcodes 19, 20: AtomicETH
  # VA, R_Key, swap or add, compare) paired by PSN with the Atomic Acknowledge (18: the original
  # value) the other side sent. Two captured atomics on the same address whose PSNs are one
  # round of slots apart are consecutive operations on that word: the later one must have found
  # what the earlier one left (FetchAdd: its original plus its add; CmpSwap: its swap value when
  # its compare matched, else its original). Retransmissions count once; a lossy capture leaves
  # pairs out; nothing checked fails. softrnic server: the k-th atomic (PSN = the client's first
  # PSN + k, the data QP carries nothing else) must also target the word (k mod slots) * cache
  # line of the buffer softrnic advertised, and have found exactly the value softrnic's pattern
  # and perftest's k div slots earlier operations on that word make (FetchAdd: the pattern's
  # u64 plus that many adds; CmpSwap: perftest's compare 0 never matches a pattern word, so it).
  if [[ $pt_tool == atomic_bw && -s $work/cap-rxe.pcap ]] && command -v tshark >/dev/null; then
    pt_slots=$(grep -om1 'cycle buffer [0-9]*, cache line [0-9]*' "$work/host.log" | awk '{c=$3+0; l=$6+0; if (l < 8) l = 8; print int(c / l)}')
    pt_exact=""
    # (-R: rdma_cm picks the data QP's PSNs, not the PSN perftest prints; the pairs are checked)
    if [[ $role == softrnic_server && -z $pt_cm ]]; then
      pt_exact="$(grep -m1 '^ local address:' "$work/host.log" | grep -o 'VAddr 0x[0-9a-f]*' | cut -d' ' -f2) $(grep -m1 '^ remote address:' "$work/host.log" | grep -o 'PSN 0x[0-9a-f]*' | cut -d' ' -f2) $(($(grep -om1 'cache line [0-9]*' "$work/host.log" | grep -o '[0-9]*$')))"
    fi
    pt_wire=$(tshark -r "$work/cap-rxe.pcap" -Y 'udp.dstport == 4791' -T fields -e ip.src -e infiniband.bth.opcode \
                -e infiniband.bth.psn -e infiniband.atomiceth -e infiniband.atomicacketh 2>/dev/null \
              | python3 -c '
import sys
slots, M, W = int(sys.argv[1]), 0xFFFFFF, (1 << 64) - 1
exact = len(sys.argv) > 4  # softrnic server: its buffer, the client first PSN, the cache line
if exact:
    buf, psn0, cline = int(sys.argv[2], 16), int(sys.argv[3], 16), int(sys.argv[4])
reqs, acks = {}, {}  # PSN -> (source, op, va, swap/add, compare); PSN -> (source, original)
for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if len(f) < 5 or not f[1]:
        continue
    src, op, psn = f[0], int(f[1]), int(f[2])
    if op in (19, 20) and f[3]:
        b = bytes.fromhex(f[3].replace(":", ""))
        reqs.setdefault(psn, (src, op, int.from_bytes(b[0:8], "big"), int.from_bytes(b[12:20], "big"),
                              int.from_bytes(b[20:28], "big")))
    elif op == 18 and f[4]:
        acks.setdefault(psn, (src, int.from_bytes(bytes.fromhex(f[4].replace(":", "")), "big")))
pairs = {}
for psn, (src, op, va, sa, cmp) in reqs.items():
    if psn in acks and acks[psn][0] != src:
        pairs.setdefault(va, []).append((psn, op, sa, cmp, acks[psn][1]))
if not reqs:
    print("FAIL no atomic request captured"); sys.exit()
base = min(reqs)  # (PSNs relative to the first captured request)
checked = exactly = 0
if exact:
    for va, ops in pairs.items():
        for psn, op, sa, cmp, orig in ops:
            k, off = (psn - psn0) & M, va - buf
            if off != (k % slots) * cline:
                print("FAIL atomic %d (PSN %d) targets offset %d, not %d" % (k, psn, off, (k % slots) * cline)); sys.exit()
            init = int.from_bytes(bytes((i * 7 + (i >> 8) * 13 + 0x3c) & 0xFF for i in range(off, off + 8)), "little")
            if op == 19 and cmp == init:
                continue  # (a compare that matches the pattern: not what perftest sends)
            want = (init + (k // slots) * sa) & W if op == 20 else init
            if orig != want:
                print("FAIL atomic %d (PSN %d) at offset %d found 0x%016x, expected 0x%016x" % (k, psn, off, orig, want))
                sys.exit()
            exactly += 1
for va, ops in pairs.items():
    ops.sort(key=lambda o: (o[0] - base) & M)
    for a, b in zip(ops, ops[1:]):
        if ((b[0] - a[0]) & M) != slots:
            continue  # an operation between them was not captured
        _, op, sa, cmp, orig = a
        left = (orig + sa) & W if op == 20 else (sa if orig == cmp else orig)
        if b[4] != left:
            print("FAIL the atomic of PSN %d at 0x%x found 0x%016x, the one before it (PSN %d) left 0x%016x"
                  % (b[0], va, b[4], a[0], left)); sys.exit()
        checked += 1
if not checked:
    print("FAIL nothing checked (%d requests, %d acknowledges, %d pairs captured)"
          % (len(reqs), len(acks), sum(len(o) for o in pairs.values()))); sys.exit()
if exact and not exactly:
    print("FAIL no captured atomic checked against the pattern of softrnic"); sys.exit()
print("OK %d successive pairs on %d words agree%s (%d requests, %d Atomic Acknowledges captured)"
      % (checked, len(pairs), ", %d originals exactly as predicted from the pattern of softrnic" % exactly if exact else "",
         len(reqs), len(acks)))
' "${pt_slots:-64}" $pt_exact)
    if [[ $pt_wire == OK* ]]; then
      echo "wire: atomics: ${pt_wire#OK } (of $n sent)"
    else
      ok=0; why+=("atomics on the wire: ${pt_wire#FAIL }")
    fi
  fi
fi
if [[ $tool == verbs_*_bw ]]; then
  # both sides print the client's report (the server got it over the TCP exchange)
  vb_g=$(tr '\t' ' ' <"$share/guest.log" | grep -Em1 "$g_ok" | tr -s ' ' || true)
  vb_h=$(tr '\t' ' ' <"$work/host.log" | grep -Em1 "$g_ok" | tr -s ' ' || true)
  [[ -n $vb_g && $vb_g == "$vb_h" ]] || { ok=0; why+=("the bw reports differ: rxe '$vb_g', softrnic '$vb_h'"); }
  if grep -Eq "$g_bad" "$work/host.log"; then ok=0; why+=("host: $(grep -Em1 "$g_bad" "$work/host.log")"); fi
fi
if [[ $tool == verbs_rc_pingpong ]] && grep -Eq "$g_bad" "$work/host.log"; then
  ok=0; why+=("host: $(grep -Em1 "$g_bad" "$work/host.log")")
fi
if [[ $tool == rping ]]; then
  rping_check "$role" "$share" "$work" "$rping_n" "$rping_size"
fi
# every RoCEv2 packet on the link (ours and rxe's) must carry a valid ICRC
cap=$work/cap-rxe.pcap
checker=$src/../shared/tools/wirecheck/check_icrc.py
if [[ -s $cap && -f $checker ]]; then
  if icrc=$(python3 "$checker" "$cap" 2>&1); then
    echo "wire: $(tail -1 <<<"$icrc")"
  else
    ok=0; why+=("ICRC check of the capture: $(tail -3 <<<"$icrc" | tr '\n' ' ')")
  fi
fi
if [[ $ok == 1 ]]; then
  passed=1
  echo "guest: $g_line"
  echo "host:  $h_line"
  echo "PASS: $tool softrnic ${role#softrnic_} <-> rxe in ${dt} s"
  exit 0
fi
fail "$tool softrnic ${role#softrnic_} <-> rxe after ${dt} s: ${why[*]}"
