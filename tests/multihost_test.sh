#!/usr/bin/env bash
# A job across "hosts": each task in a network namespace of its own with
# its own IP on a bridge, TF_CONFIG naming those IPs (from psctl tfconfig
# gen). Mid-run, one worker's link is cut: async training goes on without
# it, the job ends cleanly, and the cut-off worker exits within its
# recovery timeout. Needs root (network namespaces): tagged requires_root,
# so CI's --config=ci leaves it out; run it with
#   bazel test --test_tag_filters=requires_root //tests:multihost_test
#   multihost_test.sh <ps_server> <chief> <worker> <psctl>
set -euo pipefail
ps_server="$(realpath "$1")"
chief="$(realpath "$2")"
worker="$(realpath "$3")"
psctl="$(realpath "$4")"

if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "SKIPPED: needs root and 'ip netns' (run as root on a Linux host)"
  exit 0
fi

dir="${TEST_TMPDIR:-$(mktemp -d)}/multihost"
rm -rf "$dir"
mkdir -p "$dir"
id=$(( $$ % 100000 ))
subnet="10.$(( 100 + id % 100 )).$(( id / 100 % 250 ))"
bridge="psfbr$id"
namespaces=()
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  for i in 0 1 2 3; do ip link del "psfv$id$i" 2>/dev/null || true; done
  ip link del "$bridge" 2>/dev/null || true
}
trap cleanup EXIT

ip link add "$bridge" type bridge
ip link set "$bridge" up
hosts=(ps chief worker0 worker1)
for i in 0 1 2 3; do
  ns="psf$id-$i"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip link add "psfv$id$i" type veth peer name eth0 netns "$ns"
  ip link set "psfv$id$i" master "$bridge" up
  ip -n "$ns" addr add "$subnet.$(( 10 + i ))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done

# The TF_CONFIGs and, as across real hosts, the job's certificates and
# tokens: every task starts with its own share only (tasks/<task>: no CA
# key, no other task's key, its role's token), as copied to its host.
"$psctl" tfconfig gen --ps="$subnet.10" --chief="$subnet.11" \
  --workers="$subnet.12,$subnet.13" --out="$dir/tf" --credentials \
  --job=multihost >/dev/null
secure() {  # secure <task>: the flags naming that task's credentials
  echo "--tls_dir=$dir/tf/tasks/$1/tls --token_dir=$dir/tf/tasks/$1/tokens"
}
data=/usr/share/datasets/fashion-mnist
cat > "$dir/job.json" <<JOB
{
  "name": "multihost",
  "model": {"mlp": {"hidden_sizes": [64]}},
  "optimizer": {"kind": "ADAM"},
  "learning_rate": {"kind": "COSINE_DECAY", "learning_rate": 0.002,
                    "decay_steps": 4000, "alpha": 0.05},
  "data": {"train_images": "$data/train-images-idx3-ubyte.gz",
           "train_labels": "$data/train-labels-idx1-ubyte.gz",
           "test_images": "$data/t10k-images-idx3-ubyte.gz",
           "test_labels": "$data/t10k-labels-idx1-ubyte.gz"},
  "training": {"batch_size": 64, "steps": 4000, "mode": "ASYNC"}
}
JOB

start() {  # start <namespace index> <log name> <tf_config file> <command...>
  local ns="psf$id-$1" log="$dir/$2.log" tf="$3"
  shift 3
  ip netns exec "$ns" env TF_CONFIG="$(cat "$tf")" "$@" > "$log" 2>&1 &
  pids+=("$!")
}
# The namespaces share one kernel, so workers could reach the PS through
# shared memory; real hosts cannot, and this test is about the network.
start 0 ps "$dir/tf/ps-0.json" "$ps_server" $(secure ps-0) \
  --shared_memory=false --checkpoint_root="$dir/checkpoints"
start 1 chief "$dir/tf/chief-0.json" "$chief" $(secure chief-0) \
  --job="$dir/job.json" --checkpoint_dir="$dir/checkpoints" \
  --heartbeat_timeout_s=5 --result_file="$dir/result.json"
start 2 worker0 "$dir/tf/worker-0.json" "$worker" $(secure worker-0) --device=cpu
start 3 worker1 "$dir/tf/worker-1.json" "$worker" $(secure worker-1) \
  --device=cpu --recovery_timeout_s=10
ps_pid=${pids[0]} chief_pid=${pids[1]} w0_pid=${pids[2]} w1_pid=${pids[3]}

# Let training get going, then cut worker 1 off.
for _ in $(seq 1 600); do
  grep -q "step [0-9]*/4000" "$dir/chief.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "all 2 workers joined" "$dir/chief.log" || {
  cat "$dir"/*.log >&2
  echo "FAIL: the job did not start across the namespaces" >&2
  exit 1
}
ip link set "psfv${id}3" down
echo "cut worker-1's link at $(date +%T)"

# wait_for <pid> <seconds>: sets `status` to the exit status or "timeout"
# (not in a subshell: only this shell can wait for its children).
wait_for() {
  local pid="$1" deadline=$(( SECONDS + $2 ))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      status=timeout
      return
    fi
    sleep 0.2
  done
  status=0
  wait "$pid" || status=$?
}
wait_for "$chief_pid" 180
[ "$status" = 0 ] || { cat "$dir/chief.log" >&2; echo "FAIL: chief: $status" >&2; exit 1; }
grep -q "worker-1 at $subnet.13:2222 stopped reporting" "$dir/chief.log"
grep -q "async training continues without it" "$dir/chief.log"
grep -q '"state": "SUCCEEDED"' "$dir/result.json"
wait_for "$ps_pid" 30
[ "$status" = 0 ] || { cat "$dir/ps.log" >&2; echo "FAIL: ps: $status" >&2; exit 1; }
wait_for "$w0_pid" 30
[ "$status" = 0 ] || { cat "$dir/worker0.log" >&2; echo "FAIL: worker0: $status" >&2; exit 1; }
# Cut off, worker 1 gives up once its calls time out and its recovery
# timeout passes: bounded, and not a success.
wait_for "$w1_pid" 150
[ "$status" != timeout ] && [ "$status" != 0 ] || {
  cat "$dir/worker1.log" >&2
  echo "FAIL: worker1 ended with '$status'" >&2
  exit 1
}
echo "PASS: the job succeeded across 4 namespaces without worker-1; worker-1 exited $status"
