# Sourced by the interop harnesses (dat_interop.sh, rxe_interop.sh): makes the referee VM ready
# (../shared/tools/rdmavm: Debian 12's Linux 6.1 with siw and rxe) or skips with the reason.
#   referee_prepare [PACKAGE...]   root, /dev/net/tun, qemu, tcpdump, ethtool and the named
#                                  packages installed when missing (apt-get), the image built into
#                                  $cache when missing. Needs $rdmavm and the function skip.
# Sets cache (the image's directory).
referee_prepare() {
  [[ $(id -u) == 0 ]] || skip "needs root (the referee VM uses a network namespace and tap devices)"
  [[ -x $rdmavm/run.sh && -x $rdmavm/build.sh ]] || skip "no referee VM at $rdmavm"
  [[ -e /dev/net/tun ]] || skip "/dev/net/tun missing (tap devices unavailable)"
  cache=${RDMAVM_CACHE:-/var/cache/rdmavm}
  mkdir -p /run/lock
  exec 9>/run/lock/softrnic-rdmavm-setup.lock
  flock -w 1200 9 || skip "another process holds /run/lock/softrnic-rdmavm-setup.lock"
  local need=() c
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  command -v tcpdump >/dev/null || need+=(tcpdump)
  command -v ethtool >/dev/null || need+=(ethtool)
  for c in "$@"; do dpkg-query -W -f='${Status}' "$c" 2>/dev/null | grep -q "install ok installed" || need+=("$c"); done
  if ! referee_have_image; then
    for c in cpio:cpio gcc-12:gcc-12 make:make objcopy:binutils; do
      command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
    done
  fi
  if ((${#need[@]})); then
    echo "interop: installing what the referee needs: ${need[*]}"
    if command -v apt-get >/dev/null \
       && { DEBIAN_FRONTEND=noninteractive apt-get update -q \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; } \
          >/tmp/softrnic-rdmavm-apt.log 2>&1; then
      :
    else
      tail -5 /tmp/softrnic-rdmavm-apt.log 2>/dev/null || true
      echo "interop: could not install ${need[*]} (log: /tmp/softrnic-rdmavm-apt.log)"
    fi
  fi
  command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing and not installable (apt-get install qemu-system-x86)"
  if ! referee_have_image; then
    referee_kabi
    echo "interop: building the referee image in $cache ($rdmavm/build.sh, ~1 min, downloads ~230 MB)"
    local t0=$SECONDS
    if ! "$rdmavm/build.sh" "$cache" >/tmp/softrnic-rdmavm-build.log 2>&1; then
      tail -15 /tmp/softrnic-rdmavm-build.log
      skip "no referee image in $cache and build.sh failed (log: /tmp/softrnic-rdmavm-build.log)"
    fi
    echo "interop: image built in $((SECONDS - t0)) s"
  fi
  flock -u 9
}
referee_have_image() { [[ -s $cache/vmlinuz && -s $cache/initrd.cpio.gz ]]; }

# The kernel ABI for build.sh (RDMAVM_KABI), when not given. build.sh takes the one Debian 12's
# linux-image-amd64 names and fetches its companions (headers, linux-kbuild-6.1, linux-source-6.1)
# at the image's exact version. While the security archive is midway through a kernel update the
# companions can have moved on already (2026-11-28: linux-image-6.1.0-56 at 6.1.192-2, the
# metapackage's, beside linux-kbuild-6.1 at 6.1.192-3 only), and the build fails. Then the newest
# 6.1 ABI whose packages all exist at one version is taken (still Debian 12's Linux 6.1).
referee_kabi_complete() { # ABI: its image and companions at one version in the apt lists
  local abi=$1 ver k
  ver=$(apt-cache show --no-all-versions "linux-image-$abi-unsigned" 2>/dev/null | awk '/^Version:/{print $2; exit}')
  [[ -n $ver ]] || return 1
  for k in "linux-headers-$abi" "linux-headers-${abi%-amd64}-common" linux-kbuild-6.1 linux-source-6.1; do
    apt-cache madison "$k" 2>/dev/null | awk -v v="$ver" '$3 == v {f = 1} END {exit !f}' || return 1
  done
}
referee_kabi() {
  [[ -z ${RDMAVM_KABI:-} ]] || return 0
  local def abi
  def=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.1\./{sub("linux-image-", "", $2); print $2; exit}')
  [[ -n $def ]] && referee_kabi_complete "$def" && return 0
  for abi in $(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' 2>/dev/null |
               awk '{sub("^linux-image-", "", $1); sub("-unsigned$", "", $1); print $1}' | sort -Vr); do
    if referee_kabi_complete "$abi"; then
      echo "interop: the apt lists lack ${def:-the default kernel}'s companion packages at its version: RDMAVM_KABI=$abi"
      export RDMAVM_KABI=$abi
      return 0
    fi
  done
}

# rping_check ROLE SHARE WORK N SIZE: rping's pattern (librdmacm/examples/rping.c,
# rping_test_client): "rdma-ping-N: ", then the characters 65..122 rolling from 65 + N % 58, the
# buffer's last byte NUL. Every iteration's line of the server must show exactly that (it read it
# by RDMA Read), and the client must print as many lines (its own -V passed for each). Sets ok=0
# and appends to why on a difference.
rping_check() {
  local role=$1 share=$2 work=$3 n=$4 size=$5 srvlog clilog want got nc
  if [[ $role == softrnic_client ]]; then srvlog=$share/guest.log clilog=$work/host.log; else srvlog=$work/host.log clilog=$share/guest.log; fi
  want=$(python3 - "$n" "$size" <<'PY'
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
  [[ $got == "$want" ]] || { ok=0; why+=("the server's ping data differ from rping's pattern ($(diff <(echo "$want") <(echo "$got") | head -3 | tr '\n' ' '))"); }
  nc=$(grep -c '^ping data: rdma-ping-' "$clilog" 2>/dev/null || true)
  [[ $nc == "$n" ]] || { ok=0; why+=("the client printed $nc ping lines, not $n"); }
}

# The data gate. A perftest -R server (in the guest) listens on its port twice: for the control
# connection, then, after the handshake over it, with a new listener for the data connection. A
# native client (softrnic's) asks for the data connection before the TCG guest listens again, is
# rejected, and perftest 4.5's retry then uses the cm_ids it destroyed (it crashes). So the host's
# namespace drops every connection request to the guest that matches MATCH after the first one
# (nft's limit: one, then none for a minute), until the guest signals guest-data-listening: it
# saw a LISTEN cm_id on the port that was not among the first ones (rdma res: cm-idn). The
# requester's own retry of the request then gets through.
guest_data_gate_fn() { # prints the guest's function guest_data_gate PORT (busybox sh)
  cat <<'JOB'
guest_data_gate() {
  _ids() { rdma res show cm_id 2>/dev/null | grep 'state LISTEN' | grep ":$1 " | sed -n 's/.*cm-idn \([0-9]*\).*/\1/p' | sort -u | tr '\n' ' '; }
  _first=" $(_ids "$1")" _n=0
  while [ $_n -lt 2400 ]; do
    for _i in $(_ids "$1"); do
      case "$_first" in *" $_i "*) ;; *) rv_signal guest-data-listening; echo "INTEROP-GUEST-DATA-LISTENING (cm-idn $_i)"; return 0 ;; esac
    done
    sleep 0.05; _n=$((_n + 1))
  done
}
JOB
}
host_data_gate() { host_gate "$1 limit rate over 1/minute burst 1 packets drop" guest-data-listening; }

# host_gate RULE SIGNAL: the host job's lines (bash) that put an nft RULE in the namespace's output
# path and take it down when the guest signals SIGNAL (or after 120 s). The table is the one
# referee_case_cleanup removes after a case.
host_gate() {
  cat <<EOF
nft -f - <<'NFT'
table ip softrnic_interop {
  chain out {
    type filter hook output priority 0;
    $1
  }
}
NFT
( for i in \$(seq 2400); do [ -e $share/sig/$2 ] && break; sleep 0.05; done
  nft delete table ip softrnic_interop ) &
EOF
}

# shellcheck source=referee_shared.sh
. "$(dirname "${BASH_SOURCE[0]}")/referee_shared.sh"
