#!/usr/bin/env bash
# Expanse on the real SLURM cluster: Prolog/Epilog call `expanse-daemon hook`, the Prolog starts
# each worker's sampler from the shared binary (sampler bootstrap), samplers read a fake NVML
# whose index order differs from the minor numbers SLURM uses, the controller daemon drains the
# shared spool and uploads to a real expanse-server. Checks that the job's GPUs on each host are
# the ones SLURM gave it (by minor number, not NVML index), that its samples and node events
# arrive, and that jobs still run and no node drains when the daemon binary is missing.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
source "$(dirname "$0")/../lib/daemon_cluster.sh"
dc_setup
dc_controller_start

# The batch script keeps one CPU busy on the first host until the test has seen the job's CPU
# and memory (the file cpu.seen), at most two minutes. This first job's Prolog also starts each
# worker's sampler, which under the sanitizers on a loaded machine may find the job late; a job
# of fixed length could end before its CPU was read twice.
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null \
  --wrap "timeout 120 sh -c 'while [ ! -e $DIR/cpu.seen ]; do :; done'; sleep 2; true")"
api_job() { api GET "/api/v1/computes/$COMPUTE/jobs/$job"; }
cpu_and_memory_known() { api_job | jq_holds '.used.cpu_efficiency > 0 and .used.mem_efficiency != null' >/dev/null; }
for _ in $(seq 1 90); do cpu_and_memory_known && break; sleep 1; done
cpu_and_memory_known || fail "CPU and memory of job $job from its cgroups, not there after 90 s: $(api_job | jq -c '.used') $(api_job | jq -c '[.events[]? | {kind, host, at_ms}]'); memory samples: $(api GET "/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=job.mem_used_mib" | head -c 1500)"
pass "job $job: CPU and memory used, read from the job's cgroups on its hosts ($(api_job | jq -c '.used | {cpu_efficiency, mem_efficiency}'))"
touch "$DIR/cpu.seen"
wait_job_done "$job" 120
assert_eq COMPLETED "$(job_state "$job")" "state of job $job"

wait_until 60 "both hosts' start and end events of job $job" \
  bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job' | jq '[.events[]?] | length') -ge 4 ]]"
record="$(api_job)"
for w in "$w1" "$w2"; do
  lo="$(grep "NodeName=$w " "$(dirname "$SLURM_CONF")/gres.conf" | grep -oP 'nvidia\[\K[0-9]+')"
  got="$(jq -r --arg h "$w" '[.gpus[] | select(.host == $h) | .gpu_uuid] | join(",")' <<<"$record")"
  # SLURM gave GRES index 0, the first device file: /dev/nvidia$lo, which NVML lists as index 1.
  assert_eq "GPU-$w-minor$lo" "$got" "GPU of job $job on $w"
  assert_eq 1 "$(jq -r --arg h "$w" '.gpus[] | select(.host == $h) | .gpu_index' <<<"$record")" "NVML index on $w"
done
assert_eq "$EXPANSE_TC_WORKERS" "$(jq -r '[.hosts[]] | sort | join(" ")' <<<"$record")" "hosts of job $job"
pass "job $job: each host's GPU is the one SLURM allocated (by minor number), events from both hosts"

wait_until 60 "samples of job $job" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job' | jq -r '.used.has_gpu_samples') == true ]]"
pass "GPU samples of job $job arrived from the workers' samplers"

wait_until 30 "heartbeat relaying both workers" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE' | jq -r '.heartbeat.workers.sampled') == 2 ]]"
pass "heartbeat: 2 of 2 sampled worker nodes"
grep -q 'sampler aggregator drained files=[1-9]' "$DIR/controller.log" || fail "no drained files logged: $(tail "$DIR/controller.log")"

# A job array whose two tasks share worker1: two jobs on one node, each with its own GPU, known
# to the server by their array ids. The tasks run until both have started (the file
# array.go), so that neither can end before the other gets its GPU and reuse that GPU.
array="$(submit --array=0-1 -w "$w1" --gres=gpu:1 -o /dev/null \
  --wrap "for i in \$(seq 600); do [ -e $DIR/array.go ] && exit 0; sleep 0.2; done")"
wait_until 90 "both tasks of array $array to run" bash -c "[[ \$(squeue -h -j $array -t R | wc -l) == 2 ]]"
touch "$DIR/array.go"
for task in 0 1; do
  wait_until 90 "task ${array}_$task of the array with its GPU" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/${array}_$task' | jq_holds '(.gpus | length) == 1 and ([.events[]?.kind] | index(\"end\")) != null' >/dev/null"
done
gpu0="$(api GET "/api/v1/computes/$COMPUTE/jobs/${array}_0" | jq -r '.gpus[0].gpu_uuid')"
gpu1="$(api GET "/api/v1/computes/$COMPUTE/jobs/${array}_1" | jq -r '.gpus[0].gpu_uuid')"
[[ "$gpu0" == GPU-$w1-* && "$gpu1" == GPU-$w1-* && "$gpu0" != "$gpu1" ]] ||
  fail "array tasks on $w1 should hold different GPUs: ${array}_0 $gpu0, ${array}_1 $gpu1"
pass "array tasks ${array}_0 and ${array}_1 on $w1 hold different GPUs ($gpu0, $gpu1)"

# The daemon binary gone from the shared prefix: jobs still run, no node drains.
mv "$prefix/bin/expanse-daemon" "$prefix/bin/expanse-daemon.away"
job2="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null --wrap 'true')"
wait_job_done "$job2" 60
assert_eq COMPLETED "$(job_state "$job2")" "job $job2 without the daemon binary"
dc_assert_no_drain
pass "without the daemon binary, jobs still complete and no node drains"
mv "$prefix/bin/expanse-daemon.away" "$prefix/bin/expanse-daemon"
dc_finish
