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
# TOOL  rc_pingpong: ibv_rc_pingpong -g IDX -s 4096 -n 200 -c (TCP 18515 address exchange, RC
#       Sends of 4 packets at MTU 1024) against BUILD_DIR/tools/softrnic_rc_pingpong. Linux's
#       client checks each page's first byte of what came back (-c); softrnic checks every
#       message (as server: each is the client's; as client: each echo is the iteration's pattern).
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
case $tool in
  rc_pingpong)
    n=200 size=4096
    srv="ibv_rc_pingpong -d rxe0 -g \$RXE_GID_IDX -s $size -n $n -c"
    cli="$srv ADDR"
    h_srv="$build/tools/softrnic_rc_pingpong --local $HOST_IP -s $size -n $n -c"
    h_cli="$h_srv ADDR"
    srv_ready_port=18515
    h_ready_line='waiting on TCP port'
    g_ok="^$n iters in [0-9.]+ seconds"
    g_bad='invalid data in page|Failed status|Couldn.t|failed'
    h_ok="^softrnic_rc_pingpong: $n iters of $size bytes, data verified"
    ;;
  rping)
    # rdma-core's rping over rdma_cm (IB CM MADs on QP1, rping's port 7174) against
    # BUILD_DIR/tools/softrnic_rping --roce; both validate (-V), the server's printed ping data
    # (-v) is compared with rping's pattern, the client must print every ping.
    rping_n=10 rping_size=100
    ropts_="-C $rping_n -S $rping_size -V -v"
    srv="rping -s -a ADDR $ropts_" cli="rping -c -a ADDR $ropts_"
    h_srv="$build/tools/softrnic_rping --roce -s -a ADDR $ropts_"
    h_cli="$build/tools/softrnic_rping --roce -c -a ADDR --local $HOST_IP $ropts_"
    srv_ready_port=7174
    h_ready_line='softrnic_rping: listening on'
    if [[ $role == softrnic_client ]]; then g_ok="^server ping data: rdma-ping-$((rping_n - 1)): "
    else g_ok="^ping data: rdma-ping-$((rping_n - 1)): "; fi
    g_bad='mismatch|error|failed'
    if [[ $role == softrnic_client ]]; then h_ok="softrnic_rping: $rping_n pings, data validated"
    else h_ok="softrnic_rping: served $rping_n pings, data validated"; fi
    ;;
  *) usage;;
esac
fill_in() { echo "${1//ADDR/$2}"; }
for t in "${h_srv%% *}"; do [[ -x $t ]] || fail "$t not built (ninja -C $build)"; done

# shellcheck source=referee.sh
. "$src/tests/interop/referee.sh"
referee_prepare

work=$(mktemp -d /tmp/softrnic-rxe.XXXXXX)
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
  if [[ $role == softrnic_client ]]; then
    cat <<EOF
timeout -k 5 $tool_timeout $g_cmd >/host/guest.log 2>&1 &
p=\$!
if rv_listening $srv_ready_port 120 >/dev/null; then rv_signal guest-ready; echo INTEROP-GUEST-READY
else rv_signal guest-failed; echo INTEROP-GUEST-FAILED; fi
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
    cat <<EOF
rc=1
if [ -e $share/sig/guest-ready ]; then
  timeout -k 5 $tool_timeout $h_cmd >host.log 2>&1; rc=\$?
fi
: >$share/sig/host-done
exit \$rc
EOF
  else
    cat <<EOF
timeout -k 5 $tool_timeout $h_cmd >host.log 2>&1 &
p=\$!
for i in \$(seq 300); do
  grep -q "$h_ready_line" host.log && break
  kill -0 \$p 2>/dev/null || break
  sleep 0.1
done
if kill -0 \$p 2>/dev/null; then : >$share/sig/host-ready; else : >$share/sig/host-failed; fi
n=0
while kill -0 \$p 2>/dev/null; do
  if [ -e $share/sig/guest-done ]; then n=\$((n+1)); [ \$n -lt 150 ] || kill \$p; fi
  sleep 0.1
done
wait \$p
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
timeout -k 10 $((tool_timeout + 150)) "$rdmavm/run.sh" "${ropts[@]}" >"$work/run.log" 2>&1 || rrc=$?
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
if [[ $tool == rping ]]; then
  # rping's pattern (librdmacm/examples/rping.c): "rdma-ping-N: ", then the characters 65..122
  # rolling from 65 + N % 58; the server's line for every ping must be exactly that, and the
  # client must print as many lines.
  if [[ $role == softrnic_client ]]; then srvlog=$share/guest.log clilog=$work/host.log; else srvlog=$work/host.log clilog=$share/guest.log; fi
  want=$(python3 - "$rping_n" "$rping_size" <<'PY'
import sys
n, size = int(sys.argv[1]), int(sys.argv[2])
for ping in range(n):
    s = "rdma-ping-%d: " % ping
    c = 65 + ping % 58
    while len(s) < size - 1:
        s += chr(c); c = 65 if c == 122 else c + 1
    print("server ping data: " + s)
PY
)
  got=$(grep '^server ping data: ' "$srvlog" 2>/dev/null || true)
  [[ $got == "$want" ]] || { ok=0; why+=("the server's ping data differ from rping's pattern"); }
  nc=$(grep -c '^ping data: rdma-ping-' "$clilog" 2>/dev/null || true)
  [[ $nc == "$rping_n" ]] || { ok=0; why+=("the client printed $nc ping lines, not $rping_n"); }
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
