#!/usr/bin/env bash
# squeue --json and scontrol show job -d report a running GPU job with its GRES and node list;
# with accounting (slurmdbd) sacct --json reports it too, after it ends.
source "$(dirname "$0")/../lib/testlib.sh"

read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"
# The job runs until the test has looked at it (the file go appears, at most two minutes),
# and at least 6 s: slurmdbd recorded only the first node of a job that ended within 2 s.
dir="$(shared_scratch)"
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:2 -o /dev/null \
  --wrap "sleep 6; for i in \$(seq 600); do [ -e $dir/go ] && exit 0; sleep 0.2; done")"
wait_until 30 "job $job to run" bash -c "[[ \$(scontrol show job $job | grep -oP 'JobState=\K\S+') == RUNNING ]]"

json="$(squeue --json)"
sq="$(jq -c --argjson id "$job" '.jobs[] | select(.job_id == $id) | {nodes, tres_per_node, job_state}' <<<"$json")"
[[ -n "$sq" ]] || fail "squeue --json does not list job $job"
assert_eq "$(scontrol show hostnames "$w1,$w2" | paste -sd,)" \
  "$(scontrol show hostnames "$(jq -r .nodes <<<"$sq")" | paste -sd,)" "squeue --json node list of $job"
assert_match 'gpu:2' "$(jq -r .tres_per_node <<<"$sq")" "squeue --json GRES request of $job"
assert_eq RUNNING "$(jq -r .job_state <<<"$sq")" "squeue --json state of $job"

detail="$(scontrol show job -d "$job")"
# scontrol groups hosts with the same layout on one line: "Nodes=worker[1-2] CPU_IDs=0 Mem=0 GRES=...".
per_host="$(grep -oP '^\s+Nodes=\S+ .*GRES=\S+' <<<"$detail" | while read -r nodes _ _ gres; do
  for h in $(scontrol show hostnames "${nodes#Nodes=}"); do echo "$h ${gres#GRES=}"; done
done)"
for w in "$w1" "$w2"; do
  assert_eq "gpu:2(IDX:0-1)" "$(awk -v h="$w" '$1 == h { print $2 }' <<<"$per_host")" \
    "scontrol show job -d GRES indices on $w"
done
assert_match "JOB_GRES=gpu:4" "$detail" "scontrol show job -d total GRES"

touch "$dir/go"
wait_job_done "$job"
assert_eq COMPLETED "$(job_state "$job")" "state of $job after it ran"

if [[ "$(scontrol show config | grep -oP '^AccountingStorageType\s*=\s*\K\S+')" == accounting_storage/slurmdbd ]]; then
  # slurmdbd receives the job record asynchronously.
  wait_until 60 "sacct to report job $job" bash -c \
    "sacct --json -j $job | jq_holds '.jobs[] | select(.job_id == $job and .state.current == \"COMPLETED\")'"
  acct="$(sacct --json -j "$job" | jq -c --argjson id "$job" '.jobs[] | select(.job_id == $id)')"
  assert_eq "$(scontrol show hostnames "$w1,$w2" | paste -sd,)" \
    "$(scontrol show hostnames "$(jq -r .nodes <<<"$acct")" | paste -sd,)" "sacct --json node list of $job"
  gpus="$(jq -r '[.tres.allocated[] | select(.type == "gres" and .name == "gpu") | .count] | first' <<<"$acct")"
  assert_eq 4 "$gpus" "sacct --json allocated gres/gpu of $job"
else
  command -v sacct >/dev/null || fail "sacct missing"
  out="$(sacct -j "$job" 2>&1 || true)"
  assert_match 'Slurm accounting storage is disabled' "$out" \
    "sacct says accounting is off when there is no slurmdbd"
fi
