#!/usr/bin/env bash
# Live detection on the real cluster (docs/pystacks.md, "Live bursts"): a 2-node job runs a
# Python rank on each node; per the fake NVML its GPUs first train (100 % utilisation at 400 W),
# then hang (100 % at 60 W, as a deadlocked collective does). The controller flags the job
# stuck while it runs and asks both nodes for a stack burst through the shared control tree;
# both nodes' stacks arrive in burst windows starting at the same instant, with the function
# the ranks wait in, and the job is flagged once.
# Then an alert rule with a scancel action (dry run off) ends the hung job: the server warns
# (webhook to a local receiver), asks the controller through its heartbeat answer, the
# controller runs the real scancel, and its report is audited (docs/formats/alerts.md). The
# job's verdicts: communication_wait from the hang on (stuck with a 30 s threshold), none while
# it trained.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
SERVER_EXTRA_ARGS="--alert-interval 2s --alert-loopback-webhooks"
dc_setup
# Short bursts and a larger CPU budget (the sanitizer build reads stacks slowly); the
# controller's threshold at its minimum, so the test waits seconds, not ten minutes.
for w in $EXPANSE_TC_WORKERS; do
  "$TESTCLUSTER" exec "$w" -- bash -c 'printf "EXPANSE_PYSTACKS_CPU_PERCENT=10\nEXPANSE_PYSTACKS_BURST_SECONDS=5\n" >/etc/expanse/daemon.env'
done
trap 'for w in $EXPANSE_TC_WORKERS; do "$TESTCLUSTER" exec "$w" -- rm -f /etc/expanse/daemon.env || true; done; dc_cleanup' EXIT
printf 'EXPANSE_LIVE_STUCK_AFTER_S=10\n' >>"$DIR/daemon.env"

# Both GPUs of each worker busy at `power_mw`.
gpus_at() {
  local w lo hi
  for w in $EXPANSE_TC_WORKERS; do
    read -r lo hi < <(dc_minors "$w")
    dc_gpu_scenario "$w" "[
      {\"uuid\": \"GPU-$w-minor$hi\", \"minor\": $hi, \"sm_util\": 100, \"power_mw\": $1},
      {\"uuid\": \"GPU-$w-minor$lo\", \"minor\": $lo, \"sm_util\": 100, \"power_mw\": $1}]"
  done
}
gpus_at 400000
dc_controller_start

cat >"$DIR/hang.py" <<'PY'
import os, sys, time

def wait_for_peers(stop):
    while not os.path.exists(stop):
        time.sleep(0.05)  # the rank waits for a collective that never completes

wait_for_peers(sys.argv[1])
PY
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o "$DIR/job.out" \
  --wrap "srun timeout 240 python3 $DIR/hang.py $DIR/stop")"
power_points() {
  api GET "/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=gpu.power_w&points=500" |
    jq --arg h "$1" '[.series[] | select(.host == $h) | .points[]] | length'
}
# Training: the controller has seen each node's GPU at its working power within the job.
for w in "$w1" "$w2"; do
  wait_until 120 "training samples of job $job on $w" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=gpu.power_w&points=500' | jq --arg h '$w' '[.series[] | select(.host == \$h) | .points[]] | length') -ge 3 ]]"
done
pass "job $job trains on $w1 and $w2 ($(power_points "$w1") and $(power_points "$w2") power samples)"
hung_at="$(date +%s%3N)"
gpus_at 60000

wait_until 120 "the controller to flag job $job stuck" grep -q "live detection: job $job stuck" "$DIR/controller.log"
flagged_at="$(date +%s%3N)"
grep "live detection: job $job" "$DIR/controller.log"
grep -q "live detection: job $job stuck.*stack burst asked of .*$w1" "$DIR/controller.log" ||
  fail "the controller did not ask $w1 for a burst"
grep -q "live detection: job $job stuck.*stack burst asked of .*$w2" "$DIR/controller.log" ||
  fail "the controller did not ask $w2 for a burst"
pass "job $job flagged stuck $(((flagged_at - hung_at) / 1000)) s after its GPUs hung (threshold 10 s); bursts asked of $w1 and $w2"

# Burst windows start at the trigger time, never a whole second (regular windows always are).
bursts() {
  sqlite3 -readonly "$DIR/db.sqlite" "SELECT host, window_start_ms, SUM(count) FROM job_stacks
    WHERE job_id = '$job' AND window_start_ms % 1000 != 0 GROUP BY host, window_start_ms"
}
if ! (wait_until 90 "burst stacks of job $job from both nodes" bash -c "[[ \$(sqlite3 -readonly '$DIR/db.sqlite' \"SELECT COUNT(DISTINCT host) FROM job_stacks WHERE job_id = '$job' AND window_start_ms % 1000 != 0\") == 2 ]]"); then
  # What each sampler said of the request and its burst, and what the store holds.
  for w in "$w1" "$w2"; do
    echo "--- $w: the sampler's lines on bursts and stacks" >&2
    "$TESTCLUSTER" exec "$w" -- grep -E 'burst|py_stacks' /var/lib/expanse/sampler.log | tail -n 20 >&2 || true
  done
  sqlite3 -readonly "$DIR/db.sqlite" "SELECT host, window_start_ms, window_end_ms, SUM(count) FROM job_stacks
    WHERE job_id = '$job' GROUP BY host, window_start_ms" >&2 || true
  fail "no burst stacks of job $job from both nodes within 90 s"
fi
bursts
assert_eq 1 "$(bursts | cut -d'|' -f2 | sort -u | wc -l)" "distinct burst window starts over both nodes"
for w in "$w1" "$w2"; do
  folded="$(sqlite3 -readonly "$DIR/db.sqlite" "SELECT folded FROM job_stacks WHERE job_id = '$job'
    AND host = '$w' AND window_start_ms % 1000 != 0")"
  grep -q 'hang.py:wait_for_peers:' <<<"$folded" ||
    fail "$w's burst stacks of job $job lack hang.py:wait_for_peers: $(head -c 800 <<<"$folded")"
done
pass "both nodes' burst stacks of job $job start at $(bursts | head -1 | cut -d'|' -f2) and show hang.py:wait_for_peers"
# Each sampler said how its burst went, with the count of samples the stacks above came from.
for w in "$w1" "$w2"; do
  ended="$("$TESTCLUSTER" exec "$w" -- grep -h "stack burst for job $job ended" /var/lib/expanse/sampler.log || true)"
  assert_match "stack burst for job $job ended: [1-9][0-9]* sample\\(s\\)" "$ended" "$w's line on its burst"
done

for w in "$w1" "$w2"; do
  assert_eq "" "$(ls -A "$prefix/spool/control/$w")" "requests left in $w's control directory"
done
# "Stuck detected at T" in the job's timeline: one point per host, 1 for stuck.
marks="$(api GET "/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=job.live_detected&points=500")"
for w in "$w1" "$w2"; do
  assert_eq 1 "$(jq --arg h "$w" '[.series[] | select(.host == $h) | .points[][3]] | max' <<<"$marks")" \
    "job.live_detected on $w"
done
assert_eq 1 "$(grep -c "live detection: job $job " "$DIR/controller.log")" "times job $job was flagged"

# --- an alert rule's scancel ends the hung job --------------------------------------------------
python3 "$REPO_ROOT/tests/integration/server/webhook_receiver.py" "$DIR/webhook.port" \
  "$DIR/webhooks.jsonl" >"$DIR/receiver.log" 2>&1 &
receiver=$!
trap 'kill $receiver 2>/dev/null || true; for w in $EXPANSE_TC_WORKERS; do "$TESTCLUSTER" exec "$w" -- rm -f /etc/expanse/daemon.env || true; done; dc_cleanup' EXIT
wait_until 10 "the webhook receiver" test -s "$DIR/webhook.port"
# 80 s of spinning (the verdict itself needs 60 s): the job's whole hang stays a verdict
# whatever the cells' boundaries once it has ended.
rule="$(api POST /api/v1/orgs/acme/alert-rules "{\"name\":\"end hung jobs\",\"verdict\":\"communication_wait\",\"min_duration_s\":80,\"channel\":\"webhook\",\"target\":\"http://127.0.0.1:$(cat "$DIR/webhook.port")/hook\",\"action\":\"scancel\",\"action_grace_s\":0,\"action_dry_run\":false}")"
[[ "$(jq -r .action_dry_run <<<"$rule")" == false ]] || fail "rule: $rule"
wait_job_done "$job" 150
assert_eq CANCELLED "$(job_state "$job")" "state of job $job after the rule's scancel"
posts="$(jq -s -c '[.[] | .body | fromjson | .text | split("\n")[0]]' "$DIR/webhooks.jsonl")"
assert_match "job $job \\([^)]*\\): communication_wait for .*job $job \\([^)]*\\): cancellation requested" "$posts" \
  "the warning, then the notice, at the webhook"
wait_until 30 "the controller's report of the scancel" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/orgs/acme/audit?limit=200' | jq_holds '.events[] | select(.action == \"compute_request.done\" and .target == \"$COMPUTE/$job\")' >/dev/null"
grep -q "server request [0-9]*: scancel $job: cancelled" "$DIR/controller.log" ||
  fail "the controller's log: $(grep 'server request' "$DIR/controller.log")"
pass "the rule warned, the controller ran scancel $job when its heartbeat answer asked, and its report is audited"

# The job's verdicts: communication_wait from the hang on (within a cell or two), and nothing
# about its healthy training before (the whole-job memory_oversized may stand: it held no memory).
# Read once the server has the job's end: until then its grid runs to now.
dc_wait_job 60 "$job" '.end_ms > 0' "the end of job $job on the server"
verdicts="$(api GET "/api/v1/computes/$COMPUTE/jobs/$job/verdicts")"
cell="$(jq .cell_ms <<<"$verdicts")"
hang_from="$(jq '[.verdicts[] | select(.code == "communication_wait") | .from_ms] | min // 0' <<<"$verdicts")"
((hang_from >= hung_at - 2 * cell && hang_from <= hung_at + 2 * cell)) ||
  fail "communication_wait of job $job from $hang_from, its GPUs hung at $hung_at (cells of $cell ms): $(jq -c .verdicts <<<"$verdicts")"
others="$(jq -r '[.verdicts[] | select(.code != "communication_wait" and .code != "memory_oversized") | "\(.code) \(.from_ms)"] | join(", ")' <<<"$verdicts")"
assert_eq "" "$others" "verdicts of job $job besides communication_wait (none while it trained)"
pass "job $job: communication_wait from $(((hang_from - hung_at) / 1000)) s after its GPUs hung, no verdict while it trained"
# The same minute of spinning with the stuck threshold at 30 s (the API's stuck_after_s; the
# default is 10 min) is the server's stuck verdict, over the same interval.
stuck="$(api GET "/api/v1/computes/$COMPUTE/jobs/$job/verdicts?stuck_after_s=30")"
assert_eq "$hang_from" "$(jq '[.verdicts[] | select(.code == "stuck") | .from_ms] | min // 0' <<<"$stuck")" \
  "the start of job $job's stuck verdict at a 30 s threshold"
assert_eq "" "$(jq -r '[.verdicts[] | select(.code == "communication_wait") | .code] | join(",")' <<<"$stuck")" \
  "communication_wait left beside stuck at a 30 s threshold"
dc_finish
