#!/usr/bin/env bash
# Expanse on the real SLURM cluster: Prolog/Epilog call `expanse-daemon hook`, the Prolog starts
# each worker's sampler from the shared binary (sampler bootstrap), samplers read a fake NVML
# whose index order differs from the minor numbers SLURM uses, the controller daemon drains the
# shared spool and uploads to a real expanse-server. Checks that the job's GPUs on each host are
# the ones SLURM gave it (by minor number, not NVML index), that its samples and node events
# arrive, and that jobs still run and no node drains when the daemon binary is missing.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse-daemon and expanse-server)}"
SERVER="$BUILD/bin/expanse-server"
FAKE_NVML="$BUILD/fakes/nvml/libnvidia-ml.so.1"
source "$(dirname "$0")/../lib/expanse_server.sh"

DIR="$(shared_scratch)"
prefix="$DIR/prefix"
ctl_pid=""
cleanup() {
  if [[ -n "$ctl_pid" ]]; then
    kill "$ctl_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$ctl_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$ctl_pid" 2>/dev/null || true
  fi
  server_stop || true
  # The samplers the Prologs started run inside the worker namespaces.
  # ([e] keeps pkill from matching the command line of the shell that runs it.)
  for w in $EXPANSE_TC_WORKERS; do
    "$TESTCLUSTER" exec "$w" -- pkill -f "$prefix/bin/[e]xpanse-daemon" 2>/dev/null || true
  done
  restore_slurm_conf
}
trap cleanup EXIT
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"

mkdir -p "$prefix/bin"
cp "$BUILD/bin/expanse-daemon" "$prefix/bin/expanse-daemon"

# Each worker's fake GPUs: NVML index order is the reverse of the minor-number order, so a tool
# that maps SLURM's GPU to the NVML index picks the wrong GPU on every host.
for w in $EXPANSE_TC_WORKERS; do
  read -r lo hi < <(grep "NodeName=$w " "$(dirname "$SLURM_CONF")/gres.conf" | grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
  "$TESTCLUSTER" exec "$w" -- bash -c "cat >/etc/expanse/fake-nvml.json" <<JSON
{"gpus": [
  {"uuid": "GPU-$w-minor$hi", "minor": $hi, "sm_util": 91, "memory_used_mib": 2048},
  {"uuid": "GPU-$w-minor$lo", "minor": $lo, "sm_util": 7, "memory_used_mib": 0}]}
JSON
done

server_start || fail "expanse-server did not start"
server_register cluster "$prefix" || fail "compute registration"
printf 'SSL_CERT_FILE=%s\n' "$CA_FILE" >"$DIR/daemon.env"
pass "server up, compute $COMPUTE registered"

hook_args="--shared-prefix $prefix --user root --gres-conf $(dirname "$SLURM_CONF")/gres.conf --nvml-library $FAKE_NVML --interval 500ms --flush-interval 2s"
for hook in prolog epilog; do
  cat >"$DIR/$hook" <<HOOK
#!/bin/bash
# As the installer writes it: never fail the job, whatever happens to the daemon.
"$prefix/bin/expanse-daemon" hook $hook --sampler-bootstrap prolog $hook_args || true
exit 0
HOOK
  chmod 755 "$DIR/$hook"
done
save_slurm_conf
trap cleanup EXIT  # save_slurm_conf set its own; cleanup restores slurm.conf too
printf 'Prolog=%s\nEpilog=%s\n' "$DIR/prolog" "$DIR/epilog" >>"$SLURM_CONF"
"$TESTCLUSTER" reconfigure

"$prefix/bin/expanse-daemon" --role controller --config "$DIR/config.json" \
  --shared-prefix "$prefix" --interval 1s --flush-interval 2s --heartbeat-interval 2s \
  --env-file "$DIR/daemon.env" --state-dir "$DIR/ctl" --events-dir "$DIR/ctl/events" \
  --control-dir "$DIR/ctl/control" --nvml-library "$FAKE_NVML" \
  >"$DIR/controller.log" 2>&1 &
ctl_pid=$!

# The batch script keeps one CPU busy on the first host for 10 s.
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null \
  --wrap 'timeout 10 sh -c "while :; do :; done"; sleep 2; true')"
wait_job_done "$job" 120
assert_eq COMPLETED "$(job_state "$job")" "state of job $job"

api_job() { api GET "/api/v1/computes/$COMPUTE/jobs/$job"; }
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

wait_until 60 "CPU and memory of job $job from its cgroups" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job' | jq -e '.used.cpu_efficiency > 0 and .used.mem_efficiency != null' >/dev/null"
pass "job $job: CPU and memory used, read from the job's cgroups on its hosts ($(api_job | jq -c '.used | {cpu_efficiency, mem_efficiency}'))"

wait_until 30 "heartbeat relaying both workers" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE' | jq -r '.heartbeat.workers.sampled') == 2 ]]"
pass "heartbeat: 2 of 2 sampled worker nodes"
grep -q 'sampler aggregator drained files=[1-9]' "$DIR/controller.log" || fail "no drained files logged: $(tail "$DIR/controller.log")"

# A job array whose two tasks share worker1: two jobs on one node, each with its own GPU, known
# to the server by their array ids.
array="$(submit --array=0-1 -w "$w1" --gres=gpu:1 -o /dev/null --wrap 'sleep 6')"
for task in 0 1; do
  wait_until 90 "task ${array}_$task of the array with its GPU" bash -c "curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/${array}_$task' | jq -e '(.gpus | length) == 1 and ([.events[]?.kind] | index(\"end\")) != null' >/dev/null"
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
for w in "$w1" "$w2"; do
  state="$(sinfo -h -n "$w" -o %t)"
  [[ "$state" != *drain* && "$state" != drng ]] || fail "$w drained: $state"
done
pass "without the daemon binary, jobs still complete and no node drains"
mv "$prefix/bin/expanse-daemon.away" "$prefix/bin/expanse-daemon"
rm -rf "$DIR"
