#!/usr/bin/env bash
# RDMA test lab: a stock Debian kernel booted under qemu (TCG) with virtme-ng,
# the host filesystem as root, and Soft-RoCE (rdma_rxe) on a dummy netdev
# inside the guest.  See docs/lab.md.
#
#   ci/lab.sh setup
#   ci/lab.sh run [--mem SIZE] [--cpus N] [--timeout SECS] [--rwdir DIR]...
#                 GUEST_SCRIPT OUTDIR [ARGS...]
#   ci/lab.sh check        # exit 0 if setup looks complete (no changes)
#
# Env: LAB_MEM, LAB_CPUS, LAB_TIMEOUT (defaults of the run options),
#      LAB_KVER (use this installed kernel), LAB_VNG_SPEC (pip spec),
#      LAB_VNG_ARGS (extra vng arguments), LAB_CACHE (default ci/.cache).
#
# Exit codes of `run`: the guest script's rc, or
#   90  lab setup failed on the host
#   91  the VM never produced OUTDIR/guest.rc (boot failure, crash, timeout)
#   2   usage error
set -uo pipefail

LAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAB_CACHE="${LAB_CACHE:-$LAB_ROOT/ci/.cache}"
LAB_VENV="$LAB_CACHE/venv"
LAB_VNG_SPEC="${LAB_VNG_SPEC:-virtme-ng==1.42}"
LAB_IP_ADDR="10.99.0.1"
LAB_NETDEV="dummy0"
LAB_RDMA_DEV="rxe0"

# Debian packages the lab needs (host side and, since the guest shares the
# host filesystem, guest side too).
LAB_PACKAGES=(
  qemu-system-x86 kmod busybox-static rdma-core ibverbs-providers
  ibverbs-utils libibverbs-dev librdmacm-dev rdmacm-utils perftest
  libfabric-dev libfabric-bin libclang-dev pkg-config iproute2 python3-venv
  coreutils util-linux procps
)

log() { printf '[lab] %s\n' "$*" >&2; }
die() { printf '[lab] ERROR: %s\n' "$*" >&2; exit "${2:-90}"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else
    die "need root for: $*"; fi
}

# ---------------------------------------------------------------- setup ----

missing_packages() {
  local p st
  for p in "${LAB_PACKAGES[@]}"; do
    st="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
    [ "$st" = installed ] || printf '%s\n' "$p"
  done
}

# Kernel version already installed for the lab: newest /boot/vmlinuz-*-amd64
# that has a matching /lib/modules/<ver> with rdma_rxe.
installed_kver() {
  local f v best=""
  if [ -n "${LAB_KVER:-}" ]; then kver_ok "$LAB_KVER" && echo "$LAB_KVER"; return; fi
  for f in /boot/vmlinuz-*-amd64; do
    [ -e "$f" ] || continue
    v="${f#/boot/vmlinuz-}"
    kver_ok "$v" && best="$best$v"$'\n'
  done
  [ -n "$best" ] && printf '%s' "$best" | sort -V | tail -n1
}

kver_ok() {
  local v="$1"
  [ -r "/boot/vmlinuz-$v" ] && [ -s "/lib/modules/$v/modules.dep" ] &&
    find "/lib/modules/$v/kernel/drivers/infiniband" -name 'rdma_rxe.ko*' 2>/dev/null | grep -q .
}

vng_ok() { [ -x "$LAB_VENV/bin/vng" ] && [ -x "$LAB_VENV/bin/virtme-run" ]; }

lab_ready() {
  [ -z "$(missing_packages)" ] && [ -n "$(installed_kver)" ] && vng_ok
}

apt_updated=0
apt_update_once() {
  [ "$apt_updated" = 1 ] && return 0
  log "apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null ||
    die "apt-get update failed"
  apt_updated=1
}

setup_packages() {
  local miss
  miss="$(missing_packages | tr '\n' ' ')"
  if [ -z "${miss// /}" ]; then log "packages: all present"; return 0; fi
  log "installing packages: $miss"
  apt_update_once
  # shellcheck disable=SC2086
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $miss ||
    die "apt-get install failed for: $miss"
  miss="$(missing_packages | tr '\n' ' ')"
  [ -z "${miss// /}" ] || die "still missing after install: $miss"
}

setup_kernel() {
  local kv pkg dir deb
  kv="$(installed_kver)"
  if [ -n "$kv" ]; then log "kernel: $kv already installed"; return 0; fi
  apt_update_once
  pkg="$(apt-cache depends linux-image-amd64 2>/dev/null |
         sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1)"
  [ -n "$pkg" ] || die "cannot resolve the kernel package behind linux-image-amd64 (apt-cache depends)"
  kv="${pkg#linux-image-}"
  log "installing kernel $kv (from $pkg, unpacked, not dpkg-installed)"
  dir="$LAB_CACHE/kernel"
  mkdir -p "$dir" || die "cannot create $dir"
  deb="$(find "$dir" -maxdepth 1 -name "${pkg}_*.deb" | head -n1)"
  if [ -z "$deb" ]; then
    (cd "$dir" && apt-get download -q "$pkg") || die "apt-get download $pkg failed"
    deb="$(find "$dir" -maxdepth 1 -name "${pkg}_*.deb" | head -n1)"
    [ -n "$deb" ] || die "download of $pkg produced no .deb"
  fi
  rm -rf "$dir/root"
  dpkg -x "$deb" "$dir/root" || die "dpkg -x $deb failed"
  [ -f "$dir/root/boot/vmlinuz-$kv" ] || die "no boot/vmlinuz-$kv in $deb"
  as_root mkdir -p /boot /lib/modules || die "cannot create /boot or /lib/modules"
  as_root cp "$dir/root/boot/vmlinuz-$kv" "/boot/vmlinuz-$kv" || die "copy vmlinuz failed"
  as_root rm -rf "/lib/modules/$kv"
  as_root cp -a "$dir/root/lib/modules/$kv" "/lib/modules/$kv" || die "copy modules failed"
  as_root depmod "$kv" || die "depmod $kv failed"
  rm -rf "$dir/root"
  kver_ok "$kv" || die "kernel $kv installed but incomplete (no modules.dep or rdma_rxe)"
  log "kernel: $kv installed"
}

find_python() {
  local p
  for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import venv, ensurepip' 2>/dev/null; then
      command -v "$p"; return 0
    fi
  done
  return 1
}

setup_vng() {
  local py
  if vng_ok; then log "virtme-ng: present ($("$LAB_VENV/bin/vng" --version 2>/dev/null | head -n1))"; return 0; fi
  py="$(find_python)" || die "no python3 with venv+ensurepip (install python3-venv)"
  log "installing $LAB_VNG_SPEC into $LAB_VENV (python: $py)"
  rm -rf "$LAB_VENV"
  mkdir -p "$LAB_CACHE" || die "cannot create $LAB_CACHE"
  "$py" -m venv "$LAB_VENV" || die "python venv creation failed"
  "$LAB_VENV/bin/python" -m pip install -q --disable-pip-version-check "$LAB_VNG_SPEC" ||
    { rm -rf "$LAB_VENV"; die "pip install $LAB_VNG_SPEC failed"; }
  vng_ok || die "virtme-ng installed but vng/virtme-run missing in $LAB_VENV/bin"
}

cmd_setup() {
  [ "$(uname -m)" = x86_64 ] || die "the lab needs an x86_64 host"
  command -v dpkg-query >/dev/null || die "not a Debian system (no dpkg-query)"
  setup_packages
  setup_kernel
  setup_vng
  log "setup complete: kernel $(installed_kver), $("$LAB_VENV/bin/vng" --version 2>/dev/null | head -n1)"
}

# ------------------------------------------------------------------ run ----

usage() {
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

show_file() { # show_file FILE MAXLINES : whole file, or head+tail if long
  local f="$1" max="${2:-200}" n
  n=$(wc -l <"$f")
  if [ "$n" -le "$max" ]; then cat "$f"; else
    head -n 40 "$f"
    printf '... [%d lines omitted; full log: %s] ...\n' "$((n - 40 - (max - 40)))" "$f"
    tail -n "$((max - 40))" "$f"
  fi
}

cmd_run() {
  local mem="${LAB_MEM:-4G}" cpus="${LAB_CPUS:-2}" timeout="${LAB_TIMEOUT:-3600}"
  local -a rwdirs=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --mem) mem="${2:?}"; shift 2 ;;
      --mem=*) mem="${1#*=}"; shift ;;
      --cpus) cpus="${2:?}"; shift 2 ;;
      --cpus=*) cpus="${1#*=}"; shift ;;
      --timeout) timeout="${2:?}"; shift 2 ;;
      --timeout=*) timeout="${1#*=}"; shift ;;
      --rwdir) rwdirs+=("${2:?}"); shift 2 ;;
      --rwdir=*) rwdirs+=("${1#*=}"); shift ;;
      -h|--help) usage ;;
      --) shift; break ;;
      -*) echo "lab.sh run: unknown option $1" >&2; usage ;;
      *) break ;;
    esac
  done
  [ $# -ge 2 ] || usage
  local script="$1" out="$2"; shift 2
  [[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout must be seconds" 2
  [ -f "$script" ] || die "guest script not found: $script" 2
  script="$(cd "$(dirname "$script")" && pwd)/$(basename "$script")"
  mkdir -p "$out" || die "cannot create $out" 2
  out="$(cd "$out" && pwd)"
  rm -f "$out/guest.rc" "$out/guest.log" "$out/console.log" "$out/results.txt" \
    "$out/.lab-args" "$out/.lab-env"

  if ! lab_ready; then
    log "lab not set up yet: running setup"
    cmd_setup || exit 90
  fi
  local kv; kv="$(installed_kver)"

  # Arguments travel through a file in OUTDIR: the kernel command line that
  # carries --exec is short and its quoting is fragile.
  [ $# -gt 0 ] && printf '%s\0' "$@" >"$out/.lab-args"
  local inner=$(( timeout > 240 ? timeout - 120 : timeout * 2 / 3 ))
  {
    printf 'LAB_SCRIPT=%q\n' "$script"
    printf 'LAB_INNER_TIMEOUT=%q\n' "$inner"
    printf 'LAB_HOST_PATH=%q\n' "$PATH"
    printf 'LAB_HOST_HOME=%q\n' "${HOME:-/root}"
    printf 'LAB_KVER=%q\n' "$kv"
    printf 'LAB_T0=%q\n' "$(date +%s)"
    # Suite knobs set on the host reach the guest script.
    local v
    for v in $(compgen -e | grep -E '^(SUITE_|SKIP_|PP_|CTEST_|FI_|RSVERBS_|TEST_|MSGCOST_)'); do
      printf 'export %s=%q\n' "$v" "${!v}"
    done
  } >"$out/.lab-env"

  local -a vng=(
    "$LAB_VENV/bin/vng" --run "/boot/vmlinuz-$kv" --disable-kvm --force-9p
    --user root -m "$mem" -p "$cpus" --verbose --overlay-rwdir /root
    --rwdir "$out"
  )
  local d
  for d in "${rwdirs[@]}"; do
    mkdir -p "$d" && vng+=(--rwdir "$(cd "$d" && pwd)")
  done
  # shellcheck disable=SC2206
  [ -n "${LAB_VNG_ARGS:-}" ] && vng+=(${LAB_VNG_ARGS})
  vng+=(--exec "bash $(printf %q "$LAB_ROOT/ci/lab.sh") _guest $(printf %q "$out")")

  log "booting kernel $kv (TCG, ${mem}, ${cpus} cpus, timeout ${timeout}s): $(basename "$script") -> $out"
  local t0=$SECONDS rc
  # No tty in CI: stdin from /dev/null; console (kernel messages mixed in) to
  # console.log.  timeout kills the whole process group (vng + qemu).
  PATH="$LAB_VENV/bin:$PATH" timeout -k 20 "$timeout" "${vng[@]}" \
    </dev/null >"$out/console.log" 2>&1
  rc=$?
  log "VM exited (rc=$rc) after $((SECONDS - t0))s"

  if [ -f "$out/guest.log" ]; then
    echo "----- guest.log ($out/guest.log) -----"
    show_file "$out/guest.log" 300
    echo "----- end guest.log -----"
  fi
  [ -f "$out/results.txt" ] && { echo "----- results.txt -----"; cat "$out/results.txt"; }
  local grc
  grc="$(tr -dc '0-9' <"$out/guest.rc" 2>/dev/null)"
  if [ -z "$grc" ]; then
    [ "$rc" = 124 ] && log "VM timed out after ${timeout}s"
    log "the VM produced no guest.rc (boot failure, crash or timeout); last console lines:"
    tail -n 60 "$out/console.log" >&2
    exit 91
  fi
  log "guest rc=$grc"
  exit "$grc"
}

# ---------------------------------------------------------------- guest ----
# Runs inside the VM: `lab.sh _guest OUTDIR`.

cmd_guest() {
  local out="$1"
  # shellcheck disable=SC1091
  . "$out/.lab-env" || { echo "missing $out/.lab-env"; echo 92 >"$out/guest.rc"; exit 92; }
  export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  local p
  for p in "$LAB_HOST_HOME/.cargo/bin" /root/.cargo/bin; do
    [ -d "$p" ] && { PATH="$PATH:$p"; break; }
  done
  export HOME="$LAB_HOST_HOME"
  export LAB_OUT="$out" LAB_IP="$LAB_IP_ADDR" LAB_DEV="$LAB_RDMA_DEV" LAB_NETDEV LAB_KVER
  export LAB_ROOT CI="${CI:-}"
  export LANG=C.UTF-8 LC_ALL=C.UTF-8
  local log="$out/guest.log"
  : >"$log"

  fail_setup() {
    {
      echo "LAB SETUP FAILED: $*"
      echo "--- ip addr"; ip addr 2>&1
      echo "--- rdma link"; rdma link 2>&1
      echo "--- lsmod"; lsmod 2>&1 | grep -Ei 'rxe|ib_|rdma' ;
      echo "--- dmesg (tail)"; dmesg 2>&1 | tail -n 40
    } >>"$log"
    echo 93 >"$out/guest.rc.tmp" && mv -f "$out/guest.rc.tmp" "$out/guest.rc"
    sync
    exit 93
  }

  {
    echo "[lab] guest up $(( $(date +%s) - LAB_T0 ))s after launch (uptime $(cut -d' ' -f1 /proc/uptime)s):" \
      "kernel $(uname -r), $(nproc) cpus, $(awk '/MemTotal/{print $2" kB"}' /proc/meminfo)"
  } >>"$log"
  ulimit -l unlimited 2>/dev/null || true
  local m
  for m in ib_uverbs rdma_ucm rdma_rxe; do
    modprobe "$m" >>"$log" 2>&1 || fail_setup "modprobe $m"
  done
  ip link set lo up >>"$log" 2>&1
  ip link add "$LAB_NETDEV" type dummy >>"$log" 2>&1 || fail_setup "ip link add $LAB_NETDEV"
  ip addr add "$LAB_IP_ADDR/24" dev "$LAB_NETDEV" >>"$log" 2>&1 || fail_setup "ip addr add"
  ip link set "$LAB_NETDEV" up >>"$log" 2>&1 || fail_setup "ip link set up"
  rdma link add "$LAB_RDMA_DEV" type rxe netdev "$LAB_NETDEV" >>"$log" 2>&1 ||
    fail_setup "rdma link add $LAB_RDMA_DEV"
  local ok=0 _i
  for _i in $(seq 1 60); do
    if rdma link show "$LAB_RDMA_DEV/1" 2>/dev/null | grep -q 'state ACTIVE' &&
       ibv_devices 2>/dev/null | grep -qw "$LAB_RDMA_DEV"; then ok=1; break; fi
    sleep 0.5
  done
  [ "$ok" = 1 ] || fail_setup "$LAB_RDMA_DEV not ACTIVE / not in ibv_devices after 30s"
  echo "[lab] $(rdma link show "$LAB_RDMA_DEV/1")" >>"$log"
  echo "[lab] running: bash $LAB_SCRIPT (timeout ${LAB_INNER_TIMEOUT}s)" >>"$log"

  local -a args=()
  if [ -f "$out/.lab-args" ]; then
    mapfile -d '' args <"$out/.lab-args"
  fi
  local rc
  cd "$LAB_ROOT" || fail_setup "cd $LAB_ROOT"
  timeout -k 10 "$LAB_INNER_TIMEOUT" bash "$LAB_SCRIPT" "${args[@]}" </dev/null >>"$log" 2>&1
  rc=$?
  [ "$rc" = 124 ] && echo "[lab] guest script timed out after ${LAB_INNER_TIMEOUT}s" >>"$log"
  echo "[lab] guest script exited rc=$rc" >>"$log"
  echo "$rc" >"$out/guest.rc.tmp" && mv -f "$out/guest.rc.tmp" "$out/guest.rc"
  sync
  exit 0
}

case "${1:-}" in
  setup) shift; cmd_setup "$@" ;;
  check)
    if lab_ready; then echo "lab ready: kernel $(installed_kver)"; exit 0; fi
    echo "lab not set up (run: ci/lab.sh setup)"; exit 1 ;;
  run) shift; cmd_run "$@" ;;
  _guest) shift; cmd_guest "$@" ;;
  *) usage ;;
esac
