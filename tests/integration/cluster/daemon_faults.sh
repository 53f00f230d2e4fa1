#!/usr/bin/env bash
# The daemon on the real SLURM cluster when things go wrong, and the attribution cases that need
# a live node: the per-GPU use view (an allocated GPU with nothing on it, a process that left its
# job's cgroup but holds a GPU), a heterogeneous job, the planes down while jobs run, a worker
# whose shared mount turns read-only, and the controller killed with SIGKILL again and again
# while it uploads. In every case jobs complete, no node drains, and the data arrives once.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
dc_setup
dc_controller_start
outside_pid=""
trap 'kill "${outside_pid:-}" 2>/dev/null || true; dc_cleanup' EXIT

read -r lo hi < <(dc_minors "$w1")
gpu_lo="GPU-$w1-minor$lo"
gpu_hi="GPU-$w1-minor$hi"
nodes() { api GET "/api/v1/computes/$COMPUTE/nodes"; }
gpu_use() { # host uuid
  nodes | jq -c --arg h "$1" --arg u "$2" '.nodes[] | select(.name == $h) | .gpus[] | select(.uuid == $u) | .use'
}

# --- Per-GPU use view ---------------------------------------------------------------------------
# Job A runs a process on its GPU; job B holds the other GPU of the same worker and runs nothing
# there. A process carrying job A's environment but outside its cgroup (as one that daemonised
# would) sits on job B's GPU.
job_a="$(submit -w "$w1" --gres=gpu:1 -o /dev/null --wrap "echo \$\$ >$DIR/a.pid; sleep 300")"
job_b="$(submit -w "$w1" --gres=gpu:1 -o /dev/null --wrap 'sleep 300')"
wait_until 60 "job $job_a to write its pid" test -s "$DIR/a.pid"
for j in "$job_a" "$job_b"; do dc_wait_job 60 "$j" '(.gpus | length) == 1' "GPU of job $j"; done
gpu_a="$(dc_job "$job_a" | jq -r '.gpus[0].gpu_uuid')"
gpu_b="$(dc_job "$job_b" | jq -r '.gpus[0].gpu_uuid')"
[[ "$gpu_a" != "$gpu_b" && "$gpu_a" == GPU-$w1-* && "$gpu_b" == GPU-$w1-* ]] ||
  fail "jobs $job_a and $job_b should hold the two GPUs of $w1: $gpu_a, $gpu_b"
outside="sleep 120.$$"  # unique to this run, so the process can be found and stopped
"$TESTCLUSTER" exec "$w1" -- env SLURM_JOB_ID="$job_a" $outside &
wait_until 10 "the outside process" pgrep -f "^$outside\$"
outside_pid="$(pgrep -f "^$outside\$" | head -1)"
opid="$outside_pid"
apid="$(cat "$DIR/a.pid")"
dc_gpu_scenario "$w1" "[
  {\"uuid\": \"$gpu_hi\", \"minor\": $hi, \"sm_util\": 0, \"memory_used_mib\": 0,
   \"processes\": [$( [[ $gpu_a == "$gpu_hi" ]] && echo "{\"pid\": $apid, \"used_memory_mib\": 1000}" || echo "{\"pid\": $opid, \"used_memory_mib\": 300}" )]},
  {\"uuid\": \"$gpu_lo\", \"minor\": $lo, \"sm_util\": 0, \"memory_used_mib\": 0,
   \"processes\": [$( [[ $gpu_a == "$gpu_lo" ]] && echo "{\"pid\": $apid, \"used_memory_mib\": 1000}" || echo "{\"pid\": $opid, \"used_memory_mib\": 300}" )]}]"
view_ready() {
  nodes | jq_holds --arg a "$gpu_a" --arg b "$gpu_b" --arg h "$w1" \
    '[.nodes[] | select(.name == $h) | .gpus[] | select(.uuid == $a or .uuid == $b) | .use.processes | length] == [1, 1]' >/dev/null
}
for i in $(seq 1 60); do view_ready && break; sleep 1; done
echo "use view ready after ${i}s"
view_ready || fail "the heartbeat's use view of $w1 (job $job_a on $gpu_a pid $apid, outside pid $opid on $gpu_b): $(nodes | jq -c --arg h "$w1" '.nodes[] | select(.name == $h)')"
use_a="$(gpu_use "$w1" "$gpu_a")"
use_b="$(gpu_use "$w1" "$gpu_b")"
assert_eq busy "$(jq -r .state <<<"$use_a")" "state of job $job_a's GPU"
assert_eq "$apid:true:false" "$(jq -r '.processes[0] | "\(.pid):\(.of_allocated_job):\(.outside_cgroup)"' <<<"$use_a")" "job $job_a's own process on its GPU"
assert_eq allocated_idle "$(jq -r .state <<<"$use_b")" "state of job $job_b's GPU (allocated, none of its processes)"
assert_eq "[\"$job_b\"]" "$(jq -c .jobs <<<"$use_b")" "jobs holding $gpu_b"
assert_eq "$opid:$job_a:false:true" "$(jq -r '.processes[0] | "\(.pid):\(.job_id):\(.of_allocated_job):\(.outside_cgroup)"' <<<"$use_b")" \
  "the process outside job $job_a's cgroup, on job $job_b's GPU"
kill "$outside_pid" 2>/dev/null || true
scancel "$job_a" "$job_b"
wait_job_done "$job_a" 60
wait_job_done "$job_b" 60
dc_wait_job 60 "$job_b" '[.events[]?.kind] | index("end") != null' "end of job $job_b"
timeline="$(api GET "/api/v1/computes/$COMPUTE/jobs/$job_a/timeline?metric=job.gpu_memory_mib&points=100")"
jq_holds '[.series[] | select(.host == "'"$w1"'") | .points[][2]] | max >= 1300' <<<"$timeline" >/dev/null ||
  fail "job $job_a's GPU memory (its process and the one outside its cgroup) not in job.gpu_memory_mib: $(head -c 600 <<<"$timeline")"
pass "job.gpu_memory_mib of job $job_a counts the process outside its cgroup"
dc_gpu_scenario "$w1" "[
  {\"uuid\": \"$gpu_hi\", \"minor\": $hi, \"sm_util\": 91, \"memory_used_mib\": 2048},
  {\"uuid\": \"$gpu_lo\", \"minor\": $lo, \"sm_util\": 7, \"memory_used_mib\": 0}]"

# --- Heterogeneous job --------------------------------------------------------------------------
# Each component is its own SLURM job (its own SLURM_JOB_ID on its node); squeue names them
# <id>+0 and <id>+1, and so must the server, each with the GPU of its own node.
cat >"$DIR/het.sh" <<HET
#!/bin/bash
#SBATCH -w $w1 --gres=gpu:1 -o /dev/null
#SBATCH hetjob
#SBATCH -w $w2 --gres=gpu:1
sleep 12
HET
het="$(submit "$DIR/het.sh")"
# The backfill scheduler starts heterogeneous jobs (every 2 s here: tests/cluster/config.sh).
# (scontrol shows both components, so testlib's one-state wait does not apply.)
wait_until 120 "het job $het to finish" bash -c "[[ -z \$(squeue -h -j $het) ]]"
assert_eq "COMPLETED COMPLETED" "$(scontrol show job "$het" | grep -oP 'JobState=\K\S+' | paste -sd' ')" "states of $het's components"
for offset in 0 1; do
  dc_wait_job 60 "$het+$offset" '(.gpus | length) == 1 and ([.events[]?.kind] | index("end")) != null' "component $het+$offset with its GPU and end"
done
assert_eq "$w1" "$(dc_job "$het+0" | jq -r '.gpus[0].host')" "host of $het+0's GPU"
assert_eq "$w2" "$(dc_job "$het+1" | jq -r '.gpus[0].host')" "host of $het+1's GPU"
pass "heterogeneous job $het: components $het+0 and $het+1 each with the GPU of its node"

# --- Planes down while jobs run -----------------------------------------------------------------
server_stop
job_down="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null --wrap 'sleep 4')"
wait_job_done "$job_down" 60
assert_eq COMPLETED "$(job_state "$job_down")" "job $job_down with the planes down"
dc_assert_no_drain
sleep 4  # a few failed uploads and heartbeats
server_start || fail "expanse-server did not restart"
dc_wait_job 90 "$job_down" '([.events[]?] | length) == 4 and .used.has_gpu_samples == true' \
  "job $job_down's events and samples after the planes came back"
pass "planes down: job $job_down completed, no node drained, and its data arrived when they returned"

# --- A worker's shared mount turns read-only ----------------------------------------------------
"$TESTCLUSTER" exec "$w2" -- mount --bind -o ro "$prefix" "$prefix"
job_ro="$(submit -w "$w2" --gres=gpu:1 -o /dev/null --wrap 'sleep 3')"
wait_job_done "$job_ro" 60
assert_eq COMPLETED "$(job_state "$job_ro")" "job $job_ro with $w2's shared mount read-only"
dc_assert_no_drain
sleep 3
"$TESTCLUSTER" exec "$w2" -- umount "$prefix"
# The hook events waited on $w2's local disk; the sampler writes them once the spool is back.
dc_wait_job 90 "$job_ro" '([.events[]?] | length) == 2' "job $job_ro's events after the mount came back"
pass "read-only shared mount on $w2: job $job_ro completed, no node drained, its events arrived later"

# --- kill -9 of the controller, again and again, while it uploads -------------------------------
job_k="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null --wrap 'sleep 30')"
wait_until 60 "job $job_k to start" bash -c "[[ \$(squeue -h -j $job_k -o %t) == R ]]"
# Each kill lands on a controller that has recorded its start (on a loaded machine an ASan
# build may take longer than the pause to get there), at a random point of its uploads.
starts() { grep -c 'controller for compute' "$DIR/controller.log" || true; }
for i in 1 2 3 4 5 6; do
  sleep "0.$((RANDOM % 9 + 1))"
  sleep 1
  dc_controller_kill9
  before="$(starts)"
  dc_controller_start
  wait_until 30 "restart $i of the controller to be recorded" bash -c "(( \$(grep -c 'controller for compute' '$DIR/controller.log' || true) > $before ))"
done
wait_job_done "$job_k" 90
dc_wait_job 90 "$job_k" '([.events[]?] | length) >= 4 and .used.has_gpu_samples == true' "job $job_k's events and samples"
record="$(dc_job "$job_k")"
assert_eq 4 "$(jq '[.events[]] | length' <<<"$record")" "events of job $job_k (start and end on two hosts, none twice)"
assert_eq 2 "$(jq '[.gpus[]] | length' <<<"$record")" "GPU allocations of job $job_k"
# No gap: the 1 s buckets of each GPU over the job's life hold samples throughout (the samplers
# kept writing to the spool while the controller was dead; nothing was lost).
start_ms="$(jq '[.events[] | select(.kind == "start") | .at_ms] | max' <<<"$record")"
end_ms="$(jq '[.events[] | select(.kind == "end") | .at_ms] | min' <<<"$record")"
span_s=$(((end_ms - start_ms) / 1000))
timeline="$(api GET "/api/v1/computes/$COMPUTE/jobs/$job_k/timeline?metric=gpu.sm_util&points=$span_s")"
for w in "$w1" "$w2"; do
  n="$(jq --arg h "$w" '[.series[] | select(.host == $h) | .points[]] | length' <<<"$timeline")"
  ((n >= span_s - 3)) || fail "job $job_k on $w: $n of ~$span_s one-second buckets hold samples: $(head -c 800 <<<"$timeline")"
  pass "job $job_k on $w: $n one-second buckets over ${span_s}s hold samples"
done
grep -q 'quarantin' "$DIR/controller.log" && fail "spool files were quarantined: $(grep quarantin "$DIR/controller.log" | head -3)"
pass "controller killed 6 times during uploads: every event once, no gap in the samples"
# A crash loop must show: each start counts the runs that ended without a clean stop, and the
# heartbeat carries it (a restart otherwise looks like a fresh, healthy compute).
runs_seen() {
  api GET "/api/v1/computes/$COMPUTE" | jq_holds '.heartbeat.diagnostics.runs | .unclean_exits >= 6 and .starts >= 7' >/dev/null
}
wait_until 30 "the heartbeat to report the controller's unclean exits" runs_seen ||
  fail "heartbeat runs: $(api GET "/api/v1/computes/$COMPUTE" | jq -c '.heartbeat.diagnostics.runs')"
pass "the heartbeat reports the kills: $(api GET "/api/v1/computes/$COMPUTE" | jq -c '.heartbeat.diagnostics.runs')"
dc_assert_no_drain

# --- A job no hook reported ---------------------------------------------------------------------
# The hooks unwired and the controller down when the job starts (as when Expanse is installed
# on a busy cluster): its GPU comes from squeue's GRES detail, mapped through gres.conf.
dc_controller_kill9
sed -i '/^Prolog=/d; /^Epilog=/d' "$SLURM_CONF"
"$TESTCLUSTER" reconfigure
job_nohook="$(submit -w "$w2" --gres=gpu:1 -o /dev/null --wrap 'sleep 120')"
wait_until 60 "job $job_nohook to start" bash -c "[[ \$(squeue -h -j $job_nohook -o %t) == R ]]"
dc_controller_start
read -r lo2 _ < <(dc_minors "$w2")
dc_wait_job 60 "$job_nohook" '(.gpus | length) == 1' "job $job_nohook's GPU from squeue"
record="$(dc_job "$job_nohook")"
assert_eq "GPU-$w2-minor$lo2" "$(jq -r '.gpus[0].gpu_uuid' <<<"$record")" "GPU of unhooked job $job_nohook on $w2 (GRES index 0 is minor $lo2)"
assert_eq 0 "$(jq '[.events[]?] | length' <<<"$record")" "hook events of job $job_nohook"
scancel "$job_nohook"  # its end is what matters here, not how it ends
wait_job_done "$job_nohook" 60
dc_wait_job 60 "$job_nohook" '.gpus[0].to_ms > 0' "job $job_nohook's allocation closed"
pass "a job no hook saw: its GPU from squeue, opened and closed"
printf 'Prolog=%s\nEpilog=%s\n' "$DIR/prolog" "$DIR/epilog" >>"$SLURM_CONF"
"$TESTCLUSTER" reconfigure

# --- Hostile files in a worker's spool directory ------------------------------------------------
# What a compromised or confused worker (or anyone with write access to the shared mount) could
# leave there. Each is refused with its reason and moved aside; the FIFO must not block the
# drain, and the worker's real files keep flowing.
spool_w1="$prefix/spool/workers/$w1"
name() { printf '%020d-hostile-boot.spool' "$1"; }
# Each file is made beside the spool directory and moved in whole: the controller must judge
# the file the test meant, not an empty one caught between creation and its first write
# (which it rightly calls truncated).
"$TESTCLUSTER" exec "$w1" -- bash -c "
  set -e
  cd '$spool_w1'
  staged() { echo '$prefix/spool/.hostile-staged-'\$1; }
  ln -s /etc/passwd $(name 1)
  head -c 100 /dev/urandom >\$(staged 2) && ln \$(staged 2) '$prefix/spool/.hostile-second-link'
  mkfifo $(name 3)
  truncate -s 40M \$(staged 4)
  head -c 300 /dev/urandom >\$(staged 5) && chown 65534:65534 \$(staged 5)
  head -c 300 /dev/urandom >\$(staged 6)
  real=\$(ls -1 [0-9]*-*.spool | grep -v hostile | head -1)
  # A real file's first bytes; the controller may have drained it meanwhile: then the magic.
  head -c 20 \"\$real\" >\$(staged 7) 2>/dev/null || printf EXSP >\$(staged 7)
  for n in 2 4 5 6 7; do mv \$(staged \$n) \$(printf '%020d-hostile-boot.spool' \$n); done"
wait_until 60 "seven hostile files quarantined" bash -c "[[ \$(ls '$prefix/spool/workers/.quarantine' | grep -c hostile-boot) -ge 7 ]]"
quarantined="$(ls "$prefix/spool/workers/.quarantine" | grep hostile-boot)"
for reason in symlink hardlink not_regular too_large wrong_owner bad_magic truncated; do
  grep -q -- "-$reason\$" <<<"$quarantined" || fail "no hostile file quarantined as $reason: $quarantined"
done
pass "hostile spool files refused by reason: $(sed 's/.*-//' <<<"$quarantined" | sort | paste -sd' ')"

# --- Hostile records in well-framed spool files -------------------------------------------------
# A worker (a buggy version, a full disk, a compromised node) writes valid files whose records
# are wrongly typed. Each of these used to end the controller for good (nlohmann threw on a
# wrongly typed field), or made the server refuse the whole upload with every other worker's
# samples in it. Each file also carries one good GPU allocation ("probe") of a running job:
# it must reach the server while the bad record is dropped, counted and named.
job_probe="$(submit -w "$w1" -o /dev/null --wrap 'sleep 300')"
wait_until 60 "job $job_probe to start" bash -c "[[ \$(squeue -h -j $job_probe -o %T) == RUNNING ]]"
boot="hostile-records-$$"
now_ms="$(date +%s%3N)"
probe() { printf 'gpu_allocation={"job_id":"%s","host":"%s","gpu_uuid":"GPU-probe-%s","gpu_index":9,"from_ms":%s,"to_ms":0}' "$job_probe" "$w1" "$1" "$now_ms"; }
printf '%*s' 100000 '' | tr ' ' '[' >"$DIR/deep.json"
chmod 644 "$DIR/deep.json"
write_records() { # sequence records...
  "$TESTCLUSTER" exec "$w1" -- "$BUILD/bin/expanse-test-spool-write" "$spool_w1" "$w1" "$boot" "$@" >/dev/null
}
ctl_pid_before="$ctl_pid"
unclean_before="$(api GET "/api/v1/computes/$COMPUTE" | jq '.heartbeat.diagnostics.runs.unclean_exits')"
write_records 1 'job_event={"version":"1"}'
write_records 2 "job_event={\"version\":1,\"kind\":\"start\",\"job_id\":\"$job_probe\",\"host\":\"$w1\",\"at_ms\":\"now\"}" "$(probe 2)"
write_records 3 'gpu_series=[{"host":5,"metric":"gpu.sm_util","t0":1,"dt":[0],"v":[1]}]' "$(probe 3)"
write_records 4 'gpu_series=[5,"x",null]' "$(probe 4)"
write_records 5 "gpu_series=[{\"host\":\"$w1\",\"metric\":\"gpu.sm_util\",\"t0\":\"$now_ms\",\"dt\":[0],\"v\":[1]}]" "$(probe 5)"
write_records 6 "gpu_series=@$DIR/deep.json" "$(probe 6)"
write_records 7 "py_stacks=[{\"job_id\":\"$job_probe\",\"host\":\"$w1\",\"window_start_ms\":\"x\"}]" "$(probe 7)"
dc_wait_job 90 "$job_probe" '[.gpus[]?.gpu_uuid | select(startswith("GPU-probe-"))] | length == 6' \
  "the good records beside the bad ones (probes 2-7 of job $job_probe)"
pass "the good records of files with bad ones were delivered"
wait_until 30 "the file with nothing good quarantined" bash -c "ls '$prefix/spool/workers/.quarantine' | grep -q -- '$boot.spool-bad_records\$'"
pass "a file none of whose records could be taken is quarantined as bad_records"
kill -0 "$ctl_pid_before" 2>/dev/null || fail "the controller died on hostile records: $(tail -20 "$DIR/controller.log")"
pass "the controller (pid $ctl_pid_before) is still running"
refused_ok() {
  api GET "/api/v1/computes/$COMPUTE" | jq_holds --arg h "$w1" \
    '.heartbeat.diagnostics.bad_worker_records_by_host[$h].records >= 9' >/dev/null
}
wait_until 30 "the heartbeat to count the refused records of $w1" refused_ok ||
  fail "refused records not in the heartbeat: $(api GET "/api/v1/computes/$COMPUTE" | jq -c '.heartbeat.diagnostics')"
diag="$(api GET "/api/v1/computes/$COMPUTE" | jq -c '.heartbeat.diagnostics')"
assert_eq 0 "$(jq '.uploader.dead_lettered' <<<"$diag")" "batches the server refused (dead-lettered) after hostile records"
assert_eq "$unclean_before" "$(jq '.runs.unclean_exits' <<<"$diag")" "unclean exits of the controller (unchanged by the hostile records)"
# Logged once per host and reason, naming the field; the heartbeat keeps the last problem.
grep -q "worker spool: refused 1 record(s) from $w1 (bad_record): .*job_event.version must be an integer" "$DIR/controller.log" ||
  fail "no log line naming the bad version: $(grep 'worker spool' "$DIR/controller.log" | head -5)"
grep -q "worker spool: refused 1 record(s) from $w1 (json_too_deep): gpu_series: .*deeper than 8 levels" "$DIR/controller.log" ||
  fail "no log line for the nested payload: $(grep 'worker spool' "$DIR/controller.log" | head -5)"
[[ "$(jq -r --arg h "$w1" '.bad_worker_records_by_host[$h].last_problem' <<<"$diag")" == "py_stacks[0].window_start_ms must be an integer"* ]] ||
  fail "the heartbeat's last problem of $w1: $(jq -c --arg h "$w1" '.bad_worker_records_by_host[$h]' <<<"$diag")"
pass "refusals counted per host ($(jq -c --arg h "$w1" '.bad_worker_records_by_host[$h]' <<<"$diag")) and logged with the field's path"
scancel "$job_probe"
job_after="$(submit -w "$w1" --gres=gpu:1 -o /dev/null --wrap 'sleep 4')"
wait_job_done "$job_after" 60
dc_wait_job 60 "$job_after" '([.events[]?] | length) == 2 and .used.has_gpu_samples == true' "job $job_after's data after the hostile files"
pass "the worker's own files still flow after the hostile ones (job $job_after)"
dc_finish
