#!/usr/bin/env bash
# `expanse doctor` on the real SLURM cluster, after a real `expanse compute install` from a
# signed release on the controller and `--role sampler` on both workers (as cluster.console does
# it), with fake NVML GPUs on the workers whose minors match gres.conf:
#   - a healthy deployment: exit 0, no finding that needs action, also in --json;
#   - the Prolog line removed from slurm.conf: HOOK_MISSING with its fix, exit 1;
#   - the spool root made unwritable for the daemon user: SPOOL_NOT_WRITABLE, exit 1;
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

cleanup() {
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
mkdir -p "$DIR/fake-nvml"
install -m 644 "$BUILD/fakes/nvml/libnvidia-ml.so.1" "$DIR/fake-nvml/libnvidia-ml.so.1"
gres_conf="$(dirname "$SLURM_CONF")/gres.conf"
for w in "$w1" "$w2"; do
  save_host_etc_files "$PRIV" "$w"
  read -r lo hi < <(grep "NodeName=$w " "$gres_conf" | grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
  "$TESTCLUSTER" exec "$w" -- bash -c 'cat >/etc/expanse/fake-nvml.json && chmod 644 /etc/expanse/fake-nvml.json' <<<"{\"gpus\": [
    {\"uuid\": \"GPU-$w-minor$hi\", \"minor\": $hi, \"sm_util\": 91},
    {\"uuid\": \"GPU-$w-minor$lo\", \"minor\": $lo, \"sm_util\": 7}]}"
  # The cluster has no CUDA and no profiling agent library: those collectors are turned off,
  # as an operator would on such nodes (the doctor notes them as info).
  "$TESTCLUSTER" exec "$w" -- bash -c 'cat >/etc/expanse/daemon.env && chmod 644 /etc/expanse/daemon.env' <<ENV
SLURM_CONF=$SLURM_CONF
EXPANSE_NVML_LIBRARY=$DIR/fake-nvml/libnvidia-ml.so.1
EXPANSE_CUPTI_ENABLE=0
EXPANSE_PROFILING_AGENT_ENABLE=0
ENV
done

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
    jq -e "$expr" <<<"$OUT" >/dev/null 2>&1 && return 0
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

# --- the Prolog line removed ------------------------------------------------------------------
cp -p "$SLURM_CONF" "$PRIV/wired-slurm.conf"
sed -i '/^Prolog=/d' "$SLURM_CONF"
doctor --json
assert_eq 1 "$RC" "doctor's exit status without the Prolog line"
assert_match 'HOOK_MISSING' "$(codes)" "finding without the Prolog line"
assert_match 'expanse compute install --reinstall' \
  "$(jq -r '.findings[] | select(.code == "HOOK_MISSING") | .fix' <<<"$OUT")" "HOOK_MISSING's fix"
cp -p "$PRIV/wired-slurm.conf" "$SLURM_CONF"
doctor
assert_eq 0 "$RC" "doctor's exit status with the Prolog line back"

# --- a worker's sampler stopped (its report ages from now) ------------------------------------
"$TESTCLUSTER" exec "$w2" -- systemctl stop expanse-sampler || fail "cannot stop $w2's sampler"
pass "the sampler on $w2 stopped"

# --- the spool unwritable for the daemon user -------------------------------------------------
chmod 555 "$prefix/spool/workers"
doctor --json
assert_eq 1 "$RC" "doctor's exit status with the spool read-only"
assert_match 'SPOOL_NOT_WRITABLE' "$(codes)" "finding with the spool read-only"
assert_match "chmod 0755 $prefix/spool/workers" \
  "$(jq -r '[.findings[] | select(.code == "SPOOL_NOT_WRITABLE") | .fix] | first' <<<"$OUT")" \
  "SPOOL_NOT_WRITABLE's fix"
chmod 755 "$prefix/spool/workers"

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
