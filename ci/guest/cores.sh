# shellcheck shell=bash
# rsverbs under other libfabric cores (issue 21; docs/cores.md), in the lab.
# Sourced by device-suite.sh (suite_cores). For each core built by ci/cores.sh
# in $RSVERBS_CORES (the test command builds 2.1.0, Debian 13's; 1.22.0 and
# 2.6.0 are built by hand from upstream tags), with rsverbs on
# FI_PROVIDER_PATH and that core's own programs (so each asks its own API
# version):
#   core_<v>_fi_info          fi_info -p verbs lists rsverbs (1000.x)
#   core_<v>_apiver           tests/cores/apiver.c, built against the core's
#                             headers: API 1.4 ... the core's own, and one above
#   (and a row for Debian 12's own core, 1.17.0 in /usr, whose pingpongs are
#   suite-core.sh's fi_pingpong_*_all and fi_pingpong_rxm_*)
#   core_<v>_pp_msg           fi_pingpong -e msg -S all -c
#   core_<v>_pp_rdm           fi_pingpong -e rdm -m tagged -S all -c (native RDM)
#   core_<v>_pp_rxm           fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S all -c
#                             (the core's ofi_rxm over rsverbs MSG, defaults)
#   core_<v>_old_app          Debian 12's fi_pingpong (API 1.17) on this core
#   core_<v>_dropin_fi_info   this core's fi_info on rsverbs' drop-in libfabric.so.1
#   core_<v>_dropin_pp        this core's fi_pingpong -e rdm on the drop-in
#   core_<v>_vg_fi_info       fi_info -v under valgrind: no invalid access
#   core_<v>_vg_apiver        apiver under valgrind
#   core_<v>_vg_pp_rdm/_rxm   a short pingpong, both ends under valgrind
# A row per core lands in $LAB_OUT/cores-table.txt.

# _core_env PREFIX : the environment of a program of that core.
_core_env() {
  printf 'env -u FI_PROVIDER LD_LIBRARY_PATH=%s/lib FI_PROVIDER_PATH=%s' "$1" "${FI_PROVIDER_PATH:-$PWD/target/prov}"
}

# _vg_clean LOG... : true when every valgrind log reports no invalid access
# (memcheck's "Invalid read/write/free", "Mismatched free", overlaps) and exists.
_vg_clean() {
  local f
  for f in "$@"; do
    [ -s "$f" ] || { echo "$f: no valgrind output"; return 1; }
    grep -q "ERROR SUMMARY" "$f" || { echo "$f: valgrind did not finish"; return 1; }
    if grep -Eq "Invalid (read|write|free)|Mismatched free|Source and destination overlap|Syscall param .* points to unaddressable" "$f"; then
      grep -E -A6 "Invalid (read|write|free)|Mismatched free|unaddressable" "$f" | head -40
      return 1
    fi
  done
}

VG="valgrind --error-exitcode=0 --undef-value-errors=no --leak-check=no"

# core_row VERSION PREFIX
core_row() {
  local v="$1" pre="$2" e rc row="" t
  e=$(_core_env "$pre")
  local out="$LAB_OUT/cores/$v"; mkdir -p "$out"
  lab_log "cores: $v ($pre)"

  # fi_info of that core: rsverbs listed as verbs 1000.x.
  with_timeout 120 $e "$pre/bin/fi_info" -p verbs >"$out/fi_info.log" 2>&1; rc=$?
  with_timeout 60 $e "$pre/bin/fi_info" -l >>"$out/fi_info.log" 2>&1
  if [ "$rc" = 0 ] && ! grep -Eq '^[[:space:]]*provider:[[:space:]]*verbs[[:space:]]*$' "$out/fi_info.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -A1 '^verbs:' "$out/fi_info.log" | grep -Eq 'version: 1000\.'; then
    echo "fi_info -l does not list verbs 1000.x" >>"$out/fi_info.log"; rc=1
  fi
  # rsverbs saw this core's version (and so declared it as its fi_version).
  with_timeout 60 env FI_LOG_LEVEL=info $e "$pre/bin/fi_info" -l >"$out/fi_info_loglevel.log" 2>&1
  # The core's API version, as its own fi_info reports it (also apiver's range below).
  local cv maj min vers=""
  cv=$($e "$pre/bin/fi_info" --version | sed -n 's/^libfabric api: //p'); maj=${cv%%.*}; min=${cv#*.}
  grep -q "loaded by libfabric core $cv\b" "$out/fi_info_loglevel.log" ||
    { echo "rsverbs did not log 'loaded by libfabric core $cv'" >>"$out/fi_info.log"; grep -i "libfabric core" "$out/fi_info_loglevel.log" >>"$out/fi_info.log"; rc=1; }
  record "core_${v}_fi_info" "$rc"; row+=" fi_info=$rc"

  # apiver against this core's headers, 1.4 up to the core's own version and one above.
  vers="1.4 1.5 1.17"
  [ "$maj" -ge 2 ] || [ "$min" -ge 20 ] && vers+=" 1.20"
  [ "$maj" -ge 2 ] && vers+=" 1.22 2.0"
  vers+=" $cv $maj.$((min + 1))"
  rc=0
  gcc -std=gnu11 -O1 -g -Wall -I"$pre/include" -o "$out/apiver" tests/cores/apiver.c -L"$pre/lib" -lfabric \
    >"$out/apiver.log" 2>&1 || rc=1
  [ "$rc" = 0 ] && { with_timeout 300 $e "$out/apiver" $vers >>"$out/apiver.log" 2>&1; rc=$?; }
  record "core_${v}_apiver" "$rc"; row+=" apiver=$rc"

  # Pingpongs with that core's fabtests, all sizes, data checks (Debian 12's
  # own core: suite-core.sh runs them, fi_pingpong_*_all).
  local it=${CORE_PP_ITERS:-10}
  [ "$pre" = /usr ] || for t in "msg:-p verbs -e msg" "rdm:-p verbs -e rdm -m tagged" "rxm:-p verbs;ofi_rxm -e rdm"; do
    local name="core_${v}_pp_${t%%:*}" args="${t#*:}"
    PAIR_PORT=47592 run_pair "$name" \
      "$e $pre/bin/fi_pingpong $(printf '%q ' $args) -I $it -S all -c" \
      "$e $pre/bin/fi_pingpong $(printf '%q ' $args) -I $it -S all -c $LAB_IP" "${CORE_PP_TIMEOUT:-900}"
    rc=$?
    if [ "$rc" = 0 ] && ! grep -Eq '^(4m|6m|8m) ' "$LAB_OUT/$name.client.log"; then
      echo "fi_pingpong: largest sizes missing" >>"$LAB_OUT/$name.client.log"; rc=1
    fi
    record "$name" "$rc"; row+=" pp_${t%%:*}=$rc"
  done

  # An application of the 1.17 API (Debian 12's fi_pingpong) on this core.
  if [ "$pre" != /usr ]; then
    PAIR_PORT=47592 run_pair "core_${v}_old_app" \
      "$e /usr/bin/fi_pingpong -p verbs -e rdm -I $it -S 65536 -c" \
      "$e /usr/bin/fi_pingpong -p verbs -e rdm -I $it -S 65536 -c $LAB_IP" 300
    rc=$?; record "core_${v}_old_app" "$rc"; row+=" old_app=$rc"
  fi

  # The drop-in: this core's programs (built against its headers and symbol
  # versions) on rsverbs' libfabric.so.1 alone, no core.
  if [ "$pre" != /usr ]; then
    local d="env -u FI_PROVIDER -u FI_PROVIDER_PATH LD_LIBRARY_PATH=${RSVERBS_DROPIN_DIR:-$PWD/target/dropin}"
    with_timeout 120 $d "$pre/bin/fi_info" -p verbs >"$out/dropin_fi_info.log" 2>&1; rc=$?
    with_timeout 60 $d "$pre/bin/fi_info" --version >>"$out/dropin_fi_info.log" 2>&1
    if [ "$rc" = 0 ] && ! grep -Eq '^[[:space:]]*provider:[[:space:]]*verbs[[:space:]]*$' "$out/dropin_fi_info.log"; then rc=1; fi
    grep -q "rsverbs" "$out/dropin_fi_info.log" || { echo "not the drop-in's fi_tostr version" >>"$out/dropin_fi_info.log"; rc=1; }
    record "core_${v}_dropin_fi_info" "$rc"; row+=" dropin_fi_info=$rc"
    PAIR_PORT=47592 run_pair "core_${v}_dropin_pp" \
      "$d $pre/bin/fi_pingpong -p verbs -e rdm -I $it -S 65536 -c" \
      "$d $pre/bin/fi_pingpong -p verbs -e rdm -I $it -S 65536 -c $LAB_IP" 300
    rc=$?; record "core_${v}_dropin_pp" "$rc"; row+=" dropin_pp=$rc"
  fi

  # valgrind: no invalid read or write anywhere (rsverbs, the core, ofi_rxm).
  if command -v valgrind >/dev/null; then
    with_timeout 600 $e $VG --log-file="$out/vg_fi_info.vg" "$pre/bin/fi_info" -p verbs -v >"$out/vg_fi_info.log" 2>&1
    rc=$?; [ "$rc" = 0 ] && { _vg_clean "$out/vg_fi_info.vg" >>"$out/vg_fi_info.log" || rc=1; }
    record "core_${v}_vg_fi_info" "$rc"; row+=" vg_fi_info=$rc"
    rc=1
    [ -x "$out/apiver" ] && { with_timeout 900 $e $VG --log-file="$out/vg_apiver.vg" "$out/apiver" $vers >"$out/vg_apiver.log" 2>&1; rc=$?; }
    [ "$rc" = 0 ] && { _vg_clean "$out/vg_apiver.vg" >>"$out/vg_apiver.log" || rc=1; }
    record "core_${v}_vg_apiver" "$rc"; row+=" vg_apiver=$rc"
    for t in "rdm:-p verbs -e rdm -m tagged" "rxm:-p verbs;ofi_rxm -e rdm"; do
      local name="core_${v}_vg_pp_${t%%:*}" args="${t#*:}"
      PAIR_PORT=47592 run_pair "$name" \
        "$e $VG --log-file=$out/$name.server.vg $pre/bin/fi_pingpong $(printf '%q ' $args) -I 5 -S 16384 -c" \
        "$e $VG --log-file=$out/$name.client.vg $pre/bin/fi_pingpong $(printf '%q ' $args) -I 5 -S 16384 -c $LAB_IP" 900
      rc=$?
      [ "$rc" = 0 ] && { _vg_clean "$out/$name.server.vg" "$out/$name.client.vg" >>"$LAB_OUT/$name.client.log" || rc=1; }
      record "$name" "$rc"; row+=" vg_pp_${t%%:*}=$rc"
    done
  else
    lab_log "cores: valgrind missing"; record "core_${v}_valgrind" 1
  fi
  echo "$v$row" >>"$LAB_OUT/cores-table.txt"
}

suite_cores() {
  local cache=${RSVERBS_CORES:-/opt/rsverbs/cores} pre n=0
  : >"$LAB_OUT/cores-table.txt"
  # Debian 12's core (1.17): fi_info, apiver and valgrind here; its pingpongs
  # are suite-core.sh's.
  case " ${RSVERBS_TEST_CORES:-} " in "  "|*" 1.17.0 "*) core_row 1.17.0 /usr; n=$((n + 1)) ;; esac
  for pre in "$cache"/*/; do
    pre=${pre%/}
    [ -f "$pre/.built" ] && [ -x "$pre/bin/fi_pingpong" ] || continue
    case " ${RSVERBS_TEST_CORES:-} " in "  ") ;; *" $(basename "$pre") "*) ;; *) continue ;; esac
    core_row "$(basename "$pre")" "$pre"; n=$((n + 1))
  done
  if [ "$n" = 0 ]; then
    lab_log "cores: no core built in $cache (ci/cores.sh)"; record cores_built 1
  fi
}
