#!/usr/bin/env bash
# The daemon's whole path without SLURM's scheduler: a worker sampler (fake NVML, two GPUs whose
# minor numbers differ from their indices) and its hook events go through the shared spool to
# the controller daemon, whose outbox uploads them to a real expanse-server over TLS; the
# heartbeat relays the worker's health. Then the server goes down and comes back: nothing lost.
# Usage: daemon_end_to_end.sh BUILD_DIR
set -euo pipefail
BUILD="${1:?build directory}"
SERVER="$BUILD/bin/expanse-server"
DAEMON="$BUILD/bin/expanse-daemon"
FAKE_NVML="$BUILD/fakes/nvml/libnvidia-ml.so.1"
TEST_NAME=daemon_end_to_end
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib/expanse_server.sh"
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2; for f in "$DIR"/*.log; do echo "== $f" >&2; tail -20 "$f" >&2; done; exit 1; }
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }

DIR="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; server_stop || true; rm -rf "$DIR"; }
trap cleanup EXIT

prefix="$DIR/shared"
mkdir -p "$prefix" "$DIR/worker1" "$DIR/ctl"
cat >"$DIR/scenario.json" <<'JSON'
{"gpus": [
  {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000001", "minor": 3, "sm_util": 87, "memory_used_mib": 1000,
   "processes": [{"pid": 4242, "used_memory_mib": 900}]},
  {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000002", "minor": 1, "sm_util": 0}]}
JSON
export EXPANSE_FAKE_NVML_SCENARIO="$DIR/scenario.json"
# As SLURM sees the node: GRES index 0 is /dev/nvidia1, which NVML calls index 1.
printf 'NodeName=worker1 Name=gpu File=/dev/nvidia[1,3]\n' >"$DIR/gres.conf"

server_start || fail "server did not start"
server_register e2e "$prefix" || fail "registration"
printf 'SSL_CERT_FILE=%s\n' "$CA_FILE" >"$DIR/daemon.env"
pass "server up at $CP_URL, compute $COMPUTE registered"

# The worker's SLURM hooks: a job that starts and ends between two samples.
start_ms=$(($(date +%s%3N)))
env -i SLURM_JOB_ID=77 SLURMD_NODENAME=worker1 SLURM_JOB_USER=ana SLURM_JOB_GPUS=0 \
  CUDA_VISIBLE_DEVICES=0 "$DAEMON" hook prolog --events-dir "$DIR/worker1/events" \
  >"$DIR/prolog.out" 2>&1 || fail "prolog exited non-zero"
env -i SLURM_JOB_ID=77 SLURMD_NODENAME=worker1 "$DAEMON" hook epilog \
  --events-dir "$DIR/worker1/events" >>"$DIR/prolog.out" 2>&1 || fail "epilog exited non-zero"
[[ "$(ls "$DIR/worker1/events" | wc -l)" == 2 ]] || fail "hooks did not record two events"
pass "prolog and epilog recorded the job's start and end on the node"

# SLURM's view of the job: a stand-in squeue printing a real 22.05 capture, renumbered to 77
# and 78. Job 78 starts now rather than at the capture's fixed time: its timeline spans its life,
# and a fixed start would make the timeline's buckets widen with every day since the capture.
mkdir -p "$DIR/bin"
start_s=$((start_ms / 1000))
cat >"$DIR/bin/squeue" <<SH
#!/bin/sh
exec jq '.jobs |= [(.[0] | .job_id = 77 | .job_state = "COMPLETED"), (.[0] | .job_id = 78 | .start_time = $((start_s - 1)) | .end_time = 0 | .job_state = "RUNNING")]' "$here/../../fixtures/slurm/squeue_running.json"
SH
chmod +x "$DIR/bin/squeue"

common=(--env-file "$DIR/daemon.env" --nvml-library "$FAKE_NVML" --interval 200ms
        --slow-interval 1s --flush-interval 1s --control-dir "$DIR/control")
"$DAEMON" --role sampler --shared-prefix "$prefix" --hostname worker1 --state-dir "$DIR/worker1" \
  --events-dir "$DIR/worker1/events" --gres-conf "$DIR/gres.conf" "${common[@]}" \
  >"$DIR/sampler.log" 2>&1 &
pids+=($!)
PATH="$DIR/bin:$PATH" "$DAEMON" --role controller --config "$DIR/config.json" --hostname ctl --state-dir "$DIR/ctl" \
  --events-dir "$DIR/ctl/events" --heartbeat-interval 1s "${common[@]}" >"$DIR/controller.log" 2>&1 &
ctl_pid=$!
pids+=($ctl_pid)

timeline() {
  api GET "/api/v1/computes/$COMPUTE/jobs/77/timeline" 2>/dev/null || true
}
for _ in $(seq 1 100); do
  events="$(api GET "/api/v1/computes/$COMPUTE/jobs/77" | jq -r '[.events[]?.kind] | sort | join(",")' 2>/dev/null || true)"
  [[ "$events" == "end,start" ]] && break
  sleep 0.2
done
[[ "$events" == "end,start" ]] || fail "job 77's node events did not arrive: $(api GET "/api/v1/computes/$COMPUTE/jobs/77")"
alloc="$(api GET "/api/v1/computes/$COMPUTE/jobs/77" | jq -c '.gpus')"
[[ "$(jq -r '.[0].gpu_uuid' <<<"$alloc")" == GPU-aaaaaaaa-0000-0000-0000-000000000002 &&
   "$(jq -r '.[0].gpu_minor' <<<"$alloc")" == 1 && "$(jq -r '.[0].gpu_index' <<<"$alloc")" == 1 &&
   "$(jq -r '.[0].host' <<<"$alloc")" == worker1 &&
   "$(jq -r '.[0].to_ms' <<<"$alloc")" -gt 0 && "$(jq -r 'length' <<<"$alloc")" == 1 ]] ||
  fail "allocation of job 77: $alloc"
pass "a job shorter than one sample: start, end and its GPU (GRES 0 = minor 1 = NVML index 1) reached the server"
[[ -z "$(ls "$DIR/worker1/events")" ]] || fail "delivered events were not removed from the node"
pass "event files are removed once delivered"

for _ in $(seq 1 100); do
  workers="$(api GET "/api/v1/computes/$COMPUTE" | jq -c '.heartbeat.workers // empty' 2>/dev/null || true)"
  [[ "$(jq -r '.sampled // 0' <<<"${workers:-{\}}")" == 1 ]] && break
  sleep 0.2
done
[[ "$(jq -r .sampled <<<"$workers")" == 1 && "$(jq -r .expected <<<"$workers")" == 1 ]] ||
  fail "heartbeat does not relay the worker: $workers"
pass "the heartbeat relays the worker's health (1 of 1 sampled worker nodes)"

nodes="$(api GET "/api/v1/computes/$COMPUTE/nodes")"
grep -q GPU-aaaaaaaa-0000-0000-0000-000000000002 <<<"$nodes" || fail "worker GPUs not in nodes: $nodes"
pass "the worker's GPUs are listed for the compute"

# A longer job, its GPU named by UUID; then the planes go down for a while and come back: what
# was sampled meanwhile is backfilled.
env -i SLURM_JOB_ID=78 SLURMD_NODENAME=worker1 SLURM_JOB_GPUS=1 \
  CUDA_VISIBLE_DEVICES=GPU-aaaaaaaa-0000-0000-0000-000000000001 "$DAEMON" hook prolog \
  --events-dir "$DIR/worker1/events" >>"$DIR/prolog.out" 2>&1 || fail "prolog exited non-zero"
sleep 2
server_stop
down_from=$(date +%s%3N)
sleep 4
down_to=$(date +%s%3N)
server_start || fail "server did not restart"
in_outage=0
for _ in $(seq 1 100); do
  in_outage="$(api GET "/api/v1/computes/$COMPUTE/jobs/78/timeline?metric=gpu.sm_util&points=1000" |
    jq --argjson a "$down_from" --argjson b "$down_to" \
      '[.. | arrays | select(length == 4 and (.[0] | type) == "number") | select(.[0] > $a + 500 and .[0] < $b - 500)] | length' \
      2>/dev/null || echo 0)"
  [[ "$in_outage" -gt 0 ]] && break
  sleep 0.3
done
[[ "$in_outage" -gt 0 ]] ||
  fail "no samples from the outage: $(api GET "/api/v1/computes/$COMPUTE/jobs/78/timeline?metric=gpu.sm_util&points=50")"
pass "samples taken while the planes were down arrived after they came back ($in_outage buckets)"
grep -q 'sampler aggregator drained' "$DIR/controller.log" || fail "no 'sampler aggregator drained' log line"
pass "controller logs 'sampler aggregator drained'"
kill -TERM "$ctl_pid"; wait "$ctl_pid" || fail "controller exited non-zero on SIGTERM"
pass "controller stops cleanly on SIGTERM"
