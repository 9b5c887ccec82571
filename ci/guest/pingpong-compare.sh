#!/usr/bin/env bash
# Guest script of the main job (ci/main): fi_pingpong with data checks (-c)
# through the real libfabric core, rsverbs against libfabric's own providers,
# in the same boot:
#   msg         -e msg:            rsverbs           vs built-in verbs
#   rdm-msg     -e rdm -m msg:     rsverbs (native)  vs built-in verbs;ofi_rxm
#   rdm-tagged  -e rdm -m tagged:  rsverbs (native)  vs built-in verbs;ofi_rxm
# The built-in verbs;ofi_rxm runs get FI_UNIVERSE_SIZE=64 (on rxe it only
# runs with it: its default universe sizes the CQ beyond rxe's max_cqe);
# rsverbs' runs do not. Writes $LAB_OUT/pingpong-<mode>-{rsverbs,builtin}.txt
# and the side-by-side tables $LAB_OUT/pingpong-compare.txt (msg, kept for
# existing readers) and $LAB_OUT/pingpong-compare-all.txt (every mode).
# One line per step (which pair runs, how far along, its result and time) goes
# to $LAB_OUT/progress.log, which ci/main follows while the lab runs.
# PP_MODES (default "msg rdm-msg rdm-tagged") picks the modes.
# PP_SIZES: "default" (fi_pingpong's own set, no -S: 64, 256, 1k, 4k bytes
#   eager, 64k and 1m rendezvous; ci/main), "all" (-S all: every power of two and 1.5 times one up to the
#   largest size fi_pingpong allows; ci/main --full) or one size in bytes.
# PP_ITERS: iterations per size (default 100).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: >"$LAB_OUT/results.txt"
iters=${PP_ITERS:-100}
modes=${PP_MODES:-msg rdm-msg rdm-tagged}
sizes=${PP_SIZES:-all}
case "$sizes" in
  default) size_arg=""; size_text="sizes 64 B-1 MiB (fi_pingpong's default set)" ;;
  all) size_arg="-S all"; size_text="-S all" ;;
  *[!0-9]* | "") lab_log "pingpong-compare: PP_SIZES must be default, all or a number (got '$sizes')"; exit 2 ;;
  *) size_arg="-S $sizes"; size_text="-S $sizes" ;;
esac
pair_tmo=1200; [ "$sizes" = all ] || pair_tmo=400
progress=$LAB_OUT/progress.log
nsteps=0
for mode in $modes; do nsteps=$((nsteps + 2)); done
step=0
# note TEXT: one progress line (guest time since the script started).
note() { printf '[guest %4ds] %s\n' "$SECONDS" "$*" >>"$progress"; }
note "lab up (kernel $(uname -r)); $nsteps fi_pingpong pairs, $size_text, -I $iters, -c"
rs_env=("FI_PROVIDER_PATH=$PWD/target/prov" FI_PROVIDER=verbs)
bi_iface="FI_VERBS_IFACE=${LAB_NETDEV:-dummy0}"

run_pp() { # run_pp MODE WHO FI_PINGPONG_ARGS -- ENV...
  local mode=$1 who=$2 args=$3; shift 4
  local name="$mode-$who" t0=$SECONDS
  step=$((step + 1))
  note "[$step/$nsteps] $mode $who: fi_pingpong $args -I $iters $size_text -c ..."
  PAIR_PORT=47592 run_pair "pp-$name" \
    "env $* fi_pingpong $args -I $iters $size_arg -c" \
    "env $* fi_pingpong $args -I $iters $size_arg -c $LAB_IP" "$pair_tmo"
  local rc=$?
  local verdict=PASS; [ "$rc" = 0 ] || verdict="FAIL (rc=$rc)"
  note "[$step/$nsteps] $mode $who: $verdict in $((SECONDS - t0)) s ($(grep -cE '^[0-9.]+[kmg]? ' "$LAB_OUT/pp-$name.client.log" 2>/dev/null) sizes measured)"
  local rname="fi_pingpong_${mode//-/_}_$who"
  [ "$mode" = msg ] && rname="fi_pingpong_msg_$who" # the names the msg rows always had
  record "$rname" "$rc"
  grep -E '^[0-9.]+[kmg]? ' "$LAB_OUT/pp-$name.client.log" >"$LAB_OUT/pingpong-$name.txt" || true
}

table() { # table MODE : side-by-side rows of one mode
  printf '%-8s %14s %14s %10s %12s %12s\n' bytes "rsverbs_us" "builtin_us" "ratio" "rsverbs_MB/s" "builtin_MB/s"
  join -j1 <(awk '{print $1, $7, $6}' "$LAB_OUT/pingpong-$1-rsverbs.txt") \
           <(awk '{print $1, $7, $6}' "$LAB_OUT/pingpong-$1-builtin.txt") 2>/dev/null |
    awk '{ r = ($4 > 0) ? $2 / $4 : 0; printf "%-8s %14s %14s %10.3f %12s %12s\n", $1, $2, $4, r, $3, $5 }'
}

for mode in $modes; do
  case "$mode" in
    msg)
      run_pp msg rsverbs "-p verbs -e msg" -- "${rs_env[@]}"
      run_pp msg builtin "-p verbs -e msg" -- -u FI_PROVIDER_PATH FI_PROVIDER=verbs "$bi_iface"
      ;;
    rdm-msg | rdm-tagged)
      m=${mode#rdm-}
      run_pp "$mode" rsverbs "-p verbs -e rdm -m $m" -- "${rs_env[@]}"
      run_pp "$mode" builtin "-p 'verbs;ofi_rxm' -e rdm -m $m" -- -u FI_PROVIDER_PATH -u FI_PROVIDER \
        "$bi_iface" FI_UNIVERSE_SIZE=64
      ;;
    *) lab_log "pingpong-compare: unknown mode $mode"; record "pingpong_mode_$mode" 2 ;;
  esac
done

[ -f "$LAB_OUT/pingpong-msg-rsverbs.txt" ] && table msg >"$LAB_OUT/pingpong-compare.txt"
{
  for mode in $modes; do
    case "$mode" in
      msg) echo "== -e msg: rsverbs vs built-in verbs" ;;
      rdm-*) echo "== -e rdm -m ${mode#rdm-}: rsverbs native RDM vs built-in verbs;ofi_rxm (built-in run with FI_UNIVERSE_SIZE=64)" ;;
    esac
    table "$mode"
    echo
  done
} >"$LAB_OUT/pingpong-compare-all.txt"
cat "$LAB_OUT/pingpong-compare-all.txt"
lab_summary
