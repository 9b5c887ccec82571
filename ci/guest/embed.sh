#!/usr/bin/env bash
# shellcheck shell=bash
# Embedding entries of the device suite (issue 5): rsverbs as a drop-in
# libfabric.so.1 and embedded through its header, and still as a provider
# under the real libfabric with those exports present.
#
# Sourced by ci/guest/device-suite.sh (function suite_embed), or run alone
# in the lab:  ci/lab.sh run ci/guest/embed.sh OUTDIR
# Needs `ci/build` first (target/prov, target/dropin, target/pkgconfig).
#
#   embed_dropin_loaded      ldd / LD_DEBUG=libs: Debian's fi_info and
#                            fi_pingpong load target/dropin/libfabric.so.1,
#                            never the system libfabric
#   embed_fi_info            unmodified fi_info on the drop-in: -l lists only
#                            rsverbs; -p verbs and -p 'verbs;ofi_rxm' (RDM,
#                            FI_PROTO_RXM) resolve; -p tcp finds nothing;
#                            -e lists rsverbs' variables; --version
#   embed_pingpong_msg_SIZE  unmodified fi_pingpong -e msg -c on the drop-in
#   embed_pingpong_rdm_SIZE  unmodified fi_pingpong -e rdm -c on the drop-in
#   embed_example            examples/embed_rdm.c built with pkg-config rsverbs
#                            (links rsverbs only), run: send/recv + RMA write
#   embed_provider_coexist   FI_PROVIDER_PATH under the real core: rsverbs
#                            registered once beside the built-in verbs, its
#                            info's prov_name set by the core, no fi_* binding
#                            between rsverbs and the core (LD_DEBUG=bindings)

suite_embed() {
  local root="${LAB_ROOT:-$PWD}" rc out sz
  local dropin="$root/target/dropin" prov="$root/target/prov" pc="$root/target/pkgconfig"
  # (matches /usr/lib/... and, with usrmerge, /lib/... as the loader reports it)
  local syslib=/lib/x86_64-linux-gnu/libfabric.so
  # Drop-in runs see no libfabric core at all: no provider path, no built-in verbs.
  local -a DI=(env -u FI_PROVIDER_PATH -u FI_RSVERBS_NAME LD_LIBRARY_PATH="$dropin")

  lab_log "embed: drop-in $dropin -> $(readlink -f "$dropin/libfabric.so.1" 2>/dev/null)"

  # ---- the drop-in is what gets loaded ----
  rc=0
  out="$LAB_OUT/embed_dropin_loaded.log"
  : >"$out"
  [ -e "$dropin/libfabric.so.1" ] || { echo "missing $dropin/libfabric.so.1 (run ci/build)" >>"$out"; rc=1; }
  for b in /usr/bin/fi_info /usr/bin/fi_pingpong; do
    "${DI[@]}" ldd "$b" >>"$out" 2>&1 || rc=1
    grep -q "libfabric.so.1 => $dropin/libfabric.so.1" "$out" || { echo "$b: not resolved to the drop-in" >>"$out"; rc=1; }
  done
  with_timeout 60 "${DI[@]}" LD_DEBUG=libs fi_info -l >>"$out" 2>&1 || rc=1
  if grep -q "$syslib" "$out"; then echo "the system libfabric was loaded" >>"$out"; rc=1; fi
  grep -q "calling init: $dropin/libfabric.so.1" "$out" || { echo "drop-in not initialised" >>"$out"; rc=1; }
  [ "$rc" = 0 ] || tail -n 20 "$out"
  record embed_dropin_loaded "$rc"

  # ---- unmodified fi_info on the drop-in ----
  rc=0
  out="$LAB_OUT/embed_fi_info.log"
  : >"$out"
  local l
  l="$(with_timeout 60 "${DI[@]}" fi_info -l 2>>"$out")" || rc=1
  printf '== fi_info -l\n%s\n' "$l" >>"$out"
  [ "$l" = "$(printf 'verbs:\n    version: 1000.1')" ] || { echo "fi_info -l must list rsverbs alone" >>"$out"; rc=1; }
  echo "== fi_info -p verbs -v" >>"$out"
  with_timeout 60 "${DI[@]}" fi_info -p verbs -v >"$LAB_OUT/embed_fi_info_v.log" 2>&1 || rc=1
  cat "$LAB_OUT/embed_fi_info_v.log" >>"$out"
  grep -q 'type: FI_EP_MSG' "$LAB_OUT/embed_fi_info_v.log" || rc=1
  grep -q 'type: FI_EP_RDM' "$LAB_OUT/embed_fi_info_v.log" || rc=1
  grep -q "name: ${LAB_DEV:-rxe0}" "$LAB_OUT/embed_fi_info_v.log" || rc=1
  grep -q 'prov_name: verbs$' "$LAB_OUT/embed_fi_info_v.log" || rc=1
  grep -q 'prov_version: 1000.1' "$LAB_OUT/embed_fi_info_v.log" || rc=1
  echo "== fi_info -p 'verbs;ofi_rxm' -v" >>"$out"
  with_timeout 60 "${DI[@]}" fi_info -p 'verbs;ofi_rxm' -v >"$LAB_OUT/embed_fi_info_rxm.log" 2>&1 || rc=1
  cat "$LAB_OUT/embed_fi_info_rxm.log" >>"$out"
  grep -q 'prov_name: verbs;ofi_rxm' "$LAB_OUT/embed_fi_info_rxm.log" || rc=1
  grep -q 'protocol: FI_PROTO_RXM' "$LAB_OUT/embed_fi_info_rxm.log" || rc=1
  if grep -q 'type: FI_EP_MSG' "$LAB_OUT/embed_fi_info_rxm.log"; then echo "verbs;ofi_rxm returned MSG" >>"$out"; rc=1; fi
  echo "== fi_info -p tcp (must find nothing)" >>"$out"
  if with_timeout 60 "${DI[@]}" fi_info -p tcp >>"$out" 2>&1; then rc=1; fi
  echo "== fi_info -e" >>"$out"
  with_timeout 60 "${DI[@]}" fi_info -e >"$LAB_OUT/embed_fi_info_e.log" 2>&1 || rc=1
  cat "$LAB_OUT/embed_fi_info_e.log" >>"$out"
  grep -q 'FI_VERBS_IFACE' "$LAB_OUT/embed_fi_info_e.log" || rc=1
  echo "== fi_info --version" >>"$out"
  with_timeout 60 "${DI[@]}" fi_info --version >>"$out" 2>&1 || rc=1
  grep -q 'libfabric: 2.6.0-rsverbs-' "$out" || rc=1
  [ "$rc" = 0 ] || tail -n 30 "$out"
  record embed_fi_info "$rc"

  # ---- unmodified fi_pingpong on the drop-in, both endpoint types, data checks ----
  local ep
  # SKIP_EMBED_PINGPONG=1 (development runs only) leaves them out.
  [ "${SKIP_EMBED_PINGPONG:-0}" = 1 ] || for ep in msg rdm; do
    for sz in ${PP_EMBED_SIZES:-64 65536 1048576}; do
      PAIR_PORT=47592 run_pair "embed_pingpong_${ep}_$sz" \
        "env -u FI_PROVIDER_PATH LD_LIBRARY_PATH=$dropin fi_pingpong -p verbs -e $ep -I ${PP_EMBED_ITERS:-50} -S $sz -c" \
        "env -u FI_PROVIDER_PATH LD_LIBRARY_PATH=$dropin fi_pingpong -p verbs -e $ep -I ${PP_EMBED_ITERS:-50} -S $sz -c $LAB_IP" \
        "${PP_EMBED_TIMEOUT:-300}"
      rc=$?
      # fi_pingpong prints one result line per size ("bytes iters total time ...").
      if [ "$rc" = 0 ] && ! grep -Eq "^[0-9]+[kmg]? +${PP_EMBED_ITERS:-50} " "$LAB_OUT/embed_pingpong_${ep}_$sz.client.log"; then
        echo "fi_pingpong: no result line" >>"$LAB_OUT/embed_pingpong_${ep}_$sz.client.log"
        rc=1
      fi
      record "embed_pingpong_${ep}_$sz" "$rc"
    done
  done

  # ---- the example: header + pkg-config, linked against rsverbs only ----
  rc=0
  out="$LAB_OUT/embed_example.log"
  : >"$out"
  mkdir -p "$LAB_OUT/bin"
  local flags
  flags="$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs rsverbs 2>>"$out")" || rc=1
  echo "pkg-config --cflags --libs rsverbs: $flags" >>"$out"
  # shellcheck disable=SC2086
  cc -std=c99 -Wall -Wextra -Werror -o "$LAB_OUT/bin/embed_rdm" "$root/examples/embed_rdm.c" $flags >>"$out" 2>&1 || rc=1
  if [ "$rc" = 0 ]; then
    ldd "$LAB_OUT/bin/embed_rdm" >>"$out" 2>&1
    if grep -q 'libfabric' "$out"; then echo "the example links libfabric" >>"$out"; rc=1; fi
    with_timeout "${CTEST_TIMEOUT:-180}" env -u FI_PROVIDER_PATH -u FI_RSVERBS_NAME -u LD_LIBRARY_PATH \
      "$LAB_OUT/bin/embed_rdm" >>"$out" 2>&1 || rc=1
    [ "$(tail -n 1 "$out")" = "PASS embed_rdm" ] || rc=1
  fi
  tail -n 8 "$out"
  record embed_example "$rc"

  # ---- provider under the real libfabric, with the core API exports present ----
  rc=0
  out="$LAB_OUT/embed_provider_coexist.log"
  : >"$out"
  # Registered once, beside the built-in verbs (renamed so both are listed).
  FI_PROVIDER_PATH="$prov" FI_RSVERBS_NAME=rsverbs FI_LOG_LEVEL=info \
    with_timeout 300 env -u FI_PROVIDER -u LD_LIBRARY_PATH fi_info -l >"$LAB_OUT/embed_coexist_l.log" 2>"$LAB_OUT/embed_coexist_l.err" || rc=1
  cat "$LAB_OUT/embed_coexist_l.log" >>"$out"
  [ "$(grep -c '^rsverbs:' "$LAB_OUT/embed_coexist_l.log")" = 1 ] || { echo "rsverbs not listed exactly once" >>"$out"; rc=1; }
  awk '/^rsverbs:/{getline; print $2}' "$LAB_OUT/embed_coexist_l.log" | grep -qx 1000.1 || rc=1
  awk '/^verbs:/{getline; print $2}' "$LAB_OUT/embed_coexist_l.log" | grep -qx 117.0 || { echo "built-in verbs missing" >>"$out"; rc=1; }
  local n
  n="$(grep -c "registering as provider 'rsverbs'" "$LAB_OUT/embed_coexist_l.err")"
  echo "rsverbs registrations: $n" >>"$out"
  [ "$n" = 1 ] || rc=1
  # fi_getinfo through the core: rsverbs' info, prov_name filled in by the core;
  # no fi_* symbol binds between rsverbs and the core, either way.
  FI_PROVIDER_PATH="$prov" FI_PROVIDER=verbs LD_DEBUG=bindings \
    with_timeout 300 env -u FI_RSVERBS_NAME -u LD_LIBRARY_PATH fi_info -p verbs -t FI_EP_MSG -v \
    >"$LAB_OUT/embed_coexist_v.log" 2>"$LAB_OUT/embed_coexist_v.err" || rc=1
  grep -q 'prov_name: verbs$' "$LAB_OUT/embed_coexist_v.log" || rc=1
  grep -q 'prov_version: 1000.1' "$LAB_OUT/embed_coexist_v.log" || rc=1
  n="$(grep -c "to $prov/librsverbs-fi.so \[0\]: normal symbol \`fi_prov_ini'" "$LAB_OUT/embed_coexist_v.err")"
  echo "fi_prov_ini lookups in rsverbs: $n" >>"$out"
  [ "$n" = 1 ] || rc=1
  # Except the one probe of the core's version at fi_prov_ini (capi/version.rs).
  if grep "binding file $prov/librsverbs-fi.so" "$LAB_OUT/embed_coexist_v.err" | grep "libfabric.so.1" | grep "symbol \`fi_" | grep -vq "symbol \`fi_version' \[FABRIC_1.0\]"; then
    echo "rsverbs bound an fi_* symbol to the core:" >>"$out"
    grep "binding file $prov/librsverbs-fi.so" "$LAB_OUT/embed_coexist_v.err" | grep "libfabric.so.1" | grep "symbol \`fi_" | head >>"$out"
    rc=1
  fi
  if grep "to $prov/librsverbs-fi.so" "$LAB_OUT/embed_coexist_v.err" | grep "symbol \`fi_" | grep -vq "fi_prov_ini"; then
    echo "something bound an fi_* symbol to rsverbs' copy:" >>"$out"
    grep "to $prov/librsverbs-fi.so" "$LAB_OUT/embed_coexist_v.err" | grep "symbol \`fi_" | grep -v fi_prov_ini | head >>"$out"
    rc=1
  fi
  grep -Eq "binding file fi_info \[0\] to [^ ]*$syslib.1 \[0\]: normal symbol \`fi_getinfo'" "$LAB_OUT/embed_coexist_v.err" || {
    echo "fi_info's fi_getinfo did not bind to the system libfabric" >>"$out"
    rc=1
  }
  [ "$rc" = 0 ] || tail -n 20 "$out"
  record embed_provider_coexist "$rc"
}

# Run alone: ci/lab.sh run ci/guest/embed.sh OUTDIR
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
  : >"$LAB_OUT/results.txt"
  export FI_PROVIDER=verbs
  unset FI_VERBS_IFACE
  suite_embed
  cat "$LAB_OUT/results.txt"
  lab_summary
fi
