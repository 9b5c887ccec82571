#!/usr/bin/env bash
# Lab smoke test (guest side): proves Soft-RoCE, perftest and libfabric's
# built-in verbs provider work in the VM.
#   ci/lab.sh run ci/guest/smoke.sh /tmp/lab-smoke
set -u
# shellcheck source=ci/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: >"$LAB_OUT/results.txt"

lab_log "smoke: kernel $(uname -r), dev $LAB_DEV, ip $LAB_IP"
ip -br addr >"$LAB_OUT/ip-addr.txt" 2>&1
cat "$LAB_OUT/ip-addr.txt"

# 1. device visible to libibverbs
ibv_devices >"$LAB_OUT/ibv_devices.txt" 2>&1
rc=$?; [ "$rc" = 0 ] && ! grep -qw "$LAB_DEV" "$LAB_OUT/ibv_devices.txt" && rc=1
cat "$LAB_OUT/ibv_devices.txt"
record ibv_devices "$rc"

# 2. full device attributes
ibv_devinfo -v -d "$LAB_DEV" >"$LAB_OUT/devinfo.txt" 2>&1
rc=$?; [ "$rc" = 0 ] && ! grep -q 'PORT_ACTIVE' "$LAB_OUT/devinfo.txt" && rc=1
grep -E 'hca_id|transport|max_mr_size|max_qp:|max_cqe|max_sge|state|active_mtu' "$LAB_OUT/devinfo.txt"
record ibv_devinfo "$rc"

# 3. perftest over rdma_cm (-R).  The rdma_cm listen (port 18515) is not a
#    TCP socket: wait for it with `rdma res show cm_id`.  stdbuf: perftest's
#    stdout is block-buffered into a file otherwise.
rdma res show cm_id >"$LAB_OUT/cm_id.before.txt" 2>&1
PAIR_RDMA_PORT=18515 run_pair ib_send_lat \
  "stdbuf -oL ib_send_lat -R -d $LAB_DEV" \
  "stdbuf -oL ib_send_lat -R -d $LAB_DEV $LAB_IP" 240
rc=$?
grep -E '^ *#bytes|^ *[0-9]+ +[0-9]+ ' "$LAB_OUT/ib_send_lat.client.log"
record ib_send_lat "$rc"

# 4. libfabric's own verbs provider, msg endpoint.  fi_pingpong's
#    out-of-band control channel is TCP 47592.
export FI_VERBS_IFACE="${LAB_NETDEV:-dummy0}"
PAIR_PORT=47592 run_pair fi_pingpong \
  "stdbuf -oL fi_pingpong -p verbs -e msg -I 100 -S 1024" \
  "stdbuf -oL fi_pingpong -p verbs -e msg -I 100 -S 1024 $LAB_IP" 240
rc=$?
grep -E '^ *bytes|^ *1k ' "$LAB_OUT/fi_pingpong.client.log"
record fi_pingpong "$rc"

cat "$LAB_OUT/results.txt"
lab_summary
