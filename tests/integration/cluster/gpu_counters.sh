#!/usr/bin/env bash
# GPU hardware counters on the real SLURM cluster: each worker's sampler (started by the Prolog)
# runs the real expanse-cupti-helper against the fake libcuda + libcupti pair (tests/fakes/cupti),
# its per-second SM, tensor and DRAM activity reach the server as the job's timeline, keyed by
# the same GPU UUIDs as the NVML series; EXPANSE_CUPTI_ENABLE=0 on one worker removes them there
# only, EXPANSE_PROFILING_ENABLE=0 on the other keeps them but starts the helper without
# escalation, and each worker's heartbeat report says so. DCGM beside it, through a fake `dcgmi`
# speaking dcgmi's recorded formats (tests/fakes/dcgm), at each worker's EXPANSE_DCGM_HOST:
# health and interconnect series on both workers, DCGM's profiling fields only on the worker
# where CUPTI does not hold the counters, keyed by NVML's UUIDs although DCGM numbers the GPUs the
# other way round.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
helper="$(ls "$BUILD"/cupti/*/bin/expanse-cupti-helper | head -1)"
[[ -x "$helper" ]] || fail "no expanse-cupti-helper in $BUILD/cupti (is a CUDA toolkit installed?)"
dc_setup

# The helper as an operator would pin it with EXPANSE_CUPTI_HELPER, here with the fake driver
# libraries instead of the node's (there is no GPU).
mkdir -p "$prefix/cupti-test"
cat >"$prefix/cupti-test/expanse-cupti-helper" <<WRAP
#!/bin/sh
exec "$helper" --libcuda="$BUILD/fakes/cupti/libcuda.so.1" --libcupti="$BUILD/fakes/cupti/libcupti.so.13" "\$@"
WRAP
chmod 755 "$prefix/cupti-test/expanse-cupti-helper"

# The operator's dcgmi, as EXPANSE_DCGMI would name it; its host engine's behaviour per worker
# comes from that worker's /etc/expanse/fake-dcgm.json.
mkdir -p "$prefix/dcgm-test"
# A copy beside the wrapper: the daemon's account may not read the checkout (a clone
# in a 0700 `mktemp -d` directory).
install -m 644 "$REPO_ROOT/tests/fakes/dcgm/dcgmi" "$prefix/dcgm-test/fake-dcgmi"
cat >"$prefix/dcgm-test/dcgmi" <<WRAP
#!/bin/sh
EXPANSE_FAKE_DCGM_SCENARIO=/etc/expanse/fake-dcgm.json exec python3 "$prefix/dcgm-test/fake-dcgmi" "\$@"
WRAP
chmod 755 "$prefix/dcgm-test/dcgmi"

# GPU UUIDs as NVML and CUDA print them (hex), the same in both fake libraries.
uuid() { printf 'GPU-0000000%d-0000-4000-8000-0000000000%02x' "$1" "$2"; }
n=0
for w in $EXPANSE_TC_WORKERS; do
  n=$((n + 1))
  read -r lo hi < <(dc_minors "$w")
  dc_gpu_scenario "$w" "[
    {\"uuid\": \"$(uuid $n "$hi")\", \"minor\": $hi, \"sm_util\": 91},
    {\"uuid\": \"$(uuid $n "$lo")\", \"minor\": $lo, \"sm_util\": 88}]"
  "$TESTCLUSTER" exec "$w" -- bash -c "cat >/etc/expanse/fake-cupti.json" <<JSON
{"devices": [
  {"uuid": "$(uuid $n "$hi")", "metrics": {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed": 50.0}},
  {"uuid": "$(uuid $n "$lo")", "metrics": {
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed": 93.5,
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed": 71.0,
    "dram__cycles_active.avg.pct_of_peak_sustained_elapsed": 35.0}}]}
JSON
  # DCGM's GPU 0 is NVML's second GPU: the series must follow UUIDs, not positions. The job's
  # GPU (minor lo) fails its memory health check.
  # Each worker's host engine listens at an address of its own, which only EXPANSE_DCGM_HOST
  # tells the daemon.
  "$TESTCLUSTER" exec "$w" -- bash -c "cat >/etc/expanse/fake-dcgm.json" <<JSON
{"engine_host": "dcgm-$w.site:5555",
 "gpus": [
  {"id": 0, "uuid": "$(uuid $n "$lo")", "values": {"1002": 0.62, "1004": 0.41, "202": 3}},
  {"id": 1, "uuid": "$(uuid $n "$hi")", "values": {"1002": 0.11, "202": 0}}],
 "health": {"incidents": [{"entity_group": "GPU", "entity_id": 0, "system": "Memory system",
   "health": "Failure", "message": "Detected 2 volatile double-bit ECC error(s) in GPU 0."}]}}
JSON
  # w1: counters without escalation (EXPANSE_PROFILING_ENABLE=0 never turns the Light set
  # off); w2: no counters at all.
  enable=1 profiling=0
  [[ "$w" == "$w2" ]] && enable=0 profiling=1
  "$TESTCLUSTER" exec "$w" -- bash -c "cat >/etc/expanse/daemon.env" <<ENV
EXPANSE_CUPTI_HELPER=$prefix/cupti-test/expanse-cupti-helper
EXPANSE_CUPTI_ENABLE=$enable
EXPANSE_PROFILING_ENABLE=$profiling
EXPANSE_DCGMI=$prefix/dcgm-test/dcgmi
EXPANSE_DCGM_HOST=dcgm-$w.site:5555
ENV
done
cleanup_counters() {
  for w in $EXPANSE_TC_WORKERS; do
    "$TESTCLUSTER" exec "$w" -- rm -f /etc/expanse/fake-cupti.json /etc/expanse/fake-dcgm.json \
      /etc/expanse/daemon.env || true
  done
  dc_cleanup
}
trap cleanup_counters EXIT
dc_controller_start

# The job holds GRES index 0 on each host: /dev/nvidia$lo. Its batch step (on w1) waits while
# the counters are checked, then runs a process under Nsight Compute's injection library until
# told to stop (no CUDA here: the sampler sees the tool in the process's environment only, as it
# does before a real tool's process has a CUDA context), then waits to be let go.
cat >"$DIR/job.sh" <<JOB
#!/bin/sh
wait_for() { n=0; while [ ! -e "$DIR/\$1" ] && [ \$n -lt 300 ]; do sleep 0.5; n=\$((n + 1)); done; }
wait_for counters.seen
CUDA_INJECTION64_PATH=/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTargetInjection64.so \\
  sh -c 'n=0; while [ ! -e "$DIR/tool.seen" ] && [ \$n -lt 300 ]; do sleep 0.5; n=\$((n + 1)); done'
wait_for resumed.seen
JOB
chmod 755 "$DIR/job.sh"
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null "$DIR/job.sh")"
timeline() { api GET "/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=$1&points=500"; }
mean_on() { timeline "$1" | jq --arg h "$2" '[.series[] | select(.host == $h) | .points[][3]] | if length == 0 then null else add / length end'; }
wait_until 120 "gpu.tensor_active of job $job from $w1's helper" \
  bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=gpu.tensor_active&points=500' | jq --arg h '$w1' '[.series[] | select(.host == \$h) | .points[]] | length') -ge 2 ]]"
read -r lo _ < <(dc_minors "$w1")
series="$(timeline gpu.sm_active)"
assert_eq "$(uuid 1 "$lo")" "$(jq -r --arg h "$w1" '[.series[] | select(.host == $h) | .gpu_uuid] | unique | join(",")' <<<"$series")" \
  "the job's GPU on $w1 in gpu.sm_active (the allocated one, same UUID as NVML)"
assert_eq 0.935 "$(mean_on gpu.sm_active "$w1" | xargs printf '%.3f')" "mean SM activity on $w1"
assert_eq 0.710 "$(mean_on gpu.tensor_active "$w1" | xargs printf '%.3f')" "mean tensor activity on $w1"
assert_eq 0.350 "$(mean_on gpu.dram_active "$w1" | xargs printf '%.3f')" "mean DRAM activity on $w1"
pass "job $job: SM, tensor and DRAM activity from the CUPTI helper on $w1"

# NVML series of the same job on w2 arrive, its counters do not.
wait_until 60 "NVML samples of job $job on $w2" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=gpu.sm_util&points=500' | jq --arg h '$w2' '[.series[] | select(.host == \$h) | .points[]] | length') -ge 2 ]]"
assert_eq 0 "$(timeline gpu.sm_active | jq --arg h "$w2" '[.series[] | select(.host == $h) | .points[]] | length')" \
  "gpu.sm_active points on $w2, where EXPANSE_CUPTI_ENABLE=0"
pass "EXPANSE_CUPTI_ENABLE=0 on $w2 removes its counters only"

caps() { api GET "/api/v1/computes/$COMPUTE" | jq -c --arg h "$1" '.heartbeat.workers.reports[]? | select(.host == $h) | .capabilities.cupti'; }
wait_until 60 "$w1's cupti capability ok in the heartbeat" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE' | jq_holds --arg h '$w1' '.heartbeat.workers.reports[] | select(.host == \$h) | .capabilities.cupti.state == \"ok\"' >/dev/null"
assert_match 'PM sampling on 2 GPUs' "$(caps "$w1")" "cupti capability of $w1"
assert_match 'escalation off \(EXPANSE_PROFILING_ENABLE=0\)' "$(caps "$w1")" "cupti capability of $w1"
assert_match ' --no-escalation' "$(pgrep -af -- "sample --devices=[^ ]*$(uuid 1 "$lo")" | tr '\n' ';')" \
  "the command line of $w1's helper"
assert_eq 'disabled EXPANSE_CUPTI_ENABLE=0' "$(caps "$w2" | jq -r '"\(.state) \(.reason)"')" "cupti capability of $w2"
pass "heartbeat: cupti ok on $w1, disabled on $w2"

# DCGM: health and interconnect series of the job's GPU on both workers, under gpu.dcgm.* names.
points_on() { timeline "$1" | jq --arg h "$2" '[.series[] | select(.host == $h) | .points[]] | length'; }
for w in "$w1" "$w2"; do
  wait_until 60 "gpu.dcgm.health of job $job on $w" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=gpu.dcgm.health&points=500' | jq --arg h '$w' '[.series[] | select(.host == \$h) | .points[]] | length') -ge 1 ]]"
  read -r lo _ < <(dc_minors "$w")
  n=1; [[ "$w" == "$w2" ]] && n=2
  assert_eq "$(uuid $n "$lo")" "$(timeline gpu.dcgm.pcie_replays | jq -r --arg h "$w" '[.series[] | select(.host == $h) | .gpu_uuid] | unique | join(",")')" \
    "the job's GPU on $w in gpu.dcgm.pcie_replays (DCGM's GPU 0, NVML's UUID)"
  assert_eq 3 "$(mean_on gpu.dcgm.pcie_replays "$w")" "PCIe replays of the job's GPU on $w"
  assert_eq 2 "$(mean_on gpu.dcgm.health "$w")" "health of the job's GPU on $w (memory failure)"
done
# DCGM's profiling fields only where CUPTI does not hold the counters.
wait_until 60 "gpu.dcgm.sm_active of job $job on $w2" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=gpu.dcgm.sm_active&points=500' | jq --arg h '$w2' '[.series[] | select(.host == \$h) | .points[]] | length') -ge 2 ]]"
assert_eq 0.620 "$(mean_on gpu.dcgm.sm_active "$w2" | xargs printf '%.3f')" "DCGM SM activity on $w2"
assert_eq 0.410 "$(mean_on gpu.dcgm.tensor_active "$w2" | xargs printf '%.3f')" "DCGM tensor activity on $w2"
assert_eq 0 "$(points_on gpu.dcgm.sm_active "$w1")" "gpu.dcgm.sm_active points on $w1, where CUPTI holds the counters"
dcgm_caps() { api GET "/api/v1/computes/$COMPUTE" | jq -r --arg h "$1" '.heartbeat.workers.reports[]? | select(.host == $h) | .capabilities.dcgm | "\(.state) \(.reason)"'; }
wait_until 60 "$w2's dcgm capability ok in the heartbeat" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE' | jq_holds --arg h '$w2' '.heartbeat.workers.reports[] | select(.host == \$h) | .capabilities.dcgm.state == \"ok\"' >/dev/null"
assert_match '^ok dcgmi dmon on 2 GPUs' "$(dcgm_caps "$w1")" "dcgm capability of $w1"
assert_match 'profiling fields off: expanse-cupti-helper holds the counters' "$(dcgm_caps "$w1")" "dcgm capability of $w1"
assert_match 'health fail, GPU 0 memory: Detected 2 volatile double-bit ECC' "$(dcgm_caps "$w2")" "dcgm capability of $w2"
if [[ "$(dcgm_caps "$w2")" == *"profiling fields off"* ]]; then fail "$w2 has no CUPTI, yet DCGM's profiling fields are off: $(dcgm_caps "$w2")"; fi
pass "DCGM: health and PCIe series on both workers by NVML UUID, profiling fields on $w2 only"

# The job's process under Nsight Compute: w1's helper lets the job's GPU go (and only that one),
# from the process's environment in the job's cgroup, and takes it back when the process ends.
touch "$DIR/counters.seen"
read -r lo _ < <(dc_minors "$w1")
wait_until 60 "$w1's helper yielding the GPU of job $job to its CUDA tool" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE' | jq -r --arg h '$w1' '.heartbeat.workers.reports[] | select(.host == \$h) | .capabilities.cupti.reason' | grep -q 'yielded to another profiler'"
assert_match "^$(uuid 1 "$lo") yielded to another profiler \(yielded_to_job_profiler" "$(caps "$w1" | jq -r .reason)" \
  "cupti capability of $w1 while the job runs Nsight Compute"
pass "job $job starts a process under Nsight Compute: $w1's helper yields its GPU $(uuid 1 "$lo")"
touch "$DIR/tool.seen"
wait_until 60 "$w1's cupti capability ok again" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE' | jq_holds --arg h '$w1' '.heartbeat.workers.reports[] | select(.host == \$h) | .capabilities.cupti.state == \"ok\"' >/dev/null"
assert_match 'PM sampling on 2 GPUs' "$(caps "$w1")" "cupti capability of $w1 once the tool's process ended"
pass "the tool's process ended: $w1's helper samples the job's GPU again"
touch "$DIR/resumed.seen"
wait_job_done "$job" 120
dc_assert_no_drain
