#!/usr/bin/env bash
# Host test of ci/install's provider directory (ci/test runs it; no root
# needed, nothing installed: ci/install --destdir stages into a temp dir).
# For Debian's libfabric and for each other core built by ci/cores.sh (under
# ${RSVERBS_CORES:-/opt/rsverbs/cores}), ci/install must put
# librsverbs-fi.so into the directory that core scans without
# FI_PROVIDER_PATH, as the core itself reports it (its fi_info -e:
# FI_PROVIDER_PATH's "(default: DIR)", read through fi_getparams; DIR is
# <its libdir at build time>/libfabric). The core is found three ways: the
# default search (pkg-config, then ldconfig), PKG_CONFIG_PATH pointing at the
# core (a core moved after its build has a libfabric.pc naming a libdir
# without the library: then ci/install must refuse, not fall back to the
# system's libfabric), and --libfabric naming the library.
# Prints PASS/FAIL lines and "N passed, N failed"; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
pass=0 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
result() { # result NAME RC
  if [ "$2" = 0 ]; then echo "PASS $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi
}
# staged NAME EXPECTED_PROVDIR [VAR=VALUE...] [-- CI_INSTALL_ARGS...]: run
# ci/install --destdir, check where the provider, the drop-in and the .pc went.
staged() {
  local name=$1 want=$2; shift 2
  local d=$tmp/$name rc=0 envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  env "${envs[@]}" bash ci/install --no-build --destdir "$d" --prefix /usr/local "$@" >"$tmp/$name.log" 2>&1 || rc=1
  [ -f "$d$want/librsverbs-fi.so" ] || rc=1
  # The drop-in link names the staged provider (absolute links: inside the stage).
  local link=$d/usr/local/lib/rsverbs/dropin/libfabric.so.1 t
  t=$(readlink "$link") || rc=1
  case "$t" in /*) t=$d$t ;; *) t=$(dirname "$link")/$t ;; esac
  [ "$(realpath -m "$t")" = "$d$want/librsverbs-fi.so" ] || rc=1
  grep -q "^libdir=$want\$" "$d/usr/local/lib/pkgconfig/rsverbs.pc" 2>/dev/null || rc=1
  [ "$rc" = 0 ] || { cat "$tmp/$name.log"; find "$d" | head -20; }
  result "install_dir_$name ($want)" "$rc"
}

[ -f target/prov/librsverbs-fi.so ] || { echo "FAIL install_dirs: build first (ci/build)"; exit 1; }
# scanned FI_INFO [ENV...]: the directory a core scans, as its fi_info -e says.
scanned() { env "${@:2}" "$1" -e 2>/dev/null | sed -n 's/^# Search for providers in specific path.*(default: \(.*\))$/\1/p' | head -n 1; }

want=$(scanned fi_info)
[ -n "$want" ] || { echo "FAIL install_dirs: Debian's fi_info -e names no provider directory"; exit 1; }
staged debian12 "$want"
staged debian12_ldconfig "$want" PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=/nonexistent
cores=${RSVERBS_CORES:-/opt/rsverbs/cores}
for lib in "$cores"/*/lib/libfabric.so.1; do
  [ -f "$lib" ] || continue
  pre=$(dirname "$(dirname "$lib")"); v=$(basename "$pre")
  want=$(scanned "$pre/bin/fi_info" LD_LIBRARY_PATH="$pre/lib")
  [ -n "$want" ] || { result "install_dir_core_$v (its fi_info -e names no provider directory)" 1; continue; }
  staged "core_${v}_libfabric" "$want" -- --libfabric "$lib"
  pcdir=$(PKG_CONFIG_PATH="$pre/lib/pkgconfig" pkg-config --variable=libdir libfabric 2>/dev/null)
  if [ -f "$pcdir/libfabric.so.1" ]; then
    staged "core_${v}_pkgconfig" "$want" PKG_CONFIG_PATH="$pre/lib/pkgconfig"
  else
    # Moved core: its .pc points elsewhere; ci/install must stop, naming the problem.
    rc=0
    PKG_CONFIG_PATH="$pre/lib/pkgconfig" bash ci/install --no-build --destdir "$tmp/moved_$v" >"$tmp/moved_$v.log" 2>&1 && rc=1
    grep -q "has no libfabric.so.1" "$tmp/moved_$v.log" || rc=1
    [ -e "$tmp/moved_$v" ] && [ -n "$(find "$tmp/moved_$v" -type f)" ] && rc=1
    [ "$rc" = 0 ] || cat "$tmp/moved_$v.log"
    result "install_dir_core_${v}_pkgconfig_moved (libdir $pcdir without the library: refused)" "$rc"
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
