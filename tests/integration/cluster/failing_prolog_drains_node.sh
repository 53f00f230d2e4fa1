#!/usr/bin/env bash
# The hazard Expanse's hooks must never cause: a Prolog that exits non-zero drains the node in
# SLURM 22.05 (and requeues the job held). The harness then restores the node, and jobs run again.
source "$(dirname "$0")/../lib/testlib.sh"

dir="$(shared_scratch)"
read -r _ w2 _ <<<"$EXPANSE_TC_WORKERS"
cat >"$dir/prolog" <<HOOK
#!/bin/bash
[[ "\$(hostname)" == "$w2" ]] && exit 1
exit 0
HOOK
chmod 755 "$dir/prolog"

save_slurm_conf
echo "Prolog=$dir/prolog" >>"$SLURM_CONF"
"$TESTCLUSTER" reconfigure

job="$(submit -w "$w2" -o /dev/null --wrap 'true')"
wait_until 60 "$w2 to drain after the failing Prolog" bash -c "sinfo -h -n $w2 -o '%t' | grep -Eq '^(drain|drng)'"
pass "$w2 drained after the Prolog failed ($(sinfo -h -n "$w2" -o '%t'))"
assert_match 'Prolog' "$(scontrol show node "$w2" | grep -oP 'Reason=\K.*')" "drain reason of $w2"
wait_until 30 "job $job to be requeued and held" bash -c \
  "scontrol show job $job | grep -Eq 'Reason=(launch_failed_requeued_held|JobHeldAdmin)'"
pass "job $job was requeued and held"
scancel "$job"

restore_slurm_conf
SAVED_SLURM_CONF=""
"$TESTCLUSTER" resume "$w2"
assert_eq idle "$(sinfo -h -n "$w2" -o '%t')" "state of $w2 after the harness restored it"
job="$(submit -w "$w2" -o /dev/null --wrap 'true')"
wait_job_done "$job"
assert_eq COMPLETED "$(job_state "$job")" "a job on the restored $w2"
rm -rf "$dir"
