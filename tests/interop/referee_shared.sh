# Sourced by referee.sh: one referee guest boot serves every case of a run.
#
# Booting the TCG guest takes ~11 s of a case's ~19 s, so the cases share one guest: the first
# case boots it with a job that serves cases one after another (referee_server_job), later cases
# find it running. A case's work directory lies in the guest's 9p share; the server bind-mounts
# the case's share/ on /host while the case's job runs, so the job reads and writes /host as it
# would on a guest of its own. Between cases the server kills what the job left running and
# removes its qdiscs; the host side removes the gate's nft table and what the case left in the
# namespace. A case that fails, or a guest kernel that printed a BUG/Oops/WARNING, ends the guest:
# the next case boots a fresh one, so a failure cannot spread to the cases after it.
# INTEROP_REFEREE=oneshot (or a harness's --keep) boots a guest per case, as run.sh alone does.
# The guest powers itself off after INTEROP_REFEREE_IDLE seconds without a case (default 300);
# ctest's interop_referee_down ends it when the run is over.
REFEREE_DIR=${INTEROP_REFEREE_DIR:-/tmp/softrnic-referee}
REFEREE_NS=softrnic-referee
REFEREE_GUEST=guest2
REFEREE_MEM=1536 # dtest's need (the largest of the cases')
referee_shared() { [[ ${INTEROP_REFEREE:-shared} != oneshot && -z ${keep:-} ]]; }

# referee_workdir PREFIX: prints a fresh work directory for a case (in the shared guest's 9p
# share when the referee is shared)
referee_workdir() {
  if referee_shared; then
    mkdir -p "$REFEREE_DIR/share/cases"
    mktemp -d "$REFEREE_DIR/share/cases/$1.XXXXXX"
  else
    mktemp -d "/tmp/$1.XXXXXX"
  fi
}

# The shared guest's /job.sh (busybox sh). /ref is the whole 9p share. A case starts when the file
# /ref/queue names its directory under /ref/cases; the server marks it started, and done when
# the case's rc file appears.
referee_server_job() {
  cat <<JOB
idle_limit=\$(( ${INTEROP_REFEREE_IDLE:-300} * 10 ))
mkdir -p /ref && mount -o bind /host /ref || { echo "REFEREE-SERVER-FAILED (bind mount)"; exit 1; }
echo REFEREE-SERVING
idle=0
while [ \$idle -lt \$idle_limit ]; do
  [ \$((idle % 10)) = 0 ] && : >/ref/heartbeat # (once a second: a 9p write costs the TCG guest)
  if [ ! -f /ref/queue ]; then sleep 0.1; idle=\$((idle + 1)); continue; fi
  idle=0
  id=\$(cat /ref/queue); rm -f /ref/queue
  d=/ref/cases/\$id
  : >"\$d/started"
  dmesg -c >/dev/null
  if mount -o bind "\$d/share" /host; then
    (cd /tmp && exec /bin/sh "\$d/guest.sh" </dev/null >"\$d/console.log" 2>&1); rc=\$?
    umount /host 2>/dev/null || umount -l /host
  else
    echo "referee: cannot bind-mount \$d/share on /host" >"\$d/console.log"; rc=125
  fi
  # what the case left running (its job's orphans; not kernel threads, children of pid 2)
  for p in /proc/[0-9]*; do
    pid=\${p#/proc/}
    [ "\$pid" -gt 2 ] && [ "\$pid" != \$\$ ] || continue
    read -r _ _ _ pp _ <"\$p/stat" 2>/dev/null || continue
    [ "\$pp" = 2 ] || kill -9 "\$pid" 2>/dev/null
  done
  tc qdisc del dev eth0 root 2>/dev/null; tc qdisc del dev eth1 root 2>/dev/null
  dmesg >"\$d/dmesg.log"
  grep -qE 'BUG:|Oops|WARNING:|general protection|Call Trace' "\$d/dmesg.log" && : >/ref/tainted
  echo "\$rc" >"\$d/rc.tmp" && mv "\$d/rc.tmp" "\$d/rc"
done
echo REFEREE-IDLE
JOB
}

referee_log() { "$rdmavm/run.sh" log "$REFEREE_NS" "$REFEREE_GUEST" 2>/dev/null; }

# referee_session_up: the shared guest running and serving (booted when it is not)
referee_session_up() {
  local hb log
  if [[ -f $REFEREE_DIR/session && ! -e $REFEREE_DIR/share/tainted ]] \
     && [[ $(cat "$REFEREE_DIR/session") == "$(referee_session_stamp)" ]] \
     && hb=$(stat -c %Y "$REFEREE_DIR/share/heartbeat" 2>/dev/null) && (($(date +%s) - hb <= 5)); then
    log=$(referee_log)
    if grep -q '^REFEREE-SERVING' <<<"$log" && ! grep -q '^REFEREE-IDLE' <<<"$log"; then
      echo "rdmavm: the shared referee guest serves this case (case $(($(cat "$REFEREE_DIR/cases-served") + 1)) since its boot)"
      return 0
    fi
  fi
  referee_session_down >/dev/null 2>&1 || true
  mkdir -p "$REFEREE_DIR/share/cases"
  rm -f "$REFEREE_DIR/share/queue" "$REFEREE_DIR/share/heartbeat" "$REFEREE_DIR/share/tainted"
  echo 0 >"$REFEREE_DIR/cases-served"
  referee_server_job >"$REFEREE_DIR/server.sh"
  "$rdmavm/run.sh" up "$REFEREE_NS" || return 1
  "$rdmavm/run.sh" start "$REFEREE_NS" "$REFEREE_GUEST" 2 --mem "$REFEREE_MEM" --share "$REFEREE_DIR/share" \
    --job "$REFEREE_DIR/server.sh" || return 1
  local t=0
  until grep -q '^REFEREE-SERV' <<<"$(referee_log)"; do
    sleep 0.1; t=$((t + 1)); ((t < 300)) || { echo "rdmavm: the referee's server job did not start"; return 1; }
  done
  log=$(referee_log)
  grep -q '^REFEREE-SERVING' <<<"$log" || { tail -5 <<<"$log"; return 1; }
  referee_session_stamp >"$REFEREE_DIR/session"
  echo "rdmavm: the shared referee guest booted; the cases after this one reuse it"
}
# what a running guest must match to be reused: the image it booted
referee_session_stamp() { stat -c '%Y %s' "$cache/vmlinuz" "$cache/initrd.cpio.gz" | tr '\n' ' '; }

referee_session_down() {
  [[ -x $rdmavm/run.sh ]] && "$rdmavm/run.sh" down "$REFEREE_NS"
  rm -f "$REFEREE_DIR/session"
}

# between cases, on the host: the gate's nft table and whatever the case left in the namespace
referee_case_cleanup() {
  local p comm
  "$rdmavm/run.sh" exec "$REFEREE_NS" nft delete table ip softrnic_interop 2>/dev/null || true
  for p in $(ip netns pids "$REFEREE_NS" 2>/dev/null); do
    comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
    case $comm in qemu-system-*|tcpdump) ;; *) kill -9 "$p" 2>/dev/null || true ;; esac
  done
}

# referee_queue CASE_DIR: hands the case to the shared guest; fails when the guest does not take it
# within 10 s (it went idle or died in between)
referee_queue() {
  local id=${1#"$REFEREE_DIR/share/cases/"} t=0
  echo "$id" >"$REFEREE_DIR/share/queue.tmp" && mv "$REFEREE_DIR/share/queue.tmp" "$REFEREE_DIR/share/queue"
  until [[ -e $1/started ]]; do
    sleep 0.1; t=$((t + 1)); ((t < 100)) || { rm -f "$REFEREE_DIR/share/queue"; return 1; }
  done
}

# referee_run [--timeout S] [--job FILE] [--host CMD] [--wait-for RE] [--pcap PREFIX] [--share DIR]
#             [--mem MB]: what `run.sh` does for one case (prints rdmavm: lines, the job's output
# and the guest kernel's lines; exit status the job's, or the host command's when the job
# passed), on the shared guest when the referee is shared. There --share must be the share/
# of a referee_workdir and --job its guest.sh.
referee_run() {
  local args=("$@") timeout=210 job="" host="" waitfor="" pcap="" share=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      --timeout) timeout=$2; shift 2 ;; --job) job=$2; shift 2 ;; --host) host=$2; shift 2 ;;
      --wait-for) waitfor=$2; shift 2 ;; --pcap) pcap=$2; shift 2 ;; --share) share=$2; shift 2 ;;
      --mem) shift 2 ;;
      *) echo "referee_run: unknown option $1"; return 2 ;;
    esac
  done
  referee_shared || { timeout -k 10 $((timeout + 60)) "$rdmavm/run.sh" "${args[@]}"; return; }
  local case_dir=${share%/share}
  [[ $share == "$REFEREE_DIR/share/cases/"*/share && $job == "$case_dir/guest.sh" ]] \
    || { echo "referee_run: --share and --job must be a referee_workdir's share/ and guest.sh"; return 2; }
  mkdir -p /run/lock
  exec 8>/run/lock/softrnic-referee.lock
  flock -w 1800 8 || { echo "rdmavm: ERROR: another run holds the shared referee"; return 1; }
  local rc=0
  referee_run_locked || rc=$?
  flock -u 8
  return "$rc"
}

referee_run_locked() {
  local tries=0
  until referee_session_up && referee_queue "$case_dir"; do
    referee_session_down >/dev/null 2>&1 || true
    tries=$((tries + 1))
    ((tries < 2)) || { echo "rdmavm: ERROR: the shared referee guest does not take cases"; return 1; }
  done
  local pos t=0 hpid="" hrc=0 rc=0
  pos=$(referee_log | wc -c)
  if [[ -n $pcap ]]; then
    "$rdmavm/run.sh" pcap-start "$REFEREE_NS" pcap0 "$pcap-siw.pcap" rdmabr0
    "$rdmavm/run.sh" pcap-start "$REFEREE_NS" pcap1 "$pcap-rxe.pcap" rdmabr1
  fi
  if [[ -n $host ]]; then
    if [[ -n $waitfor ]]; then
      until grep -Eq -- "$waitfor" "$case_dir/console.log" 2>/dev/null || [[ -e $case_dir/rc ]]; do
        sleep 0.1; t=$((t + 1)); ((t < timeout * 10)) || break
      done
    fi
    "$rdmavm/run.sh" exec "$REFEREE_NS" timeout -k 5 "$timeout" bash -c "$host" &
    hpid=$!
  fi
  until [[ -e $case_dir/rc ]]; do
    sleep 0.1; t=$((t + 1))
    ((t < timeout * 10)) || { echo "rdmavm: the case's guest job still runs after ${timeout} s"; rc=124; break; }
  done
  if [[ -n $hpid ]]; then wait "$hpid" || hrc=$?; fi
  if [[ -n $pcap ]]; then
    "$rdmavm/run.sh" pcap-stop "$REFEREE_NS" pcap0
    "$rdmavm/run.sh" pcap-stop "$REFEREE_NS" pcap1
  fi
  [[ $rc == 0 ]] && rc=$(cat "$case_dir/rc")
  referee_case_cleanup
  cat "$case_dir/console.log" 2>/dev/null || true
  referee_log | tail -c +$((pos + 1)) | grep -E '^\[' || true # the guest kernel's lines meanwhile
  echo $(($(cat "$REFEREE_DIR/cases-served") + 1)) >"$REFEREE_DIR/cases-served"
  [[ $rc == 0 ]] && rc=$hrc
  if [[ $rc != 0 || -e $REFEREE_DIR/share/tainted ]]; then
    [[ -e $REFEREE_DIR/share/tainted ]] && cp "$case_dir/dmesg.log" "$share/guest-dmesg.log" 2>/dev/null
    echo "rdmavm: ending the shared guest: $([[ $rc != 0 ]] && echo "this case failed (status $rc)" || echo "its kernel printed a BUG/WARNING (share/guest-dmesg.log)")"
    referee_session_down >/dev/null 2>&1 || true
  fi
  return "$rc"
}
