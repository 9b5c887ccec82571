# shellcheck shell=bash
# Core entries of the device suite (sourced by ci/guest/device-suite.sh after
# lib.sh, with the provider environment already exported).
#   - fi_info lists rsverbs as provider "verbs", and only it (libfabric's
#     built-in verbs, version 117.0, must be hidden by rsverbs' 1000.x);
#   - fi_pingpong -e msg -S all -c over rsverbs.
# Only meaningful for SUITE_PROVIDER=rsverbs.

suite_core() {
  local rc

  # fi_info -l: exactly one "verbs" provider, with rsverbs' version.
  with_timeout 60 fi_info -l >"$LAB_OUT/fi_info_l.log" 2>&1
  rc=$?
  local versions
  versions="$(awk '/^verbs:/{getline; print $2}' "$LAB_OUT/fi_info_l.log" | tr '\n' ' ')"
  echo "fi_info -l: verbs versions: $versions" >>"$LAB_OUT/fi_info_l.log"
  if [ "$rc" = 0 ] && [ "$versions" != "1000.1 " ]; then rc=1; fi
  record fi_info_lists_rsverbs_only "$rc"

  # fi_info -p verbs -e msg: domains of rsverbs (prov_version 1000.1 in the verbose dump).
  with_timeout 60 fi_info -p verbs -e msg -v >"$LAB_OUT/fi_info_v.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && ! grep -q 'prov_version: 1000.1' "$LAB_OUT/fi_info_v.log"; then rc=1; fi
  if [ "$rc" = 0 ] && ! grep -q "name: ${LAB_DEV}" "$LAB_OUT/fi_info_v.log"; then rc=1; fi
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
}
