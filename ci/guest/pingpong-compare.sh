#!/usr/bin/env bash
# Guest script of the main job (ci/main): fi_pingpong over FI_EP_MSG, all sizes,
# with data checks, through the real libfabric core — first over rsverbs
# (FI_PROVIDER_PATH), then over libfabric's built-in C verbs provider, in the
# same boot. Writes $LAB_OUT/pingpong-{rsverbs,builtin}.txt and a side-by-side
# table $LAB_OUT/pingpong-compare.txt.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: >"$LAB_OUT/results.txt"
iters=${PP_ITERS:-100}

run_pp() { # run_pp NAME ENV...
  local name=$1; shift
  PAIR_PORT=47592 run_pair "pp-$name" \
    "env $* fi_pingpong -p verbs -e msg -I $iters -S all -c" \
    "env $* fi_pingpong -p verbs -e msg -I $iters -S all -c $LAB_IP" 1200
  local rc=$?
  record "fi_pingpong_msg_$name" "$rc"
  grep -E '^[0-9.]+[kmg]? ' "$LAB_OUT/pp-$name.client.log" >"$LAB_OUT/pingpong-$name.txt" || true
}

run_pp rsverbs "FI_PROVIDER_PATH=$PWD/target/prov" FI_PROVIDER=verbs
run_pp builtin -u FI_PROVIDER_PATH FI_PROVIDER=verbs "FI_VERBS_IFACE=${LAB_NETDEV:-dummy0}"

{
  printf '%-8s %14s %14s %10s %12s %12s\n' bytes "rsverbs_us" "builtin_us" "ratio" "rsverbs_MB/s" "builtin_MB/s"
  join -j1 <(awk '{print $1, $7, $6}' "$LAB_OUT/pingpong-rsverbs.txt") \
           <(awk '{print $1, $7, $6}' "$LAB_OUT/pingpong-builtin.txt") 2>/dev/null |
    awk '{ r = ($4 > 0) ? $2 / $4 : 0; printf "%-8s %14s %14s %10.3f %12s %12s\n", $1, $2, $4, r, $3, $5 }'
} >"$LAB_OUT/pingpong-compare.txt"
cat "$LAB_OUT/pingpong-compare.txt"
lab_summary
