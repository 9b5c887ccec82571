# shellcheck shell=bash
# fabtests over rsverbs (issue 22), in the lab: a core's own runfabtests.sh,
# its quick selection (unit, functional and short tests), with no exclude
# list, for provider `verbs` (rsverbs' MSG and native RDM) and
# `verbs;ofi_rxm` (the core's ofi_rxm over rsverbs' MSG endpoints), default
# settings. Sourced by device-suite.sh (suite_fabtests).
#
# Both ends run here: runfabtests gets the provider alone (with host names it
# would ssh to them) and the interface address with -s/-c.
# runfabtests.sh reads an exclude file from ./fabtests/test_configs,
# ./test_configs or ../test_configs of its working directory: it runs in an
# empty directory, so none applies.
#
# Records, per core V and provider P (verbs, verbs_rxm):
#   fabtests_V_P              runfabtests finished and printed its summary,
#                             and every test that failed is one of
#                             ci/guest/fabtests-known.txt (each with its cause
#                             and issue); a failure not listed there fails it
#   fabtests_V_P_<test>       FAIL for each such unlisted failure
# The counts (pass, fail, notrun) go to $LAB_OUT/fabtests-summary.txt.

_ft_known() { # _ft_known V P NAME : true if NAME is a listed known failure
  local v="$1" p="$2" n="$3"
  awk -v v="$v" -v p="$p" -v n="$n" -F'\t' '
    /^#/ || NF < 3 { next }
    ($1 == v || $1 == "*") && ($2 == p || $2 == "*") && $3 == n { found = 1 }
    END { exit !found }' "$(dirname "${BASH_SOURCE[0]}")/fabtests-known.txt"
}

# _ft_timing BLOCK : true if a unit test failed only on one of fabtests' own
# elapsed-time bounds ("fi_eq_sread slept N ms", "fi_cq_sread - signal
# ignored"): under TCG emulation a loaded host can stall the guest past them.
_ft_timing() {
  grep -q '^  server_cmd:' "$1" && ! grep -q '^  client_cmd:' "$1" &&
    grep -Eq 'slept [0-9]+ ms|signal ignored' "$1"
}

# _ft_rerun DIR PREFIX BLOCK : runs the block's (unit test) command once more,
# alone, in the same environment; appends its output to BLOCK.
_ft_rerun() {
  local dir="$1" pre="$2" block="$3" cmd rc
  cmd=$(sed -n 's/^  server_cmd: *//p' "$block" | head -1)
  [ -n "$cmd" ] || return 1
  printf -- '--- run again alone: %s\n' "$cmd" >>"$block"
  (cd "$dir" && with_timeout "${FABTESTS_TEST_TIMEOUT:-120}" env -u FI_PROVIDER \
     LD_LIBRARY_PATH="$pre/lib" FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-$PWD/target/prov}" \
     PATH="$pre/bin:$PATH" bash -c "$cmd") >>"$block" 2>&1
  rc=$?
  printf -- '--- rc %d\n' "$rc" >>"$block"
  [ "$rc" = 0 ]
}

# _ft_teardown BLOCK : true if a client-server test failed only because its
# server's send completed flushed (cq_readerr 125, provider errno 5 =
# IBV_WC_WR_FLUSH_ERR) in ft_tx: fi_rdm_multi_client's client closes its
# endpoint as soon as it has received the server's last message, and rxe
# posts that receive's completion before it sends the RC ACK; if the close
# (rsverbs: QP to error first) gets there first the ACK is never sent, the
# client's DREQ reaches the server with the send still unacknowledged, and
# the send is flushed. The data arrived; the test treats the send's error as
# fatal. Lab, session 34: 1 run in 70 over rsverbs, 0 in 50 over libfabric
# 2.1's C verbs (which destroys the QP without the error transition);
# README, "fabtests' teardown race in the lab".
_ft_teardown() {
  grep -q '^  server_cmd:' "$1" && grep -q '^  client_cmd:' "$1" &&
    grep -q 'cq_readerr 125 (Operation canceled), provider errno: 5 ' "$1" &&
    grep -q '^    ft_tx(): ' "$1"
}

# _ft_rerun_pair DIR PREFIX BLOCK : runs the block's server and client once
# more, alone, in the same environment (the client 1 s after the server, as
# runfabtests does); appends their output to BLOCK; true if both exit 0.
_ft_rerun_pair() {
  local dir="$1" pre="$2" block="$3" scmd ccmd spid src crc
  scmd=$(sed -n 's/^  server_cmd: *//p' "$block" | head -1)
  ccmd=$(sed -n 's/^  client_cmd: *//p' "$block" | head -1)
  [ -n "$scmd" ] && [ -n "$ccmd" ] || return 1
  printf -- '--- run again alone: server %s; client %s\n' "$scmd" "$ccmd" >>"$block"
  (cd "$dir" && with_timeout "${FABTESTS_TEST_TIMEOUT:-120}" env -u FI_PROVIDER \
     LD_LIBRARY_PATH="$pre/lib" FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-$PWD/target/prov}" \
     PATH="$pre/bin:$PATH" bash -c "$scmd") >"$block.server" 2>&1 &
  spid=$!
  sleep 1
  (cd "$dir" && with_timeout "${FABTESTS_TEST_TIMEOUT:-120}" env -u FI_PROVIDER \
     LD_LIBRARY_PATH="$pre/lib" FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-$PWD/target/prov}" \
     PATH="$pre/bin:$PATH" bash -c "$ccmd") >"$block.client" 2>&1
  crc=$?
  wait "$spid"; src=$?
  { echo "--- server (rc $src)"; cat "$block.server"; echo "--- client (rc $crc)"; cat "$block.client"; } >>"$block"
  rm -f "$block.server" "$block.client"
  [ "$src" = 0 ] && [ "$crc" = 0 ]
}

# fabtests_run V PREFIX PROVIDER TAG
fabtests_run() {
  local v="$1" pre="$2" prov="$3" tag="$4"
  local dir="$LAB_OUT/fabtests/$v-$tag" log rc name res unlisted=0 cap
  # The cap on the whole run: RSVERBS_FABTESTS_TIMEOUT, or for
  # verbs;ofi_rxm RSVERBS_FABTESTS_RXM_TIMEOUT when set.
  cap=${RSVERBS_FABTESTS_TIMEOUT:-5400}
  [ "$tag" = verbs_rxm ] && cap=${RSVERBS_FABTESTS_RXM_TIMEOUT:-$cap}
  rm -rf "$dir"; mkdir -p "$dir"
  log="$dir/runfabtests.log"
  lab_log "fabtests: $v $prov (${RSVERBS_FABTESTS_SET:-quick}, no exclude list)"
  (cd "$dir" && with_timeout "$cap" env -u FI_PROVIDER \
     LD_LIBRARY_PATH="$pre/lib" FI_PROVIDER_PATH="${FI_PROVIDER_PATH:-$PWD/target/prov}" \
     PATH="$pre/bin:$PATH" \
     bash "$pre/bin/runfabtests.sh" -vv -T "${FABTESTS_TEST_TIMEOUT:-120}" -p "$pre/bin" -t "${RSVERBS_FABTESTS_SET:-quick}" \
       -s "$LAB_IP" -c "$LAB_IP" "$prov" >"$log" 2>&1)
  rc=$?
  # Each test: "- name: <cmd>" then "  result: Pass|Fail [..]|Notrun|Excluded".
  awk '/^- name:/ { sub(/^- name: +/, ""); n = $0 } /^  result:/ { sub(/^  result: +/, ""); print n "\t" $0 }' \
    "$log" >"$dir/results.tsv"
  local np nf nn ne
  np=$(grep -c $'\tPass' "$dir/results.tsv"); nf=$(grep -c $'\tFail' "$dir/results.tsv")
  nn=$(grep -c $'\tNotrun' "$dir/results.tsv"); ne=$(grep -c $'\tExcluded' "$dir/results.tsv")
  printf '%s\t%s\tpass %d\tfail %d\tnotrun %d\texcluded %d\trc %d\n' "$v" "$prov" "$np" "$nf" "$nn" "$ne" "$rc" \
    >>"$LAB_OUT/fabtests-summary.txt"
  lab_log "fabtests: $v $prov: pass $np, fail $nf, notrun $nn, excluded $ne (runfabtests rc=$rc)"
  local entry block cmd
  while IFS=$'\t' read -r name res; do
    case "$res" in
      Fail*)
        entry="fabtests_${v}_${tag}_$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.-' '_')"
        # The test's own block of the log (its command and output), where
        # the test command shows a failure's log.
        block="$LAB_OUT/$entry.log"
        awk -v n="$name" '/^- name:/ { l = $0; sub(/^- name: +/, ""); on = ($0 == n); if (on) print l; next } on' "$log" >"$block"
        if _ft_known "$v" "$tag" "$name"; then
          lab_log "fabtests: known failure: $name"
        elif _ft_timing "$block" && _ft_rerun "$dir" "$pre" "$block"; then
          # A timing bound of fabtests' own (fi_eq_test allows 5 ms for an
          # sread with an event queued) missed under a loaded emulated lab,
          # and met when the test ran again alone: logged, not a failure.
          lab_log "fabtests: $name failed a timing bound and passed when run again alone ($block)"
          printf '%s\t%s\ttiming retry passed\t%s\n' "$v" "$tag" "$name" >>"$LAB_OUT/fabtests-summary.txt"
        elif _ft_teardown "$block" && _ft_rerun_pair "$dir" "$pre" "$block"; then
          # The server's last send was flushed by the client's close (the
          # teardown race above), and the test passed when run again alone:
          # logged, not a failure.
          lab_log "fabtests: $name lost a send's ACK to the client's close and passed when run again alone ($block)"
          printf '%s\t%s\tteardown retry passed\t%s\n' "$v" "$tag" "$name" >>"$LAB_OUT/fabtests-summary.txt"
        else
          unlisted=$((unlisted + 1))
          record "$entry" 1
        fi ;;
    esac
  done <"$dir/results.tsv"
  # The run must have finished (the summary printed) and excluded nothing.
  rc=0
  grep -q "Percentage of Pass\|# total" "$log" || { echo "runfabtests did not finish" >>"$log"; rc=1; }
  [ "$ne" = 0 ] || rc=1
  [ "$unlisted" = 0 ] || rc=1
  record "fabtests_${v}_${tag}" "$rc"
}

suite_fabtests() {
  local cache=${RSVERBS_CORES:-/opt/rsverbs/cores} v
  : >"$LAB_OUT/fabtests-summary.txt"
  # Entries: VERSION (a core of the cache, with its fabtests) or
  # VERSION=PREFIX (fabtests installed in PREFIX, for the system's core; e.g.
  # 1.17.0=/opt/rsverbs/fabtests-1.17.0, built by hand from the upstream tag).
  local spec
  for spec in ${RSVERBS_FABTESTS_CORES:-2.1.0}; do
    v=${spec%%=*}
    local pre=${spec#*=}
    [ "$pre" = "$spec" ] && pre="$cache/$v"
    if [ ! -x "$pre/bin/runfabtests.sh" ]; then
      lab_log "fabtests: no fabtests for $v in $cache (ci/cores.sh)"; record "fabtests_${v}_built" 1; continue
    fi
    # RSVERBS_FABTESTS_PROVIDERS: which of the two (default both; the test
    # command runs both, with the unit and functional sets).
    case " ${RSVERBS_FABTESTS_PROVIDERS:-verbs verbs_rxm} " in *" verbs "*) fabtests_run "$v" "$pre" verbs verbs ;; esac
    case " ${RSVERBS_FABTESTS_PROVIDERS:-verbs verbs_rxm} " in *" verbs_rxm "*) fabtests_run "$v" "$pre" "verbs;ofi_rxm" verbs_rxm ;; esac
  done
}
