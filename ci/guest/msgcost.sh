#!/usr/bin/env bash
# Guest script: instructions per small RDM message, exactly, for rsverbs' native
# RDM (and RSVERBS_BEFORE_PROV, a second build), libfabric's ofi_rxm over
# rsverbs' MSG endpoints (rsverbs_rxm: Mercury's stack), and ofi_rxm over
# libfabric's C verbs (verbs_rxm).
#
#   ci/lab.sh run ci/guest/msgcost.sh OUTDIR
#
# tests/bench/fi_msgcost (one process, the endpoint sends 8-byte tagged
# messages to itself: both ends of each message) runs under callgrind twice,
# with N1 and N2 messages; (instructions(N2) - instructions(N1)) / (N2 - N1)
# is the cost of one message (fi_msgcost zeroes the counts after its warm-up,
# which sets the connection up; tear-down cancels out). Same for one empty fi_cq_read (-P). User-space instructions
# only (provider, libfabric, libibverbs/librxe, libc); the kernel's share
# (rxe) is the same for every contender. Timing under TCG moves 2x between
# runs; these counts move by about 1 % (rsverbs reads the rdma-cm channel
# once per clock tick, and how many ticks a run spans varies).
#
# Output: $LAB_OUT/msgcost.txt, one line per contender:
#   MSGCOST name=rsverbs peers=0 per_msg=4896 per_msg_without_cm=4850 per_poll=462
# (per_msg_without_cm leaves out the rdma-cm channel reads, which follow the
# run's elapsed time under callgrind rather than the number of messages).
# Needs valgrind (skipped with a note when missing).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: >"$LAB_OUT/results.txt"
: >"$LAB_OUT/msgcost.txt"
N1=${MSGCOST_N1:-500}
N2=${MSGCOST_N2:-1500}
POLLS=${MSGCOST_POLLS:-10000}
# MSGCOST_PEERS=N: N more endpoints connect to the measured one first and stay
# idle (fi_msgcost -c), so per-peer work on every message shows; they have
# been idle MSGCOST_SETTLE_MS (default 1000) when the first message goes
# (fi_msgcost -w: rsverbs holds peers idle for 250-500 ms to the credit
# floor; 0 counts the first moments after they connected instead)
PEERS=${MSGCOST_PEERS:-0}
SETTLE=${MSGCOST_SETTLE_MS:-$([ "$PEERS" -gt 0 ] && echo 1000 || echo 0)}
BIN="$LAB_OUT/bin"
if ! command -v valgrind >/dev/null; then
  echo "msgcost: valgrind is not installed (apt-get install valgrind)" | tee -a "$LAB_OUT/msgcost.txt"
  record msgcost_valgrind 1
  exit 1
fi
if [ ! -x "$BIN/fi_msgcost" ] || [ ! -x "$BIN/fi_msgcost_msg" ]; then
  with_timeout 900 bash "$(dirname "${BASH_SOURCE[0]}")/../../tests/bench/build.sh" "$BIN" >"$LAB_OUT/build.log" 2>&1
  record msgcost_build $?
fi
PROV="${RSVERBS_PROV_DIR:-$PWD/target/prov}"
contenders="rsverbs:$PROV"
before="${RSVERBS_BEFORE_PROV:-}"
[ -n "$before" ] && contenders="$contenders rsverbs_before:$before"
# rsverbs_rxm: libfabric's own ofi_rxm over rsverbs' MSG endpoints (what
# Mercury runs: it asks "verbs;ofi_rxm" by name), beside verbs_rxm, the same
# ofi_rxm over libfabric's C verbs. MSGCOST_RXM_OVER_RSVERBS=0 leaves it out.
[ "${MSGCOST_RXM_OVER_RSVERBS:-1}" = 1 ] && contenders="$contenders rsverbs_rxm:$PROV"
contenders="$contenders verbs_rxm:"

# instructions of one callgrind run (PROGRAM TOTALS)
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'; }
# of which in rdma_get_cm_event (inclusive): rsverbs reads the rdma-cm channel
# once per tick of the coarse clock, so this part follows elapsed time, not
# the message count
cmcost() {
  callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$1" 2>/dev/null |
    awk '/:rdma_get_cm_event \[/ { gsub(",", "", $1); s += $1 } END { print s + 0 }'
}

# MSGCOST_EP=msg: MSG endpoints instead (tests/bench/fi_msgcost_msg: a
# connected pair in one process, both ends counted), rsverbs (and
# RSVERBS_BEFORE_PROV) beside libfabric's own C verbs, for each of
# MSGCOST_MODES (send: fi_send + fi_recv, both completions read; inject:
# fi_inject + fi_recv; write: fi_write, its completion read). One line each:
#   MSGCOST name=rsverbs ep=msg mode=send per_op=1234
if [ "${MSGCOST_EP:-rdm}" = msg ]; then
  port=47990
  for c in ${contenders% verbs_rxm:} verbs:; do
    case $c in rsverbs_rxm:*) continue ;; esac
    name=${c%%:*} dir=${c#*:}
    if [ "$name" = verbs ]; then
      envs="-u FI_PROVIDER_PATH FI_VERBS_IFACE=${LAB_NETDEV:-dummy0}"
    else
      envs="FI_PROVIDER_PATH=$dir"
    fi
    for mode in ${MSGCOST_MODES:-send inject write}; do
      rc=0
      for n in "$N1" "$N2"; do
        port=$((port + 1))
        # shellcheck disable=SC2086
        with_timeout 1200 env $envs valgrind --tool=callgrind --callgrind-out-file="$LAB_OUT/msg.$name.$mode.$n.cg" \
          "$BIN/fi_msgcost_msg" -a "$LAB_IP" -o "$port" -p verbs -m "$mode" -n "$n" \
          >"$LAB_OUT/msg.$name.$mode.$n.log" 2>&1 || rc=1
      done
      a=$(total "$LAB_OUT/msg.$name.$mode.$N1.cg") b=$(total "$LAB_OUT/msg.$name.$mode.$N2.cg")
      if [ "$rc" = 0 ] && [ -n "$a" ] && [ -n "$b" ]; then
        echo "MSGCOST name=$name ep=msg mode=$mode per_op=$(( (b - a) / (N2 - N1) ))" | tee -a "$LAB_OUT/msgcost.txt"
      else
        echo "MSGCOST name=$name ep=msg mode=$mode failed (see $LAB_OUT/msg.$name.$mode.*.log)" | tee -a "$LAB_OUT/msgcost.txt"
        rc=1
      fi
      record "msgcost_msg_${name}_$mode" "$rc"
    done
  done
  lab_summary
  exit
fi

for c in $contenders; do
  name=${c%%:*} dir=${c#*:}
  if [ "$name" = verbs_rxm ]; then
    envs="-u FI_PROVIDER_PATH FI_VERBS_IFACE=${LAB_NETDEV:-dummy0} FI_UNIVERSE_SIZE=64"; prov='verbs;ofi_rxm'
  elif [ "$name" = rsverbs_rxm ]; then
    envs="FI_PROVIDER_PATH=$dir"; prov='verbs;ofi_rxm'
  else
    envs="FI_PROVIDER_PATH=$dir"; prov=verbs
  fi
  rc=0
  for run in "$N1:0" "$N2:0" "$N1:$POLLS"; do
    n=${run%%:*} p=${run#*:}
    # shellcheck disable=SC2086
    with_timeout 1200 env $envs valgrind --tool=callgrind --callgrind-out-file="$LAB_OUT/$name.$n.$p.cg" \
      "$BIN/fi_msgcost" -p "$prov" -t -n "$n" -r 1 -P "$p" -c "$PEERS" -w "$SETTLE" >"$LAB_OUT/$name.$n.$p.log" 2>&1 || rc=1
  done
  a=$(total "$LAB_OUT/$name.$N1.0.cg") b=$(total "$LAB_OUT/$name.$N2.0.cg") q=$(total "$LAB_OUT/$name.$N1.$POLLS.cg")
  if [ "$rc" = 0 ] && [ -n "$a" ] && [ -n "$b" ] && [ -n "$q" ]; then
    # fi_msgcost zeroes callgrind's counts after its warm-up (n/10 + 10
    # messages, with the connection set-up): n messages are counted
    m=$(( N2 - N1 ))
    ca=$(cmcost "$LAB_OUT/$name.$N1.0.cg") cb=$(cmcost "$LAB_OUT/$name.$N2.0.cg")
    echo "MSGCOST name=$name peers=$PEERS settle_ms=$SETTLE per_msg=$(( (b - a) / m )) per_msg_without_cm=$(( ((b - cb) - (a - ca)) / m )) per_poll=$(( (q - a) / POLLS ))" |
      tee -a "$LAB_OUT/msgcost.txt"
  else
    echo "MSGCOST name=$name failed (see $LAB_OUT/$name.*.log)" | tee -a "$LAB_OUT/msgcost.txt"
    rc=1
  fi
  record "msgcost_$name" "$rc"
done
lab_summary
