#!/usr/bin/env bash
# A 2-node job that asks for a GPU per node runs on two distinct hosts, each with its own hostname
# and address, and every task is given CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS by SLURM's GRES.
source "$(dirname "$0")/../lib/testlib.sh"

dir="$(shared_scratch)"
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"
[[ -n "$w1" && -n "$w2" ]] || fail "needs two workers, have '$EXPANSE_TC_WORKERS'"

job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o "$dir/out" --wrap "srun bash -c '
  ip=\$(ip -4 -o addr show eth0 | awk \"{print \\\$4}\")
  echo \"task host=\$(hostname) ip=\$ip cvd=\$CUDA_VISIBLE_DEVICES gpus=\$SLURM_JOB_GPUS\" >> $dir/tasks'")"
wait_job_done "$job"
assert_eq COMPLETED "$(job_state "$job")" "state of 2-node GPU job $job"

for w in "$w1" "$w2"; do
  line="$(grep "host=$w " "$dir/tasks" || true)"
  [[ -n "$line" ]] || fail "no task ran on $w; tasks: $(cat "$dir/tasks" 2>/dev/null)"
  assert_match 'cvd=[0-9]+( |$)' "$line" "CUDA_VISIBLE_DEVICES of the task on $w"
  assert_match 'gpus=[0-9]+( |$)' "$line" "SLURM_JOB_GPUS of the task on $w"
done
addrs="$(grep -oP 'ip=\K\S+' "$dir/tasks" | sort -u | wc -l)"
assert_eq 2 "$addrs" "distinct network addresses of the job's two hosts"
rm -rf "$dir"
