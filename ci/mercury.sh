#!/usr/bin/env bash
# Mercury (https://github.com/mercury-hpc/mercury), a real client of
# rsverbs: builds its own tests against Debian 12's libfabric 1.17 into a
# cache outside the clone, for ci/guest/mercury.sh to run in the lab.
# By hand: Mercury is not packaged for Debian 12 and CI cannot fetch it.
#
#   ci/mercury.sh --src DIR    build from a source tree with its submodules
#                              (a v2.4.1 checkout: Testing/driver/kwsys,
#                              src/mchecksum, src/boost filled in)
#   ci/mercury.sh --dir        print the build directory (exit 1 when not built)
#
# Configured with NA over OFI only (NA_USE_OFI, no shared-memory plugin) and
# the tests' protocol `verbs` (Mercury then asks libfabric for
# "verbs;ofi_rxm": the core's ofi_rxm over rsverbs' MSG endpoints).
# Env: RSVERBS_MERCURY (default /opt/rsverbs/mercury; not under /var/cache,
# which the lab guest hides under a tmpfs).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${RSVERBS_MERCURY:-/opt/rsverbs/mercury}
build=$cache/build
log() { printf '[mercury] %s\n' "$*" >&2; }
built() { [ -x "$build/bin/hg_test_server" ] && [ -f "$build/CTestTestfile.cmake" ]; }

case "${1:-}" in
  --src)
    [ $# -eq 2 ] || { echo "usage: $0 --src DIR" >&2; exit 2; }
    src=$(cd "$2" && pwd)
    for sub in Testing/driver/kwsys src/mchecksum src/boost; do
      [ -n "$(ls -A "$src/$sub" 2>/dev/null)" ] || { log "$src/$sub is empty: check out Mercury's submodules first"; exit 1; }
    done
    bash "$top/ci/deps.sh" cmake g++
    rm -rf "$build"; mkdir -p "$build"
    log "configure $src -> $build"
    (cd "$build" && cmake "$src" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=ON \
       -DNA_USE_OFI=ON -DNA_USE_SM=OFF -DNA_OFI_TESTING_PROTOCOL=verbs \
       -DMERCURY_USE_BOOST_PP=ON -DMERCURY_USE_CHECKSUMS=OFF >"$cache/cmake.log" 2>&1) ||
      { tail -20 "$cache/cmake.log"; exit 1; }
    log "make"
    (cd "$build" && make -j"$(nproc)" >"$cache/make.log" 2>&1) || { tail -30 "$cache/make.log"; exit 1; }
    log "built: $(cd "$build" && ctest -N -R ofi_verbs | tail -1)" ;;
  --dir) built || exit 1; echo "$build" ;;
  *) echo "usage: $0 --src DIR | --dir" >&2; exit 2 ;;
esac
