#!/usr/bin/env bash
# kill -9 of the controller daemon, again and again while it drains the spool and uploads: every
# sample the worker's sampler took reaches the server exactly once (the telemetry store keeps one
# value per series and timestamp, so "exactly once" is checked as: as many samples in the store
# as the sampler took, at exactly its timestamps, and no batch rejected).
# Usage: daemon_kill9.sh BUILD_DIR
set -euo pipefail
BUILD="${1:?build directory}"
SERVER="$BUILD/bin/expanse-server"
DAEMON="$BUILD/bin/expanse-daemon"
FAKE_NVML="$BUILD/fakes/nvml/libnvidia-ml.so.1"
TEST_NAME=daemon_kill9
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib/expanse_server.sh"
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2; for f in "$DIR"/*.log; do echo "== $f" >&2; tail -15 "$f" >&2; done; exit 1; }
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }

DIR="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; server_stop || true; rm -rf "$DIR"; }
trap cleanup EXIT

prefix="$DIR/shared"
mkdir -p "$prefix/spool/workers" "$DIR/w" "$DIR/ctl"
echo '{"gpus": [{"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000009", "minor": 0, "sm_util": 42}]}' >"$DIR/scenario.json"
export EXPANSE_FAKE_NVML_SCENARIO="$DIR/scenario.json"
server_start || fail "server did not start"
server_register kill9 "$prefix" || fail "registration"
printf 'SSL_CERT_FILE=%s\n' "$CA_FILE" >"$DIR/daemon.env"

start_s=$(date +%s)
mkdir -p "$DIR/bin"
cat >"$DIR/bin/squeue" <<SH
#!/bin/sh
exec jq '.jobs |= [.[0] | .job_id = 9 | .start_time = $((start_s - 5)) | .end_time = 0 | .job_state = "RUNNING"]' "$here/../../fixtures/slurm/squeue_running.json"
SH
chmod +x "$DIR/bin/squeue"
env -i SLURM_JOB_ID=9 SLURMD_NODENAME=w1 CUDA_VISIBLE_DEVICES=GPU-aaaaaaaa-0000-0000-0000-000000000009 "$DAEMON" hook prolog \
  --events-dir "$DIR/w/events" >/dev/null 2>&1

common=(--env-file "$DIR/daemon.env" --nvml-library "$FAKE_NVML" --flush-interval 500ms
        --slow-interval 5s --control-dir "$DIR/control")
"$DAEMON" --role sampler --shared-prefix "$prefix" --hostname w1 --state-dir "$DIR/w" \
  --events-dir "$DIR/w/events" --interval 100ms "${common[@]}" >"$DIR/sampler.log" 2>&1 &
sampler=$!
pids+=($sampler)

run_controller() {
  PATH="$DIR/bin:$PATH" "$DAEMON" --role controller --config "$DIR/config.json" --hostname ctl \
    --state-dir "$DIR/ctl" --events-dir "$DIR/ctl/events" --interval 1s --heartbeat-interval 1s \
    "${common[@]}" >>"$DIR/controller.log" 2>&1 &
  ctl=$!
  pids+=($ctl)
}
kills=0
for delay in 0.7 1.3 0.4 2.1 0.9 1.6 0.3 1.1; do
  run_controller
  sleep "$delay"
  kill -9 "$ctl"
  wait "$ctl" 2>/dev/null || true
  kills=$((kills + 1))
done
pass "controller killed with SIGKILL $kills times while draining and uploading"

# Stop sampling (the sampler flushes what it holds), then let one controller finish the job.
kill -TERM "$sampler"
wait "$sampler" || fail "sampler exited non-zero"
ticks="$(grep -oP 'sampler stopped after \K[0-9]+' "$DIR/sampler.log")" || fail "no tick count in the sampler log"
run_controller
count() {
  api GET "/api/v1/computes/$COMPUTE/jobs/9/timeline?metric=gpu.sm_util&points=10000" |
    jq '[.series[] | select(.gpu_uuid == "GPU-aaaaaaaa-0000-0000-0000-000000000009") | .points[]] | length'
}
stored=0
for _ in $(seq 1 150); do
  stored="$(count 2>/dev/null || echo 0)"
  [[ "$stored" -ge "$ticks" && -z "$(find "$prefix/spool/workers/w1" -name '*.spool')" ]] && break
  sleep 0.2
done
sleep 2  # anything still in flight would land now
stored="$(count)"
[[ "$stored" == "$ticks" ]] || fail "sampler took $ticks samples, the store holds $stored"
pass "all $ticks samples are in the store, none lost and none twice"
dead="$(api GET "/api/v1/computes/$COMPUTE" | jq -r '.heartbeat.outbox.dead_lettered_batches')"
[[ "$dead" == 0 ]] || fail "$dead batches were refused by the server"
pass "no batch was refused"
