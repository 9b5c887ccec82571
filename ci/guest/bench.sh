#!/usr/bin/env bash
# Guest script of ci/bench: every contender on the same rxe device in one
# boot, interleaved in rounds (A B C ... A B C ...), so drift hits all alike.
#
#   ci/lab.sh run ci/guest/bench.sh OUTDIR      (ci/bench does this)
#
# Knobs come from $LAB_OUT/bench.env (written by ci/bench), see ci/bench.
# Raw output: $LAB_OUT/raw/<id>.r<round>.{client,server}.log; one line per
# run in $LAB_OUT/runs.tsv (id, round, rc, seconds, log base name).  Parsing,
# medians, targets and plots happen on the host (tests/bench/report.py).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: >"$LAB_OUT/results.txt"
[ -f "$LAB_OUT/bench.env" ] && . "$LAB_OUT/bench.env"

: "${BENCH_ROUNDS:=3}"
: "${BENCH_PP_ITERS:=20}"              # fi_pingpong -I (every size of -S all)
: "${BENCH_SIZES:=8,64,512,4096,16384,65536,262144,1048576,4194304}"  # fi_bw -L
: "${BENCH_PP_SIZES:=all}"             # fi_pingpong -S: "all" or sizes (one run each)
: "${BENCH_PERF_LAT_SIZES:=all}"       # perftest *_lat: "all" (-a, 2 B .. 8 MiB) or sizes (one run each)
: "${BENCH_PERF_LAT_ITERS:=100}"       # perftest *_lat -n
: "${BENCH_PERF_BW_BYTES:=16777216}"   # perftest *_bw: -n = bytes/size, clamped
: "${BENCH_PERF_BW_MAX_ITERS:=5000}"
: "${BENCH_PERF_BW_MIN_ITERS:=200}"
: "${BENCH_PERF_BW_SIZES:=8 4096 65536 262144 1048576 4194304}"
: "${BENCH_LAT_ARGS:=-l 500 -B 16777216 -N 10 -w 20}"      # fi_bw -m lat (+ -L BENCH_SIZES)
: "${BENCH_FB_ARGS:=-l 200 -n 2000 -N 10 -B 8388608 -w 20 -W 64}"  # fi_bw -m latbw
: "${BENCH_BW_ARGS:=-n 5000 -N 20 -B 16777216 -w 50 -W 64}" # fi_bw bandwidth (+ -L BENCH_SIZES)
: "${BENCH_SCALE_PEERS:=1 16 64}"
: "${BENCH_SCALE_ARGS:=-S 8:65536 -l 200}"
: "${BENCH_ONLY:=.}"                   # extended regex over test ids
: "${BENCH_SKIP:=^$}"                  # extended regex over test ids
: "${BENCH_PIN:=1}"                    # 1: server pinned to CPU 0, client to CPU 1 (taskset)
: "${BENCH_TIMEOUT:=900}"              # per run
: "${BENCH_BUDGET:=2100}"              # s: no new round once another would not fit

PROV="${RSVERBS_PROV_DIR:-$PWD/target/prov}"
BIN="$LAB_OUT/bin"
RAW="$LAB_OUT/raw"
mkdir -p "$RAW"
: >"$LAB_OUT/runs.tsv"
ip="$LAB_IP"

# Provider environments.  rsverbs is loaded through FI_PROVIDER_PATH (which
# hides the built-in verbs, see ci/guest/pingpong-compare.sh); the built-in
# runs without it.  ofi_rxm over the built-in verbs only runs on rxe with a
# small universe (its CQs otherwise exceed rxe's max_cqe): FI_UNIVERSE_SIZE=64
# for every rxm contender, so all run alike.
ENV_rsverbs="FI_PROVIDER_PATH=$PROV"
# BENCH_BEFORE_PROV: a directory holding another librsverbs-fi.so (e.g. the
# build before a hot-path change): contender rsverbs_before, MSG and native RDM.
ENV_rsverbs_before="FI_PROVIDER_PATH=${BENCH_BEFORE_PROV:-/nonexistent}"
ENV_verbs="-u FI_PROVIDER_PATH FI_VERBS_IFACE=${LAB_NETDEV:-dummy0}"
ENV_rsverbs_rxm="FI_PROVIDER_PATH=$PROV FI_UNIVERSE_SIZE=64"
ENV_verbs_rxm="-u FI_PROVIDER_PATH FI_VERBS_IFACE=${LAB_NETDEV:-dummy0} FI_UNIVERSE_SIZE=64"
ENV_tcp_rxm="-u FI_PROVIDER_PATH FI_TCP_IFACE=${LAB_NETDEV:-dummy0} FI_UNIVERSE_SIZE=64"
PROV_rsverbs=verbs PROV_verbs=verbs PROV_rsverbs_before=verbs PROV_rsverbs_rxm='verbs;ofi_rxm' PROV_verbs_rxm='verbs;ofi_rxm' PROV_tcp_rxm='tcp;ofi_rxm'

wanted() { [[ "$1" =~ $BENCH_ONLY ]] && ! [[ "$1" =~ $BENCH_SKIP ]]; }

# bench_run ID ROUND PORTKIND SERVER_CMD CLIENT_CMD [SUFFIX]
bench_run() {
  local id=$1 round=$2 kind=$3 scmd=$4 ccmd=$5 t0=$SECONDS rc
  local name="raw/$id.r$round${6:+.$6}"
  # BENCH_PIN=1 (default): server on CPU 0, client on CPU 1, for every
  # contender alike: which vCPUs two busy-polling processes share otherwise
  # changes a whole run's latency (seen: the same contender 47 us in one run,
  # 160 us in the next).
  if [ "$BENCH_PIN" = 1 ]; then scmd="taskset -c 0 $scmd"; ccmd="taskset -c 1 $ccmd"; fi
  if [ "$kind" = rdma ]; then
    PAIR_RDMA_PORT=18515 PAIR_RETRIES=3 PAIR_GRACE=${BENCH_GRACE:-15} run_pair "$name" "$scmd" "$ccmd" "$BENCH_TIMEOUT" >/dev/null
  else
    PAIR_PORT=$kind PAIR_RETRIES=3 PAIR_GRACE=${BENCH_GRACE:-15} run_pair "$name" "$scmd" "$ccmd" "$BENCH_TIMEOUT" >/dev/null
  fi
  rc=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$round" "$rc" "$((SECONDS - t0))" "$name" >>"$LAB_OUT/runs.tsv"
  lab_log "bench $id round $round: rc=$rc $((SECONDS - t0))s"
  # keep the server tail with a failed client (run_pair prints both)
  return 0
}

pp() { # pp CONTENDER EP MODE ROUND : fi_pingpong -S all, or one run per size
  local c=$1 ep=$2 mode=$3 r=$4 id envv provv sz
  id="lat.$c.$ep"; [ "$ep" = rdm ] && id="$id.$mode"
  wanted "$id" || return 0
  envv="ENV_$c"; provv="PROV_$c"
  for sz in $BENCH_PP_SIZES; do
    local args="-p '${!provv}' -e $ep -m $mode -I $BENCH_PP_ITERS -S $sz"
    bench_run "$id" "$r" 47592 \
      "env ${!envv} stdbuf -oL fi_pingpong $args" \
      "env ${!envv} stdbuf -oL fi_pingpong $args $ip" "$sz"
  done
}

flat() { # flat CONTENDER EP MODE ROUND : fi_bw -m lat (per-round-trip times: medians)
  local c=$1 ep=$2 mode=$3 r=$4 id envv provv t=""
  id="med.$c.$ep"; [ "$ep" = rdm ] && id="$id.$mode"
  wanted "$id" || return 0
  [ "$mode" = tagged ] && t=-t
  envv="ENV_$c"; provv="PROV_$c"
  bench_run "$id" "$r" 47600 \
    "env ${!envv} $BIN/fi_bw -p '${!provv}' -e $ep" \
    "env ${!envv} $BIN/fi_bw -p '${!provv}' -e $ep -m lat $t -L $BENCH_SIZES $BENCH_LAT_ARGS $ip"
}

fb() { # fb CONTENDER EP ROUND : fi_bw -m latbw: ping-pong latency, then bandwidth, one connection
  local c=$1 ep=$2 r=$3 id="fb.$1.$2" envv provv
  wanted "$id" || return 0
  envv="ENV_$c"; provv="PROV_$c"
  bench_run "$id" "$r" 47600 \
    "env ${!envv} $BIN/fi_bw -p '${!provv}' -e $ep" \
    "env ${!envv} $BIN/fi_bw -p '${!provv}' -e $ep -m latbw -L $BENCH_SIZES $BENCH_FB_ARGS $ip"
}

perf_lat() { # perf_lat OP ROUND
  local op=$1 r=$2 id="lat.perftest.$1" sz
  wanted "$id" || return 0
  for sz in $BENCH_PERF_LAT_SIZES; do
    local sarg="-s $sz"; [ "$sz" = all ] && sarg=-a
    local args="-R -d $LAB_DEV $sarg -n $BENCH_PERF_LAT_ITERS -F"
    bench_run "$id" "$r" rdma "stdbuf -oL ib_${op}_lat $args" "stdbuf -oL ib_${op}_lat $args $ip" "$sz"
  done
}

perf_bw() { # perf_bw OP ROUND : one run per size (iterations scale with size)
  local op=$1 r=$2 id="bw.perftest.$1" s n
  wanted "$id" || return 0
  for s in $BENCH_PERF_BW_SIZES; do
    n=$((BENCH_PERF_BW_BYTES / s))
    [ "$n" -gt "$BENCH_PERF_BW_MAX_ITERS" ] && n=$BENCH_PERF_BW_MAX_ITERS
    [ "$n" -lt "$BENCH_PERF_BW_MIN_ITERS" ] && n=$BENCH_PERF_BW_MIN_ITERS
    local args="-R -d $LAB_DEV -s $s -n $n -F"
    bench_run "$id.$s" "$r" rdma "stdbuf -oL ib_${op}_bw $args" "stdbuf -oL ib_${op}_bw $args $ip"
  done
}

fibw() { # fibw CONTENDER EP ROUND
  local c=$1 ep=$2 r=$3 id="bw.$1.$2" envv provv
  wanted "$id" || return 0
  envv="ENV_$c"; provv="PROV_$c"
  bench_run "$id" "$r" 47600 \
    "env ${!envv} $BIN/fi_bw -p '${!provv}' -e $ep" \
    "env ${!envv} $BIN/fi_bw -p '${!provv}' -e $ep -L $BENCH_SIZES $BENCH_BW_ARGS $ip"
}

scale() { # scale CONTENDER PEERS : one RDM endpoint, PEERS client endpoints
  local c=$1 n=$2 id="scale.$1.$2" envv provv cenv=""
  wanted "$id" || return 0
  envv="ENV_$c"; provv="PROV_$c"
  # The client's 64 endpoints are not what is measured: smaller rxm pools
  # there keep 64 verbs;ofi_rxm endpoints inside the VM's memory.
  case $c in *rxm) cenv="FI_OFI_RXM_RX_SIZE=64 FI_OFI_RXM_TX_SIZE=64" ;; esac
  bench_run "$id" 1 47600 \
    "env ${!envv} $BIN/fi_bw -p '${!provv}' -e rdm" \
    "env ${!envv} $cenv $BIN/fi_bw -p '${!provv}' -e rdm -m scale -c $n $BENCH_SCALE_ARGS $ip"
}

lab_log "bench: rounds=$BENCH_ROUNDS pp_iters=$BENCH_PP_ITERS only='$BENCH_ONLY' skip='$BENCH_SKIP'"
{
  echo "kernel $(uname -r)"
  echo "cpus $(nproc)"
  echo "mem_kb $(awk '/MemTotal/{print $2}' /proc/meminfo)"
  echo "libfabric $(fi_info --version 2>/dev/null | tr '\n' ' ')"
  echo "perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
  echo "rdma $(rdma link show "$LAB_DEV/1" 2>/dev/null)"
  echo "pin $BENCH_PIN"
  echo "mtu $(ibv_devinfo -d "$LAB_DEV" 2>/dev/null | awk '/active_mtu/{print $2; exit}')"
} >"$LAB_OUT/guest-info.txt"

# ci/bench builds the tools on the host (gcc under TCG takes minutes)
if [ -x "$BIN/fi_bw" ]; then rc=0; else
  with_timeout 900 bash "$(dirname "${BASH_SOURCE[0]}")/../../tests/bench/build.sh" "$BIN" >"$LAB_OUT/build.log" 2>&1
  rc=$?
fi
record bench_build "$rc"
[ "$rc" = 0 ] || { cat "$LAB_OUT/build.log"; exit 1; }
[ -f "$PROV/librsverbs-fi.so" ] || { lab_log "bench: $PROV/librsverbs-fi.so missing"; exit 1; }

scale_all() {
  lab_log "bench: ===== scale"
  for n in $BENCH_SCALE_PEERS; do
    scale rsverbs "$n"
    scale verbs_rxm "$n"
  done
}

t_start=$SECONDS t_scale=0
for r in $(seq 1 "$BENCH_ROUNDS"); do
  if [ "$r" -gt 1 ]; then
    per=$(( (SECONDS - t_start - t_scale) / (r - 1) ))
    if [ $((SECONDS - t_start + per)) -gt "$BENCH_BUDGET" ]; then
      lab_log "bench: stopping after $((r - 1)) rounds: another (~${per}s) would exceed BENCH_BUDGET=${BENCH_BUDGET}s"
      echo "rounds_done $((r - 1))" >>"$LAB_OUT/guest-info.txt"
      break
    fi
  fi
  lab_log "bench: ===== round $r of $BENCH_ROUNDS"
  # latency, MSG
  perf_lat send "$r"
  pp rsverbs msg msg "$r"
  pp verbs msg msg "$r"
  [ -n "${BENCH_BEFORE_PROV:-}" ] && pp rsverbs_before msg msg "$r"
  perf_lat write "$r"
  perf_lat read "$r"
  # latency, RDM
  for m in msg tagged; do
    pp rsverbs rdm "$m" "$r"
    [ -n "${BENCH_BEFORE_PROV:-}" ] && pp rsverbs_before rdm "$m" "$r"
    pp verbs_rxm rdm "$m" "$r"
    pp rsverbs_rxm rdm "$m" "$r"
    pp tcp_rxm rdm "$m" "$r"
  done
  # fi_bw: ping-pong latency (each round trip timed: medians, minima), then
  # bandwidth and message rate, over one connection per contender
  fb rsverbs msg "$r"
  fb verbs msg "$r"
  [ -n "${BENCH_BEFORE_PROV:-}" ] && fb rsverbs_before msg "$r"
  fb rsverbs rdm "$r"
  [ -n "${BENCH_BEFORE_PROV:-}" ] && fb rsverbs_before rdm "$r"
  fb verbs_rxm rdm "$r"
  fb rsverbs_rxm rdm "$r"
  fb tcp_rxm rdm "$r"
  flat rsverbs rdm tagged "$r"
  [ -n "${BENCH_BEFORE_PROV:-}" ] && flat rsverbs_before rdm tagged "$r"
  flat verbs_rxm rdm tagged "$r"
  for op in send write read; do perf_bw "$op" "$r"; done
  # scale once, after the first round (so a short budget still measures it)
  if [ "$r" = 1 ]; then t0s=$SECONDS; scale_all; t_scale=$((SECONDS - t0s)); fi
  echo "rounds_done $r" >>"$LAB_OUT/guest-info.txt"
done

awk -F'\t' '{ printf "%s %s %s\n", ($3 == 0 ? "PASS" : "FAIL"), $1 ".r" $2, ($3 == 0 ? "" : "(rc=" $3 ")") }' \
  "$LAB_OUT/runs.tsv" >>"$LAB_OUT/results.txt"
lab_summary
exit 0
