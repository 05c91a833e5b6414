#!/usr/bin/env bash
# Interop against Linux siw (and, with --rxe, Linux rxe): softrnic's IA softrnic_iwarp_tcp
# (wire=tcp, MPA/TCP; with --rxe softrnic_roce, wire=roce, RoCEv2 with IB CM) on the host side of
# the rdmavm referee VM (../shared/tools/rdmavm: Debian 12's Linux 6.1 + siw + rxe + OFA dapl)
# and an unmodified dapl2-utils or rdma-core tool in the guest, one side each. Judged by the
# tools' success lines on BOTH sides (their exit codes are unreliable).
#
#   dat_interop.sh BUILD_DIR ROLE [TOOL] [--rxe] [--ia-params "k=v ..."] [--rdmavm DIR] [--keep DIR]
#
# --rxe  the guest's side is OFA dapl's cma provider on rxe (IA ofa-v2-cma-roe-eth1, eth1 =
#        10.99.1.2), softrnic's the IA softrnic_roce on 10.99.1.1; TOOL dtest, dtestx (the IB
#        extensions: immediate data, atomics), dapltest_rw, dapltest_rr or reject (an IB CM REJ with
#        private data each way; softrnic's listener answers rping's repeated REQ with an MRA
#        first, seen in the capture) (dtestsrq cannot pass: OFA's waits for an EP_BROKEN that rxe
#        never raises, docs/interop.md). Every RoCEv2 packet of the capture must carry a valid ICRC.
#
# ROLE  softrnic_client: the guest (siw, IA ofa-v2-iwarp) serves, softrnic connects to 10.99.0.2
#       softrnic_server: softrnic serves on 10.99.0.1, the guest connects
# TOOL  dtest (default; -b 65536 -B 10), dtestsrq (-b 4096), dapltest_rw (client SR 256 server RW 4096
#       server SR 256), dapltest_rr (the same with server RR 4096), rping (rdma-core's rping -V -v on
#       siw against itself on softrnic's librdmacm: 10 validated pings of 100 bytes; both sides
#       printed every ping), reject (an MPA reject with private data each way:
#       dtest's server on siw rejects softrnic_connect; softrnic_connect rejects rping on siw)
#       perftest_send_lat, perftest_write_bw, perftest_read_bw (perftest's ib_send_lat -s 64,
#       ib_write_bw / ib_read_bw -s 4096 (-o 4), -R -n 5 -F on siw against
#       BUILD_DIR/tools/softrnic_perftest: perftest's exit status and result line, no perftest
#       error line but the cosmetic "Failed to disconnect RDMA CM", softrnic_perftest's data
#       verdict, and for bw the report both sides print equal: the client's figures, sent over
#       the control connection), verbs_write_bw_cm (ib_write_bw -R -s 4096 -n 5 on both sides,
#       the host's unmodified over softrnic's librdmacm: softrnic_server only)
# --ia-params  appended to the softrnic line's ia_params ("wire=tcp ip=10.99.0.1 ..."), e.g.
#              "mpa_crc=0", "mpa_rev=1", "mpa_p2p=0"
# --rdmavm     the referee (default: <source dir>/../shared/tools/rdmavm)
# --keep DIR   keep logs and captures (DIR/cap-siw.pcap or cap-rxe.pcap) in DIR; without it they are kept only
#              on failure (the path is printed)
# INTEROP_TOOL_TIMEOUT  bound of each tool in seconds (default 120; a pass takes ~15 s in all)
#
# dtest's server sends its IA name over its side channel (TCP 15828) and the client opens that
# name, so each side's dat.conf has the other side's name too: on the host `ofa-v2-iwarp` is
# softrnic, in the guest `softrnic_iwarp_tcp` is OFA's libdaplofa on eth0 (siw0).
# dtest's server advertises itself on its side channel before it creates its PSP (dat_psp_create
# follows send_server_params in dtest.c), so a native client can reach the rdma_cm port before a
# TCG-slow siw server listens there (siw answers RST: NON_PEER_REJECTED, as OFA dapl reports it
# too). With softrnic as dtest's client, an nft rule in the namespace drops the host's packets to
# 10.99.0.2:45248 until the guest sees its listener; the kernel's SYN retransmit (1 s) connects.
# Two siw races (Linux 6.1) that a native peer hits against a TCG guest most of the time:
# - siw_accept() sends the MPA Reply before it installs the socket callback that reads the
#   initiator's first FPDU; an RTR or Send arriving in between stays unread in the socket and the
#   connection never establishes (closing it later hits BUG() in iwcm.c:969);
# - siw_qp_sq_proc_tx() checks tx_suspend (set when the peer's FIN or RST arrives) before the
#   DDP Last flag, so a Send whose last FPDU already went out completes with LOC_QP_OP_ERR (and
#   QP_FATAL) when the peer closes right after receiving it (dapltest's server does).
# Both close when the guest's packets leave later than siw's code runs: the guest delays its eth0
# egress by INTEROP_SIW_DELAY_MS (default 20; netem from Debian's sch_netem.ko of the guest
# kernel, taken from the referee's cache). INTEROP_SIW_DELAY_MS=0 shows the races.
# Exit 0 pass, 1 fail, 77 "SKIPPED: reason" when the referee cannot run (no root, no
# /dev/net/tun, no qemu and no way to install it, no image and no way to build it).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 2; }
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[[ $# -ge 2 ]] || usage
build=$(cd "$1" && pwd) role=$2
shift 2
tool=dtest
if [[ $# -gt 0 && $1 != --* ]]; then tool=$1; shift; fi
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rdmavm=${RDMAVM_DIR:-$src/../shared/tools/rdmavm}
extra="" keep="" rxe=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --ia-params) extra=$2; shift 2;;
    --rxe) rxe=1; shift;;
    --rdmavm) rdmavm=$2; shift 2;;
    --keep) keep=$2; shift 2;;
    *) usage;;
  esac
done
case $role in softrnic_client|softrnic_server) ;; *) usage;; esac

HOST_IP=10.99.0.1 GUEST_IP=10.99.0.2 LINK=siw GUEST_DEV=eth0
tool_timeout=${INTEROP_TOOL_TIMEOUT:-120}   # each tool's bound (s); a pass takes well under 30 s
OUR_IA=softrnic_iwarp_tcp SIW_IA=ofa-v2-iwarp OUR_WIRE=tcp
if [[ $rxe == 1 ]]; then
  # RoCEv2: rxe0 on the guest's eth1, OFA dapl's cma provider over it; softrnic's IA on the host side
  HOST_IP=10.99.1.1 GUEST_IP=10.99.1.2 LINK=rxe GUEST_DEV=eth1
  OUR_IA=softrnic_roce SIW_IA=ofa-v2-cma-roe-eth1 OUR_WIRE=roce
  case $tool in dtest|dtestx|dtestsrq|dapltest_rw|dapltest_rr|reject) ;; *) usage;; esac
fi
lib=$build/dat/libdaplsoftrnic.so
[[ -f $lib ]] || fail "$lib not built (ninja -C $build daplsoftrnic)"

# ---- what each tool needs: server/client command lines (IA and ADDR filled in per side), the
# ---- server's ready condition, the success line, and for dapltest the quit command.
srv_ready_port="" srv_ready_line="" quit="" gate_port="" data_gate=""
case $tool in
  dtest)
    srv="dtest -s -P IA -b 65536 -B 10"
    cli="dtest -h ADDR -P IA -b 65536 -B 10"
    srv_ready_port=15828          # dtest prints its waiting line before listen()
    gate_port=45248               # ... and creates its PSP only after the side channel
    ok_srv='DAPL Test Complete\. PASSED' ok_cli=$ok_srv
    ;;
  dtestx)
    # the DAT IB extensions (RDMA Write with Immediate, CmpSwap, FetchAdd) over RoCEv2 (--rxe only):
    # a TCP side channel (15828) for the addresses, then rdma_cm on conn_qual 31112
    srv="dtestx -s -P IA"
    cli="dtestx -h ADDR -P IA"
    srv_ready_port=15828 gate_port=31112
    ok_srv='IB extension test - immed/atomic test PASSED' ok_cli=$ok_srv
    ;;
  dtestsrq)
    # -b on both sides: each side's default is its own provider's DAT_IB_TRANSPORT_MTU (OFA on
    # siw: 1024, softrnic: 4096) and the sizes are not exchanged
    srv="dtestsrq -s -P IA -b 4096"
    cli="dtestsrq -h ADDR -P IA -b 4096"
    srv_ready_line='server ready on port'
    ok_srv='DAPL RC SRQ Test Complete\.' ok_cli=$ok_srv
    ;;
  dapltest_rw|dapltest_rr)
    op=RW; [[ $tool == dapltest_rr ]] && op=RR
    srv="dapltest -T S -D IA"
    cli="dapltest -T T -s ADDR -D IA -i 10 -t 1 -w 1 client SR 256 server $op 4096 server SR 256"
    quit="dapltest -T Q -s ADDR -D IA"
    srv_ready_line='Service Point Ready'
    ok_cli='End of Work -- Client Exiting'   # plus: no error line on either side (below)
    ok_srv='Server: Transaction Test Finished for this client'
    ;;
  rping)
    # rdma-core's rping (rdma_cm port 7174) on both sides: on siw, and on the host unmodified over
    # softrnic's librdmacm and libibverbs (softrnic_run, an iWARP device with this case's
    # ia_params: VERBSPEC). Both validate: the client compares the buffer the server wrote back
    # with what it sent (-V); each side prints every ping (-v), the last must be there.
    rping_n=10 rping_size=100
    ropts_="-C $rping_n -S $rping_size -V -v"
    srv="rping -s -a ADDR $ropts_" cli="rping -c -a ADDR $ropts_"
    h_srv="$build/bin/softrnic_run --verbs 'VERBSPEC' -- rping -s -a ADDR $ropts_"
    h_cli="$build/bin/softrnic_run --verbs 'VERBSPEC' -- rping -c -a ADDR $ropts_"
    srv_ready_port=7174
    ok_srv="^server ping data: rdma-ping-$((rping_n - 1)): "
    ok_cli="^ping data: rdma-ping-$((rping_n - 1)): "
    h_ok_srv=$ok_srv h_ok_cli=$ok_cli
    ;;
  verbs_write_bw_cm)
    # perftest's ib_write_bw -R on both sides: on siw, and on the host unmodified over softrnic's
    # librdmacm and libibverbs (softrnic_run, VERBSPEC). As the client, Debian's perftest 4.5
    # connects its data QP right after the control handshake, before the TCG guest listens
    # again, and its retry of the refused connect crashes (freed memory): the data gate
    # (referee.sh) holds the host's SYNs back until the guest listens, and the kernel's SYN
    # retransmission connects.
    popts_="-R -p 18518 -n 5 -s 4096 -F"
    srv="ib_write_bw -d siw0 $popts_" cli="ib_write_bw -d siw0 $popts_ ADDR"
    # (no SOFTRNIC_TRACE: its lines on stderr would land inside perftest's result line)
    h_srv="env -u SOFTRNIC_TRACE $build/bin/softrnic_run --verbs 'VERBSPEC' -- ib_write_bw -d softrnic_iwarp0 $popts_"
    h_cli="env -u SOFTRNIC_TRACE $build/bin/softrnic_run --verbs 'VERBSPEC' -- ib_write_bw -d softrnic_iwarp0 $popts_ ADDR"
    srv_ready_port=18518
    data_gate="ip daddr $GUEST_IP tcp dport 18518 tcp flags == syn"  # (referee.sh)
    ok_srv="^ 4096 +5 +[-+0-9.a-z]+([[:space:]]+[-+0-9.a-z]+){2}[[:space:]]*$"
    ok_cli=$ok_srv h_ok_srv=$ok_srv h_ok_cli=$ok_srv
    ;;
  reject)
    # An MPA reject with private data, each way. softrnic client: OFA dapl's dtest server on siw
    # rejects a request whose private data is not its pattern (dtest.c: "Error with CONNECT
    # REQUEST private data", dat_cr_reject), and OFA's cma provider puts its 4-byte header
    # 02 00 02 00 in every reject: BUILD_DIR/tools/softrnic_connect must receive exactly that.
    # softrnic server: softrnic_connect rejects rping's request with private data; rping reports
    # RDMA_CM_EVENT_REJECTED (it prints no private data: the capture must show it in the reject).
    reject_pd=736f6674726e69632073617973206e6f   # "softrnic says no"
    srv="dtest -s -P IA -b 65536 -B 10" cli="rping -c -a ADDR -C 1 -S 100 -v"
    # dtest's server hands its parameters over its side channel (TCP 15828) first; read them
    h_cli="bash -c 'timeout 20 head -c 1 </dev/tcp/ADDR/15828 >/dev/null && exec $build/tools/softrnic_connect -a ADDR -p 45248 --local $HOST_IP --pdata-zeros 48 --expect rejected --expect-pdata 02000200 MPAOPTS'"
    h_srv="$build/tools/softrnic_connect --listen -a ADDR -p 7174 --reject $reject_pd MPAOPTS"
    srv_ready_port=15828 gate_port=45248
    ok_srv='Error with CONNECT REQUEST private data' ok_cli='cma event RDMA_CM_EVENT_REJECTED'
    h_ok_cli='rejected by the peer, private data \(4 bytes\): 02000200$'
    h_ok_srv="rejected the request of 10\.99\.0\.2:[0-9]+ .*ours 16 bytes: $reject_pd"
    if [[ $rxe == 1 ]]; then
      # RoCEv2: a REJ's private data field is 148 bytes, zero-filled behind what the consumer gave.
      # softrnic's listener rejects only after 7 s: rdma_cm's REQ timeout (4.096 us * 2^20 plus
      # twice the packet lifetime, ~4.8 s) runs out first, the REQ comes again, and softrnic must
      # answer it with an MRA (rping waits then, and still reports the REJ, not a timeout)
      z=$(printf '0%.0s' $(seq 1 288))
      h_cli="bash -c 'timeout 20 head -c 1 </dev/tcp/ADDR/15828 >/dev/null && exec $build/tools/softrnic_connect --roce -a ADDR -p 45248 --local $HOST_IP --pdata-zeros 48 --expect rejected --expect-pdata 02000200$z'"
      h_srv="$build/tools/softrnic_connect --roce --listen -a ADDR -p 7174 --reject $reject_pd --delay 7 --timeout 60"
      h_ok_cli="rejected by the peer, private data \\(148 bytes\\): 02000200$z\$"
      h_ok_srv="rejected the request of 10\.99\.1\.2:[0-9]+ .*ours 16 bytes: $reject_pd"
    fi
    ;;
  perftest_send_lat|perftest_write_bw|perftest_read_bw)
    # perftest 4.5-0.17 with -R: a control rdma_cm connection (56-byte Sends), then the data
    # connection on the same port; softrnic's side is tools/softrnic_perftest. -F: the TCG
    # guest's clock fails perftest's CPU frequency check otherwise (bw tools exit before the end).
    # Each tool its own port, so that a stale listener cannot answer the next test.
    pt_tool=${tool#perftest_} pt_n=5
    case $pt_tool in
      send_lat) pt_port=18515 pt_size=64 pt_extra="" ;;
      write_bw) pt_port=18516 pt_size=4096 pt_extra="" ;;
      read_bw) pt_port=18517 pt_size=4096 pt_extra=" -o 4" ;;
    esac
    popts_="-R -d siw0 -p $pt_port -n $pt_n -s $pt_size$pt_extra -F"
    srv="ib_$pt_tool $popts_" cli="ib_$pt_tool $popts_ ADDR"
    hopts_="-p $pt_port -n $pt_n -S $pt_size$pt_extra"
    h_srv="$build/tools/softrnic_perftest $pt_tool -s -a ADDR $hopts_ MPAOPTS"
    # read_bw client: softrnic's pattern is RDMA-Written into perftest's buffer first (its MR is
    # REMOTE_WRITE too on iWARP), so that every Read has a known answer
    pt_prime=""; [[ $pt_tool == read_bw ]] && pt_prime=" --prime-remote"
    h_cli="$build/tools/softrnic_perftest $pt_tool -c ADDR --local $HOST_IP $hopts_ --connect-retry 30$pt_prime MPAOPTS"
    srv_ready_port=$pt_port   # perftest prints its banner before it listens
    # perftest's result line (REPORT_FMT_LAT / REPORT_FMT; inf/nan when its clock is off)
    num_='[-+0-9.a-z]+'
    if [[ $pt_tool == send_lat ]]; then
      ok_srv="^ $pt_size +$pt_n +$num_([[:space:]]+$num_){6}"
    else
      ok_srv="^ $pt_size +$pt_n +$num_([[:space:]]+$num_){2}[[:space:]]*$"
    fi
    ok_cli=$ok_srv
    pt_h="softrnic_perftest: $pt_tool %s: $pt_n x $pt_size B, "
    case $pt_tool in
      send_lat)
        pt_v="data verified \\($pt_n messages of exactly $pt_size B, identical payloads\\)$"
        h_ok_srv="$(printf "$pt_h" server)$pt_v" h_ok_cli="$(printf "$pt_h" client)$pt_v" ;;
      write_bw)
        h_ok_srv="$(printf "$pt_h" server)data verified \\($pt_size bytes written in 1 range\\(s\\), the fill replaced, the rest and the guards intact\\)$"
        h_ok_cli="$(printf "$pt_h" client)completions verified \\($pt_n Writes of $pt_size B completed" ;;
      read_bw)
        h_ok_srv="$(printf "$pt_h" server)data served \\([0-9]+ B of softrnic's pattern, unchanged; [0-9]+ frames"
        h_ok_cli="$(printf "$pt_h" client)data verified \\($pt_n Reads of $pt_size B, each returned the pattern written first\\)$" ;;
    esac
    ;;
  *) usage;;
esac
: "${h_srv:=$srv}" "${h_cli:=$cli}" "${h_ok_srv:=$ok_srv}" "${h_ok_cli:=$ok_cli}"
# fill_in CMD IA ADDR
fill_in() { local c=${1//IA/$2}; echo "${c//ADDR/$3}"; }

# ---- the referee: root, tun, qemu, an image (installed and built here if missing and possible)
for t in "${h_srv%% *}" "${h_cli%% *}"; do
  command -v "$t" >/dev/null || skip "$t not installed on the host (apt-get install dapl2-utils)"
done
[[ $role == softrnic_client ]] || gate_port="" data_gate=""
# shellcheck source=referee.sh
. "$src/tests/interop/referee.sh"
referee_prepare ${gate_port:+nftables} ${data_gate:+nftables}
# The gate: siw's rdma_cm port is a TCP port; rxe's CM REQs are RoCEv2 packets (UDP 4791), and
# nothing else goes to the guest's 4791 before the connection (dtest's side channel is TCP).
gate_match="tcp dport $gate_port"
[[ $rxe == 1 ]] && gate_match="udp dport 4791"
if [[ -n $gate_port ]] && ! command -v nft >/dev/null; then
  echo "interop: WARNING: no nft: dtest's listen race is not gated (the client may be refused)"
  gate_port=""
fi

# ---- the run
work=$(referee_workdir softrnic-interop)
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

netem_ms=${INTEROP_SIW_DELAY_MS:-20}
[[ $rxe == 1 ]] && netem_ms=0   # the delay works around siw races; rxe has none of them
if [[ $netem_ms != 0 ]]; then
  kdeb=$(ls "$cache"/debs/linux-image-*-unsigned_*.deb 2>/dev/null | head -1)
  if [[ -n $kdeb ]] && dpkg-deb --fsys-tarfile "$kdeb" | tar -xO --wildcards './lib/modules/*/kernel/net/sched/sch_netem.ko' >"$share/sch_netem.ko" 2>/dev/null \
     && [[ -s $share/sch_netem.ko ]]; then
    :
  else
    echo "interop: WARNING: no sch_netem.ko in $cache/debs: siw's races are not worked around"
    rm -f "$share/sch_netem.ko"; netem_ms=0
  fi
fi

conf=$work/host-dat.conf
line_params="wire=$OUR_WIRE ip=$HOST_IP${extra:+ $extra}"
for ia in "$OUR_IA" "$SIW_IA"; do
  echo "$ia u2.0 nonthreadsafe default $lib dapl.2.0 \"$line_params\" \"\""
done >"$conf"

# the MPA tools take the MPA settings the DAT tools take from ia_params
mpaopts=""
for kv in $extra; do
  case $kv in
    mpa_rev=*) mpaopts+=" --mpa-rev ${kv#*=}" ;;
    mpa_crc=0) mpaopts+=" --no-crc" ;;
    mpa_p2p=0) mpaopts+=" --no-p2p" ;;
  esac
done
h_srv=${h_srv//MPAOPTS/$mpaopts} h_cli=${h_cli//MPAOPTS/$mpaopts}
h_srv=${h_srv//VERBSPEC/$line_params} h_cli=${h_cli//VERBSPEC/$line_params}
[[ $tool == reject && $role == softrnic_server ]] && srv_ready_port=7174
if [[ $role == softrnic_client ]]; then
  g_cmd=$(fill_in "$srv" "$SIW_IA" "$GUEST_IP") h_cmd=$(fill_in "$h_cli" "$OUR_IA" "$GUEST_IP")
  g_quit="" h_quit=$([[ -n $quit ]] && fill_in "$quit" "$OUR_IA" "$GUEST_IP" || true)
  g_ok=$ok_srv h_ok=$h_ok_cli
else
  g_cmd=$(fill_in "$cli" "$SIW_IA" "$HOST_IP") h_cmd=$(fill_in "$h_srv" "$OUR_IA" "$HOST_IP")
  g_quit=$([[ -n $quit ]] && fill_in "$quit" "$SIW_IA" "$HOST_IP" || true) h_quit=""
  g_ok=$ok_cli h_ok=$h_ok_srv
fi

# the guest's job (busybox sh); its tool log goes to the 9p share (/host)
{
  echo '. /usr/lib/rdmavm/lib.sh'
  echo "printf '%s\\n' '$OUR_IA u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"$GUEST_DEV 0\" \"\"' >/tmp/dat.conf"
  echo "grep -v '^#' /etc/dat.conf >>/tmp/dat.conf"
  echo 'export DAT_OVERRIDE=/tmp/dat.conf'
  echo 'cd /tmp'
  [[ -z $data_gate ]] || guest_data_gate_fn
  if [[ $netem_ms != 0 ]]; then
    # (a shared referee guest has it loaded from an earlier case already)
    echo "{ grep -q '^sch_netem ' /proc/modules || insmod /host/sch_netem.ko; } && /usr/sbin/tc qdisc add dev eth0 root netem delay ${netem_ms}ms \\"
    echo "  && echo 'guest: eth0 egress delayed ${netem_ms} ms (works around two siw races)' \\"
    echo "  || echo 'guest: WARNING: could not delay eth0 egress'"
  fi
  if [[ $role == softrnic_client ]]; then
    cat <<EOF
timeout -k 5 $tool_timeout $g_cmd >/host/guest.log 2>&1 &
p=\$!
${gate_port:+( rv_listening $gate_port 120 >/dev/null && rv_signal guest-cm-listening ) &}
n=0
while :; do
  if [ -n "$srv_ready_port" ]; then rv_listening "$srv_ready_port" 0 >/dev/null && break
  else grep -q "$srv_ready_line" /host/guest.log 2>/dev/null && break; fi
  kill -0 \$p 2>/dev/null || { rv_signal guest-failed; echo INTEROP-GUEST-FAILED; break; }
  n=\$((n+1)); [ \$n -lt 1200 ] || { rv_signal guest-failed; echo INTEROP-GUEST-FAILED; break; }
  sleep 0.1
done
[ -e /host/sig/guest-failed ] || { rv_signal guest-ready; echo INTEROP-GUEST-READY; }
${data_gate:+guest_data_gate $srv_ready_port &}
n=0 k=0 rc=""
while kill -0 \$p 2>/dev/null; do
  n=\$((n+1))
  if [ \$n = 200 ]; then
    echo "--- guest: the server still runs 20 s after it was ready; TCP sockets (/proc/net/tcp: local, remote, state, tx_queue:rx_queue; ports in hex, B0C0 = 45248):"
    awk 'NR > 1 {print \$2, \$3, \$4, \$5}' /proc/net/tcp
  fi
  if [ -e /host/sig/host-done ]; then
    k=\$((k+1))
    [ \$k = 150 ] && { echo "--- guest: killing the server (15 s after the host finished)"; kill \$p; }
    [ \$k = 250 ] && { echo "--- guest: the server does not exit (stuck in the kernel?)"; rc=124; break; }
  fi
  sleep 0.1
done
[ -n "\$rc" ] || { wait \$p; rc=\$?; }
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
  ${g_quit:+timeout -k 5 30 $g_quit >/host/guest-quit.log 2>&1}
fi
rv_signal guest-done
EOF
  fi
  cat <<'EOF'
echo "INTEROP-GUEST-TOOL-EXIT $rc"
echo "--- guest dmesg (siw/rdma lines)"
dmesg | grep -iE 'siw|iw_cm|iwpm|mpa|rdma|terminate|BUG' | grep -vE 'iwpm_register_pid|ommand line' | tail -20
exit $rc
EOF
} >"$work/guest.sh"

# the host's side, run by run.sh inside the namespace (where 10.99.0.1 is)
{
  echo "export DAT_OVERRIDE=$conf SOFTRNIC_TRACE=1 SOFTRNIC_STATS=1"
  echo "cd $work"
  if [[ $role == softrnic_client ]]; then
    [[ -z $gate_port ]] || host_gate "ip daddr $GUEST_IP $gate_match drop" guest-cm-listening
    [[ -z $data_gate ]] || host_data_gate "$data_gate"
    cat <<EOF
rc=1
if [ -e $share/sig/guest-ready ]; then
  timeout -k 5 $tool_timeout $h_cmd >host.log 2>&1; rc=\$?
  ${h_quit:+timeout -k 5 30 $h_quit >host-quit.log 2>&1}
fi
: >$share/sig/host-done
exit \$rc
EOF
  else
    cat <<EOF
timeout -k 5 $tool_timeout $h_cmd >host.log 2>&1 &
p=\$!
for i in \$(seq 300); do
  if [ -n "$srv_ready_port" ]; then ss -Hltn "sport = :$srv_ready_port" | grep -q . && break
  else grep -q "$srv_ready_line" host.log && break; fi
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

ropts=(--mem 1536 --timeout $((tool_timeout + 90)) --share "$share" --job "$work/guest.sh" --host "bash $work/host.sh")
[[ $role == softrnic_client ]] && ropts+=(--wait-for '^INTEROP-GUEST-(READY|FAILED)')
command -v tcpdump >/dev/null && ropts+=(--pcap "$work/cap")
siw_role=client; [[ $role == softrnic_client ]] && siw_role=server
echo "interop: $tool, softrnic ${role#softrnic_} ($OUR_IA \"$line_params\") vs siw $siw_role"
echo "interop:   guest: $g_cmd"
echo "interop:   host:  $h_cmd"
t0=$SECONDS
rrc=0
referee_run "${ropts[@]}" >"$work/run.log" 2>&1 || rrc=$?
dt=$((SECONDS - t0))
if [[ $rrc == 77 ]]; then grep SKIP "$work/run.log" || true; passed=1; skip "the referee did not run ($(grep -o 'SKIP: .*' "$work/run.log" | head -1))"; fi

show() { # FILE TITLE
  echo "--- $2"
  if [[ -s $1 ]]; then tail -n 25 "$1"; else echo "(no output)"; fi
}
grep -v 'speed is unknown' "$work/run.log" | grep -E '^rdmavm|INTEROP|^---|^guest|siw|dmesg|^\[|^[0-9A-F]{8}:' || true
show "$share/guest.log" "guest (siw): $g_cmd"
show "$work/host.log" "host (softrnic): $h_cmd"
[[ -n $g_quit ]] && show "$share/guest-quit.log" "guest (siw): $g_quit"
[[ -n $h_quit ]] && show "$work/host-quit.log" "host (softrnic): $h_quit"

ok=1 why=()
g_line=$(grep -Em1 "$g_ok" "$share/guest.log" 2>/dev/null) || { ok=0; why+=("guest lacks /$g_ok/"); }
h_line=$(grep -Em1 "$h_ok" "$work/host.log" 2>/dev/null) || { ok=0; why+=("host lacks /$h_ok/"); }
if [[ $tool == dapltest_* ]]; then
  for f in "$share/guest.log" "$share/guest-quit.log" "$work/host.log" "$work/host-quit.log"; do
    if grep -Eq 'ERR|[Ee]rror|[Ff]ailed|[Mm]ismatch|[Uu]nexpected' "$f" 2>/dev/null; then
      ok=0; why+=("error line in ${f##*/}: $(grep -Em1 'ERR|[Ee]rror|[Ff]ailed|[Mm]ismatch|[Uu]nexpected' "$f")")
    fi
  done
fi
if [[ $tool == rping ]]; then
  rping_check "$role" "$share" "$work" "$rping_n" "$rping_size"
  if grep -Eq 'mismatch|error|failed' "$share/guest.log" "$work/host.log" 2>/dev/null; then
    ok=0; why+=("error line: $(grep -Ehm1 'mismatch|error|failed' "$share/guest.log" "$work/host.log")")
  fi
fi
if [[ $tool == perftest_* ]]; then
  # perftest's verdict: exit status 0, no error line (perftest_communication.c, perftest_resources.h;
  # "Failed to disconnect RDMA CM" when the peer closed first is cosmetic: exit status stays 0)
  grep -q '^INTEROP-GUEST-TOOL-EXIT 0$' "$work/run.log" \
    || { ok=0; why+=("perftest's exit status: $(grep -o 'INTEROP-GUEST-TOOL-EXIT.*' "$work/run.log" | head -1)"); }
  pt_err='Completion with error|Failed status|Failed to|Bad wc status|Couldn.t|Unable to|not compatible|RDMA CM event error|Unexpected CM event|bad event|Can.t produce|failed'
  pt_bad=$(grep -E "$pt_err" "$share/guest.log" 2>/dev/null | grep -Ev 'Failed to disconnect RDMA CM' || true)
  [[ -z $pt_bad ]] || { ok=0; why+=("perftest error line: $(head -1 <<<"$pt_bad")"); }
  grep -q 'Failed to disconnect RDMA CM' "$share/guest.log" 2>/dev/null \
    && echo "note: perftest printed the cosmetic 'Failed to disconnect RDMA CM' (the peer closed first)"
  pt_results=$(tr '\t' ' ' <"$share/guest.log" | grep -Ec "$g_ok" || true)
  [[ $pt_results == 1 ]] || { ok=0; why+=("perftest printed $pt_results result lines, not 1"); }
  if [[ $tool != perftest_send_lat ]]; then
    # both sides print the client's report (the server got it over the control connection)
    pt_g=$(tr '\t' ' ' <"$share/guest.log" | grep -Em1 "$g_ok" | tr -s ' ' || true)
    pt_hl=$(tr '\t' ' ' <"$work/host.log" | grep -Em1 "$g_ok" | tr -s ' ' || true)
    [[ -n $pt_g && $pt_g == "$pt_hl" ]] || { ok=0; why+=("the bw reports differ: perftest '$pt_g', softrnic '$pt_hl'"); }
  fi
  # Where perftest cannot show what it got (its write_bw buffer allows no read-back, its read_bw
  # client checks nothing), the capture can: every RDMA Write (softrnic client) or Read Response
  # (softrnic server) FPDU softrnic sent that tshark decodes must carry softrnic_perftest's
  # pattern at its offset (byte i: (7 i + 13 (i >> 8) + 0x3c) & 0xff; every operation at offset
  # 0 with -s 4096, so the lowest Tagged Offset is the buffer's start). Frames tshark cannot
  # reassemble are left out; a mismatch, or nothing decoded, fails.
  pt_op=""
  [[ $tool == perftest_write_bw && $role == softrnic_client ]] && pt_op=0
  [[ $tool == perftest_read_bw && $role == softrnic_server ]] && pt_op=2
  if [[ -n $pt_op && -s $work/cap-$LINK.pcap ]] && command -v tshark >/dev/null; then
    pt_wire=$(tshark -r "$work/cap-$LINK.pcap" -Y "iwarp_rdma.opcode == $pt_op && ip.src == $HOST_IP" -T fields \
                -e iwarp_ddp.tagged_offset -e data.data 2>/dev/null \
              | python3 -c '
import sys
fpdus = []
for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if len(f) < 2 or not f[0] or not f[1]:
        continue
    for to, data in zip(f[0].split(","), f[1].split(",")):
        fpdus.append((int(to, 16), bytes.fromhex(data.replace(":", ""))))
if not fpdus:
    print("FAIL no FPDU decoded"); sys.exit()
base = min(to for to, _ in fpdus)
total = 0
for to, data in fpdus:
    for j, b in enumerate(data):
        i = to - base + j
        if b != (i * 7 + (i >> 8) * 13 + 0x3c) & 0xff:
            print("FAIL byte %d of the FPDU at offset %d is 0x%02x" % (j, to - base, b)); sys.exit()
    total += len(data)
print("OK %d FPDUs, %d bytes" % (len(fpdus), total))
')
    pt_what="RDMA Write"; [[ $pt_op == 2 ]] && pt_what="Read Response"
    if [[ $pt_wire == OK* ]]; then
      echo "wire: softrnic's ${pt_what}s carry its pattern: ${pt_wire#OK } (of $((pt_n * pt_size)) sent)"
    else
      ok=0; why+=("${pt_what}s on the wire: ${pt_wire#FAIL }")
    fi
  fi
fi
# What was asked of the MPA exchange must show on the wire: softrnic's requests (as initiator)
# carry the revision and CRC flag its ia_params name; the replies answer with the same revision.
if [[ $rxe == 0 && $role == softrnic_client && -s $work/cap-$LINK.pcap ]] && command -v tshark >/dev/null; then
  mpa=$(tshark -r "$work/cap-$LINK.pcap" -Y 'iwarp_mpa.req || iwarp_mpa.rep' -T fields -e ip.src \
          -e iwarp_mpa.rev -e iwarp_mpa.crc_flag 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n\t' '; ')
  echo "wire: MPA requests/replies (count src rev crc): $mpa"
  want_rev=2 want_crc=1
  [[ " $extra " == *" mpa_rev=1 "* ]] && want_rev=1
  [[ " $extra " == *" mpa_crc=0 "* ]] && want_crc=0
  bad=$(tshark -r "$work/cap-$LINK.pcap" -Y "(iwarp_mpa.req && ip.src == $HOST_IP && (iwarp_mpa.rev != $want_rev || iwarp_mpa.crc_flag != $want_crc)) || (iwarp_mpa.rep && iwarp_mpa.rev != $want_rev)" 2>/dev/null | wc -l)
  [[ $bad == 0 ]] || { ok=0; why+=("$bad MPA frames differ from revision $want_rev / CRC flag $want_crc"); }
fi
if [[ $tool == reject && $role == softrnic_server && $rxe == 1 ]]; then
  # IB CM as it crossed the wire: rping's REQ twice (its timeout ran out while softrnic's consumer
  # waited), softrnic's MRA for the repeated one, then softrnic's REJ with the consumer's bytes
  cm_from() { tshark -r "$work/cap-rxe.pcap" -d udp.port==4791,infiniband \
                -Y "ip.src == $1 && infiniband.bth.destqp == 1 && infiniband.mad.attributeid == $2 $3" 2>/dev/null | wc -l; }
  nreq=$(cm_from "$GUEST_IP" 0x0010 "") nmra=$(cm_from "$HOST_IP" 0x0011 "")
  pd_colons=$(sed 's/../&:/g; s/:$//' <<<"$reject_pd")
  nrej=$(cm_from "$HOST_IP" 0x0012 "&& frame contains $pd_colons")
  echo "wire: IB CM: $nreq REQs from rping, $nmra MRAs and $nrej REJs with our private data from softrnic"
  ((nreq >= 2 && nmra >= 1 && nrej >= 1)) || { ok=0; why+=("IB CM on the wire: REQ x$nreq, MRA x$nmra, REJ with $reject_pd x$nrej (want >= 2, >= 1, >= 1)"); }
elif [[ $tool == reject && $role == softrnic_server ]]; then
  # the reject as it crossed the wire: MPA reply with the R flag, our private data behind the
  # RFC 6581 IRD/ORD header (siw's requests are enhanced)
  rej=$(tshark -r "$work/cap-$LINK.pcap" -Y 'iwarp_mpa.rep && iwarp_mpa.rej_flag == 1' -T fields \
          -e iwarp_mpa.privatedata 2>/dev/null | tr -d ':' | head -1)
  if [[ $rej == ????????"$reject_pd" ]]; then
    echo "wire: MPA reply with the reject flag, private data $rej"
  else
    ok=0; why+=("no MPA reject carrying $reject_pd in the capture (saw '${rej}')")
  fi
fi
if [[ $rxe == 1 && -s $work/cap-rxe.pcap && -f $src/../shared/tools/wirecheck/check_icrc.py ]]; then
  # every RoCEv2 packet on the link (softrnic's and rxe's) carries a valid ICRC
  if icrc=$(python3 "$src/../shared/tools/wirecheck/check_icrc.py" "$work/cap-rxe.pcap" 2>&1); then
    echo "wire: $(tail -1 <<<"$icrc")"
  else
    ok=0; why+=("ICRC check of the capture: $(tail -3 <<<"$icrc" | tr '\n' ' ')")
  fi
fi
if [[ $ok == 1 ]]; then
  passed=1
  echo "guest: $g_line"
  echo "host:  $h_line"
  echo "PASS: $tool softrnic ${role#softrnic_} <-> $LINK in ${dt} s"
  exit 0
fi
if [[ -s $work/cap-$LINK.pcap ]] && command -v tshark >/dev/null; then
  echo "--- MPA on the wire (tshark, first 20 iWARP frames)"
  tshark -r "$work/cap-$LINK.pcap" -Y 'iwarp_mpa.req || iwarp_mpa.rep || iwarp_rdma.opcode == 7' -O iwarp_mpa 2>/dev/null \
    | grep -E '^Frame|Src: 10|flag|Revision|Private data|Terminate' | head -40 || true
  tshark -r "$work/cap-$LINK.pcap" -Y 'tcp.port != 15828 && (iwarp_mpa || tcp.flags.reset == 1 || tcp.flags.fin == 1)' 2>/dev/null | head -20 || true
fi
fail "$tool softrnic ${role#softrnic_} <-> $LINK after ${dt} s: ${why[*]}"
