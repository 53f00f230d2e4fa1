#!/usr/bin/env bash
# `expanse compute install` on the real SLURM cluster with a real expanse-server (which also
# mirrors a signed release), as the operator guide has an operator do it:
#   - a site with its own Prolog (a glob), Epilog and TaskProlog;
#   - a fresh controller install from a signed release with --patch-slurm-conf=true: the daemon
#     runs as `slurm` under (stand-in) systemd, heartbeats, jobs run with the site hooks still
#     working and Expanse's hook events arrive; the token is nowhere on the host; a job on the
#     controller's own node starts no sampler there;
#   - a token issued for another compute is refused before anything changes;
#   - upgrade to a newer signed release with --reinstall (no token); workers' samplers converge
#     to the new shared binary at their next job;
#   - replacement credential: re-issued token with --reinstall; the old credential is refused;
#   - the sampler role on a worker, then its uninstall;
#   - uninstall of the controller: slurm.conf byte-identical to the site's, files gone, the
#     compute deprovisioned.
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
cleanup() {
  host_systemd_off "$ctl" || true
  host_systemd_off "$w1" || true
  host_systemd_off "$w2" || true
  for w in $EXPANSE_TC_WORKERS; do
    "$TESTCLUSTER" exec "$w" -- pkill -f "$prefix/bin/[e]xpanse-daemon" 2>/dev/null || true
  done
  server_stop || true
  restore_slurm_conf
}
save_slurm_conf
trap cleanup EXIT

# --- a signed release, mirrored by the server ------------------------------------------------
make_signed_release "$DIR" 1.0.0 1.1.0
# CUPTI builds for two CUDA versions from the built helper; the controller's (stand-in) driver
# takes cuda1300. lib/ holds a stand-in: NVIDIA's libraries are tens of megabytes, and without a
# driver the helper stops at libcuda anyway (the daemon then reports why and retries).
mkdir -p "$DIR/cupti-stage/bin" "$DIR/cupti-stage/lib" "$DIR/fakebin"
cp "$(ls "$BUILD"/cupti/*/bin/expanse-cupti-helper | head -1)" "$DIR/cupti-stage/bin/"
cp "$(ls "$BUILD"/cupti/*/lib/libexpanse-agent.so | head -1)" "$DIR/cupti-stage/lib/"
echo "not a real library" >"$DIR/cupti-stage/lib/libcupti.so"
for version in 1.0.0 1.1.0; do
  for variant in cuda1280:570.124.06 cuda1300:580.65.06; do
    "$EXPANSE" release pack --name expanse-cupti --version "$version" --variant "${variant%%:*}" \
      --min-driver "${variant#*:}" --from "$DIR/cupti-stage" --output-dir "$DIR/releases" >/dev/null
  done
done
"$EXPANSE" release sign --key "$DIR/release.key" "$DIR"/releases/expanse-cupti_*.tar.gz >/dev/null
# Stand-in drivers: the controller's supports CUDA 13.0, worker1's only 12.8.
mkdir -p "$DIR/fakebin-575"
printf '#!/bin/sh\n[ "$1" = --query-gpu=driver_version ] && echo 580.95.05\n' >"$DIR/fakebin/nvidia-smi"
printf '#!/bin/sh\n[ "$1" = --query-gpu=driver_version ] && echo 575.51.03\n' >"$DIR/fakebin-575/nvidia-smi"
chmod 755 "$DIR/fakebin/nvidia-smi" "$DIR/fakebin-575/nvidia-smi"
SERVER_EXTRA_ARGS="--releases-dir $DIR/releases" server_start || fail "expanse-server did not start"
publish_release "$DIR" || fail "release manifest"
pass "signed release 1.0.0 and 1.1.0 mirrored at $CP_URL/releases"

new_token() { api POST "/api/v1/computes/$1/install-tokens" | jq -r .token; }
COMPUTE="$(api POST /api/v1/orgs/acme/computes '{"name":"cluster","type":"slurm"}' | jq -r .id)"
OTHER="$(api POST /api/v1/orgs/acme/computes '{"name":"other","type":"slurm"}' | jq -r .id)"

# --- the site's own hooks ---------------------------------------------------------------------
site="$DIR/site"
mkdir -p "$site/prolog.d" "$DIR/ran"
chmod 777 "$DIR/ran"
for n in 10 20; do
  printf '#!/bin/bash\necho "$(hostname) $SLURM_JOB_ID" >%q/prolog%s-$(hostname)-$SLURM_JOB_ID\n' \
    "$DIR/ran" "$n" >"$site/prolog.d/$n.sh"
done
printf '#!/bin/bash\ntouch %q/epilog-$(hostname)-$SLURM_JOB_ID\n' "$DIR/ran" >"$site/epilog.sh"
printf '#!/bin/bash\necho export SITE_TASK_VAR=from-site\n' >"$site/taskprolog.sh"
chmod 755 "$site"/prolog.d/*.sh "$site/epilog.sh" "$site/taskprolog.sh"
printf 'Prolog=%s/prolog.d/*\nEpilog=%s/epilog.sh\nTaskProlog=%s/taskprolog.sh\n' \
  "$site" "$site" "$site" >>"$SLURM_CONF"
"$TESTCLUSTER" reconfigure
site_conf_sum="$(sha256sum <"$SLURM_CONF")"
cp "$SLURM_CONF" "$DIR/site-slurm.conf"

host_systemd_on "$ctl"
mkdir -p "$prefix"
install_args=(--type slurm --shared-prefix "$prefix" --releases-url "$CP_URL/releases"
  --cosign-key "$DIR/release.pub" --control-plane "$CP_URL" --data-plane "$DP_URL"
  --slurm-conf "$SLURM_CONF" --heartbeat-timeout 45s --patch-slurm-conf=true)
on_ctl() { "$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" "$@"; }
ctl_snapshot() { host_snapshot "$ctl" /etc/systemd/system /etc/expanse /var/lib/slurm/.expanse "$prefix" "$SLURM_CONF"; }

token="$(new_token "$COMPUTE")"

# --- fresh install -----------------------------------------------------------------------------
before_fresh="$(ctl_snapshot)"
reconf_before="$(slurmd_reconfigure_count)"
out="$(EXPANSE_INSTALL_TOKEN="$token" on_ctl PATH="$DIR/fakebin:$PATH" "$EXPANSE" compute install \
  "${install_args[@]}" --daemon-version 1.0.0 2>&1)" || fail "fresh install failed: $out"
printf '%s\n' "$out" | sed 's/^/    | /'
assert_match 'release manifest signature verified' "$out" "install verified the manifest"
assert_match 'archive checksum and signature verified' "$out" "install verified the archive"
assert_match "heartbeat received: compute $COMPUTE is active" "$out" "first heartbeat awaited"
assert_match 'CUPTI cuda1300' "$out" "CUPTI variant chosen for driver 580.95.05"
ctl_host="$("$TESTCLUSTER" exec "$ctl" -- hostname -s)"
[[ -x "$prefix/lib/cupti-nodes/$ctl_host/bin/expanse-cupti-helper" ]] || fail "CUPTI helper not installed"
pass "CUPTI cuda1300 installed under lib/cupti-nodes/$ctl_host"
state="$(api GET "/api/v1/computes/$COMPUTE" | jq -r .state)"
assert_eq active "$state" "compute state after install"
# The slurm.conf named with --slurm-conf is the daemon's too (not where SLURM looks by default
# here): without it the controller's squeue finds no cluster and no job reaches the server.
assert_match "Environment=SLURM_CONF=$SLURM_CONF" "$("$TESTCLUSTER" exec "$ctl" -- cat /etc/systemd/system/expanse-daemon.service)" \
  "the controller unit pins the slurm.conf named at install"
user_line="$("$TESTCLUSTER" exec "$ctl" -- systemctl show expanse-daemon -p User)"
assert_eq "User=slurm" "$user_line" "the daemon service runs as"
daemon_pid="$("$TESTCLUSTER" exec "$ctl" -- systemctl show expanse-daemon -p MainPID | cut -d= -f2)"
assert_eq slurm "$(ps -o user= -p "$daemon_pid" | tr -d ' ')" "owner of the running daemon process"
assert_match 'Prolog=.*/prefix/hooks/prolog' "$(grep -i '^Prolog=' "$SLURM_CONF" | tail -1)" "Prolog wired"
for f in /etc/systemd/system /etc/expanse /var/lib/slurm/.expanse "$prefix" /var/lib/expanse-install; do
  if "$TESTCLUSTER" exec "$ctl" -- grep -rqF -- "$token" "$f" 2>/dev/null; then
    fail "the install token was written under $f"
  fi
done
pass "the install token appears in no file on the controller"
[[ -x "$prefix/bin/py-spy" ]] || fail "the bundled py-spy was not installed"
pass "bundled py-spy installed at $prefix/bin/py-spy"
cfg_mode="$("$TESTCLUSTER" exec "$ctl" -- stat -c '%a %U' /var/lib/slurm/.expanse/config.json)"
assert_eq "600 slurm" "$cfg_mode" "credential config mode and owner"

# Jobs: the site hooks still run (both Prolog glob members, in SLURM's order), the TaskProlog
# export reaches the task, Expanse's hook events reach the server, no node drains.
wait_until 30 "slurmd to reload the hooks" bash -c "(( \$(cat $EXPANSE_TC_STATE/log/slurmd-*.log | grep -c reconfigured) > $reconf_before ))"
job="$(submit -N 2 -w "$w1,$w2" -o "$DIR/job-%j.out" --wrap 'echo "var=$SITE_TASK_VAR"; sleep 2')"
wait_job_done "$job" 90
assert_eq COMPLETED "$(job_state "$job")" "job $job with the wired hooks"
for w in "$w1" "$w2"; do
  assert_file_contains "$DIR/ran/prolog10-$w-$job" "$w $job" "site Prolog 10.sh ran on $w"
  assert_file_contains "$DIR/ran/prolog20-$w-$job" "$w $job" "site Prolog 20.sh ran on $w"
  wait_until 20 "site Epilog on $w" test -e "$DIR/ran/epilog-$w-$job"
done
assert_file_contains "$DIR/job-$job.out" "var=from-site" "the site TaskProlog's export reached the task"
node_events_arrived() { api GET "/api/v1/computes/$COMPUTE/jobs/$job" | jq_holds '[.events[]?] | length >= 2'; }
if ! (wait_until 60 "node events of job $job at the server" node_events_arrived); then
  fail "job $job at the server: $(api GET "/api/v1/computes/$COMPUTE/jobs/$job" | head -c 800);" \
    "workers' samplers: $(for w in $EXPANSE_TC_WORKERS; do "$TESTCLUSTER" exec "$w" -- tail -4 /var/lib/expanse/sampler.log 2>&1; done | tr '\n' ';');" \
    "events dirs: $(for w in $EXPANSE_TC_WORKERS; do "$TESTCLUSTER" exec "$w" -- ls -la /var/lib/expanse/events 2>&1; done | tr '\n' ';');" \
    "controller: $("$TESTCLUSTER" exec "$ctl" -- journalctl -u expanse-daemon | tail -8 | tr '\n' ';')"
fi
pass "Expanse Prolog/Epilog events of job $job arrived through the daemon"
for w in $EXPANSE_TC_WORKERS; do
  assert_match '^idle' "$(sinfo -h -n "$w" -o '%t')" "state of $w after the job"
done

# --- a job on the controller's own node: its Prolog starts no sampler beside the daemon ---------
# (The job's 3 s give a sampler the Prolog would have started time to show.)
job="$(submit -N 1 -w "$ctl_host" -o /dev/null --wrap 'sleep 3')"
wait_job_done "$job" 60
assert_eq COMPLETED "$(job_state "$job")" "job $job on the controller's node"
if "$TESTCLUSTER" exec "$ctl" -- systemctl is-active -q expanse-sampler ||
  pgrep -f -- "^$prefix/bin/expanse-daemon --role sampler .*--hostname $ctl_host( |\$)" >/dev/null; then
  fail "job $job's Prolog started a sampler on the controller's node $ctl_host"
fi
pass "no sampler on the controller's node $ctl_host: its daemon samples the GPUs there"

# --- reinstall with a token for another compute: refused, nothing changes ----------------------
before="$(ctl_snapshot)"
other_token="$(new_token "$OTHER")"
out="$(EXPANSE_INSTALL_TOKEN="$other_token" on_ctl "$EXPANSE" compute install "${install_args[@]}" \
  --reinstall --daemon-version 1.0.0 2>&1)" && fail "a token for another compute was accepted"
assert_match "belongs to compute $OTHER" "$out" "refusal names the token's compute"
assert_same_snapshot "$before" "$(ctl_snapshot)" "controller after the refused token"

# --- an install over an existing config without --reinstall: the choices are explained ----------
out="$(EXPANSE_INSTALL_TOKEN="$(new_token "$COMPUTE")" on_ctl "$EXPANSE" compute install \
  "${install_args[@]}" --daemon-version 1.0.0 2>&1)" && fail "install over an existing config"
assert_match 'existing daemon config found' "$out" "second install without --reinstall"

# --- upgrade: --reinstall, new version, no token -------------------------------------------------
# With --cupti-variant: the pinned cuda1280 instead of the cuda1300 driver 580.95.05 would get.
old_cred="$("$TESTCLUSTER" exec "$ctl" -- jq -r .credential /var/lib/slurm/.expanse/config.json)"
# Another node's CUPTI build, as its Prolog left it: jobs there may have its agent loaded.
mkdir -p "$prefix/lib/cupti-nodes/node-elsewhere/lib"
echo in-use >"$prefix/lib/cupti-nodes/node-elsewhere/lib/libexpanse-agent.so"
out="$(on_ctl PATH="$DIR/fakebin:$PATH" "$EXPANSE" compute install "${install_args[@]}" --reinstall \
  --daemon-version 1.1.0 --cupti-variant cuda1280 2>&1)" || fail "upgrade failed: $out"
assert_match "heartbeat received" "$out" "upgrade waited for a heartbeat"
assert_match 'CUPTI cuda1280.*pinned' "$out" "the upgrade's CUPTI variant, pinned"
assert_match '"variant": *"cuda1280"' "$(cat "$prefix/lib/cupti-nodes/$ctl_host/release.json")" \
  "CUPTI build under lib/cupti-nodes/$ctl_host after the pinned upgrade"
assert_eq in-use "$(cat "$prefix/lib/cupti-nodes/node-elsewhere/lib/libexpanse-agent.so" 2>&1)" \
  "another node's CUPTI build after the controller's reinstall"
assert_eq 1.1.0 "$("$TESTCLUSTER" exec "$ctl" -- jq -r .daemon_version /var/lib/expanse-install/controller.json)" "installed version after upgrade"
# (Compared by digest: test logs do not show credentials either.)
assert_eq "$(sha256sum <<<"$old_cred")" \
  "$("$TESTCLUSTER" exec "$ctl" -- jq -r .credential /var/lib/slurm/.expanse/config.json | sha256sum)" \
  "credential digest kept by the upgrade"
out="$(on_ctl "$EXPANSE" compute install "${install_args[@]}" --reinstall \
  --daemon-version 1.0.0 2>&1)" && fail "downgrade accepted"
assert_match 'older than 1.1.0' "$out" "downgrade refused"

# --- workers converge to the upgraded shared binary at their next job, without a per-node step ---
# Each worker's sampler was started by the first job's Prolog from the old binary. The upgrade
# replaced <prefix>/bin/expanse-daemon; the next job's Prolog replaces the sampler with one
# running the new file (its pid file naming the new binary's identity, its /proc/PID/exe the
# shared path, no longer "(deleted)").
declare -A old_sampler
for w in "$w1" "$w2"; do
  old_sampler[$w]="$("$TESTCLUSTER" exec "$w" -- cat /var/lib/expanse/sampler/sampler.pid 2>/dev/null | awk '{print $1}')"
  # A live sampler, not a pid file an earlier test's sampler (as root) left behind.
  [[ -n "${old_sampler[$w]}" &&
     "$("$TESTCLUSTER" exec "$w" -- readlink "/proc/${old_sampler[$w]}/exe")" == */bin/expanse-daemon* ]] ||
    fail "no sampler was bootstrapped on $w by the first job (pid file: ${old_sampler[$w]:-none};" \
      "log: $("$TESTCLUSTER" exec "$w" -- tail -3 /var/lib/expanse/sampler.log 2>&1 | tr '\n' ';'))"
done
job="$(submit -N 2 -w "$w1,$w2" -o /dev/null --wrap 'sleep 1')"
wait_job_done "$job" 90
new_inode="$(stat -c %i "$prefix/bin/expanse-daemon")"
sampler_converged() {  # $1: worker
  local pid identity
  read -r pid identity < <("$TESTCLUSTER" exec "$1" -- cat /var/lib/expanse/sampler/sampler.pid) || return 1
  [[ $pid != "${old_sampler[$1]}" && $(cut -d: -f2 <<<"$identity") == "$new_inode" ]] &&
    [[ $("$TESTCLUSTER" exec "$1" -- readlink "/proc/$pid/exe") == "$prefix/bin/expanse-daemon" ]]
}
for w in "$w1" "$w2"; do
  for ((i = 0; i < 60; i++)); do sampler_converged "$w" && break; sleep 1; done
  sampler_converged "$w" || fail "$w's sampler still runs the old binary 60 s after the next job: pid file" \
    "$("$TESTCLUSTER" exec "$w" -- cat /var/lib/expanse/sampler/sampler.pid), new inode $new_inode;" \
    "processes: $("$TESTCLUSTER" exec "$w" -- pgrep -af expanse-daemon | tr '\n' ';')" \
    "sampler log: $("$TESTCLUSTER" exec "$w" -- tail -5 /var/lib/expanse/sampler.log 2>&1 | tr '\n' ';')"
done
pass "after the upgrade, the next job's Prolog replaced the sampler on $w1 and $w2 with the new binary"
# That Prolog also chose the node's CUPTI build, and says what it chose (or why none) in the
# sampler's log.
for w in "$w1" "$w2"; do
  assert_match 'expanse-daemon prolog: CUPTI' "$("$TESTCLUSTER" exec "$w" -- cat /var/lib/expanse/sampler.log)" \
    "the Prolog's CUPTI line in $w's sampler log"
done


# --- replacement credential ---------------------------------------------------------------------
out="$(EXPANSE_INSTALL_TOKEN="$(new_token "$COMPUTE")" on_ctl "$EXPANSE" compute install \
  "${install_args[@]}" --reinstall --daemon-version 1.1.0 2>&1)" || fail "replacement failed: $out"
new_cred="$("$TESTCLUSTER" exec "$ctl" -- jq -r .credential /var/lib/slurm/.expanse/config.json)"
[[ "$new_cred" != "$old_cred" && "$new_cred" == exp_cc_* ]] || fail "no new credential"
code="$(curl -sS --cacert "$CA_FILE" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $old_cred" \
  "$CP_URL/cp/v1/enrolment?wait_ms=0")"
assert_eq 401 "$code" "the replaced credential at the control plane"

# --- sampler role on a worker -------------------------------------------------------------------
host_systemd_on "$w1"
out="$("$TESTCLUSTER" exec "$w1" -- env PATH="$DIR/fakebin-575:$PATH" "$EXPANSE" compute install \
  --type slurm --role sampler --shared-prefix "$prefix" 2>&1)" || fail "sampler install on $w1: $out"
assert_match 'CUPTI cuda1280' "$out" "CUPTI variant chosen for $w1's driver 575.51.03"
assert_match '"variant": *"cuda1280"' "$(cat "$prefix/lib/cupti-nodes/$w1/release.json")" \
  "CUPTI build unpacked for $w1"
# TaskProlog on a worker injects the capture agent of that worker's own CUPTI build (not the
# controller's cuda1300 one), and tells it the node's control directory.
job="$(submit -N 1 -w "$w1" -o "$DIR/inject-%j.out" --wrap 'echo "inject=$CUDA_INJECTION64_PATH control=$EXPANSE_CONTROL_DIR"')"
wait_job_done "$job" 60
assert_match "inject=$prefix/lib/cupti-nodes/$w1/lib/libexpanse-agent.so control=/" \
  "$(cat "$DIR/inject-$job.out")" "TaskProlog on $w1 exports $w1's own agent"
state="$("$TESTCLUSTER" exec "$w1" -- systemctl is-active expanse-sampler)" ||
  fail "expanse-sampler on $w1 is $state: $("$TESTCLUSTER" exec "$w1" -- journalctl -u expanse-sampler | tail -5)"
pass "expanse-sampler active on $w1"
sampler_pid="$("$TESTCLUSTER" exec "$w1" -- systemctl show expanse-sampler -p MainPID)"
sleep 3  # a sampler that finds another one holding the node's lock exits at once
assert_eq "$sampler_pid" "$("$TESTCLUSTER" exec "$w1" -- systemctl show expanse-sampler -p MainPID)" "the sampler service's process 3 s later"
assert_eq "User=slurm" "$("$TESTCLUSTER" exec "$w1" -- systemctl show expanse-sampler -p User)" "sampler service user"
out="$("$TESTCLUSTER" exec "$ctl" -- "$EXPANSE" compute install --type slurm --role sampler \
  --shared-prefix "$prefix" 2>&1)" && fail "sampler accepted on the controller"
assert_match 'already samples' "$out" "sampler role refused on the controller"
"$TESTCLUSTER" exec "$w1" -- "$EXPANSE" compute uninstall --type slurm --role sampler \
  --shared-prefix "$prefix" >/dev/null || fail "sampler uninstall"
assert_eq "" "$("$TESTCLUSTER" exec "$w1" -- ls /etc/systemd/system)" "units left on $w1"
host_systemd_off "$w1"

# --- an autoscaled worker: no explicit install; its first job's Prolog installs the shared unit --
host_systemd_on "$w2"
"$TESTCLUSTER" exec "$w2" -- pkill -f "$prefix/bin/[e]xpanse-daemon" || true
job="$(submit -N 1 -w "$w2" -o /dev/null --wrap 'sleep 1')"
wait_job_done "$job" 60
wait_until 20 "expanse-sampler started by the Prolog on $w2" \
  "$TESTCLUSTER" exec "$w2" -- systemctl is-active -q expanse-sampler
assert_eq "$(cat "$prefix/lib/systemd/expanse-sampler.service")" \
  "$("$TESTCLUSTER" exec "$w2" -- cat /etc/systemd/system/expanse-sampler.service)" \
  "the unit the bootstrap installed on $w2 is the shared one"
assert_eq "User=slurm" "$("$TESTCLUSTER" exec "$w2" -- systemctl show expanse-sampler -p User)" \
  "bootstrapped sampler service user"
# The worker's uninstall (the guide's first uninstall step) stops what its Prolog started, though
# no sampler install ever ran there: first under the unit the bootstrap copied, ...
out="$("$TESTCLUSTER" exec "$w2" -- "$EXPANSE" compute uninstall --type slurm --role sampler \
  --shared-prefix "$prefix" 2>&1)" || fail "sampler uninstall on $w2: $out"
assert_match 'installed by a job.s Prolog' "$out" "uninstall on $w2 found the bootstrapped unit"
state="$("$TESTCLUSTER" exec "$w2" -- systemctl is-active expanse-sampler)" &&
  fail "expanse-sampler on $w2 is still $state after the worker's uninstall"
assert_eq "" "$("$TESTCLUSTER" exec "$w2" -- ls /etc/systemd/system)" "units left on $w2 after its uninstall"
host_systemd_off "$w2"
# ... then started directly, as on a node without systemd.
direct_sampler() { pgrep -f -- "^$prefix/bin/expanse-daemon --role sampler .*--hostname $w2( |\$)"; }
# Running, and its pid file written (the uninstall finds it there).
direct_sampler_ready() {
  local pid
  pid="$(direct_sampler)" &&
    [[ "$("$TESTCLUSTER" exec "$w2" -- cat /var/lib/expanse/sampler/sampler.pid | awk '{print $1}')" == "$pid" ]]
}
job="$(submit -N 1 -w "$w2" -o /dev/null --wrap 'sleep 1')"
wait_job_done "$job" 60
wait_until 20 "a sampler the Prolog started directly on $w2" direct_sampler_ready
out="$("$TESTCLUSTER" exec "$w2" -- "$EXPANSE" compute uninstall --type slurm --role sampler \
  --shared-prefix "$prefix" 2>&1)" || fail "sampler uninstall on $w2 without systemd: $out"
assert_match 'stopping the sampler a Prolog started' "$out" "uninstall on $w2 without systemd"
pids="$(direct_sampler)" && fail "the sampler still runs on $w2 after its uninstall: $pids"
pass "the worker's uninstall stopped the sampler a Prolog started on $w2"

# --- uninstall: the site's slurm.conf comes back byte for byte ------------------------------------
cred="$new_cred"
out="$(on_ctl "$EXPANSE" compute uninstall --type slurm --role controller --shared-prefix "$prefix" \
  --slurm-conf "$SLURM_CONF" 2>&1)" || fail "uninstall failed: $out"
assert_eq "$site_conf_sum" "$(sha256sum <"$SLURM_CONF")" "slurm.conf after uninstall vs the site's"
[[ "$out" != *"removed $prefix/"* ]] || fail "uninstall without --verbose printed its diagnostics: $out"
assert_eq deprovisioned "$(api GET "/api/v1/computes/$COMPUTE" | jq -r .state)" "compute state after uninstall"
assert_eq "" "$("$TESTCLUSTER" exec "$ctl" -- find /etc/systemd/system /var/lib/slurm/.expanse -mindepth 1)" "units and credential left"
assert_eq "" "$(find "$prefix" -mindepth 1 | head -5)" "files left in the shared prefix"
code="$(curl -sS --cacert "$CA_FILE" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $cred" \
  "$CP_URL/cp/v1/enrolment?wait_ms=0")"
assert_eq 401 "$code" "the credential after uninstall"
# --- config only: the credential and nothing else ---------------------------------------------
THIRD="$(api POST /api/v1/orgs/acme/computes '{"name":"config-only","type":"slurm"}' | jq -r .id)"
out="$(EXPANSE_INSTALL_TOKEN="$(new_token "$THIRD")" on_ctl "$EXPANSE" compute install \
  --control-plane "$CP_URL" --data-plane "$DP_URL" 2>&1)" || fail "config-only install: $out"
assert_eq "$THIRD" "$("$TESTCLUSTER" exec "$ctl" -- jq -r .compute_id /var/lib/slurm/.expanse/config.json)" \
  "compute in the config written without --type"
assert_eq "" "$("$TESTCLUSTER" exec "$ctl" -- find /etc/systemd/system "$prefix" -mindepth 1)" \
  "units and prefix files after a config-only install"
assert_eq "$site_conf_sum" "$(sha256sum <"$SLURM_CONF")" "slurm.conf after a config-only install"
on_ctl "$EXPANSE" compute uninstall --type slurm >/dev/null || fail "uninstall after config-only"
assert_eq deprovisioned "$(api GET "/api/v1/computes/$THIRD" | jq -r .state)" "config-only compute after uninstall"
# --- --systemd=false, --sampler-bootstrap off, --bundled-pyspy=false; uninstall --keep-identity --
FOURTH="$(api POST /api/v1/orgs/acme/computes '{"name":"manual","type":"slurm"}' | jq -r .id)"
out="$(EXPANSE_INSTALL_TOKEN="$(new_token "$FOURTH")" on_ctl "$EXPANSE" compute install \
  "${install_args[@]}" --daemon-version 1.1.0 --systemd=false --sampler-bootstrap off \
  --bundled-pyspy=false --verbose 2>&1)" || fail "install with --systemd=false: $out"
assert_match 'install this unit as /etc/systemd/system/expanse-daemon.service' "$out" "the unit is printed"
assert_match 'Environment=EXPANSE_DAEMON_CONFIG=' "$out" "the printed unit pins the config"
assert_eq "" "$("$TESTCLUSTER" exec "$ctl" -- find /etc/systemd/system -mindepth 1)" "units written with --systemd=false"
[[ ! -e "$prefix/bin/py-spy" ]] || fail "py-spy installed despite --bundled-pyspy=false"
pass "--bundled-pyspy=false leaves py-spy out"
assert_match "--sampler-bootstrap'? '?off" "$(cat "$prefix/hooks/prolog")" "the Prolog wrapper with --sampler-bootstrap off"
out="$(on_ctl "$EXPANSE" compute uninstall --type slurm --keep-identity --verbose 2>&1)" ||
  fail "uninstall --keep-identity: $out"
assert_match "removed $prefix/bin/expanse-daemon" "$out" "uninstall --verbose names what it removed"
assert_eq "$FOURTH" "$("$TESTCLUSTER" exec "$ctl" -- jq -r .compute_id /var/lib/slurm/.expanse/config.json)" \
  "the credential kept by uninstall --keep-identity"
[[ "$(api GET "/api/v1/computes/$FOURTH" | jq -r .state)" != deprovisioned ]] ||
  fail "uninstall --keep-identity deprovisioned the compute"
pass "uninstall --keep-identity keeps the compute provisioned"
assert_eq "$site_conf_sum" "$(sha256sum <"$SLURM_CONF")" "slurm.conf after uninstall --keep-identity"
on_ctl "$EXPANSE" compute uninstall --type slurm >/dev/null || fail "final uninstall"
assert_eq deprovisioned "$(api GET "/api/v1/computes/$FOURTH" | jq -r .state)" "compute after the final uninstall"
pass "install lifecycle complete"
