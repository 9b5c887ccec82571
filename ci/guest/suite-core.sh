# shellcheck shell=bash
# Core entries of the device suite (sourced by ci/guest/device-suite.sh after
# lib.sh, with the provider environment already exported).
#   - fi_getinfo returns rsverbs as provider "verbs", and only it (libfabric's
#     built-in verbs, version 117.0, is hidden by rsverbs' higher 1000.x);
#   - fi_pingpong -e msg -S all -c over rsverbs;
#   - fi_info -t FI_EP_RDM and fi_pingpong -e rdm -m msg|tagged -S all -c (native RDM).
# Only meaningful for SUITE_PROVIDER=rsverbs.

suite_core() {
  local rc

  # fi_info -p verbs: every verbs info fi_getinfo returns is rsverbs' (provider
  # version 1000.x). libfabric 1.17 keeps the built-in verbs (117.0) registered
  # but hidden: `fi_info -l` still lists it, fi_getinfo never returns it.
  with_timeout 60 fi_info -p verbs >"$LAB_OUT/fi_info_p.log" 2>&1
  rc=$?
  local versions
  # Infos of provider "verbs" itself must all be rsverbs' (1000.1). Those of
  # "verbs;ofi_rxm" carry rxm's own version (117.0): rxm stacked on rsverbs'
  # MSG endpoints (suite_rxm checks what is underneath).
  versions="$(awk '$1 == "provider:" {p = $2} $1 == "version:" && p == "verbs" {print $2}' \
    "$LAB_OUT/fi_info_p.log" | sort -u | tr '\n' ' ')"
  echo "fi_info -p verbs: versions of provider verbs: $versions" >>"$LAB_OUT/fi_info_p.log"
  if [ "$rc" = 0 ] && [ "$versions" != "1000.1 " ]; then rc=1; fi
  with_timeout 60 fi_info -l >"$LAB_OUT/fi_info_l.log" 2>&1 || rc=1
  if ! awk '/^verbs:/{getline; print $2}' "$LAB_OUT/fi_info_l.log" | grep -qx '1000.1'; then rc=1; fi
  record fi_info_returns_rsverbs_only "$rc"

  # FI_RSVERBS_NAME=rsverbs: registered under another name, side by side with
  # the built-in verbs (which fi_getinfo then returns for "verbs" again).
  FI_PROVIDER=rsverbs FI_RSVERBS_NAME=rsverbs with_timeout 60 fi_info -p rsverbs >"$LAB_OUT/fi_info_rename.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && ! grep -Eq '^[[:space:]]*provider:[[:space:]]*rsverbs[[:space:]]*$' "$LAB_OUT/fi_info_rename.log"; then rc=1; fi
  FI_RSVERBS_NAME=rsverbs FI_VERBS_IFACE="${LAB_NETDEV:-dummy0}" with_timeout 60 fi_info -p verbs \
    >>"$LAB_OUT/fi_info_rename.log" 2>&1 || rc=1
  if ! grep -q 'version: 117.0' "$LAB_OUT/fi_info_rename.log"; then rc=1; fi
  record fi_info_renamed_beside_builtin "$rc"

  # fi_info -v for FI_EP_MSG: rsverbs' attributes for the lab's device.
  with_timeout 60 fi_info -p verbs -t FI_EP_MSG -v >"$LAB_OUT/fi_info_v.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && ! grep -q 'prov_version: 1000.1' "$LAB_OUT/fi_info_v.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q "name: ${LAB_DEV}" "$LAB_OUT/fi_info_v.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q 'FI_PROTO_RDMA_CM_IB_RC' "$LAB_OUT/fi_info_v.log"; then rc=1; fi
  record fi_info_verbose_rsverbs "$rc"

  # fi_pingpong, FI_EP_MSG, all sizes, data checks, against itself.
  PAIR_PORT=47592 run_pair fi_pingpong_msg_all \
    "fi_pingpong -p verbs -e msg -I ${PP_ITERS:-100} -S all -c" \
    "fi_pingpong -p verbs -e msg -I ${PP_ITERS:-100} -S all -c $LAB_IP" "${PP_TIMEOUT:-1500}"
  rc=$?
  if [ "$rc" = 0 ] && ! grep -Eq '^(6m|4m) ' "$LAB_OUT/fi_pingpong_msg_all.client.log"; then
    echo "fi_pingpong: largest sizes missing from the output" >>"$LAB_OUT/fi_pingpong_msg_all.client.log"
    rc=1
  fi
  record fi_pingpong_msg_all "$rc"

  # fi_info -v for FI_EP_RDM: native RDM endpoints of provider "verbs".
  with_timeout 60 fi_info -p verbs -t FI_EP_RDM -v >"$LAB_OUT/fi_info_rdm.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && ! grep -q 'type: FI_EP_RDM' "$LAB_OUT/fi_info_rdm.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q 'protocol: FI_PROTO_RXM' "$LAB_OUT/fi_info_rdm.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q 'prov_version: 1000.1' "$LAB_OUT/fi_info_rdm.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -Eq 'caps: .*FI_TAGGED' "$LAB_OUT/fi_info_rdm.log"; then rc=1; fi
  record fi_info_rdm "$rc"

  # fi_pingpong, FI_EP_RDM (rsverbs' own RDM protocol), all sizes, data checks:
  # untagged (-m msg, fi_pingpong's default, spelled out) and tagged (-m tagged).
  local mode name
  for mode in msg tagged; do
    name=fi_pingpong_rdm_all
    [ "$mode" = tagged ] && name=fi_pingpong_rdm_tagged_all
    PAIR_PORT=47592 run_pair "$name" \
      "fi_pingpong -p verbs -e rdm -m $mode -I ${PP_ITERS:-100} -S all -c" \
      "fi_pingpong -p verbs -e rdm -m $mode -I ${PP_ITERS:-100} -S all -c $LAB_IP" "${PP_TIMEOUT:-1500}"
    rc=$?
    if [ "$rc" = 0 ] && ! grep -Eq '^(6m|4m) ' "$LAB_OUT/$name.client.log"; then
      echo "fi_pingpong: largest sizes missing from the output" >>"$LAB_OUT/$name.client.log"
      rc=1
    fi
    record "$name" "$rc"
  done
}

# ============================================================================
# rxm block: libfabric's own ofi_rxm utility provider stacked on rsverbs' MSG
# endpoints (prov_name "verbs;ofi_rxm", what a stock Mercury/DAOS asks for).
# FI_PROVIDER is unset here: the suite's FI_PROVIDER=verbs would filter
# ofi_rxm out, and stock applications run without it. No rxm tuning
# (FI_UNIVERSE_SIZE, FI_OFI_RXM_*) is set. PP_RXM_ITERS (5) iterations per
# size: rxm's rendezvous is slow under TCG (~1 s per 1 MiB transfer).
# ----------------------------------------------------------------------------
suite_rxm() {
  local rc it="${PP_RXM_ITERS:-5}"

  # fi_info -p "verbs;ofi_rxm": RDM infos of ofi_rxm, and the core provider
  # underneath is rsverbs (it logs that it answered a utility provider's
  # core-only query; the built-in verbs is hidden by rsverbs' 1000.x).
  (unset FI_PROVIDER; FI_LOG_LEVEL=info with_timeout 60 fi_info -p "verbs;ofi_rxm" -v \
    >"$LAB_OUT/fi_info_rxm.log" 2>"$LAB_OUT/fi_info_rxm.stderr")
  rc=$?
  if [ "$rc" = 0 ] && ! grep -Eq '^[[:space:]]*prov_name:[[:space:]]*verbs;ofi_rxm[[:space:]]*$' "$LAB_OUT/fi_info_rxm.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q 'type: FI_EP_RDM' "$LAB_OUT/fi_info_rxm.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q "name: ${LAB_DEV}" "$LAB_OUT/fi_info_rxm.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q "registering as provider 'verbs'" "$LAB_OUT/fi_info_rxm.stderr"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q 'asked as the core provider of a utility provider' "$LAB_OUT/fi_info_rxm.stderr"; then rc=1; fi
  [ "$rc" = 0 ] || tail -n 20 "$LAB_OUT/fi_info_rxm.stderr"
  record fi_info_rxm_over_rsverbs "$rc"

  # fi_pingpong over ofi_rxm over rsverbs, all sizes, data checks: msg and tagged.
  local mode
  for mode in msg tagged; do
    PAIR_PORT=47592 run_pair "fi_pingpong_rxm_$mode" \
      "env -u FI_PROVIDER fi_pingpong -p 'verbs;ofi_rxm' -e rdm -m $mode -I $it -S all -c" \
      "env -u FI_PROVIDER fi_pingpong -p 'verbs;ofi_rxm' -e rdm -m $mode -I $it -S all -c $LAB_IP" "${PP_TIMEOUT:-1500}"
    rc=$?
    if [ "$rc" = 0 ] && ! grep -Eq '^(6m|4m) ' "$LAB_OUT/fi_pingpong_rxm_$mode.client.log"; then
      echo "fi_pingpong: largest sizes missing from the output" >>"$LAB_OUT/fi_pingpong_rxm_$mode.client.log"
      rc=1
    fi
    record "fi_pingpong_rxm_$mode" "$rc"
  done
}
# ---- end of the rxm block ---------------------------------------------------
