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
