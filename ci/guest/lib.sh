# shellcheck shell=bash
# Helpers for lab guest scripts (source me: . ci/guest/lib.sh).
# Runs inside the VM started by ci/lab.sh run, which exports
#   LAB_OUT (shared, host-visible output dir), LAB_IP (10.99.0.1),
#   LAB_DEV (rxe0), LAB_NETDEV (dummy0), LAB_ROOT (repo root), LAB_KVER.
# Works outside the lab too (LAB_OUT defaults to ./lab-out).
# See docs/lab.md.

: "${LAB_OUT:=${LAB_ROOT:-$PWD}/lab-out}"
: "${LAB_IP:=10.99.0.1}"
: "${LAB_DEV:=rxe0}"
mkdir -p "$LAB_OUT"

# lab_log MSG... : timestamped line on stdout (lands in guest.log).
lab_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# _lab_alive PID : true while PID exists and is not a zombie.
_lab_alive() {
  [ -r "/proc/$1/stat" ] || return 1
  local st
  st="$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [ -n "$st" ] && [ "$st" != Z ]
}

# with_timeout SECS CMD... : run CMD with a hard limit.  Returns CMD's rc,
# or 124 if the limit was hit (also when SIGKILL was needed).
with_timeout() {
  local secs="$1"; shift
  local t0=$SECONDS rc
  timeout -k 10 "$secs" "$@"
  rc=$?
  if [ "$rc" = 137 ] && [ $((SECONDS - t0)) -ge "$secs" ]; then rc=124; fi
  return "$rc"
}

# wait_tcp_listen PORT [TIMEOUT=60] : poll `ss -ltn` until something listens
# on TCP PORT (any address).  Returns 0 when it does, 1 on timeout.
wait_tcp_listen() {
  local port="$1" tmo="${2:-60}" t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$tmo" ]; do
    ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && return 0
    sleep 0.3
  done
  return 1
}

# _lab_rdma_listening PORT : true if an rdma_cm id listens on PORT
# (rdma_cm listens are not TCP sockets; `rdma res show cm_id` lists them).
_lab_rdma_listening() {
  rdma res show cm_id 2>/dev/null | grep -w LISTEN | grep -Eq "src-addr [^ ]*:$1( |\$)"
}

# wait_rdma_listen PORT [TIMEOUT=60] : poll until an rdma_cm listener is
# bound to PORT (e.g. 18515 for perftest -R, 7471 for rdma_server).
wait_rdma_listen() {
  local port="$1" tmo="${2:-60}" t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$tmo" ]; do
    _lab_rdma_listening "$port" && return 0
    sleep 0.3
  done
  return 1
}

# wait_log_match FILE REGEX [TIMEOUT=60] [PID] : poll until FILE contains a
# line matching the extended REGEX.  Gives up early when PID has exited.
wait_log_match() {
  local f="$1" re="$2" tmo="${3:-60}" pid="${4:-}" t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$tmo" ]; do
    grep -Eq -- "$re" "$f" 2>/dev/null && return 0
    if [ -n "$pid" ] && ! _lab_alive "$pid"; then
      grep -Eq -- "$re" "$f" 2>/dev/null; return
    fi
    sleep 0.3
  done
  return 1
}

# _lab_kill_group PID : TERM, then KILL, the process group led by PID
# (coreutils timeout makes itself a group leader).
_lab_kill_group() {
  local pid="$1" i
  _lab_alive "$pid" || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  for i in 1 2 3 4 5 6 7 8 9 10; do _lab_alive "$pid" || return 0; sleep 0.5; done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
}

# run_pair NAME SERVER_CMD CLIENT_CMD [TIMEOUT=180]
#   SERVER_CMD and CLIENT_CMD are shell strings (run with bash -c).
#   Server: background, output to $LAB_OUT/NAME.server.log.
#   Readiness, first that applies:
#     PAIR_PORT=N     wait until TCP port N listens (wait_tcp_listen)
#     PAIR_RDMA_PORT=N  wait until an rdma_cm id listens on port N
#     PAIR_READY=RE   wait until the server log matches the extended regex RE
#     otherwise       sleep PAIR_DELAY (default 3) seconds
#   Client: output to $LAB_OUT/NAME.client.log; retried up to PAIR_RETRIES
#   times (default 5, PAIR_RETRY_DELAY s apart, default 3) while the server
#   is still alive.  Each command is limited to TIMEOUT seconds; the server
#   gets PAIR_GRACE (default 60) s after the client to finish.  Leftovers are
#   killed.  Returns 0 only if both exited 0; else the client's rc if
#   non-zero, else the server's (124 = timeout, 125 = server never ready).
run_pair() {
  local name="$1" scmd="$2" ccmd="$3" tmo="${4:-180}"
  local slog="$LAB_OUT/$name.server.log" clog="$LAB_OUT/$name.client.log"
  local retries="${PAIR_RETRIES:-5}" rdelay="${PAIR_RETRY_DELAY:-3}"
  local grace="${PAIR_GRACE:-60}"
  local spid src=0 crc=1 i t0
  : >"$slog"; : >"$clog"
  lab_log "run_pair $name: server: $scmd"
  timeout -k 10 "$tmo" bash -c "$scmd" </dev/null >"$slog" 2>&1 &
  spid=$!

  local ready=0
  if [ -n "${PAIR_PORT:-}" ]; then
    t0=$SECONDS
    while [ $((SECONDS - t0)) -lt 60 ]; do
      ss -ltnH "sport = :$PAIR_PORT" 2>/dev/null | grep -q . && { ready=1; break; }
      _lab_alive "$spid" || break
      sleep 0.3
    done
  elif [ -n "${PAIR_RDMA_PORT:-}" ]; then
    t0=$SECONDS
    while [ $((SECONDS - t0)) -lt 60 ]; do
      _lab_rdma_listening "$PAIR_RDMA_PORT" && { ready=1; break; }
      _lab_alive "$spid" || break
      sleep 0.3
    done
  elif [ -n "${PAIR_READY:-}" ]; then
    wait_log_match "$slog" "$PAIR_READY" 60 "$spid" && ready=1
  else
    sleep "${PAIR_DELAY:-3}"
    _lab_alive "$spid" && ready=1
  fi
  if [ "$ready" != 1 ]; then
    lab_log "run_pair $name: server not ready (pid $spid alive: $(_lab_alive "$spid" && echo yes || echo no))"
    _lab_kill_group "$spid"; wait "$spid" 2>/dev/null
    echo "--- $slog (tail)"; tail -n 20 "$slog"
    return 125
  fi

  for i in $(seq 1 "$retries"); do
    lab_log "run_pair $name: client attempt $i: $ccmd"
    echo "=== attempt $i: $ccmd" >>"$clog"
    with_timeout "$tmo" bash -c "$ccmd" </dev/null >>"$clog" 2>&1
    crc=$?
    [ "$crc" = 0 ] && break
    echo "=== attempt $i exited rc=$crc" >>"$clog"
    [ "$crc" = 124 ] && break
    _lab_alive "$spid" || break
    [ "$i" -lt "$retries" ] && sleep "$rdelay"
  done

  t0=$SECONDS
  while _lab_alive "$spid" && [ $((SECONDS - t0)) -lt "$grace" ]; do sleep 0.3; done
  if _lab_alive "$spid"; then
    lab_log "run_pair $name: server still running ${grace}s after client: killing"
    _lab_kill_group "$spid"
    wait "$spid" 2>/dev/null
    src=124
  else
    wait "$spid"; src=$?
  fi
  lab_log "run_pair $name: server rc=$src client rc=$crc"
  if [ "$src" = 0 ] && [ "$crc" = 0 ]; then return 0; fi
  echo "--- $slog (tail)"; tail -n 20 "$slog"
  echo "--- $clog (tail)"; tail -n 20 "$clog"
  [ "$crc" != 0 ] && return "$crc"
  return "$src"
}

# record NAME RC : append "PASS NAME" or "FAIL NAME (rc=RC)" to
# $LAB_OUT/results.txt (and echo it).  Returns RC.
record() {
  local name="$1" rc="$2" line
  if [ "$rc" = 0 ]; then line="PASS $name"; else line="FAIL $name (rc=$rc)"; fi
  echo "$line" >>"$LAB_OUT/results.txt"
  lab_log "$line"
  return "$rc"
}

# check NAME CMD... : run CMD, record its rc under NAME.
check() { local name="$1"; shift; "$@"; record "$name" $?; }

# lab_summary : print "lab: N passed, N failed" from results.txt; returns 1
# if anything failed or nothing was recorded.
lab_summary() {
  local p f
  p=$(grep -c '^PASS ' "$LAB_OUT/results.txt" 2>/dev/null); p=${p:-0}
  f=$(grep -c '^FAIL ' "$LAB_OUT/results.txt" 2>/dev/null); f=${f:-0}
  echo "lab: $p passed, $f failed"
  [ "$f" = 0 ] && [ "$p" -gt 0 ]
}
