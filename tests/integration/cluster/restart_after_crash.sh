#!/usr/bin/env bash
# `start` is idempotent (a running cluster is left as it is), and a start after a crash — every
# process killed with SIGKILL, leaving namespaces, bridge, cgroups and state behind — cleans up
# what is left and brings up a working cluster.
source "$(dirname "$0")/../lib/testlib.sh"

pids_before="$(cat "$EXPANSE_TC_STATE"/pids/*.pid | sort | paste -sd,)"
args=(--workers "$(wc -w <<<"$EXPANSE_TC_WORKERS")")
[[ "$EXPANSE_TC_ACCOUNTING" == 1 ]] && args+=(--accounting)
out="$("$TESTCLUSTER" start "${args[@]}" 2>&1)"
assert_match 'already running' "$out" "second start reports the running cluster"
assert_eq "$pids_before" "$(cat "$EXPANSE_TC_STATE"/pids/*.pid | sort | paste -sd,)" "daemon PIDs after a second start"

# Crash: kill every daemon at once, as a power cut of the harness would.
kill -KILL $(cat "$EXPANSE_TC_STATE"/pids/*.pid)
sleep 0.5
"$TESTCLUSTER" status >/dev/null 2>&1 && fail "status says running after every daemon was killed"
pass "status reports the crashed cluster as not running"

"$TESTCLUSTER" start "${args[@]}" >/dev/null
pass "start after the crash succeeded"
assert_eq "$(($(wc -w <<<"$EXPANSE_TC_WORKERS") + 1))" "$(sinfo -h -N -o '%N %t' | grep -c ' idle$')" "idle nodes after the restart"
job="$(submit -o /dev/null --wrap 'true')"
wait_job_done "$job"
assert_eq COMPLETED "$(job_state "$job")" "a job after the restart"
