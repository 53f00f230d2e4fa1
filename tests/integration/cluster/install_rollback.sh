#!/usr/bin/env bash
# Failure handling of `expanse compute install` on the real SLURM cluster, with a real
# expanse-server mirroring a signed release. Each failing install must leave the controller
# byte-identical (files, modes, owners: units, daemon.env, credential, daemon state, the shared
# prefix, slurm.conf):
#   - an injected failure before every journalled change in turn, until the install succeeds;
#   - an install killed (SIGKILL) part-way, recovered by the next command;
#   - no heartbeat within --heartbeat-timeout (a daemon that never reports);
#   - a tampered archive, and a manifest signed by another key: refused before any change;
#   - a second install while one runs: refused by the install lock;
#   - a run without root: the guide's "open install lock ... permission denied";
#   - --patch-slurm-conf=false: SLURM files untouched, the lines to add printed;
#   - a failed reinstall (an upgrade to 1.1.0 failing in its cleanup, in the new install, or for
#     want of a heartbeat): the previous installation comes back, its daemon running again.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse, expanse-daemon, expanse-server)}"
SERVER="$BUILD/bin/expanse-server"
EXPANSE="$BUILD/bin/expanse"
source "$(dirname "$0")/../lib/expanse_server.sh"
source "$(dirname "$0")/../lib/install_env.sh"

DIR="$(shared_scratch)"
prefix="$DIR/prefix"
ctl="$EXPANSE_TC_CONTROLLER"
cleanup() {
  host_systemd_off "$ctl" || true
  server_stop || true
  restore_slurm_conf
}
save_slurm_conf
trap cleanup EXIT

make_signed_release "$DIR" 1.0.0 1.1.0
SERVER_EXTRA_ARGS="--releases-dir $DIR/releases" server_start || fail "expanse-server did not start"
publish_release "$DIR" || fail "release manifest"
# Uninstall deprovisions the compute for good; a fresh install after it registers a new one.
new_compute() { COMPUTE="$(api POST /api/v1/orgs/acme/computes '{"name":"cluster","type":"slurm"}' | jq -r .id)"; }
new_compute
new_token() { api POST "/api/v1/computes/$COMPUTE/install-tokens" | jq -r .token; }

host_systemd_on "$ctl"
mkdir -p "$prefix"
install_args=(--type slurm --shared-prefix "$prefix" --releases-url "$CP_URL/releases"
  --cosign-key "$DIR/release.pub" --control-plane "$CP_URL" --data-plane "$DP_URL"
  --slurm-conf "$SLURM_CONF" --heartbeat-timeout 45s --patch-slurm-conf=true)
# install [env assignments...] -- [extra flags...]: runs the installer on the controller.
install() {
  local envs=()
  while [[ $# -gt 0 && "$1" != -- ]]; do envs+=("$1"); shift; done
  shift
  "$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" "${envs[@]}" \
    "$EXPANSE" compute install "${install_args[@]}" "$@"
}
snapshot() {
  host_snapshot "$ctl" /etc/systemd/system /etc/expanse /var/lib/slurm/.expanse /var/lib/expanse \
    "$prefix" "$SLURM_CONF"
}
# Only the (empty) lock file may stay in the installer's own directory.
assert_install_dir_clean() {
  assert_eq "/var/lib/expanse-install/install.lock" \
    "$("$TESTCLUSTER" exec "$ctl" -- find /var/lib/expanse-install -mindepth 1)" "$1: installer state left"
}
# What install manages and uninstall removes (daemon.env and the daemon's node-local state are
# the operator's to review after an uninstall, as the guide says).
managed_snapshot() {
  host_snapshot "$ctl" /etc/systemd/system /var/lib/slurm/.expanse "$prefix" "$SLURM_CONF"
}
before="$(snapshot)"
before_managed="$(managed_snapshot)"

# --- an injected failure before each change in turn -------------------------------------------
n=0
while :; do
  token="$(new_token)"
  if out="$(EXPANSE_INSTALL_TOKEN="$token" install EXPANSE_INSTALL_TEST_FAIL_AFTER="$n" -- \
    --daemon-version 1.0.0 2>&1)"; then
    break
  fi
  assert_match "injected failure before change $((n + 1))" "$out" "failure at change $((n + 1))"
  assert_match "the host is as it was before this install" "$out" "rollback after change $n"
  assert_same_snapshot "$before" "$(snapshot)" "controller after failing at change $((n + 1))"
  assert_install_dir_clean "failure at change $((n + 1))"
  ((++n < 60)) || fail "the install never succeeded"
done
((n >= 15)) || fail "only $n changes were exercised"
pass "an install failing before any of its $n changes leaves the controller as it was; with none injected it succeeds"
"$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" "$EXPANSE" compute uninstall --type slurm \
  --shared-prefix "$prefix" --slurm-conf "$SLURM_CONF" >/dev/null || fail "uninstall"
assert_same_snapshot "$before_managed" "$(managed_snapshot)" "controller after install and uninstall"
before="$(snapshot)"
new_compute

# --- killed part-way: the next command rolls the journal back first ------------------------------
for k in 3 11 20; do
  out="$(EXPANSE_INSTALL_TOKEN="$(new_token)" install EXPANSE_INSTALL_TEST_KILL_AFTER="$k" -- \
    --daemon-version 1.0.0 2>&1)" && fail "install with SIGKILL after $k changes succeeded"
  out="$("$TESTCLUSTER" exec "$ctl" -- "$EXPANSE" compute uninstall --type slurm \
    --shared-prefix "$prefix" 2>&1)" || fail "recovery: $out"
  assert_match 'interrupted; rolling back' "$out" "the next command after a kill at change $((k + 1))"
  assert_same_snapshot "$before" "$(snapshot)" "controller after a kill at change $((k + 1))"
done

# --- no heartbeat: a daemon that runs but never reports ---------------------------------------
mute="$DIR/mute-daemon"
printf '#!/bin/sh\nmkdir -p /var/lib/expanse/outbox && echo pending >/var/lib/expanse/outbox/x\nexec sleep 600\n' >"$mute"
chmod 755 "$mute"
out="$(EXPANSE_INSTALL_TOKEN="$(new_token)" install -- --daemon-binary "$mute" \
  --heartbeat-timeout 4s 2>&1)" && fail "install without a heartbeat succeeded"
assert_match 'cannot be verified|not verif' "$out" "a bare binary is said to be unverifiable"
assert_match 'no authenticated heartbeat' "$out" "heartbeat timeout reported"
assert_same_snapshot "$before" "$(snapshot)" "controller after the heartbeat timeout"

# --- refused releases: nothing changes ----------------------------------------------------------
archive="$(ls "$DIR"/releases/expanse-daemon_1.0.0_*.tar.gz)"
cp "$archive" "$DIR/good.tar.gz"
printf 'X' | dd of="$archive" bs=1 seek=100 conv=notrunc 2>/dev/null
out="$(EXPANSE_INSTALL_TOKEN="$(new_token)" install -- --daemon-version 1.0.0 2>&1)" &&
  fail "a tampered archive was installed"
assert_match 'sha256|checksum' "$out" "tampered archive refused"
assert_same_snapshot "$before" "$(snapshot)" "controller after the tampered archive"
cp "$DIR/good.tar.gz" "$archive"
"$EXPANSE" release keygen --private-key "$DIR/other.key" --public-key "$DIR/other.pub" >/dev/null
out="$(EXPANSE_INSTALL_TOKEN="$(new_token)" install -- --daemon-version 1.0.0 \
  --cosign-key "$DIR/other.pub" 2>&1)" && fail "a manifest signed by another key was accepted"
assert_match 'signature' "$out" "manifest signed by another key refused"
assert_same_snapshot "$before" "$(snapshot)" "controller after the wrong key"

# --- concurrent installs: exactly one proceeds ----------------------------------------------------
EXPANSE_INSTALL_TOKEN="$(new_token)" install -- --daemon-binary "$mute" --heartbeat-timeout 8s \
  >"$DIR/first.log" 2>&1 &
first=$!
wait_until 20 "the first install to hold the lock" grep -q 'waiting up to' "$DIR/first.log"
out="$(EXPANSE_INSTALL_TOKEN="$(new_token)" install -- --daemon-version 1.0.0 2>&1)" &&
  fail "a second concurrent install ran"
assert_match 'another expanse compute install or uninstall holds' "$out" "second concurrent install"
wait "$first" && fail "the first install should have timed out waiting for a heartbeat"
assert_same_snapshot "$before" "$(snapshot)" "controller after the concurrent installs"

# --- without root ---------------------------------------------------------------------------------
out="$("$TESTCLUSTER" exec "$ctl" -- setpriv --reuid slurm --regid slurm --clear-groups \
  "$EXPANSE" compute install "${install_args[@]}" --daemon-version 1.0.0 2>&1)" && fail "ran without root"
assert_match '^expanse: open install lock /var/lib/expanse-install/install.lock: permission denied; re-run with sudo' \
  "$out" "install without root"

# --- without --patch-slurm-conf: SLURM files untouched, the lines printed ---------------------------
conf_sum="$(sha256sum <"$SLURM_CONF")"
out="$(EXPANSE_INSTALL_TOKEN="$(new_token)" install -- --daemon-version 1.0.0 \
  --patch-slurm-conf=false 2>&1)" || fail "install without patching: $out"
assert_eq "$conf_sum" "$(sha256sum <"$SLURM_CONF")" "slurm.conf after an install without patching"
assert_match "Prolog=$prefix/hooks/prolog" "$out" "the Prolog line to add is printed"
assert_match 'slurm.conf left untouched' "$out" "the operator is told to wire the hooks"

# --- a failed reinstall puts the previous installation back, its daemon running -------------------
# Failures in the cleanup of 1.0.0 (after the unit is stopped; after its file is gone; while its
# files are set aside), in the install of 1.1.0, and a 1.1.0 daemon that never reports.
installed="$(managed_snapshot)"
daemon_exe() {
  "$TESTCLUSTER" exec "$ctl" -- bash -c \
    'pid="$(systemctl show -p MainPID --value expanse-daemon)"; [[ $pid != 0 ]] && readlink "/proc/$pid/exe"'
}
assert_previous_back() {  # $1: what failed; $2: the installer's output
  assert_match "the previous installation is back in place" "$2" "$1: rollback message"
  assert_same_snapshot "$installed" "$(managed_snapshot)" "controller after $1"
  assert_eq active "$("$TESTCLUSTER" exec "$ctl" -- systemctl is-active expanse-daemon)" \
    "the 1.0.0 daemon after $1"
  assert_eq "$prefix/bin/expanse-daemon" "$(daemon_exe)" "the running daemon's binary after $1"
  assert_eq 1.0.0 "$("$TESTCLUSTER" exec "$ctl" -- jq -r .daemon_version /var/lib/expanse-install/controller.json)" \
    "the recorded version after $1"
  assert_eq "/var/lib/expanse-install/controller.json /var/lib/expanse-install/install.lock" \
    "$("$TESTCLUSTER" exec "$ctl" -- find /var/lib/expanse-install -mindepth 1 | sort | xargs)" \
    "$1: the installer's directory (no journal left)"
}
reinstall_args=(--reinstall --daemon-version 1.1.0 --patch-slurm-conf=false)
for n in 1 3 6 20; do
  out="$(install EXPANSE_INSTALL_TEST_FAIL_AFTER="$n" -- "${reinstall_args[@]}" 2>&1)" &&
    fail "a reinstall failing after $n changes succeeded"
  assert_match "injected failure before change $((n + 1))" "$out" "reinstall failure at change $((n + 1))"
  assert_previous_back "a reinstall failing at change $((n + 1))" "$out"
done
out="$(install -- --reinstall --daemon-binary "$mute" --heartbeat-timeout 4s \
  --patch-slurm-conf=false 2>&1)" && fail "a reinstall without a heartbeat succeeded"
assert_match 'no authenticated heartbeat' "$out" "reinstall heartbeat timeout reported"
assert_previous_back "a reinstall whose daemon never reports" "$out"
out="$(install -- "${reinstall_args[@]}" 2>&1)" || fail "reinstall to 1.1.0: $out"
assert_eq 1.1.0 "$("$TESTCLUSTER" exec "$ctl" -- jq -r .daemon_version /var/lib/expanse-install/controller.json)" \
  "the recorded version after the upgrade"
assert_eq "" "$(find "$prefix" -name '*.expanse-undo-*')" "what the upgrade set aside is deleted at its commit"
pass "a failed reinstall leaves 1.0.0 installed and running; the next one upgrades to 1.1.0"

"$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" "$EXPANSE" compute uninstall --type slurm \
  --shared-prefix "$prefix" >/dev/null || fail "uninstall"
assert_same_snapshot "$before_managed" "$(managed_snapshot)" "controller after install without patching and uninstall"
pass "install failure handling complete"
