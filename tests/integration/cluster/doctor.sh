#!/usr/bin/env bash
# `expanse doctor` on the real SLURM cluster, after a real `expanse compute install` from a
# signed release on the controller and `--role sampler` on both workers (as cluster2.console does
# it), with fake NVML GPUs on the workers whose minors match gres.conf:
#   - a healthy deployment: exit 0, no finding that needs action, also in --json;
#   - the Prolog line removed from slurm.conf: HOOK_MISSING with its fix, exit 1;
#   - gres.conf naming minors a worker does not have: GRES_MINOR_MISMATCH, exit 1;
#   - the DCGM host engine unreachable from a worker (the operator's dcgmi, a fake): DCGM_DEGRADED;
#   - the spool root made unwritable for the daemon user: SPOOL_NOT_WRITABLE, exit 1;
#   - a worker's report 10 minutes behind the shared file system's clock: WORKER_CLOCK_SKEW;
#   - a running GPU job: the attribution self-check cannot read SLURM 22.05's default-allow
#     device cgroup and says so (exit 0); switched to the listing form older SLURMs make, it
#     agrees; the job's other GPU added to its devices.allow: ATTRIBUTION_CGROUP_DEVICES naming
#     that GPU, exit 1;
#   - a worker's sampler stopped: `doctor --host` reports it WORKER_SILENT once its last report
#     is older than two minutes, exit 1;
#   - the credential revoked through the console API: CREDENTIAL_REVOKED, exit 1.
# Each breakage is undone before the next; the EXIT trap removes the install and restores
# slurm.conf and the workers' /etc/expanse files for the tests after this one.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse, expanse-daemon, expanse-server)}"
SERVER="$BUILD/bin/expanse-server"
EXPANSE="$BUILD/bin/expanse"
source "$(dirname "$0")/../lib/expanse_server.sh"
source "$(dirname "$0")/../lib/install_env.sh"

DIR="$(shared_scratch)"
prefix="$DIR/prefix"
ctl="$EXPANSE_TC_CONTROLLER"
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"
PRIV="$(mktemp -d)"

job="" restore_devices=""
# The SLURM devices cgroup on $w1 back to allowing by default, once its jobs' cgroups are gone.
restore_slurm_devices() {
  [[ -n "$restore_devices" ]] || return 0
  local i
  for i in $(seq 50); do
    "$TESTCLUSTER" exec "$w1" -- bash -c 'echo a >"$(ls -d /sys/fs/cgroup/devices/slurm* | head -1)/devices.allow"' \
      2>/dev/null && { restore_devices=""; return 0; }
    sleep 0.2
  done
  echo "cannot put $w1's SLURM devices cgroup back to allowing by default" >&2
  return 1
}
cleanup() {
  if [[ -n "$job" ]]; then
    scancel "$job" 2>/dev/null || true
    wait_job_done "$job" 60 2>/dev/null || true
  fi
  restore_slurm_devices || true
  [[ ! -f "$PRIV/gres.conf" ]] || cp -p "$PRIV/gres.conf" "$gres_conf"
  "$TESTCLUSTER" exec "$w2" -- rm -f /etc/expanse/fake-dcgm.json 2>/dev/null || true
  chmod 755 "$prefix/spool/workers" 2>/dev/null || true
  host_systemd_off "$ctl" || true
  for w in "$w1" "$w2"; do
    if [[ -e "$PRIV/sampler-$w" ]]; then
      "$TESTCLUSTER" exec "$w" -- "$EXPANSE" compute uninstall --type slurm --role sampler \
        --shared-prefix "$prefix" >/dev/null 2>&1 || true
      host_systemd_off "$w" || true
    fi
  done
  for w in $EXPANSE_TC_WORKERS; do
    "$TESTCLUSTER" exec "$w" -- pkill -f "$prefix/bin/[e]xpanse-daemon" 2>/dev/null || true
    restore_host_etc_files "$PRIV" "$w" || true
  done
  server_stop || true
  rm -rf "$PRIV"
  restore_slurm_conf
}
save_slurm_conf
trap cleanup EXIT

# --- a signed release mirrored by the server, a registered compute ----------------------------
make_signed_release "$DIR" 1.0.0
SERVER_EXTRA_ARGS="--releases-dir $DIR/releases" server_start || fail "expanse-server did not start"
publish_release "$DIR" || fail "release manifest"
COMPUTE="$(api POST /api/v1/orgs/acme/computes '{"name":"doctor","type":"slurm"}' | jq -r .id)"
token="$(api POST "/api/v1/computes/$COMPUTE/install-tokens" | jq -r .token)"
[[ "$token" == exp_it_* ]] || fail "no install token"

# --- the workers' GPUs: two fake NVML GPUs each, with the minors gres.conf gives the node -------
# UUIDs in NVIDIA's form (hex), as DCGM's discovery prints them: the worker's number, the minor.
gpu_uuid() { printf 'GPU-0000000%d-0000-4000-8000-0000000000%02x' "${1##*[!0-9]}" "$2"; }
mkdir -p "$DIR/fake-nvml"
install -m 644 "$BUILD/fakes/nvml/libnvidia-ml.so.1" "$DIR/fake-nvml/libnvidia-ml.so.1"
gres_conf="$(dirname "$SLURM_CONF")/gres.conf"
for w in "$w1" "$w2"; do
  save_host_etc_files "$PRIV" "$w"
  read -r lo hi < <(grep "NodeName=$w " "$gres_conf" | grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
  "$TESTCLUSTER" exec "$w" -- bash -c 'cat >/etc/expanse/fake-nvml.json && chmod 644 /etc/expanse/fake-nvml.json' <<<"{\"gpus\": [
    {\"uuid\": \"$(gpu_uuid "$w" "$hi")\", \"minor\": $hi, \"sm_util\": 91},
    {\"uuid\": \"$(gpu_uuid "$w" "$lo")\", \"minor\": $lo, \"sm_util\": 7}]}"
  # The cluster has no CUDA and no profiling agent library: those collectors are turned off,
  # as an operator would on such nodes (the doctor notes them as info).
  "$TESTCLUSTER" exec "$w" -- bash -c 'cat >/etc/expanse/daemon.env && chmod 644 /etc/expanse/daemon.env' <<ENV
SLURM_CONF=$SLURM_CONF
EXPANSE_NVML_LIBRARY=$DIR/fake-nvml/libnvidia-ml.so.1
EXPANSE_CUPTI_ENABLE=0
EXPANSE_PROFILING_AGENT_ENABLE=0
$([[ "$w" == "$w2" ]] && echo "EXPANSE_DCGMI=$DIR/dcgm-test/dcgmi")
ENV
done
# DCGM on $w2 through the operator's dcgmi (a fake speaking dcgmi's recorded formats, as in
# cluster.gpu_counters), its host engine up for now.
mkdir -p "$DIR/dcgm-test"
# A copy beside the wrapper: the daemon's account may not read the checkout (a clone
# in a 0700 `mktemp -d` directory).
install -m 644 "$REPO_ROOT/tests/fakes/dcgm/dcgmi" "$DIR/dcgm-test/fake-dcgmi"
cat >"$DIR/dcgm-test/dcgmi" <<WRAP
#!/bin/sh
EXPANSE_FAKE_DCGM_SCENARIO=/etc/expanse/fake-dcgm.json exec python3 "$DIR/dcgm-test/fake-dcgmi" "\$@"
WRAP
chmod 755 "$DIR/dcgm-test" "$DIR/dcgm-test/dcgmi"
read -r lo2 hi2 < <(grep "NodeName=$w2 " "$gres_conf" | grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
dcgm_gpus="[{\"id\": 0, \"uuid\": \"$(gpu_uuid "$w2" "$hi2")\"}, {\"id\": 1, \"uuid\": \"$(gpu_uuid "$w2" "$lo2")\"}]"
"$TESTCLUSTER" exec "$w2" -- bash -c 'cat >/etc/expanse/fake-dcgm.json && chmod 644 /etc/expanse/fake-dcgm.json' \
  <<<"{\"gpus\": $dcgm_gpus}"

# --- the controller install ---------------------------------------------------------------------
host_systemd_on "$ctl"
mkdir -p "$prefix"
on_ctl() { "$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" "$@"; }
reconf_before="$(slurmd_reconfigure_count)"
out="$(EXPANSE_INSTALL_TOKEN="$token" on_ctl "$EXPANSE" compute install --type slurm \
  --shared-prefix "$prefix" --releases-url "$CP_URL/releases" --cosign-key "$DIR/release.pub" \
  --control-plane "$CP_URL" --data-plane "$DP_URL" --slurm-conf "$SLURM_CONF" \
  --heartbeat-timeout 45s --patch-slurm-conf=true --profiling-agent=false \
  --daemon-version 1.0.0 2>&1)" || fail "install failed: $out"
pass "Expanse installed on the controller, compute $COMPUTE"
wait_until 30 "slurmd to reload the hooks" bash -c "(( \$(cat $EXPANSE_TC_STATE/log/slurmd-*.log | grep -c reconfigured) > $reconf_before ))"

# The sampler service on each worker, as the console's assistant prompt has it.
for w in "$w1" "$w2"; do
  touch "$PRIV/sampler-$w"
  host_systemd_on "$w"
  out="$("$TESTCLUSTER" exec "$w" -- "$EXPANSE" compute install --type slurm --role sampler \
    --shared-prefix "$prefix" 2>&1)" || fail "sampler install on $w: $out"
done
for w in "$w1" "$w2"; do
  if ! (wait_until 60 "$w's sampler report in the spool" test -s "$prefix/spool/workers/$w/health.rec"); then
    ls -la "$prefix/spool/workers" "$prefix/spool/workers/$w" >&2 || true
    "$TESTCLUSTER" exec "$w" -- journalctl -u expanse-sampler 2>&1 | tail -20 >&2 || true
    fail "no health report from $w's sampler"
  fi
done
pass "both workers' samplers report in $prefix/spool/workers"
# Installed with --profiling-agent=false: no TaskProlog, so a task gets no capture agent (the
# other installs' TaskProlog exports it: install_lifecycle.sh).
job="$(submit -w "$w1" -o "$DIR/inject-%j.out" --wrap 'echo "inject=${CUDA_INJECTION64_PATH-unset}"')"
wait_job_done "$job" 60
assert_eq "inject=unset" "$(cat "$DIR/inject-$job.out")" \
  "a task's CUDA_INJECTION64_PATH on a compute installed with --profiling-agent=false"

# doctor ARGS... — runs `expanse doctor` on the controller; sets OUT and RC.
doctor() {
  RC=0
  OUT="$(on_ctl "$EXPANSE" doctor "$@" 2>&1)" || RC=$?
}
# doctor_until SECONDS WHAT JQ ARGS... — reruns `doctor ARGS` every 5 s (each run asks the
# planes and reads every report) until `jq -e JQ` holds for its JSON.
doctor_until() {
  local seconds="$1" what="$2" expr="$3" i
  shift 3
  for ((i = 0; i < seconds; i += 5)); do
    doctor "$@" --json
    jq_holds "$expr" <<<"$OUT" 2>/dev/null && return 0
    sleep 5
  done
  fail "timed out after ${seconds}s waiting for: $what; the doctor said: $OUT"
}
codes() { jq -r '[.findings[] | select(.severity == "action") | .code] | join(" ")' <<<"$OUT"; }

# --- healthy ------------------------------------------------------------------------------------
# The first reports of a just-started sampler may lack a sample; give it a few seconds.
doctor_until 60 "a healthy deployment" '.needs_action == false'
doctor
printf '%s\n' "$OUT" | sed 's/^/    | /'
assert_eq 0 "$RC" "doctor's exit status on a healthy deployment"
assert_match 'nothing to do' "$OUT" "doctor's verdict on a healthy deployment"
doctor --json
assert_eq 0 "$RC" "doctor --json's exit status on a healthy deployment"
assert_eq false "$(jq -r .needs_action <<<"$OUT")" "needs_action on a healthy deployment"
assert_eq "" "$(codes)" "findings needing action on a healthy deployment"

# --- DCGM's host engine unreachable from $w2 ---------------------------------------------------
"$TESTCLUSTER" exec "$w2" -- bash -c 'cat >/etc/expanse/fake-dcgm.json' \
  <<<"{\"engine\": \"unreachable\", \"dmon\": {\"lose_engine_after_rounds\": 0}, \"gpus\": $dcgm_gpus}"
doctor_until 90 "DCGM_DEGRADED on $w2" '[.findings[].code] | index("DCGM_DEGRADED")' --host "$w2"
assert_eq 1 "$RC" "doctor --host $w2's exit status with its DCGM host engine unreachable"
assert_match 'DCGM unavailable' "$(jq -r '.findings[] | select(.code == "DCGM_DEGRADED") | .seen' <<<"$OUT")" \
  "DCGM_DEGRADED's reason"
assert_match 'nvidia-dcgm' "$(jq -r '.findings[] | select(.code == "DCGM_DEGRADED") | .fix' <<<"$OUT")" \
  "DCGM_DEGRADED's fix"

# --- a worker's sampler stopped (its report ages from now) ------------------------------------
"$TESTCLUSTER" exec "$w2" -- systemctl stop expanse-sampler || fail "cannot stop $w2's sampler"
pass "the sampler on $w2 stopped"

# --- the Prolog line removed ------------------------------------------------------------------
cp -p "$SLURM_CONF" "$PRIV/wired-slurm.conf"
sed -i '/^Prolog=/d' "$SLURM_CONF"
doctor --json
assert_eq 1 "$RC" "doctor's exit status without the Prolog line"
assert_match 'HOOK_MISSING' "$(codes)" "finding without the Prolog line"
assert_match 'expanse compute install --reinstall' \
  "$(jq -r '.findings[] | select(.code == "HOOK_MISSING") | .fix' <<<"$OUT")" "HOOK_MISSING's fix"
cp -p "$PRIV/wired-slurm.conf" "$SLURM_CONF"
doctor --json
[[ "$(codes)" != *HOOK_MISSING* ]] || fail "HOOK_MISSING with the Prolog line back: $(codes)"
pass "no HOOK_MISSING with the Prolog line back"

# --- gres.conf names minors $w1 does not have -------------------------------------------------
cp -p "$gres_conf" "$PRIV/gres.conf"
sed -i "/NodeName=$w1 /s/nvidia\[[0-9]*-[0-9]*\]/nvidia[6-7]/" "$gres_conf"
doctor --host "$w1" --json
assert_eq 1 "$RC" "doctor --host $w1's exit status with gres.conf naming minors 6-7"
assert_match 'GRES_MINOR_MISMATCH' "$(codes)" "finding with gres.conf's minors wrong"
assert_match "minors 6,7 for $w1" "$(jq -r '.findings[] | select(.code == "GRES_MINOR_MISMATCH") | .seen' <<<"$OUT")" \
  "GRES_MINOR_MISMATCH names gres.conf's minors"
cp -p "$PRIV/gres.conf" "$gres_conf"
rm "$PRIV/gres.conf"

# --- the spool unwritable for the daemon user -------------------------------------------------
chmod 555 "$prefix/spool/workers"
doctor --json
assert_eq 1 "$RC" "doctor's exit status with the spool read-only"
assert_match 'SPOOL_NOT_WRITABLE' "$(codes)" "finding with the spool read-only"
assert_match "chmod 0755 $prefix/spool/workers" \
  "$(jq -r '[.findings[] | select(.code == "SPOOL_NOT_WRITABLE") | .fix] | first' <<<"$OUT")" \
  "SPOOL_NOT_WRITABLE's fix"
chmod 755 "$prefix/spool/workers"

# --- $w2's report 10 minutes behind the shared file system's clock ------------------------------
# (Its sampler is stopped, so nothing rewrites the report meanwhile; the file's time is put back
# for the silence check below.)
report="$prefix/spool/workers/$w2/health.rec"
touch -r "$report" "$PRIV/report-mtime"
touch -d "@$(($(date +%s) + 600))" "$report"
doctor --host "$w2" --json
assert_eq 1 "$RC" "doctor --host $w2's exit status with its report 10 minutes behind"
assert_match "$w2's clock is 10 min behind" \
  "$(jq -r '.findings[] | select(.code == "WORKER_CLOCK_SKEW") | .seen' <<<"$OUT")" "WORKER_CLOCK_SKEW"
touch -r "$PRIV/report-mtime" "$report"

# --- the attribution self-check on a running job (while $w2's report ages) ----------------------
# A one-GPU job on $w1: SLURM gives it GRES index 0, /dev/nvidia$lo1. SLURM 22.05 confines it by
# denying the other GPU in a cgroup that allows by default, which the kernel lists only as
# "a *:* rwm": the self-check says it could not compare, and why, and nothing needs action.
read -r lo1 hi1 < <(grep "NodeName=$w1 " "$gres_conf" | grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
job="$(submit -w "$w1" --gres=gpu:1 -o /dev/null --wrap 'sleep 600')"
job_running() { [[ "$(job_state "$1")" == RUNNING ]]; }
wait_until 60 "job $job to run" job_running "$job"
self_check() { jq -r '.findings[] | select(.code == "ATTRIBUTION_SELF_CHECK") | .seen' <<<"$OUT"; }
doctor_until 90 "$w1's self-check to look at job $job's cgroup" \
  '[.findings[] | select(.code == "ATTRIBUTION_SELF_CHECK") | .seen | test("1 not checked \\(devices.list is")] | any' \
  --host "$w1"
assert_eq 0 "$RC" "doctor --host $w1's exit status with job $job as SLURM 22.05 confines it"
assert_match '0 agree; 1 not checked \(devices.list is "a \*:\* rwm"' "$(self_check)" \
  "the self-check on a default-allow job cgroup"
scancel "$job"
wait_job_done "$job" 60
# A site whose SLURM cgroup denies devices by default (as SLURM before 21.08 made job cgroups,
# or an operator's parent cgroup): SLURM's own deny of the other GPU then removes it from the
# list the job inherits, and the list names the job's GPU. The node's SLURM devices cgroup is
# set that way while no job runs (the kernel changes a cgroup's default only without children),
# allowing the usual character devices and both GPUs; a new job is then compared, and agrees.
srun -w "$w1" true  # slurmd makes its devices cgroup with the first job
slurm_devices() {
  "$TESTCLUSTER" exec "$w1" -- bash -c "d=\$(ls -d /sys/fs/cgroup/devices/slurm* | head -1) && cd \$d && $1"
}
for i in $(seq 50); do
  slurm_devices "echo a >devices.deny" 2>/dev/null && break
  sleep 0.2  # the last job's cgroup is still being removed
done
slurm_devices "for e in 'c 1:* rwm' 'c 5:* rwm' 'c 136:* rwm' 'c 195:254 rwm' 'c 195:255 rwm' 'c 195:$lo1 rwm' 'c 195:$hi1 rwm'; do echo \"\$e\" >devices.allow; done" ||
  fail "cannot make $w1's SLURM devices cgroup deny by default"
restore_devices=1
job="$(submit -w "$w1" --gres=gpu:1 -o /dev/null --wrap 'sleep 600')"
wait_until 60 "job $job to run" job_running "$job"
# job_devices CMD — runs CMD with $d the job's devices cgroup on $w1, then keeps its devices.list.
job_devices() {
  "$TESTCLUSTER" exec "$w1" -- bash -c "d=\$(find /sys/fs/cgroup/devices -maxdepth 6 -type d -name job_$job | head -1) &&
    [[ -n \$d ]] && $1 && cat \$d/devices.list" >"$PRIV/devices.list" 2>/dev/null
}
# slurmstepd makes the job's cgroup after the job is RUNNING.
wait_until 30 "job $job's devices cgroup on $w1" job_devices true
grep -qx "c 195:$lo1 rwm" "$PRIV/devices.list" && ! grep -q "c 195:$hi1 " "$PRIV/devices.list" ||
  fail "job $job's devices.list should allow /dev/nvidia$lo1 only: $(cat "$PRIV/devices.list")"
doctor_until 60 "$w1's self-check to compare job $job" \
  '[.findings[] | select(.code == "ATTRIBUTION_SELF_CHECK") | .seen | test("of 1 running job .*: 1 agree")] | any' \
  --host "$w1"
assert_eq 0 "$RC" "doctor --host $w1's exit status with job $job's device list as allocated"
# Its other GPU added, as a wrong gres.conf or a hand edit would leave it: the doctor names the
# GPU the job may open but was not given.
job_devices "echo 'c 195:$hi1 rwm' >\$d/devices.allow" || fail "cannot widen job $job's devices cgroup"
grep -qx "c 195:$hi1 rwm" "$PRIV/devices.list" || fail "job $job's devices.list: $(cat "$PRIV/devices.list")"
doctor_until 60 "ATTRIBUTION_CGROUP_DEVICES for job $job" \
  '[.findings[].code] | index("ATTRIBUTION_CGROUP_DEVICES")' --host "$w1"
doctor --host "$w1" --json
assert_eq 1 "$RC" "doctor --host $w1's exit status with job $job's cgroup widened"
seen="$(jq -r '.findings[] | select(.code == "ATTRIBUTION_CGROUP_DEVICES") | .seen' <<<"$OUT")"
assert_match "job \"$job\"'s cgroup device list lets it open" "$seen" "ATTRIBUTION_CGROUP_DEVICES's job"
assert_match "not allocated: \[\"$(gpu_uuid "$w1" "$hi1")\"\]" "$seen" "the GPU only the cgroup allows"
assert_match "SLURM allocated it \[\"$(gpu_uuid "$w1" "$lo1")\"\]" "$seen" "the GPU SLURM allocated"
assert_eq "$w1" "$(jq -r '.findings[] | select(.code == "ATTRIBUTION_CGROUP_DEVICES") | .host' <<<"$OUT")" \
  "the host ATTRIBUTION_CGROUP_DEVICES names"
scancel "$job"
wait_job_done "$job" 60
restore_slurm_devices
doctor_until 60 "$w1 healthy once job $job ended" '.needs_action == false' --host "$w1"
pass "the self-check: SLURM 22.05's default-allow cgroup not compared (and said why), a listed GPU agreed, an added one named"

# --- the stopped worker goes silent -----------------------------------------------------------
# Its last report must be more than two minutes old; the doctor is asked about that host only.
doctor_until 200 "$w2 reported silent" '[.findings[].code] | index("WORKER_SILENT")' --host "$w2"
doctor --host "$w2" --json
assert_eq 1 "$RC" "doctor --host $w2's exit status with its sampler stopped"
assert_eq "$w2" "$(jq -r '.findings[] | select(.code == "WORKER_SILENT") | .host' <<<"$OUT")" \
  "the host WORKER_SILENT names"
doctor --host "$w1" --json
assert_eq 0 "$RC" "doctor --host $w1's exit status (its sampler still runs)"

# --- the credential revoked ---------------------------------------------------------------------
api POST "/api/v1/computes/$COMPUTE/deprovision" >/dev/null
doctor --json
assert_eq 1 "$RC" "doctor's exit status with the credential revoked"
assert_match 'CREDENTIAL_REVOKED' "$(codes)" "finding with the credential revoked"
pass "each broken setup gave its finding and exit status 1"
