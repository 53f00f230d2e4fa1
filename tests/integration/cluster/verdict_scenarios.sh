#!/usr/bin/env bash
# Verdict scenarios on the real SLURM cluster (docs/formats/verdicts.md), three jobs at once and
# then a fourth:
# - no_process: a job holds a GPU and runs nothing on it. The controller's live detection flags
#   it while it runs (threshold lowered to 10 s), and once it ends its only verdict is
#   no_process, over a minute at least, with the GPU's evidence.
# - host_bound: a job keeps every CPU it was given busy while its GPU (fake NVML) runs at 10 %.
#   Its only verdict is host_bound, with the job's CPU (used, and waited for: on this loaded
#   two-core machine the spinners get less than their CPUs, and still want them) as evidence.
# - a healthy busy job on two GPUs at 95 % with most of their memory: no verdict at all, and
#   never flagged live.
# - io_wait, once the first three are done: a job on w1 reads a file from a slow FUSE file system
#   (tests/tools/slow_fs.py, mounted in w1's namespace; each read waits 200 ms) while its GPU
#   runs at 10 %. This harness's job cgroups are v1 (no per-cgroup I/O pressure), so the evidence
#   is the sampled share of time a thread of the job was in uninterruptible sleep.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
dc_setup
printf 'EXPANSE_LIVE_NO_PROCESS_AFTER_S=10\n' >>"$DIR/daemon.env"

slowfs="$DIR/slowfs"
slowfs_wrapper=""
io_job=""
# The FUSE daemon runs in w1's namespaces (no PID namespace of its own, so its pid is ours to
# signal); it writes that pid before it becomes the daemon. A job still reading keeps the mount
# busy: it is cancelled first, and the mount is detached lazily either way.
slowfs_cleanup() {
  if [[ -n "$io_job" ]]; then
    scancel "$io_job" 2>/dev/null || true
    for _ in $(seq 1 150); do job_finished "$io_job" && break; sleep 0.2; done
  fi
  "$TESTCLUSTER" exec "$w1" -- umount -l "$slowfs" 2>/dev/null || true
  if [[ -s "$DIR/slow_fs.pid" ]]; then
    kill "$(cat "$DIR/slow_fs.pid")" 2>/dev/null || true
  fi
  [[ -z "$slowfs_wrapper" ]] || wait "$slowfs_wrapper" 2>/dev/null || true
}
trap 'slowfs_cleanup; dc_cleanup' EXIT
mkdir -p "$slowfs"
"$TESTCLUSTER" exec "$w1" -- bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$DIR/slow_fs.pid" \
  /usr/bin/python3 "$REPO_ROOT/tests/tools/slow_fs.py" "$slowfs" --delay-ms 200 \
  >"$DIR/slow_fs.log" 2>&1 &
slowfs_wrapper=$!
for _ in $(seq 1 150); do
  "$TESTCLUSTER" exec "$w1" -- test -f "$slowfs/data" && break
  kill -0 "$slowfs_wrapper" 2>/dev/null || fail "the slow file system's daemon exited: $(cat "$DIR/slow_fs.log")"
  sleep 0.2
done
"$TESTCLUSTER" exec "$w1" -- test -f "$slowfs/data" ||
  fail "the slow file system is not mounted on $w1 after 30 s: $(cat "$DIR/slow_fs.log")"

read -r lo hi < <(dc_minors "$w1")
# SLURM gives a one-GPU job the first free GRES index: the first job gets minor $lo (idle, no
# process), the second minor $hi (10 %, most of its memory held).
dc_gpu_scenario "$w1" "[
  {\"uuid\": \"GPU-$w1-minor$lo\", \"minor\": $lo, \"sm_util\": 0, \"memory_used_mib\": 0, \"power_mw\": 70000},
  {\"uuid\": \"GPU-$w1-minor$hi\", \"minor\": $hi, \"sm_util\": 10, \"memory_used_mib\": 100000, \"power_mw\": 150000}]"
read -r lo2 hi2 < <(dc_minors "$w2")
dc_gpu_scenario "$w2" "[
  {\"uuid\": \"GPU-$w2-minor$lo2\", \"minor\": $lo2, \"sm_util\": 95, \"memory_used_mib\": 120000, \"power_mw\": 600000},
  {\"uuid\": \"GPU-$w2-minor$hi2\", \"minor\": $hi2, \"sm_util\": 95, \"memory_used_mib\": 120000, \"power_mw\": 600000}]"
dc_controller_start

# 90 s each: the first job's Prolog starts the samplers, which may find it up to ~10 s late
# (no_process then lasts ~80 s); each interval verdict needs a minute of its state.
idle_job="$(submit -w "$w1" --gres=gpu:1 -o /dev/null --wrap 'sleep 90')"
wait_until 60 "job $idle_job to run" bash -c "[[ \$(squeue -h -j $idle_job -o %t) == R ]]"
# As many spinning processes as CPUs the job got on the node.
cpu_job="$(submit -w "$w1" --gres=gpu:1 -o /dev/null \
  --wrap 'for i in $(seq "$SLURM_CPUS_ON_NODE"); do timeout 90 sh -c "while :; do :; done" & done; wait; true')"
busy_job="$(submit -w "$w2" --gres=gpu:2 -o /dev/null --wrap 'sleep 90')"

wait_until 120 "the controller to flag job $idle_job no_process" \
  grep -q "live detection: job $idle_job no_process" "$DIR/controller.log"
grep "live detection: job $idle_job" "$DIR/controller.log"
pass "job $idle_job flagged no_process while it ran"

for j in "$idle_job" "$cpu_job" "$busy_job"; do
  wait_job_done "$j" 240
  assert_eq COMPLETED "$(job_state "$j")" "state of job $j"
  dc_wait_job 90 "$j" '.end_ms > 0' "the end of job $j on the server"
done
for j in "$cpu_job" "$busy_job"; do
  if grep -q "live detection: job $j " "$DIR/controller.log"; then
    fail "job $j was flagged live: $(grep "live detection: job $j " "$DIR/controller.log")"
  fi
done
pass "jobs $cpu_job and $busy_job never flagged live"

# The io_wait job takes w1's first GPU again, now at 10 % with memory held; it runs while the
# first three jobs' verdicts are checked.
dc_gpu_scenario "$w1" "[
  {\"uuid\": \"GPU-$w1-minor$lo\", \"minor\": $lo, \"sm_util\": 10, \"memory_used_mib\": 100000, \"power_mw\": 150000},
  {\"uuid\": \"GPU-$w1-minor$hi\", \"minor\": $hi, \"sm_util\": 10, \"memory_used_mib\": 100000, \"power_mw\": 150000}]"
io_job="$(submit -w "$w1" --gres=gpu:1 -o "$DIR/io_job.out" \
  --wrap "timeout 80 dd if=$slowfs/data of=/dev/null bs=1M status=none; true")"

verdicts() { api GET "/api/v1/computes/$COMPUTE/jobs/$1/verdicts"; }
codes() { jq -r '[.verdicts[].code] | join(" ")' <<<"$1"; }

# The job's GPUs as the test meant them: the scenario relies on SLURM's first free index.
assert_eq "GPU-$w1-minor$lo" "$(api GET "/api/v1/computes/$COMPUTE/jobs/$idle_job" | jq -r '[.gpus[].gpu_uuid] | join(",")')" "GPU of job $idle_job"
assert_eq "GPU-$w1-minor$hi" "$(api GET "/api/v1/computes/$COMPUTE/jobs/$cpu_job" | jq -r '[.gpus[].gpu_uuid] | join(",")')" "GPU of job $cpu_job"

idle="$(verdicts "$idle_job")"
assert_eq "no_process" "$(codes "$idle")" "the verdicts of job $idle_job, which ran nothing on its GPU"
length_s="$(jq '.verdicts[0] | (.to_ms - .from_ms) / 1000 | floor' <<<"$idle")"
[[ "$length_s" -ge 60 ]] || fail "no_process of job $idle_job lasts $length_s s, not a minute at least: $idle"
assert_eq "GPU-$w1-minor$lo" "$(jq -r '.verdicts[0].gpus | join(",")' <<<"$idle")" "no_process's GPU"
assert_eq "0 0" "$(jq -r '.verdicts[0].evidence.gpus[0] | "\(.sm_util_mean) \(.gpu_processes_max)"' <<<"$idle")" "no_process's evidence: the GPU's utilisation and processes"
assert_match 'start the GPU work sooner' "$(jq -r '.verdicts[0].suggestion' <<<"$idle")" "no_process's suggestion"
pass "job $idle_job: no_process over $length_s s"

cpu="$(verdicts "$cpu_job")"
assert_eq "host_bound" "$(codes "$cpu")" "the verdicts of job $cpu_job, whose CPUs were saturated"
evidence="$(jq -c '.verdicts[0].evidence.cpu' <<<"$cpu")"
jq_holds '.cores_allocated >= 1 and .cores_used_mean > 0 and .cores_waiting_mean >= 0 and
       (.cores_used_mean + .cores_waiting_mean) >= 0.9 * .cores_allocated' <<<"$evidence" >/dev/null ||
  fail "host_bound's CPU evidence does not show the job's CPUs saturated: $evidence"
assert_match "CPUs on $w1 were saturated" "$(jq -r '.verdicts[0].suggestion' <<<"$cpu")" "host_bound's suggestion"
# The negative control of io_wait's evidence: spinning threads are never in uninterruptible sleep.
jq_holds '.verdicts[0].evidence.io.uninterruptible_some_mean < 0.3' <<<"$cpu" >/dev/null ||
  fail "host_bound's job shows its threads blocked: $(jq -c '.verdicts[0].evidence.io' <<<"$cpu")"
pass "job $cpu_job: host_bound, CPU evidence $evidence"

busy="$(verdicts "$busy_job")"
assert_eq "" "$(codes "$busy")" "the verdicts of job $busy_job, busy on both GPUs"
pass "job $busy_job, healthy and busy: no verdict"

wait_job_done "$io_job" 240
assert_eq COMPLETED "$(job_state "$io_job")" "state of job $io_job (output: $(cat "$DIR/io_job.out" 2>/dev/null))"
dc_wait_job 90 "$io_job" '.end_ms > 0' "the end of job $io_job on the server"
assert_eq "GPU-$w1-minor$lo" "$(api GET "/api/v1/computes/$COMPUTE/jobs/$io_job" | jq -r '[.gpus[].gpu_uuid] | join(",")')" "GPU of job $io_job"
io="$(verdicts "$io_job")"
assert_eq "io_wait" "$(codes "$io")" "the verdicts of job $io_job, which read a slow file system ($io)"
evidence="$(jq -c '.verdicts[0].evidence.io' <<<"$io")"
jq_holds ".host == \"$w1\" and .uninterruptible_some_mean >= 0.5 and (has(\"pressure_some_mean\") | not)" \
  <<<"$evidence" >/dev/null || fail "io_wait's evidence does not show the job's reader blocked: $evidence"
assert_match "a thread of the job on $w1 was in uninterruptible sleep" \
  "$(jq -r '.verdicts[0].suggestion' <<<"$io")" "io_wait's suggestion"
pass "job $io_job: io_wait, evidence $evidence"
