#!/usr/bin/env bash
# Debian's own verbs programs (ibverbs-utils, rdmacm-utils, perftest), unmodified, over softrnic's
# libibverbs.so.1 and librdmacm.so.1:
#   verbs_test.sh BUILD_DIR CASE
# Every program runs as an unprivileged user (nobody, when run as root) on a host without
# /dev/infiniband, through the launcher (softrnic_run: LD_LIBRARY_PATH). A pair runs the server, then the client
# against it over the programs' own TCP exchange (a port per case, so cases may run side by side);
# it passes when both exit 0 and their output says what the case asserts.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

build=$(cd "$1" && pwd)
case_name=$2
run=$build/bin/softrnic_run
[ -x "$run" ] || { echo "FAIL: $run is not built"; exit 1; }

work=$(mktemp -d /tmp/softrnic-verbs.XXXXXX)
chmod 0777 "$work"
trap 'rm -rf "$work"' EXIT

# as_user CMD...: CMD through softrnic_run, as nobody (when we are root) or as ourselves; in the
# network namespace in_ns names, when a case made one.
in_ns=()
as_user() {
  local env=(env SOFTRNIC_INFO_DIR="$work/info")
  [ -n "${SOFTRNIC_VERBS:-}" ] && env+=(SOFTRNIC_VERBS="$SOFTRNIC_VERBS")
  [ -n "${SOFTRNIC_IMPAIR:-}" ] && env+=(SOFTRNIC_IMPAIR="$SOFTRNIC_IMPAIR")
  [ -n "${UCX_TLS:-}" ] && env+=(UCX_TLS="$UCX_TLS")
  [ -n "${UCX_SOCKADDR_TLS_PRIORITY:-}" ] && env+=(UCX_SOCKADDR_TLS_PRIORITY="$UCX_SOCKADDR_TLS_PRIORITY")
  if [ "$(id -u)" = 0 ]; then
    "${in_ns[@]}" runuser -u nobody -- "${env[@]}" "$run" --log "${SOFTRNIC_LOG:-info}" -- "$@"
  else
    "${env[@]}" "$run" --log "${SOFTRNIC_LOG:-info}" -- "$@"
  fi
}

need() {
  local b
  for b in "$@"; do command -v "$b" >/dev/null || skip "$b is not installed (Debian packages ibverbs-utils, perftest)"; done
}

# The port of this case's TCP exchange: one per case name, in 20000..29999.
port=$((20000 + $(echo -n "$case_name" | cksum | cut -d' ' -f1) % 10000))

# pair NAME SECONDS PROGRAM ARGS...: server and client of one program; their outputs in
# $work/NAME.server and $work/NAME.client.
pair() {
  local name=$1 secs=$2
  shift 2
  local srv=$work/$name.server cli=$work/$name.client
  as_user timeout "$secs" "$@" -p "$port" >"$srv" 2>&1 &
  local spid=$!
  local i
  for i in $(seq 1 50); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  as_user timeout "$secs" "$@" -p "$port" 127.0.0.1 >"$cli" 2>&1
  local crc=$?
  wait "$spid"
  judge "$name" $? "$crc" "error|failed|couldn't|unable"
  echo "ok: $name ($*)"
}

# judge NAME SERVER_EXIT CLIENT_EXIT ERRORS: both ends exited 0, and neither output has a line
# matching ERRORS (extended regex, any case): an error line fails the case even when the
# program exits 0.
judge() {
  [ "$3" = 0 ] && [ "$2" = 0 ] || fail_with "$work" "$1: server exit $2, client exit $3" "$1.server" "$1.client"
  if grep -qiE "$4" "$work/$1.server" "$work/$1.client"; then
    fail_with "$work" "$1: an error line" "$1.server" "$1.client"
  fi
}

# expect NAME FILE PATTERN: the output says PATTERN (extended regex).
expect() {
  grep -qE "$3" "$work/$2" || fail_with "$work" "$1: no line matching '$3'" "$2"
}

case_devices() {
  need ibv_devices ibv_devinfo
  as_user ibv_devices >"$work/devices" 2>&1 || fail_with "$work" "ibv_devices failed" devices
  # (127.0.0.1, or the next free loopback address when another process holds it: cases run side by side)
  expect devices devices '^\s+softrnic_roce0\s+025346527f0000[0-9a-f]{2}$'
  as_user ibv_devinfo -v >"$work/roce" 2>&1 || fail_with "$work" "ibv_devinfo -v failed" roce
  for p in 'hca_id:\s+softrnic_roce0' 'transport:\s+InfiniBand' 'state:\s+PORT_ACTIVE' 'link_layer:\s+Ethernet' \
    'active_mtu:\s+4096' 'max_qp_wr:\s+16384' 'GID\[  0\]:\s+fe80::253:4652:7f00:[0-9a-f]+, RoCE v2' \
    'GID\[  1\]:\s+::ffff:127\.0\.0\.[0-9]+, RoCE v2'; do
    expect "ibv_devinfo (RoCEv2)" roce "$p"
  done
  SOFTRNIC_VERBS="wire=tcp ip=127.0.0.1|wire=roce ip=127.0.0.1" as_user ibv_devinfo -v >"$work/two" 2>&1 ||
    fail_with "$work" "ibv_devinfo -v (two devices) failed" two
  for p in 'hca_id:\s+softrnic_iwarp0' 'transport:\s+iWARP' 'hca_id:\s+softrnic_roce0' 'atomic_cap:\s+ATOMIC_NONE'; do
    expect "ibv_devinfo (iWARP and RoCEv2)" two "$p"
  done
  SOFTRNIC_VERBS="wire=bogus" as_user ibv_devices >"$work/bad" 2>&1 && fail_with "$work" "a bad SOFTRNIC_VERBS was taken" bad
  expect "a bad SOFTRNIC_VERBS" bad "SOFTRNIC_VERBS device 0 \(wire=bogus\): .*wire"
  echo "ok: ibv_devices, ibv_devinfo -v (RoCEv2; iWARP beside RoCEv2), a bad SOFTRNIC_VERBS refused"
}

# ibv_rc_pingpong validates each received buffer (-c) on both ends.
case_rc_pingpong() {
  need ibv_rc_pingpong
  pair plain 60 ibv_rc_pingpong -g 1 -c -n 1000
  pair events 60 ibv_rc_pingpong -g 1 -c -e -n 1000
  pair large 120 ibv_rc_pingpong -g 1 -c -s 65536 -n 1000
  for f in plain events large; do expect "$f" "$f.client" "1000 iters in"; done
}

# Drop and reorder on both ends: the transfer completes, checked, and retransmissions were needed.
case_rc_pingpong_impaired() {
  need ibv_rc_pingpong
  SOFTRNIC_IMPAIR="seed=7,drop=0.03,reorder=3" pair impaired 180 ibv_rc_pingpong -g 1 -c -n 200
  expect impaired impaired.client "200 iters in"
  local r
  r=$(grep -ohE "retransmits [0-9]+" "$work/impaired.server" "$work/impaired.client" | awk '{s += $2} END {print s + 0}')
  [ "$r" -gt 0 ] || fail_with "$work" "no retransmission under a 3 % drop" impaired.server impaired.client
  echo "ok: $r retransmissions"
}

# UD on RoCEv2: ibv_ud_pingpong (its datagrams behind the GRH, to the AH of the peer's GID).
case_ud_pingpong() {
  need ibv_ud_pingpong
  pair ud 60 ibv_ud_pingpong -g 1 -s 1024 -n 1000
  expect ud ud.client "1000 iters in"
}

case_srq_pingpong() {
  need ibv_srq_pingpong
  pair srq 60 ibv_srq_pingpong -g 1 -c -n 1000
  expect srq srq.client "1000 iters in"
}

# perftest 4.5 without -R: every size (-a, a small -n) for each test but the atomics (one size
# each), and four QPs (-q 4) for the bandwidth tests (perftest allows -q only there).
case_perftest() {
  local prog=$1
  need "$prog"
  case $prog in
    *atomic_lat) pair "$prog" 120 "$prog" -x 1 -n 100 ;;
    *_lat) pair "$prog" 300 "$prog" -x 1 -a -n 5 ;;
    *atomic_bw) pair "$prog" 120 "$prog" -x 1 -q 4 -n 200 ;;
    *)
      pair "$prog" 120 "$prog" -x 1 -q 4 -n 200
      pair "$prog-all" 300 "$prog" -x 1 -a -n 5
      # (every size from 2 B to 8 MiB: 23 rows; the small ones' figures may round to 0.00 MB/s)
      awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { n++; last = $4 } END { exit !(n == 23 && last + 0 > 0) }' \
        "$work/$prog-all.client" || fail_with "$work" "$prog -a: not every size, or no bandwidth" "$prog-all.client"
      ;;
  esac
  # The result rows: a size, then numbers; bandwidth above zero.
  expect "$prog" "$prog.client" '^\s*[0-9]+\s+[0-9]+\s+[0-9.]+'
  if [[ $prog == *_bw ]]; then
    awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { if ($4 + 0 <= 0) bad = 1; n++ } END { exit (n == 0 || bad) }' \
      "$work/$prog.client" || fail_with "$work" "$prog: no bandwidth above zero" "$prog.client"
  fi
}

# --- librdmacm (softrnic's librdmacm.so.1 beside its libibverbs.so.1) ---

# This case's two addresses, 127.<x>.<y>.1 (server) and .2 (client): its own, so that the
# server's device is where the program binds (a DAT test may hold 127.0.0.1 meanwhile).
sub=$(( $(echo -n "$case_name" | cksum | cut -d' ' -f1) % 200 + 20 ))
srv_ip=127.$sub.7.1
cli_ip=127.$sub.7.2

# cm_pair NAME SECONDS WIRE SERVER... -- CLIENT...: a server and a client connected through
# rdma_cm, each on a softrnic device of WIRE (roce, tcp) at its own address.
cm_pair() {
  local name=$1 secs=$2 wire=$3
  shift 3
  local s=() c=()
  while [ "$1" != -- ]; do s+=("$1"); shift; done
  shift
  c=("$@")
  SOFTRNIC_VERBS="wire=$wire ip=$srv_ip" as_user timeout "$secs" "${s[@]}" >"$work/$name.server" 2>&1 &
  local spid=$!
  sleep 1  # (rdma_cm has nothing a script can watch for: the listen is in the program)
  SOFTRNIC_VERBS="wire=$wire ip=$cli_ip" as_user timeout "$secs" "${c[@]}" >"$work/$name.client" 2>&1
  local crc=$?
  wait "$spid"
  judge "$name" $? "$crc" "error|failed|couldn't|unable|unhandled"
  echo "ok: $name (${c[*]})"
}

# rping verifies every ping's data (-V) on both ends, 1000 of them, at 64 B and 64 KiB (rping
# takes at most 65535), over RoCEv2 (IB CM) and over iWARP (MPA/TCP).
case_rping() {
  need rping
  local w S
  for w in roce tcp; do
    for S in 64 65535; do
      cm_pair "rping-$w-$S" 120 "$w" rping -s -a "$srv_ip" -p "$port" -V -C 1000 -S "$S" -- \
        rping -c -a "$srv_ip" -p "$port" -V -C 1000 -S "$S"
    done
  done
}

# A peer killed mid-connection (SIGKILL: no DREQ, no FIN from softrnic): rping's server hears
# DISCONNECTED within the keepalive bound (RoCEv2: 5 s idle + 5 probes 1 s apart; iWARP: the
# kernel ends the dead process's TCP connection at once) and exits. Killed while the server's
# RDMA Read or Write is in flight (about one time in four), the RoCEv2 server's request runs out
# of retries first, as on rxe: rping gets its completion error (status 12,
# IBV_WC_RETRY_EXC_ERR) and exits, often before its CM thread prints the DISCONNECTED that
# softrnic delivers beside it. Either is the dead peer found, within the same bound.
case_rping_killed() {
  need rping
  local w t0 t1
  for w in roce tcp; do
    SOFTRNIC_VERBS="wire=$w ip=$srv_ip" as_user timeout 60 rping -s -a "$srv_ip" -p "$port" -C 100000000 -S 1024 \
      >"$work/killed-$w.server" 2>&1 &
    local spid=$!
    sleep 1
    SOFTRNIC_VERBS="wire=$w ip=$cli_ip" as_user rping -c -a "$srv_ip" -p "$port" -C 100000000 -S 1024 \
      >"$work/killed-$w.client" 2>&1 &
    sleep 2
    pkill -KILL -f "rping -c -a $srv_ip -p $port" || fail_with "$work" "no rping client to kill ($w)" "killed-$w.client"
    t0=$(date +%s)
    wait "$spid"
    t1=$(date +%s)
    expect "rping server, its client killed ($w)" "killed-$w.server" \
      "server DISCONNECT EVENT|cq completion failed status 12"
    [ $((t1 - t0)) -le 20 ] || fail_with "$work" "DISCONNECTED after $((t1 - t0)) s ($w)" "killed-$w.server"
    echo "ok: $w: the killed client's server heard DISCONNECTED after $((t1 - t0)) s"
  done
}

# ucmatose: four connections at once, 100 messages each way on each.
case_ucmatose() {
  need ucmatose
  local w
  for w in roce tcp; do
    cm_pair "ucmatose-$w" 120 "$w" ucmatose -b "$srv_ip" -p "$port" -c 4 -C 100 -- \
      ucmatose -s "$srv_ip" -p "$port" -c 4 -C 100
    expect "ucmatose ($w)" "ucmatose-$w.client" "test complete"
    expect "ucmatose ($w)" "ucmatose-$w.server" "test complete"
  done
}

# rdma_server and rdma_client: the synchronous endpoint calls (rdma_getaddrinfo, rdma_create_ep,
# rdma_get_request) and rdma_verbs.h's posts.
case_rdma_server() {
  need rdma_server rdma_client
  local w
  for w in roce tcp; do
    cm_pair "rdma_server-$w" 60 "$w" rdma_server -s "$srv_ip" -p "$port" -- rdma_client -s "$srv_ip" -p "$port"
    expect "rdma_client ($w)" "rdma_server-$w.client" "rdma_client: end 0"
    expect "rdma_server ($w)" "rdma_server-$w.server" "rdma_server: end 0"
  done
}

# perftest 4.5 with -R: its control connection and its data QPs through rdma_cm, on both wires.
case_perftest_cm() {
  local prog=${1%_cm} w
  need "$prog"
  for w in roce tcp; do
    cm_pair "$prog-R-$w" 120 "$w" "$prog" -R -p "$port" -n 200 -- "$prog" -R -p "$port" -n 200 "$srv_ip"
    expect "$prog -R ($w)" "$prog-R-$w.client" '^\s*[0-9]+\s+[0-9]+\s+[0-9.]+'
  done
}

# qperf 0.4.11 with -cm1 (its RDMA tests reach RoCE only through rdma_cm), on RoCEv2: each RC
# test, 64 B, a second each, then quit (the server exits 0). Every test reports a figure above
# zero. (On iWARP the Send bandwidth tests end the connection, as on siw: a sender that outruns
# the receiver's reposts finds no receive posted, which iWARP has no RNR retry for.)
case_qperf() {
  need qperf
  local tests=(rc_lat rc_bw rc_bi_bw rc_rdma_write_lat rc_rdma_write_bw rc_rdma_read_lat rc_rdma_read_bw
    rc_compare_swap_mr rc_fetch_add_mr)
  cm_pair qperf 120 roce qperf -lp "$port" -- qperf "$srv_ip" -lp "$port" -cm1 -t 1 -m 64 "${tests[@]}" quit
  local t
  for t in "${tests[@]}"; do
    awk -v t="$t:" '$1 == t { getline; if ($3 + 0 > 0) ok = 1 } END { exit !ok }' "$work/qperf.client" ||
      fail_with "$work" "qperf $t: no figure above zero" qperf.client
  done
}

# libfabric 1.17 (libfabric-bin), unmodified: fi_info finds softrnic's device through the verbs
# provider, and fi_pingpong checks every message it receives (-c) on a verbs MSG endpoint and on
# an RDM endpoint of verbs;ofi_rxm, at 64 B and 64 KiB, on both wires. The verbs provider uses
# only devices behind non-loopback interfaces: the case makes a network namespace with a veth
# pair (10.77.0.1, 10.77.0.2: the server's and the client's device), which needs root; the
# programs run in it as nobody.
case_libfabric() {
  need fi_info fi_pingpong
  [ "$(id -u)" = 0 ] || skip "libfabric's verbs provider skips loopback interfaces; this case makes a network namespace with a veth pair, which needs root"
  local ns=softrnic-fab-$$
  ip netns add "$ns" || skip "cannot create a network namespace"
  # (expanded now: $ns is local and gone by the time the shell exits)
  trap "ip netns del '$ns' 2>/dev/null; rm -rf '$work'" EXIT
  ip -n "$ns" link add fab0 type veth peer name fab1 || skip "cannot create a veth pair"
  ip -n "$ns" addr add 10.77.0.1/24 dev fab0 && ip -n "$ns" addr add 10.77.0.2/24 dev fab1 &&
    ip -n "$ns" link set lo up && ip -n "$ns" link set fab0 up && ip -n "$ns" link set fab1 up ||
    fail_with "$work" "cannot set up the namespace's addresses"
  in_ns=(ip netns exec "$ns")
  SOFTRNIC_VERBS="wire=roce ip=10.77.0.1" as_user fi_info -p verbs >"$work/fi_info" 2>&1 ||
    fail_with "$work" "fi_info -p verbs failed" fi_info
  expect "fi_info -p verbs" fi_info "domain: softrnic_roce0"
  expect "fi_info -p verbs" fi_info "type: FI_EP_MSG"
  SOFTRNIC_VERBS="wire=roce ip=10.77.0.1" as_user fi_info -p "verbs;ofi_rxm" >"$work/fi_info_rxm" 2>&1 ||
    fail_with "$work" "fi_info -p 'verbs;ofi_rxm' failed" fi_info_rxm
  expect "fi_info -p 'verbs;ofi_rxm'" fi_info_rxm "type: FI_EP_RDM"
  local w ep prov
  for w in roce tcp; do
    for ep in msg rdm; do
      prov=verbs
      [ "$ep" = rdm ] && prov="verbs;ofi_rxm"
      fab_pair "fi-$w-$ep-64" "$w" -p "$prov" -e "$ep" -c -S 64 -I 1000
      expect "fi_pingpong $prov $ep ($w)" "fi-$w-$ep-64.client" '^64\s+1k\s+=1k\s'
      fab_pair "fi-$w-$ep-64k" "$w" -p "$prov" -e "$ep" -c -S 65536 -I 200
      expect "fi_pingpong $prov $ep ($w)" "fi-$w-$ep-64k.client" '^64k\s+200\s+=200\s'
    done
  done
}

# fab_pair NAME WIRE ARGS...: fi_pingpong's server and client with ARGS in the case's namespace,
# the server's control port the case's port.
fab_pair() {
  local name=$1 wire=$2
  shift 2
  SOFTRNIC_VERBS="wire=$wire ip=10.77.0.1" as_user timeout 120 fi_pingpong "$@" -B "$port" >"$work/$name.server" 2>&1 &
  local spid=$! i
  for i in $(seq 1 50); do
    "${in_ns[@]}" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  SOFTRNIC_VERBS="wire=$wire ip=10.77.0.2" as_user timeout 120 fi_pingpong "$@" -P "$port" 10.77.0.1 >"$work/$name.client" 2>&1
  local crc=$?
  wait "$spid"
  judge "$name" $? "$crc" "error|failed|couldn't|unable"
  echo "ok: $name (fi_pingpong $*)"
}

# OFA dapl's own provider (libdaplofa: libdapl2's cma provider, over rdma_cm and verbs) on
# softrnic's libraries, against softrnic's DAT provider: unmodified dtest and dtestsrq, OFA dapl
# as server and as client, on both wires. dtestsrq passes only where the QP leaving an SRQ raises
# IBV_EVENT_QP_LAST_WQE_REACHED, which OFA dapl waits for (siw and rxe never raise it). Each
# side's dat.conf names its provider sr_test: dtest's server tells the client its provider's name.
case_ofa_dapl() {
  need dtest dtestsrq
  [ -e /usr/lib/x86_64-linux-gnu/libdaplofa.so.2 ] || [ -n "$(ldconfig -p | grep libdaplofa.so.2)" ] ||
    skip "libdaplofa.so.2 is missing (Debian package libdapl2)"
  local w role tool
  for w in roce tcp; do
    printf 'sr_test u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "%s 0" ""\n' "$srv_ip" >"$work/ofa-server.conf"
    printf 'sr_test u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "%s 0" ""\n' "$cli_ip" >"$work/ofa-client.conf"
    printf 'sr_test u2.0 nonthreadsafe default %s dapl.2.0 "wire=%s ip=%s" ""\n' \
      "$build/dat/libdaplsoftrnic.so.2" "$w" "$srv_ip" >"$work/softrnic-server.conf"
    printf 'sr_test u2.0 nonthreadsafe default %s dapl.2.0 "wire=%s ip=%s" ""\n' \
      "$build/dat/libdaplsoftrnic.so.2" "$w" "$cli_ip" >"$work/softrnic-client.conf"
    for role in server client; do
      dapl_pair "dtest-$w-ofa-$role" "$w" "$role" "DAPL Test Complete\. PASSED" dtest -B 200
      dapl_pair "dtestsrq-$w-ofa-$role" "$w" "$role" "DAPL RC SRQ Test Complete\." dtestsrq
    done
  done
}

# dapl_pair NAME WIRE OFA_ROLE SUCCESS TOOL ARGS...: TOOL's server and client, OFA dapl (on
# softrnic's verbs, SOFTRNIC_VERBS) in OFA_ROLE, softrnic's DAT provider in the other. Passes when
# both outputs say SUCCESS and neither has an error line (dapl2-utils' exit codes are unreliable).
dapl_pair() {
  local name=$1 wire=$2 ofa=$3 success=$4
  shift 4
  local tool=("$@") sconf=$work/softrnic-server.conf cconf=$work/ofa-client.conf
  [ "$ofa" = server ] && sconf=$work/ofa-server.conf cconf=$work/softrnic-client.conf
  SOFTRNIC_VERBS="wire=$wire ip=$srv_ip" as_user env DAT_OVERRIDE="$sconf" timeout 120 "${tool[@]}" -s -P sr_test \
    >"$work/$name.server" 2>&1 &
  local spid=$! i
  for i in $(seq 1 100); do
    ss -Hltn "sport = :15828" 2>/dev/null | grep -q . && grep -q "waiting\|ready" "$work/$name.server" && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  SOFTRNIC_VERBS="wire=$wire ip=$cli_ip" as_user env DAT_OVERRIDE="$cconf" timeout 120 "${tool[@]}" -P sr_test \
    -h "$srv_ip" >"$work/$name.client" 2>&1
  wait "$spid"
  local f
  for f in server client; do
    grep -qE "$success" "$work/$name.$f" || fail_with "$work" "$name: the $f did not say /$success/" "$name.server" "$name.client"
    ! grep -qE "Error|ERR:" "$work/$name.$f" || fail_with "$work" "$name: an error line" "$name.server" "$name.client"
  done
  echo "ok: $name (${tool[*]}; OFA dapl the $ofa)"
}

# Open MPI 4.1 (openmpi-bin), unmodified, with its UCX layers (pml ucx, osc ucx) on UCX's "rc"
# over softrnic (UCX_TLS without shared memory or tcp: the two ranks of one host talk through
# softrnic's RoCEv2 devices, each at its own loopback address by default): tests/verbs/
# mpi_verbs.c, compiled here with mpicc, checks every byte of its Sends, Receives, Puts and Gets.
case_mpi() {
  need mpirun mpicc
  mpicc -O2 -o "$work/mpi_verbs" "$(dirname "${BASH_SOURCE[0]}")/mpi_verbs.c" >"$work/mpicc" 2>&1 ||
    fail_with "$work" "mpicc failed" mpicc
  chmod 0755 "$work/mpi_verbs"
  UCX_TLS=rc_verbs,ud_verbs,self as_user timeout 180 mpirun -np 2 --mca pml ucx --mca osc ucx \
    --mca btl '^vader,tcp,openib,uct' "$work/mpi_verbs" >"$work/mpi" 2>&1 || fail_with "$work" "mpirun failed" mpi
  [ "$(grep -c '^mpi_verbs: rank [01]: ok' "$work/mpi")" = 2 ] || fail_with "$work" "a rank did not say ok" mpi
  # The ranks' RC QPs went through softrnic: its log names each one established.
  [ "$(grep -c 'QP\[[0-9]*\]: established' "$work/mpi")" -ge 2 ] ||
    fail_with "$work" "no softrnic QP was established" mpi
  echo "ok: mpirun -np 2 (pml ucx, osc ucx) over softrnic"
}

# UCX 1.13 (ucx-utils), unmodified: ucx_info lists the device with its rc_verbs transport (it
# checks /dev/infiniband/uverbsN: softrnic_run's libsoftrnic_devfiles answers), and ucx_perftest
# runs UCT's active messages, puts and gets over rc_verbs between two processes (their addresses
# go over ucx_perftest's own TCP connection; the QPs connect by ibv_modify_qp).
case_ucx() {
  need ucx_info ucx_perftest
  SOFTRNIC_VERBS="wire=roce ip=$srv_ip" as_user ucx_info -d >"$work/ucx_info" 2>&1 ||
    fail_with "$work" "ucx_info -d failed" ucx_info
  expect "ucx_info -d" ucx_info "Memory domain: softrnic_roce0"
  expect "ucx_info -d" ucx_info "Transport: rc_verbs"
  local t args
  for t in "am_lat -n 1000" "put_bw -D zcopy -s 65536 -n 200" "get -D zcopy -s 65536 -n 200"; do
    read -r -a args <<<"$t"
    cm_pair "ucx-${args[0]}" 60 roce ucx_perftest -d softrnic_roce0:1 -x rc_verbs -p "$port" -- \
      ucx_perftest "$srv_ip" -p "$port" -d softrnic_roce0:1 -x rc_verbs -t "${args[@]}"
    expect "ucx_perftest ${args[0]}" "ucx-${args[0]}.client" '^Final:\s+[0-9]+'
  done
  # UCP's tag matching over UCX's "rc" (rc_verbs, with ud_verbs for the wire-up: UCX's own tcp
  # transport cannot be the auxiliary one, it lacks asynchronous callbacks).
  for t in "tag_lat -n 1000" "tag_bw -s 65536 -n 200"; do
    read -r -a args <<<"$t"
    UCX_TLS=rc_verbs,ud_verbs cm_pair "ucp-${args[0]}" 60 roce ucx_perftest -p "$port" -- \
      ucx_perftest "$srv_ip" -p "$port" -t "${args[@]}"
    expect "ucx_perftest ${args[0]} (UCP)" "ucp-${args[0]}.client" '^Final:\s+[0-9]+'
  done
  # UCP's client/server API (io_demo): its connection through UCX's rdmacm wire-up over
  # softrnic's librdmacm (ids without QPs: CONNECT_RESPONSE, rdma_establish), its data over
  # rc_verbs, every IO checked (-q). The server serves until it is stopped. The client reports
  # once, at its end (-P 600): its report every second would split "total:200" into parts when
  # a loaded host makes the 200 IOs last longer than a second.
  need io_demo
  local io_port=$((port + 1))  # (ucx_perftest's connections above may hold $port in TIME_WAIT)
  export UCX_SOCKADDR_TLS_PRIORITY=rdmacm  # (not UCX's own tcp sockcm)
  UCX_TLS=rc_verbs,ud_verbs SOFTRNIC_VERBS="wire=roce ip=$srv_ip" as_user timeout 120 io_demo -p "$io_port" -q \
    >"$work/io_demo.server" 2>&1 &
  local spid=$!
  sleep 2
  UCX_TLS=rc_verbs,ud_verbs SOFTRNIC_VERBS="wire=roce ip=$cli_ip" as_user timeout 60 io_demo -p "$io_port" -i 200 \
    -P 600 -o write,read -q "$srv_ip" >"$work/io_demo.client" 2>&1
  local crc=$?
  pkill -TERM -f "io_demo -p $io_port -q" 2>/dev/null
  stop_pid "$spid" TERM
  unset UCX_SOCKADDR_TLS_PRIORITY
  [ "$crc" = 0 ] || fail_with "$work" "io_demo's client exit $crc" io_demo.client io_demo.server
  expect "io_demo (UCP client/server over rdmacm)" io_demo.client "Client exit with status 'OK'"
  expect "io_demo (UCP client/server over rdmacm)" io_demo.client "total:200 "
  ! grep -qiE "error|failed to|invalid" "$work/io_demo.client" ||
    fail_with "$work" "io_demo: an error line" io_demo.client io_demo.server
}

case $case_name in
  devices) case_devices ;;
  ucx) case_ucx ;;
  qperf) case_qperf ;;
  libfabric) case_libfabric ;;
  ofa_dapl) case_ofa_dapl ;;
  mpi) case_mpi ;;
  rping) case_rping ;;
  rping_killed) case_rping_killed ;;
  ucmatose) case_ucmatose ;;
  rdma_server) case_rdma_server ;;
  ib_*_cm) case_perftest_cm "$case_name" ;;
  rc_pingpong) case_rc_pingpong ;;
  rc_pingpong_impaired) case_rc_pingpong_impaired ;;
  srq_pingpong) case_srq_pingpong ;;
  ud_pingpong) case_ud_pingpong ;;
  ib_*) case_perftest "$case_name" ;;
  *) echo "FAIL: unknown case $case_name"; exit 2 ;;
esac
