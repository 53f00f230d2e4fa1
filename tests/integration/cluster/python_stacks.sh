#!/usr/bin/env bash
# Python stacks of a SLURM job on the real cluster: a job runs a Python program on a worker; the
# worker's sampler (started by the Prolog) finds the job's processes in its cgroup, reads their
# stacks with the native CPython reader, folds them per window, and the controller uploads them;
# the query API then shows the job's stacks with the right function and line, attributed to that
# job and no other.
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
job="$(submit -w "$w1" --gres=gpu:1 -o "$DIR/job.out" --wrap "python3 $DIR/train.py $DIR/stop")"
other="$(submit -w "$w2" --gres=gpu:1 -o /dev/null --wrap 'sleep 20')"
stacks() { api GET "/api/v1/computes/$COMPUTE/jobs/$1/stacks"; }
wait_until 150 "10 stack samples of job $job while it runs" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/stacks' | jq -e '.total_count >= 10' "
touch "$DIR/stop"
wait_job_done "$job" 60
assert_eq COMPLETED "$(job_state "$job")" "state of Python job $job"
wait_job_done "$other" 60
result="$(stacks "$job")"
echo "$result" | jq -c '{total_count, distinct_stacks, top: .stacks[0:3]}'
jq -e --arg f "train.py:load_batch:$hot_line" '[.stacks[].folded | select(endswith($f))] | length > 0' <<<"$result" >/dev/null ||
  fail "no stack of job $job ends in train.py:load_batch:$hot_line: $(head -c 1500 <<<"$result")"
jq -e '[.stacks[].folded | select(contains("train.py:<module>:") and contains("train.py:train:"))] | length > 0' <<<"$result" >/dev/null ||
  fail "job $job's stacks lack the <module> -> train path: $(head -c 1500 <<<"$result")"
pass "job $job: $(jq .total_count <<<"$result") stack samples, leaf train.py:load_batch:$hot_line under <module> and train"
assert_eq 0 "$(stacks "$other" | jq .total_count)" "stack samples of the non-Python job $other"
wait_job_done "$other" 60
rm -rf "$DIR"
