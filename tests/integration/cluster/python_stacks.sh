#!/usr/bin/env bash
# Python stacks of a SLURM job on the real cluster: a job runs a Python program on a worker; the
# worker's sampler (started by the Prolog) finds the job's processes in its cgroup, reads their
# stacks with the native CPython reader, folds them per window, and the controller uploads them;
# the query API then shows the job's stacks with the right function and line, attributed to that
# job and no other. Three more Python jobs on underused GPUs wait in a data loader, a collective
# and a device synchronisation: each gets exactly its stack verdict (input_bound,
# communication_wait, sync_bound) with the stacks that show it.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
dc_setup
# Short windows so the test does not wait a minute for the first one to close, and a larger CPU
# budget: the sanitizer build reads stacks about ten times slower than a release build.
for w in $EXPANSE_TC_WORKERS; do
  "$TESTCLUSTER" exec "$w" -- bash -c 'printf "EXPANSE_PYSTACKS_WINDOW_SECONDS=10\nEXPANSE_PYSTACKS_CPU_PERCENT=10\n" >/etc/expanse/daemon.env'
done
trap 'for w in $EXPANSE_TC_WORKERS; do "$TESTCLUSTER" exec "$w" -- rm -f /etc/expanse/daemon.env || true; done; dc_cleanup' EXIT
dc_controller_start

# It trains until the test has seen its stacks (the file named by its argument appears), not
# for a fixed time: on a loaded machine the sampler may find it late or sample it slowly.
cat >"$DIR/train.py" <<'PY'
import os, sys, time

def load_batch(n):
    total = 0
    for i in range(n):
        total += i * i  # the hot line
    return total

def train(stop):
    deadline = time.time() + 180
    while time.time() < deadline and not os.path.exists(stop):
        load_batch(20000)

train(sys.argv[1])
PY
hot_line="$(grep -n 'the hot line' "$DIR/train.py" | cut -d: -f1)"

# Three jobs whose GPUs are underused and whose Python stacks say why, each waiting in the code
# a verdict names: a data loader reading its batches (input_bound), a collective waiting for
# the other ranks (communication_wait), a device synchronisation (sync_bound). Their modules sit
# where PyTorch's own do, so their frames carry the paths the server classifies by; they sleep
# in them rather than spin, so three jobs and the sampler share two cores.
mkdir -p "$DIR/site/torch/utils/data" "$DIR/site/torch/distributed" "$DIR/site/torch/cuda"
cat >"$DIR/site/torch/utils/data/dataloader.py" <<'PY'
import time


class _DataLoaderIter:
    def __next__(self):
        with open(__file__, "rb") as f:  # the next batch, from storage
            f.read()
        time.sleep(0.05)
        return 0


_it = _DataLoaderIter()


def step():
    next(_it)
PY
cat >"$DIR/site/torch/distributed/distributed_c10d.py" <<'PY'
import time


def all_reduce(tensor=None):
    time.sleep(0.05)  # the other ranks are late


def step():
    all_reduce()
PY
cat >"$DIR/site/torch/cuda/__init__.py" <<'PY'
import time


def synchronize(device=None):
    time.sleep(0.05)  # the device's queue drains


def step():
    synchronize()
PY
cat >"$DIR/scenario.py" <<'PY'
import importlib.util, os, sys, time

MODULES = {"input": "torch/utils/data/dataloader.py",
           "collective": "torch/distributed/distributed_c10d.py",
           "sync": "torch/cuda/__init__.py"}
root, kind, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
spec = importlib.util.spec_from_file_location("scenario_" + kind, os.path.join(root, MODULES[kind]))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
deadline = time.time() + seconds
while time.time() < deadline:
    module.step()
PY
# Every GPU at 10 %: underused, never idle, so each interval is one the stacks must explain;
# half its memory in use, so no job is memory_oversized.
for w in "$w1" "$w2"; do
  read -r lo hi < <(dc_minors "$w")
  dc_gpu_scenario "$w" "[
    {\"uuid\": \"GPU-$w-minor$hi\", \"minor\": $hi, \"sm_util\": 10, \"memory_used_mib\": 40000},
    {\"uuid\": \"GPU-$w-minor$lo\", \"minor\": $lo, \"sm_util\": 10, \"memory_used_mib\": 40000}]"
done
job="$(submit -w "$w1" --gres=gpu:1 -o "$DIR/job.out" --wrap "python3 $DIR/train.py $DIR/stop")"
declare -A scenario_job
scenario_job[input_bound]="$(submit -w "$w1" --gres=gpu:1 -o /dev/null --wrap "python3 $DIR/scenario.py $DIR/site input 80")"
scenario_job[communication_wait]="$(submit -w "$w2" --gres=gpu:1 -o /dev/null --wrap "python3 $DIR/scenario.py $DIR/site collective 80")"
scenario_job[sync_bound]="$(submit -w "$w2" --gres=gpu:1 -o /dev/null --wrap "python3 $DIR/scenario.py $DIR/site sync 80")"
# Both workers' CPUs are taken by the jobs above: the non-Python job runs on the controller.
other="$(submit -w "$EXPANSE_TC_CONTROLLER" -o /dev/null --wrap 'sleep 20')"
stacks() { api GET "/api/v1/computes/$COMPUTE/jobs/$1/stacks"; }
wait_until 150 "10 stack samples of job $job while it runs" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/stacks' | jq_holds '.total_count >= 10' "
touch "$DIR/stop"
wait_job_done "$job" 60
assert_eq COMPLETED "$(job_state "$job")" "state of Python job $job"
wait_job_done "$other" 60
result="$(stacks "$job")"
echo "$result" | jq -c '{total_count, distinct_stacks, top: .stacks[0:3]}'
jq_holds --arg f "train.py:load_batch:$hot_line" '[.stacks[].folded | select(endswith($f))] | length > 0' <<<"$result" >/dev/null ||
  fail "no stack of job $job ends in train.py:load_batch:$hot_line: $(head -c 1500 <<<"$result")"
jq_holds '[.stacks[].folded | select(contains("train.py:<module>:") and contains("train.py:train:"))] | length > 0' <<<"$result" >/dev/null ||
  fail "job $job's stacks lack the <module> -> train path: $(head -c 1500 <<<"$result")"
pass "job $job: $(jq .total_count <<<"$result") stack samples, leaf train.py:load_batch:$hot_line under <module> and train"
assert_eq 0 "$(stacks "$other" | jq .total_count)" "stack samples of the non-Python job $other"
wait_job_done "$other" 60

# Each scenario job's verdict, with the stacks that show it. The underused interval is what the
# series leave open; the stacks decide which verdict it is.
for code in input_bound communication_wait sync_bound; do
  j="${scenario_job[$code]}"
  wait_job_done "$j" 150
  assert_eq COMPLETED "$(job_state "$j")" "state of the $code job $j"
  dc_wait_job 90 "$j" '.end_ms > 0' "the end of job $j on the server"
  verdicts="$(api GET "/api/v1/computes/$COMPUTE/jobs/$j/verdicts")"
  assert_eq "$code" "$(jq -r '[.verdicts[].code] | join(" ")' <<<"$verdicts")" "the verdicts of job $j"
  top="$(jq -r '.verdicts[0].evidence.stacks.top[0].folded' <<<"$verdicts")"
  case "$code" in
    input_bound) frame="dataloader.py:_DataLoaderIter.__next__" ;;
    communication_wait) frame="distributed_c10d.py:all_reduce" ;;
    sync_bound) frame="__init__.py:synchronize" ;;
  esac
  assert_match "$frame" "$top" "the top stack of job $j's $code"
  assert_match "$frame" "$(jq -r '.verdicts[0].suggestion' <<<"$verdicts")" "$code's suggestion names the frame"
done
pass "input_bound, communication_wait and sync_bound each for its own job, from its stacks"
dc_finish
