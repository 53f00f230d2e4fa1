#!/usr/bin/env bash
# The Ansible role ansible/roles/expanse, run with Debian's ansible-playbook over real SSH
# against the SLURM test cluster, through the example playbook ansible/examples/site.yml:
#   - Debian's sshd runs inside each host's namespaces (the controller's mount namespace, each
#     worker's network, UTS and mount namespaces) with a test host key and client key; Ansible
#     reaches every host at its own address with strict host-key checking;
#   - check mode with diff on fresh hosts: would change every host, shows the daemon.env lines
#     and the settings the installer would record, and changes nothing (files and the compute);
#   - install: the controller from a signed release (the token from a vars file, kept out of
#     Ansible's output even at -vvv, out of the ssh command lines and out of every file), the
#     samplers on both workers as services; a second run reports changed=0;
#   - a two-node GPU job runs, and each host's GPU is the one SLURM allocated, with samples;
#   - a changed DCGM setting: diff in check mode without changing, then the line and a
#     restart; an upgrade by version: controller reinstall and sampler update, then changed=0
#     (setting and version); changed install options (no bundled py-spy, a CUPTI variant):
#     reinstalls that apply them, then changed=0;
#   - uninstall (expanse_state=absent): slurm.conf byte-identical to the site's, units, files
#     and the role's daemon.env lines gone, the compute deprovisioned; a second run changed=0.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse, expanse-daemon, expanse-server)}"
SERVER="$BUILD/bin/expanse-server"
EXPANSE="$BUILD/bin/expanse"
source "$(dirname "$0")/../lib/expanse_server.sh"
source "$(dirname "$0")/../lib/install_env.sh"

command -v ansible-playbook >/dev/null || fail "ansible-playbook is missing (scripts/setup packages installs ansible)"
[[ -x /usr/sbin/sshd ]] || fail "/usr/sbin/sshd is missing (scripts/setup packages installs openssh-server)"

DIR="$(shared_scratch)"
prefix="$DIR/prefix"
ctl="$EXPANSE_TC_CONTROLLER"
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"
HOSTS=("$ctl" "$w1" "$w2")
SSH_PORT=$((${EXPANSE_TC_PORT_BASE:-16817} + 13))
# Keys, the token's vars file and saved host files: local disk, root only, not the shared mount.
PRIV="$(mktemp -d /tmp/expanse-ansible-test.XXXXXX)"
made_run_sshd=0
declare -A ADDR

cleanup() {
  local h pid sock
  # Ansible's SSH connection masters (ControlPersist) outlive each run; end them first.
  for sock in "$PRIV"/cp/*; do
    if [[ -S "$sock" ]]; then ssh -o ControlPath="$sock" -O exit expanse-test >/dev/null 2>&1 || true; fi
  done
  for h in "${HOSTS[@]}"; do
    if pid="$(cat "$PRIV/sshd-$h.pid" 2>/dev/null)"; then kill "$pid" 2>/dev/null || true; fi
  done
  for h in "${HOSTS[@]}"; do host_systemd_off "$h" || true; done
  for h in "$w1" "$w2"; do
    "$TESTCLUSTER" exec "$h" -- pkill -f "$prefix/bin/[e]xpanse-daemon" 2>/dev/null || true
  done
  server_stop || true
  for h in "${HOSTS[@]}"; do restore_host_etc_files "$PRIV" "$h" || true; done
  ((made_run_sshd)) && rmdir /run/sshd 2>/dev/null
  rm -rf "$PRIV"
  restore_slurm_conf
}
save_slurm_conf
trap cleanup EXIT

# The build's CLI, copied once: Ansible copies it to each host from here, unaffected by a
# rebuild of the build directory while the test runs. Without its debug sections (ASan still
# names functions): the copy module checksums the file on both ends on every run.
mkdir -p "$DIR/bin"
objcopy --strip-debug "$EXPANSE" "$DIR/bin/expanse"
EXPANSE="$DIR/bin/expanse"

# --- a signed release mirrored by the server, a registered compute, the site's slurm.conf -----
make_signed_release "$DIR" 1.0.0 1.1.0
SERVER_EXTRA_ARGS="--releases-dir $DIR/releases" server_start || fail "expanse-server did not start"
publish_release "$DIR" || fail "release manifest"
COMPUTE="$(api POST /api/v1/orgs/acme/computes '{"name":"ansible","type":"slurm"}' | jq -r .id)"
token="$(api POST "/api/v1/computes/$COMPUTE/install-tokens" | jq -r .token)"
[[ "$token" == exp_it_* ]] || fail "no install token"
(umask 077 && printf 'expanse_install_token: %s\n' "$token" >"$PRIV/token.yml")
pass "signed releases 1.0.0 and 1.1.0 mirrored; compute $COMPUTE registered"
cp -p "$SLURM_CONF" "$DIR/site-slurm.conf"
mkdir -p "$prefix" # the shared filesystem, mounted on every node before an install

for h in "${HOSTS[@]}"; do
  save_host_etc_files "$PRIV" "$h"
  host_systemd_on "$h"
done
# The workers' GPUs through the fake NVML: NVML's index order is the reverse of the minor
# numbers SLURM allocates by, as in cluster2.daemon_attribution.
mkdir -p "$DIR/fake-nvml"
install -m 644 "$BUILD/fakes/nvml/libnvidia-ml.so.1" "$DIR/fake-nvml/libnvidia-ml.so.1"
gres_conf="$(dirname "$SLURM_CONF")/gres.conf"
for w in "$w1" "$w2"; do
  read -r lo hi < <(grep "NodeName=$w " "$gres_conf" | grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
  "$TESTCLUSTER" exec "$w" -- bash -c 'cat >/etc/expanse/fake-nvml.json && chmod 644 /etc/expanse/fake-nvml.json' <<<"{\"gpus\": [
    {\"uuid\": \"GPU-$w-minor$hi\", \"minor\": $hi, \"sm_util\": 91, \"memory_used_mib\": 2048},
    {\"uuid\": \"GPU-$w-minor$lo\", \"minor\": $lo, \"sm_util\": 7, \"memory_used_mib\": 0}]}"
done

# --- sshd in each host's namespaces ---------------------------------------------------------
while read -r name addr _; do ADDR[$name]="$addr"; done < <("$TESTCLUSTER" hosts | tail -n +2)
ssh-keygen -q -t ed25519 -N '' -C expanse-test-host -f "$PRIV/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C expanse-test-client -f "$PRIV/id_ed25519"
cp "$PRIV/id_ed25519.pub" "$PRIV/authorized_keys"
if [[ ! -d /run/sshd ]]; then mkdir -m 755 /run/sshd && made_run_sshd=1; fi
: >"$PRIV/known_hosts"
for h in "${HOSTS[@]}"; do
  [[ -n "${ADDR[$h]:-}" ]] || fail "no address for $h in: $("$TESTCLUSTER" hosts)"
  # SetEnv: the cluster's SLURM_CONF, as a site sets it for every login (/etc/environment);
  # the installer's `scontrol reconfigure` needs it. StrictModes no: the key files are in /tmp.
  cat >"$PRIV/sshd-$h.conf" <<EOF
ListenAddress ${ADDR[$h]}:$SSH_PORT
HostKey $PRIV/host_ed25519
AuthorizedKeysFile $PRIV/authorized_keys
PidFile $PRIV/sshd-$h.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
SetEnv SLURM_CONF=$SLURM_CONF
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel VERBOSE
EOF
  "$TESTCLUSTER" exec "$h" -- /usr/sbin/sshd -f "$PRIV/sshd-$h.conf" -E "$DIR/sshd-$h.log" ||
    fail "sshd did not start on $h: $(cat "$DIR/sshd-$h.log")"
  wait_until 10 "sshd's pid file on $h" test -s "$PRIV/sshd-$h.pid"
  printf '[%s]:%s %s\n' "${ADDR[$h]}" "$SSH_PORT" "$(cut -d' ' -f1-2 "$PRIV/host_ed25519.pub")" >>"$PRIV/known_hosts"
done
pass "sshd listening in the namespaces of $ctl (${ADDR[$ctl]}), $w1 (${ADDR[$w1]}), $w2 (${ADDR[$w2]}) on port $SSH_PORT"

# --- Ansible: configuration and the inventory of the cluster -------------------------------
mkdir -p "$DIR/ansible/home" "$DIR/ansible/local" "$DIR/ansible/remote" "$PRIV/cp"
for h in "${HOSTS[@]}"; do mkdir -p "$DIR/cli/$h"; done
cat >"$DIR/ansible.cfg" <<EOF
[defaults]
roles_path = $REPO_ROOT/ansible/roles
inventory = $DIR/inventory.yml
home = $DIR/ansible/home
local_tmp = $DIR/ansible/local
remote_tmp = $DIR/ansible/remote
retry_files_enabled = False
host_key_checking = True
nocolor = True
interpreter_python = /usr/bin/python3

[ssh_connection]
ssh_args = -o ControlMaster=auto -o ControlPersist=120s -o GSSAPIAuthentication=no -o UserKnownHostsFile=$PRIV/known_hosts -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes
control_path_dir = $PRIV/cp
pipelining = True
EOF
cat >"$DIR/inventory.yml" <<EOF
all:
  vars:
    ansible_user: root
    ansible_port: $SSH_PORT
    ansible_ssh_private_key_file: $PRIV/id_ed25519
    # The hosts have no sudo; we log in as root (the playbook's become: true is overridden).
    ansible_become: false
    expanse_shared_prefix: $prefix
    expanse_daemon_version: v1.0.0
    expanse_releases_url: $CP_URL/releases
    expanse_cosign_key: $DIR/release.pub
    expanse_control_plane: $CP_URL
    expanse_data_plane: $DP_URL
    expanse_slurm_conf: $SLURM_CONF
    expanse_heartbeat_timeout: 60s
    expanse_ssl_cert_file: $CA_FILE
    expanse_cupti_mode: perfmon
    expanse_profiling_agent: true
    # All hosts share this machine's /usr/local/bin, so each gets its own CLI path.
    expanse_cli_install: copy
    expanse_cli_src: $EXPANSE
    expanse_cli_path: "$DIR/cli/{{ inventory_hostname }}/expanse"
    expanse_dcgm_host: 127.0.0.1:5555
    expanse_daemon_env:
      SLURM_CONF: $SLURM_CONF
  children:
    expanse_controller:
      hosts:
        $ctl:
          ansible_host: ${ADDR[$ctl]}
    expanse_workers:
      hosts:
        $w1:
          ansible_host: ${ADDR[$w1]}
        $w2:
          ansible_host: ${ADDR[$w2]}
      vars:
        expanse_daemon_env:
          SLURM_CONF: $SLURM_CONF
          EXPANSE_NVML_LIBRARY: $DIR/fake-nvml/libnvidia-ml.so.1
EOF
export ANSIBLE_CONFIG="$DIR/ansible.cfg" ANSIBLE_NOCOLOR=1
PLAYBOOK="$REPO_ROOT/ansible/examples/site.yml"
run_no=0
# playbook ARGS... — runs the example playbook; its output goes to $DIR/run-N.log and is
# printed indented; sets OUT (the output) and RC.
playbook() {
  local start=$SECONDS
  run_no=$((run_no + 1))
  RC=0
  ansible-playbook "$PLAYBOOK" -e "@$PRIV/token.yml" "$@" >"$DIR/run-$run_no.log" 2>&1 || RC=$?
  OUT="$(cat "$DIR/run-$run_no.log")"
  printf '    | ansible-playbook %s (run %d, exit %d, %d s)\n' "$*" "$run_no" "$RC" $((SECONDS - start))
  sed -n '/^PLAY RECAP/,$p' "$DIR/run-$run_no.log" | sed 's/^/    | /'
  if grep -qF -- "$token" "$DIR/run-$run_no.log"; then
    fail "run $run_no: the install token appears in Ansible's output"
  fi
}
# recap HOST FIELD — a number from the last PLAY RECAP of OUT.
recap() {
  sed -n '/^PLAY RECAP/,$p' <<<"$OUT" | grep -E "^$1 +:" | grep -oP "\b$2=\K[0-9]+"
}
assert_run_ok() { # what
  ((RC == 0)) || fail "$1: ansible-playbook exited $RC: $(tail -40 <<<"$OUT")"
  local h
  for h in "${HOSTS[@]}"; do
    [[ "$(recap "$h" failed)" == 0 && "$(recap "$h" unreachable)" == 0 ]] ||
      fail "$1: $h failed or unreachable: $(tail -40 <<<"$OUT")"
  done
}
assert_no_change() { # what
  assert_run_ok "$1"
  local h
  for h in "${HOSTS[@]}"; do assert_eq 0 "$(recap "$h" changed)" "$1: changed on $h"; done
}
snapshot_all() {
  local h
  for h in "${HOSTS[@]}"; do
    host_snapshot "$h" /etc/systemd/system /etc/expanse /var/lib/expanse-install \
      /var/lib/slurm/.expanse "$prefix" "$DIR/cli/$h"
  done
  sha256sum "$SLURM_CONF"
  api GET "/api/v1/computes/$COMPUTE" | jq -c '{state}'
}

out="$(ansible all -m ansible.builtin.command -a 'hostname -s' -o 2>&1)" || fail "ansible over ssh: $out"
for h in "${HOSTS[@]}"; do
  assert_match "^$h \| CHANGED \| rc=0 \| \(stdout\) $h\$" "$(grep "^$h " <<<"$out")" \
    "a command over ssh to $h runs in that host's namespaces"
done
ansible-playbook --syntax-check "$PLAYBOOK" >/dev/null || fail "syntax check of $PLAYBOOK"

# --- check mode on fresh hosts: would change, changes nothing --------------------------------
before="$(snapshot_all)"
playbook --check --diff
assert_run_ok "check mode on fresh hosts"
for h in "${HOSTS[@]}"; do
  (($(recap "$h" changed) > 0)) || fail "check mode reported no change for the fresh host $h"
done
pass "check mode: every fresh host would change ($ctl $(recap "$ctl" changed), $w1 $(recap "$w1" changed), $w2 $(recap "$w2" changed) tasks)"
assert_match '\+EXPANSE_DCGM_HOST=127\.0\.0\.1:5555' "$OUT" "diff mode shows the daemon.env line to add"
assert_match '\+daemon_version: "1\.0\.0"' "$OUT" "diff mode shows the controller install to record (v1.0.0 read as 1.0.0)"
assert_match '\+unit_name: "expanse-sampler\.service"' "$OUT" "diff mode shows the sampler install to record"
assert_same_snapshot "$before" "$(snapshot_all)" "hosts, slurm.conf and the compute after the check run"

# --- install ------------------------------------------------------------------------------------
playbook -vvv
assert_run_ok "install"
for h in "${HOSTS[@]}"; do (($(recap "$h" changed) > 0)) || fail "install changed nothing on $h"; done
assert_match 'heartbeat received: compute [^ ]+ is active' "$OUT" "the installer waited for the heartbeat"
assert_eq active "$(api GET "/api/v1/computes/$COMPUTE" | jq -r .state)" "compute state after the install"
pass "the install token is in none of Ansible's -vvv output (ssh command lines included)"
assert_eq "User=slurm" "$("$TESTCLUSTER" exec "$ctl" -- systemctl show expanse-daemon -p User)" "controller service user"
assert_eq 1.0.0 "$("$TESTCLUSTER" exec "$ctl" -- jq -r .daemon_version /var/lib/expanse-install/controller.json)" "installed daemon version"
assert_match 'Prolog=.*/prefix/hooks/prolog' "$(grep -i '^Prolog=' "$SLURM_CONF" | tail -1)" "Prolog wired in slurm.conf"
for w in "$w1" "$w2"; do
  "$TESTCLUSTER" exec "$w" -- systemctl is-active -q expanse-sampler ||
    fail "expanse-sampler on $w: $("$TESTCLUSTER" exec "$w" -- journalctl -u expanse-sampler | tail -5)"
  assert_eq "User=slurm" "$("$TESTCLUSTER" exec "$w" -- systemctl show expanse-sampler -p User)" "sampler service user on $w"
  assert_match "EXPANSE_NVML_LIBRARY=$DIR/fake-nvml/" "$("$TESTCLUSTER" exec "$w" -- cat /etc/expanse/daemon.env)" \
    "the workers' expanse_daemon_env in $w's daemon.env"
done
for h in "${HOSTS[@]}"; do
  env_file="$("$TESTCLUSTER" exec "$h" -- cat /etc/expanse/daemon.env)"
  assert_match 'EXPANSE_DCGM_HOST=127\.0\.0\.1:5555' "$env_file" "expanse_dcgm_host in $h's daemon.env"
  assert_match "SSL_CERT_FILE=$CA_FILE" "$env_file" "the CA (expanse_ssl_cert_file) seeded by the installer on $h"
  assert_eq "640 root:slurm" "$("$TESTCLUSTER" exec "$h" -- stat -c '%a %U:%G' /etc/expanse/daemon.env)" "$h's daemon.env mode and owner"
  for f in /etc/systemd/system /etc/expanse /var/lib/slurm/.expanse /var/lib/expanse-install "$prefix" "$DIR/ansible"; do
    if "$TESTCLUSTER" exec "$h" -- grep -rqF -- "$token" "$f" 2>/dev/null; then
      fail "the install token was written under $f on $h"
    fi
  done
done
pass "the install token is in no file on any host, nor in Ansible's temporary directories"

# --- idempotence --------------------------------------------------------------------------------
# (Check mode on an installed cluster is exercised below, with a changed setting.)
playbook
assert_no_change "second run"

# --- a job runs and is attributed ---------------------------------------------------------------
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null --wrap 'sleep 8')"
wait_job_done "$job" 120
assert_eq COMPLETED "$(job_state "$job")" "state of job $job"
api_job() { api GET "/api/v1/computes/$COMPUTE/jobs/$job"; }
wait_until 90 "both hosts' start and end events of job $job" \
  bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job' | jq '[.events[]?] | length') -ge 4 ]]"
record="$(api_job)"
for w in "$w1" "$w2"; do
  lo="$(grep "NodeName=$w " "$gres_conf" | grep -oP 'nvidia\[\K[0-9]+')"
  assert_eq "GPU-$w-minor$lo" "$(jq -r --arg h "$w" '[.gpus[] | select(.host == $h) | .gpu_uuid] | join(",")' <<<"$record")" \
    "GPU of job $job on $w (the one SLURM allocated)"
done
wait_until 90 "GPU samples of job $job" bash -c "[[ \$(curl -sS --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job' | jq -r '.used.has_gpu_samples') == true ]]"
pass "job $job: events from both workers and GPU samples from the samplers the role installed"
for w in "$w1" "$w2"; do
  assert_match '^idle' "$(sinfo -h -n "$w" -o '%t')" "state of $w after the job"
done

# --- a changed setting: diff first, then the change and a restart, then nothing -----------------
# The CLI copy has been checked (would change, changed, unchanged); the runs from here on leave
# the CLI alone (expanse_cli_install=none), as checksumming the ASan CLI on every host costs
# ~10 s a run.
keep_cli=(-e expanse_cli_install=none)
pid_before="$("$TESTCLUSTER" exec "$w1" -- systemctl show expanse-sampler -p MainPID)"
before="$(snapshot_all)"
playbook "${keep_cli[@]}" --check --diff -e expanse_dcgm_host=127.0.0.1:5556
assert_run_ok "check run with a new DCGM address"
assert_match '-EXPANSE_DCGM_HOST=127\.0\.0\.1:5555' "$OUT" "diff of the DCGM line (old)"
assert_match '\+EXPANSE_DCGM_HOST=127\.0\.0\.1:5556' "$OUT" "diff of the DCGM line (new)"
assert_same_snapshot "$before" "$(snapshot_all)" "hosts after the check run with a new DCGM address"
playbook "${keep_cli[@]}" -e expanse_dcgm_host=127.0.0.1:5556
assert_run_ok "run with a new DCGM address"
assert_match 'RUNNING HANDLER \[expanse : Restart the Expanse service\]' "$OUT" "the changed setting restarts the services"
for h in "${HOSTS[@]}"; do
  assert_match 'EXPANSE_DCGM_HOST=127\.0\.0\.1:5556' "$("$TESTCLUSTER" exec "$h" -- cat /etc/expanse/daemon.env)" "new DCGM address on $h"
done
[[ "$("$TESTCLUSTER" exec "$w1" -- systemctl show expanse-sampler -p MainPID)" != "$pid_before" ]] ||
  fail "the sampler on $w1 was not restarted"
pass "the sampler on $w1 was restarted with the new setting"

# --- upgrade by version: the controller reinstalls, the samplers take the new binary -----------
# The new DCGM address stays set: the run after the upgrade (changed=0) also shows that the
# changed setting is not re-applied.
playbook "${keep_cli[@]}" -e expanse_daemon_version=1.1.0 -e expanse_dcgm_host=127.0.0.1:5556
assert_run_ok "upgrade to 1.1.0"
assert_eq 1.1.0 "$("$TESTCLUSTER" exec "$ctl" -- jq -r .daemon_version /var/lib/expanse-install/controller.json)" "installed daemon version after the upgrade"
assert_match 'daemon_version: 1\.0\.0 -> 1\.1\.0' "$OUT" "the upgrade's reason"
assert_match 'shared daemon binary' "$OUT" "the samplers re-installed for the new shared binary"
for h in "${HOSTS[@]}"; do (($(recap "$h" changed) > 0)) || fail "upgrade changed nothing on $h"; done
assert_eq active "$(api GET "/api/v1/computes/$COMPUTE" | jq -r .state)" "compute state after the upgrade"
playbook "${keep_cli[@]}" -e expanse_daemon_version=1.1.0 -e expanse_dcgm_host=127.0.0.1:5556
assert_no_change "second run at 1.1.0 with the new DCGM address"

# --- changed install options: the role reinstalls with them, then has nothing to do ------------
# (Neither was compared with what the installer recorded: changing them did nothing.)
[[ -x "$prefix/bin/py-spy" ]] || fail "the release's py-spy is not installed"
options=("${keep_cli[@]}" -e expanse_daemon_version=1.1.0 -e expanse_dcgm_host=127.0.0.1:5556
  -e expanse_bundled_pyspy=false -e expanse_cupti_variant=cuda1300)
playbook "${options[@]}"
assert_run_ok "run without the bundled py-spy and with a CUPTI variant"
assert_match 'bundled_pyspy: True -> False' "$OUT" "the controller's reason (py-spy)"
assert_match 'cupti_variant:  -> cuda1300' "$OUT" "the reason (CUPTI variant)"
[[ ! -e "$prefix/bin/py-spy" ]] || fail "py-spy is still in $prefix/bin after --bundled-pyspy=false"
assert_eq false "$("$TESTCLUSTER" exec "$ctl" -- jq -r .bundled_pyspy /var/lib/expanse-install/controller.json)" "recorded bundled_pyspy"
for w in "$w1" "$w2"; do
  assert_eq cuda1300 "$("$TESTCLUSTER" exec "$w" -- jq -r .cupti_variant /var/lib/expanse-install/sampler.json)" "recorded CUPTI variant on $w"
done
playbook "${options[@]}"
assert_no_change "second run with the changed install options"
pass "changed install options (bundled py-spy, CUPTI variant) reinstall once, then nothing"

# --- uninstall ----------------------------------------------------------------------------------
playbook -e expanse_state=absent
assert_run_ok "uninstall"
cmp "$DIR/site-slurm.conf" "$SLURM_CONF" || fail "slurm.conf after uninstall differs from the site's: $(diff "$DIR/site-slurm.conf" "$SLURM_CONF" | head)"
pass "slurm.conf after uninstall is byte-identical to the site's"
assert_eq deprovisioned "$(api GET "/api/v1/computes/$COMPUTE" | jq -r .state)" "compute state after uninstall"
for h in "${HOSTS[@]}"; do
  assert_eq "" "$("$TESTCLUSTER" exec "$h" -- find /etc/systemd/system /var/lib/slurm/.expanse -mindepth 1)" "units and credential left on $h"
  assert_eq "" "$("$TESTCLUSTER" exec "$h" -- find /var/lib/expanse-install -name '*.json')" "install state left on $h"
  env_file="$("$TESTCLUSTER" exec "$h" -- cat /etc/expanse/daemon.env 2>/dev/null || true)"
  [[ "$env_file" != *EXPANSE_DCGM_HOST* && "$env_file" != *EXPANSE_NVML_LIBRARY* && "$env_file" != *SLURM_CONF=* ]] ||
    fail "the role's lines are still in $h's daemon.env: $env_file"
done
pass "the role's daemon.env lines are gone from every host"
assert_eq "" "$(find "$prefix" -mindepth 1 | head -5)" "files left in the shared prefix"
playbook -e expanse_state=absent
assert_no_change "second uninstall run"
pass "Ansible role: check, install, idempotence, attribution, change, upgrade and uninstall"
