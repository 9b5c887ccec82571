#!/usr/bin/env bash
# Host test of ci/install's provider directory (ci/test runs it; no root
# needed, nothing installed: ci/install --destdir stages into a temp dir).
# For Debian's libfabric and for each other core built by ci/cores.sh (under
# ${RSVERBS_CORES:-/var/cache/rsverbs/cores}), ci/install must put
# librsverbs-fi.so into that core's PROVDLDIR, the directory it scans without
# FI_PROVIDER_PATH: <its libdir>/libfabric. Found three ways: the default
# search (pkg-config, then ldconfig), PKG_CONFIG_PATH pointing at the core,
# and --libfabric naming the library.
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
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
staged debian12 "/usr/lib/$multiarch/libfabric"
staged debian12_ldconfig "/usr/lib/$multiarch/libfabric" PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=/nonexistent
cores=${RSVERBS_CORES:-/var/cache/rsverbs/cores}
for lib in "$cores"/*/lib/libfabric.so.1; do
  [ -f "$lib" ] || continue
  pre=$(dirname "$(dirname "$lib")"); v=$(basename "$pre")
  staged "core_${v}_pkgconfig" "$pre/lib/libfabric" PKG_CONFIG_PATH="$pre/lib/pkgconfig"
  staged "core_${v}_libfabric" "$pre/lib/libfabric" -- --libfabric "$lib"
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
