#!/usr/bin/env bash
# Other libfabric cores for the version tests (docs/cores.md): each one built
# once, with its own util/fi_info and fabtests (fi_pingpong, runfabtests.sh),
# into a cache outside the clone, so a test run only checks a stamp.
#
#   ci/cores.sh                    build what the test command needs: 2.1.0 from
#                                  Debian 13's source package (apt deb-src)
#   ci/cores.sh --src DIR VERSION  build a core from a source tree (an upstream
#                                  tag checked out by hand: git archive vX.Y.Z)
#   ci/cores.sh --prefix VERSION   print the install prefix of VERSION (exit 1
#                                  when it is not built)
#
# Env: RSVERBS_CORES (default /opt/rsverbs/cores; not under /var/cache, which
# the lab guest hides under a tmpfs).
# The cores are configured with --enable-only: rxm and tcp (verbs off, so
# the core cannot fall back to its own C verbs behind rsverbs' back).
# Installs what it lacks on a fresh Debian 12 machine.
set -euo pipefail
cache=${RSVERBS_CORES:-/opt/rsverbs/cores}
log() { printf '[cores] %s\n' "$*" >&2; }

prefix_of() { printf '%s/%s' "$cache" "$1"; }
built() { [ -f "$(prefix_of "$1")/.built" ] && [ -x "$(prefix_of "$1")/bin/fi_pingpong" ]; }

need_pkgs() {
  local need=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    log "installing: ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; }
  fi
}

# build SRC VERSION: configure, make and install the core and its fabtests.
build() {
  local src=$1 ver=$2 pre jobs
  pre=$(prefix_of "$ver")
  jobs=$(nproc)
  need_pkgs gcc make pkg-config libibverbs-dev librdmacm-dev libnl-3-dev libnl-route-3-dev
  if [ ! -x "$src/configure" ]; then
    need_pkgs autoconf automake libtool
    log "$ver: autogen"
    (cd "$src" && ./autogen.sh >/dev/null 2>&1)
    [ -x "$src/fabtests/configure" ] || (cd "$src/fabtests" && ./autogen.sh >/dev/null 2>&1)
  fi
  rm -rf "$pre"; mkdir -p "$pre"
  log "$ver: configure core (rxm, tcp) -> $pre"
  (cd "$src" && ./configure -q --prefix="$pre" --enable-only --enable-rxm --enable-tcp \
     --disable-static CFLAGS="-O2 -g" >"$pre/configure.log" 2>&1) || { tail -20 "$pre/configure.log"; return 1; }
  log "$ver: make core"
  (cd "$src" && make -j"$jobs" >"$pre/make.log" 2>&1 && make install >>"$pre/make.log" 2>&1) ||
    { tail -30 "$pre/make.log"; return 1; }
  log "$ver: configure + make fabtests"
  (cd "$src/fabtests" && ./configure -q --prefix="$pre" --with-libfabric="$pre" CFLAGS="-O2 -g" \
     >"$pre/fabtests-configure.log" 2>&1 && make -j"$jobs" >"$pre/fabtests-make.log" 2>&1 &&
     make install >>"$pre/fabtests-make.log" 2>&1) || { tail -30 "$pre/fabtests-make.log" "$pre/fabtests-configure.log" 2>/dev/null; return 1; }
  "$pre/bin/fi_info" --version >"$pre/.built"
  log "$ver: built ($(head -1 "$pre/.built"))"
}

# Debian 13's libfabric source package (2.1.0): the release tarball, configure included.
debian13() {
  local ver=2.1.0 work list=/etc/apt/sources.list.d/rsverbs-trixie-src.sources
  built "$ver" && { log "$ver: cached in $(prefix_of "$ver")"; return 0; }
  need_pkgs dpkg-dev bzip2 xz-utils
  if [ ! -f "$list" ]; then
    log "adding Debian 13 (trixie) deb-src entry: $list"
    cat >"$list" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update -q >/dev/null
  fi
  work="$cache/src"; mkdir -p "$work"
  if ! ls "$work"/libfabric_2.1.0*.orig.tar.* >/dev/null 2>&1; then
    (cd "$work" && apt-get source --download-only --tar-only libfabric/trixie >/dev/null 2>&1) ||
      { apt-get update -q >/dev/null; (cd "$work" && apt-get source --download-only --tar-only libfabric/trixie >/dev/null); }
  fi
  rm -rf "$work/libfabric-$ver"
  tar -xf "$(ls "$work"/libfabric_2.1.0*.orig.tar.* | head -1)" -C "$work"
  [ -d "$work/libfabric-$ver" ] || { log "unexpected tarball layout in $work"; ls "$work" >&2; return 1; }
  build "$work/libfabric-$ver" "$ver"
}

case "${1:-}" in
  --src) [ $# -eq 3 ] || { echo "usage: $0 --src DIR VERSION" >&2; exit 2; }
         built "$3" && { log "$3: cached in $(prefix_of "$3")"; exit 0; }
         build "$(cd "$2" && pwd)" "$3" ;;
  --prefix) [ $# -eq 2 ] || exit 2; built "$2" || exit 1; prefix_of "$2"; echo ;;
  "") debian13 ;;
  *) echo "usage: $0 [--src DIR VERSION | --prefix VERSION]" >&2; exit 2 ;;
esac
