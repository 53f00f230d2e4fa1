#!/usr/bin/env bash
# Prolog, Epilog and TaskProlog run on every host of a 2-node job (each writes a file naming its
# host), and an `export` line printed by the TaskProlog reaches the job's environment.
source "$(dirname "$0")/../lib/testlib.sh"

dir="$(shared_scratch)"
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"
for hook in prolog epilog taskprolog; do
  cat >"$dir/$hook" <<HOOK
#!/bin/bash
echo "\$SLURM_JOB_ID \$CUDA_VISIBLE_DEVICES" > "$dir/ran-$hook-\$(hostname)-\$SLURM_JOB_ID"
HOOK
  chmod 755 "$dir/$hook"
done
echo 'echo "export EXPANSE_TC_FROM_TASKPROLOG=set-on-$(hostname)"' >>"$dir/taskprolog"

save_slurm_conf
printf 'Prolog=%s\nEpilog=%s\nTaskProlog=%s\n' "$dir/prolog" "$dir/epilog" "$dir/taskprolog" >>"$SLURM_CONF"
"$TESTCLUSTER" reconfigure

job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o "$dir/out" \
  --wrap "srun bash -c 'echo \"\$(hostname) \$EXPANSE_TC_FROM_TASKPROLOG\" >> $dir/env'")"
wait_job_done "$job"
assert_eq COMPLETED "$(job_state "$job")" "state of job $job"

for w in "$w1" "$w2"; do
  for hook in prolog taskprolog; do
    assert_file_contains "$dir/ran-$hook-$w-$job" "$job" "$hook ran on $w for job $job"
  done
  # The Epilog runs after the job is reported complete.
  wait_until 30 "epilog on $w" test -f "$dir/ran-epilog-$w-$job"
  assert_file_contains "$dir/ran-epilog-$w-$job" "$job" "epilog ran on $w for job $job"
  assert_file_contains "$dir/env" "$w set-on-$w" "TaskProlog export visible in the task on $w"
done
# The Prolog sees the job's GPU assignment, which is what Expanse's Prolog will record.
assert_match "^$job [0-9]" "$(cat "$dir/ran-prolog-$w1-$job")" "Prolog environment carries CUDA_VISIBLE_DEVICES"
rm -rf "$dir"
