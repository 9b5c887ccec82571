#!/usr/bin/env bash
# Guest script: Mercury's own tests over rsverbs (a real client; by hand,
# after ci/mercury.sh built them):
#
#   ci/lab.sh run --mem 4G --timeout 1800 ci/guest/mercury.sh OUTDIR
#
# Mercury asks libfabric 1.17 (Debian 12's core, the one it was built
# against) for "verbs;ofi_rxm": the core's ofi_rxm over rsverbs' MSG
# endpoints, rsverbs found through FI_PROVIDER_PATH (RSVERBS_PROV_DIR,
# default target/prov). Records:
#   mercury_fi_info       the core lists rsverbs' verbs (version 1000.x)
#   mercury_maps          a Mercury server started here maps librsverbs-fi.so
#                         (the core chose rsverbs, not its own C verbs)
#   mercury_ctest_N       `ctest -R ofi_verbs` (rpc, bulk and kill; busy and
#                         blocking; client/server and self), round N of
#                         TEST_HG_ROUNDS (default 2)
# and with TEST_HG_BUILTIN=1, for comparison, over the core's own C verbs
# (FI_PROVIDER_PATH unset, FI_UNIVERSE_SIZE=64):
#   mercury_maps_builtin  a Mercury server maps no librsverbs-fi.so (rsverbs
#                         is not installed in the core's provider directory)
#   mercury_ctest_builtin the same tests
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: >"$LAB_OUT/results.txt"
build=$(bash "$(dirname "${BASH_SOURCE[0]}")/../mercury.sh" --dir) || {
  echo "Mercury is not built: ci/mercury.sh --src DIR" | tee "$LAB_OUT/mercury.txt"
  record mercury_built 1; exit 1
}
# Resolved: the server's maps name the file by its real path.
prov=$(realpath "${RSVERBS_PROV_DIR:-$PWD/target/prov}")
export FI_PROVIDER_PATH="$prov"

fi_info -l 2>&1 | grep -A1 '^verbs' >"$LAB_OUT/fi_info.txt"
grep -q 'version: 1000\.' "$LAB_OUT/fi_info.txt"
record mercury_fi_info $?

# server_maps : starts one Mercury server, long enough to see what it mapped
# (its port file goes to a directory of its own, not to the build directory
# the tests use); prints the librsverbs-fi.so it maps, if any.
server_maps() {
  local tmp spid
  tmp=$(mktemp -d)
  (cd "$tmp" && exec "$build/bin/hg_test_server" --comm ofi --protocol verbs --busy) >"$LAB_OUT/server.log" 2>&1 &
  spid=$!
  for _ in $(seq 1 40); do
    sleep 0.5
    grep -q "Waiting for client" "$LAB_OUT/server.log" && break
  done
  grep -o '/[^ ]*librsverbs-fi\.so' "/proc/$spid/maps" 2>/dev/null | sort -u
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; rm -rf "$tmp"
}
maps=$(server_maps); echo "${maps:-no librsverbs-fi.so mapped}" | tee "$LAB_OUT/maps.txt"
[ "$maps" = "$prov/librsverbs-fi.so" ]
record mercury_maps $?

ctest_round() { # ctest_round NAME : Mercury's verbs tests, their summary in guest.log
  local log="$LAB_OUT/$1.log" rc
  lab_log "mercury: ctest -R ofi_verbs ($1)"
  (cd "$build" && with_timeout 1500 ctest -R ofi_verbs --output-on-failure --timeout 240) >"$log" 2>&1
  rc=$?
  grep -E 'Test +#|tests passed' "$log"
  record "$1" "$rc"
}
for r in $(seq 1 "${TEST_HG_ROUNDS:-2}"); do ctest_round "mercury_ctest_$r"; done
if [ "${TEST_HG_BUILTIN:-0}" = 1 ]; then
  (
    unset FI_PROVIDER_PATH; export FI_UNIVERSE_SIZE=64
    maps=$(server_maps); echo "${maps:-no librsverbs-fi.so mapped}" | tee "$LAB_OUT/maps_builtin.txt"
    [ -z "$maps" ]; record mercury_maps_builtin $?
    ctest_round mercury_ctest_builtin
  )
fi
lab_summary
