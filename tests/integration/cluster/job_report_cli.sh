#!/usr/bin/env bash
# `expanse job report` and `expanse jobs` against the real expanse-server after a real SLURM GPU
# job: a job holds two GPUs of a worker (fake NVML: one busy with 2 GiB, one idle with nothing on
# it) and ends; its verdicts must be over_allocated and memory_oversized with their suggestions,
# and a job on the other worker that only spins a CPU must get cpu_only alone. Once the server
# has the verdicts, the report (text and --json) must name the job's GPUs, the verdict codes and
# the idle ledger figures the API gives, `expanse jobs` must
# list the job with its waste columns, and each failure must end with its documented exit status
# and one line (unknown job, refused token, token file readable by others, plain http to a
# non-loopback host).
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse, expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
EXPANSE="$BUILD/bin/expanse"
[[ -x "$EXPANSE" ]] || fail "no expanse CLI at $EXPANSE"
dc_setup
read -r lo hi < <(dc_minors "$w1")
dc_gpu_scenario "$w1" "[
  {\"uuid\": \"GPU-$w1-minor$lo\", \"minor\": $lo, \"sm_util\": 95, \"memory_used_mib\": 2048},
  {\"uuid\": \"GPU-$w1-minor$hi\", \"minor\": $hi, \"sm_util\": 0, \"memory_used_mib\": 0}]"
# On the other worker, at the same time, a GPU job that only computes on its CPU: its GPU does
# nothing and holds no process while the job keeps a core busy (cpu_only).
read -r lo2 hi2 < <(dc_minors "$w2")
dc_gpu_scenario "$w2" "[
  {\"uuid\": \"GPU-$w2-minor$hi2\", \"minor\": $hi2, \"sm_util\": 0, \"memory_used_mib\": 0},
  {\"uuid\": \"GPU-$w2-minor$lo2\", \"minor\": $lo2, \"sm_util\": 0, \"memory_used_mib\": 0}]"
dc_controller_start

# Long enough for the idle GPU's no_process interval (60 s at least) after a late sampler start.
job="$(submit -w "$w1" --gres=gpu:2 -o /dev/null --wrap 'sleep 90')"
cpu_job="$(submit -w "$w2" --gres=gpu:1 -o /dev/null --wrap 'timeout 90 sh -c "while :; do :; done"; true')"
wait_job_done "$job" 180
wait_job_done "$cpu_job" 180
assert_eq COMPLETED "$(job_state "$job")" "state of job $job"
assert_eq COMPLETED "$(job_state "$cpu_job")" "state of job $cpu_job"
# The job's end as the server knows it, and its GPUs' allocations closed: until then its ledger
# grows with the server's clock, or shrinks when an allocation's end arrives, and two reads
# would disagree.
dc_wait_job 90 "$job" '.end_ms > 0 and (.gpus | length) == 2 and all(.gpus[]; .to_ms > 0)' \
  "the end of job $job and of its GPU allocations on the server"
verdicts() { api GET "/api/v1/computes/$COMPUTE/jobs/$job/verdicts"; }
wait_until 90 "the over_allocated verdict of job $job" \
  bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job/verdicts' | jq_holds '[.verdicts[].code] | index(\"over_allocated\") != null'"
api_job="$(dc_job "$job")"
api_verdicts="$(verdicts)"
api_ledger="$(api GET "/api/v1/computes/$COMPUTE/jobs/$job/ledger")"
codes="$(jq -r '[.verdicts[].code] | join(" ")' <<<"$api_verdicts")"
pass "the API's verdicts of job $job: $codes"
# One GPU of two used, with 2 GiB of its 80 GiB at the peak.
assert_eq "ask for 1 GPU, not 2 (--gres=gpu:1)" \
  "$(jq -r '.verdicts[] | select(.code == "over_allocated") | .suggestion' <<<"$api_verdicts")" \
  "over_allocated's suggestion"
assert_eq 2048 \
  "$(jq -r '.verdicts[] | select(.code == "memory_oversized") | .evidence.gpu_memory_peak_mib' <<<"$api_verdicts")" \
  "memory_oversized's peak GPU memory (MiB)"
assert_match '^2 GiB of 80 GiB used at the peak' \
  "$(jq -r '.verdicts[] | select(.code == "memory_oversized") | .suggestion' <<<"$api_verdicts")" \
  "memory_oversized's suggestion"
dc_wait_job 90 "$cpu_job" '.end_ms > 0' "the end of job $cpu_job on the server"
# The job's end can reach the server before its last CPU samples (another batch), so read the
# verdicts again for a while. On this two-core machine other tests' work takes CPU from the
# spinning job (it got 0.36 of a core beside three busy cgroups): the rule counts what it
# waited for as well, and the evidence must show both.
cpu_codes() { jq -r '[.verdicts[].code] | join(" ")' <<<"$cpu_verdicts"; }
for _ in $(seq 1 20); do
  cpu_verdicts="$(api GET "/api/v1/computes/$COMPUTE/jobs/$cpu_job/verdicts")"
  [[ "$(cpu_codes)" == cpu_only ]] && break
  sleep 1
done
assert_eq "cpu_only" "$(cpu_codes)" \
  "the verdicts of job $cpu_job, which never touched its GPU (its CPU efficiency: $(dc_job "$cpu_job" | jq -c .used.cpu_efficiency); all of them: $(jq -c '.verdicts' <<<"$cpu_verdicts"))"
jq_holds '.verdicts[0].evidence | .cpu_cores_used_mean > 0 and .cpu_cores_waiting_mean >= 0 and
  .cpu_cores_used_mean + .cpu_cores_waiting_mean >= 0.5' <<<"$cpu_verdicts" >/dev/null ||
  fail "cpu_only's evidence lacks the cores the job used and waited for: $(jq -c '.verdicts[0].evidence' <<<"$cpu_verdicts")"
pass "cpu_only's evidence: $(jq -c '.verdicts[0].evidence | {cpu_cores_used_mean, cpu_cores_waiting_mean}' <<<"$cpu_verdicts")"

# The token only in the environment, as a user would export it; never on the command line.
report() { EXPANSE_API_TOKEN="$API_TOKEN" "$EXPANSE" "$@" --server "$CP_URL" --cacert "$CA_FILE" --compute "$COMPUTE"; }
started=$(date +%s%N)
text="$(report job report "$job")" || fail "expanse job report $job exited $?"
elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
printf '%s\n' "$text"
for gpu in "GPU-$w1-minor$lo" "GPU-$w1-minor$hi"; do
  assert_match "$gpu" "$text" "the report names GPU $gpu"
done
for code in $codes; do
  assert_match "  $code  " "$text" "the report shows verdict $code"
  suggestion="$(jq -r --arg c "$code" '.verdicts[] | select(.code == $c) | .suggestion' <<<"$api_verdicts" | head -1)"
  [[ "$text" == *"suggestion: $suggestion"* ]] || fail "the report lacks the suggestion of $code: $suggestion"
done
pass "every verdict of the API is in the report with its suggestion"
[[ "$text" =~ [▁▂▃▄▅▆▇█] ]] || fail "no sparkline in the report"
assert_match "^Job $job (\\([^)]*\\) )?on compute $COMPUTE" "$(head -1 <<<"$text")" "the report's first line"
pass "expanse job report took ${elapsed_ms} ms end to end (budget 1 s; not asserted)"

doc="$(report job report "$job" --json)" || fail "expanse job report --json exited $?"
assert_eq "$job" "$(jq -r .job.job_id <<<"$doc")" "--json job id"
assert_eq "$(jq -c '[.gpus[].gpu_uuid] | sort' <<<"$api_job")" "$(jq -c '[.gpus[].gpu_uuid] | sort' <<<"$doc")" "--json GPUs"
assert_eq "$(jq -c '[.verdicts[].code]' <<<"$api_verdicts")" "$(jq -c '[.verdicts[].code]' <<<"$doc")" "--json verdict codes"
for figure in idle_gpu_s active_gpu_s allocated_gpu_s never_used_gpus; do
  assert_eq "$(jq ".totals.$figure" <<<"$api_ledger")" "$(jq ".ledger.$figure" <<<"$doc")" "--json ledger $figure"
done
assert_eq "$(jq .used.gpus_active <<<"$api_job")" "$(jq .used.gpus_active <<<"$doc")" "--json gpus_active"
assert_eq 2 "$(jq '[.gpus[].sm_util.sparkline | length] | map(select(. == 60)) | length' <<<"$doc")" "--json sparklines of 60 columns"

user="$(jq -r .user <<<"$api_job")"
umask 077
printf '%s\n' "$API_TOKEN" >"$DIR/token"
list="$("$EXPANSE" jobs --user "$user" --since 1d --org acme --server "$CP_URL" --cacert "$CA_FILE" --token-file "$DIR/token")" ||
  fail "expanse jobs exited $?"
printf '%s\n' "$list"
row="$(grep -E "^$job " <<<"$list")" || fail "expanse jobs --user $user does not list job $job"
# The server may still say COMPLETING: squeue reports the job until its Epilog is done.
assert_match "^$job +(COMPLETED|COMPLETING) " "$row" "expanse jobs: state of $job"
assert_match "IDLE GPU-H" "$list" "expanse jobs: waste columns"
alloc="$(jq -r '.used.allocated_gpu_hours * 100 | round / 100 | tostring' <<<"$api_job")"
listed="$("$EXPANSE" jobs --user "$user" --since 1d --org acme --server "$CP_URL" --cacert "$CA_FILE" --token-file "$DIR/token" --json)"
assert_eq "$(jq .used.allocated_gpu_hours <<<"$api_job")" \
  "$(jq --arg j "$job" '.jobs[] | select(.job_id == $j) | .allocated_gpu_hours' <<<"$listed")" "expanse jobs --json allocated GPU-hours of $job ($alloc)"

# A member's own-jobs token (scope jobs:own): the operator maps the member to the SLURM user the
# job ran as; the token then reads that user's jobs through the same commands, and once the
# mapping names someone else, the job is as unknown as one that never ran (docs/report.md).
EXPANSE_ADMIN_PASSWORD='member pass 1' "$SERVER" admin add-user --db "$DIR/db.sqlite" --org acme \
  --email member@acme.example --role member --slurm-user "$user" >/dev/null
csrf="$(curl -sS --cacert "$CA_FILE" -c "$DIR/cookies" -H 'Content-Type: application/json' \
  --data '{"email":"member@acme.example","password":"member pass 1"}' "$CP_URL/api/v1/session" | jq -r .csrf_token)"
own="$(curl -sS --cacert "$CA_FILE" -b "$DIR/cookies" -H "X-CSRF-Token: $csrf" -H 'Content-Type: application/json' \
  --data '{"name":"my jobs","scopes":["jobs:own"]}' "$CP_URL/api/v1/orgs/acme/api-tokens" | jq -r .token)"
[[ "$own" == exp_at_* ]] || fail "no jobs:own token for the member"
own_text="$(EXPANSE_API_TOKEN="$own" "$EXPANSE" job report "$job" --server "$CP_URL" --cacert "$CA_FILE" --compute "$COMPUTE")" ||
  fail "expanse job report $job with the member's jobs:own token exited $?"
assert_match "^Job $job (\\([^)]*\\) )?on compute $COMPUTE" "$(head -1 <<<"$own_text")" "the report with a jobs:own token"
own_list="$(EXPANSE_API_TOKEN="$own" "$EXPANSE" jobs --user "$user" --since 1d --org acme --server "$CP_URL" --cacert "$CA_FILE")" ||
  fail "expanse jobs with the jobs:own token exited $?"
grep -qE "^$job " <<<"$own_list" || fail "expanse jobs with the jobs:own token does not list job $job: $own_list"
pass "a jobs:own token of SLURM user $user reports on and lists job $job"
"$SERVER" admin set-slurm-user --db "$DIR/db.sqlite" --org acme --email member@acme.example --slurm-user someone-else >/dev/null
# Failures: one line each, the documented exit statuses.
expect_exit() { # status what command...
  local want="$1" what="$2" out rc=0
  shift 2
  out="$("$@" 2>&1)" || rc=$?
  assert_eq "$want" "$rc" "exit status: $what"
  [[ "$(wc -l <<<"$out")" == 1 ]] || fail "$what: expected one line, got: $out"
  [[ "$out" != *"$API_TOKEN"* ]] || fail "$what: the token was printed"
  printf '     %s\n' "$out"
}
expect_exit 3 "unknown job" report job report 999999
EXPANSE_API_TOKEN="$own" expect_exit 3 "another user's job, to a jobs:own token" "$EXPANSE" job report "$job" \
  --server "$CP_URL" --cacert "$CA_FILE" --compute "$COMPUTE"
EXPANSE_API_TOKEN="$own" expect_exit 4 "another user's job list, to a jobs:own token" "$EXPANSE" jobs --user "$user" \
  --since 1d --org acme --server "$CP_URL" --cacert "$CA_FILE"
EXPANSE_API_TOKEN=exp_at_wrong expect_exit 4 "refused token" "$EXPANSE" job report "$job" \
  --server "$CP_URL" --cacert "$CA_FILE" --compute "$COMPUTE"
chmod 644 "$DIR/token"
expect_exit 2 "token file readable by others" "$EXPANSE" jobs --org acme --server "$CP_URL" --token-file "$DIR/token"
EXPANSE_API_TOKEN="$API_TOKEN" expect_exit 2 "plain http to another host" "$EXPANSE" job report "$job" \
  --server "http://expanse.example" --compute "$COMPUTE"
expect_exit 2 "no compute" env -u EXPANSE_COMPUTE EXPANSE_API_TOKEN="$API_TOKEN" "$EXPANSE" job report "$job" --server "$CP_URL"
dc_finish
