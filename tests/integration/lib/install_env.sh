# Helpers for installer tests on the SLURM test cluster (sourced after testlib.sh).
#
# The cluster's hosts are namespaces on a machine without systemd as PID 1, so an installer test
# gives a host a systemd of its own, inside that host's mount namespace only:
#   host_systemd_on HOST    tmpfs over /run/systemd (with system/ in it, which is how programs
#                           tell that systemd runs), /etc/systemd/system and the installer's and
#                           credential's directories, and tests/fakes/systemd/{systemctl,journalctl}
#                           bound over /usr/bin; units it starts really run, as their User=, with
#                           their capabilities.
#   host_systemd_off HOST   stops every unit the stand-in started there and undoes the mounts.
# shellcheck shell=bash

FAKE_SYSTEMCTL="$REPO_ROOT/tests/fakes/systemd/systemctl"
FAKE_JOURNALCTL="$REPO_ROOT/tests/fakes/systemd/journalctl"
# Directories private to a host while its systemd is on. They must exist as mount points on the
# machine itself (empty; nothing is written to them outside the namespaces).
INSTALL_PRIVATE_DIRS=(/run/systemd /etc/systemd/system /var/lib/expanse-install /var/lib/slurm/.expanse)

host_systemd_on() {
  local host="$1" d
  for d in "${INSTALL_PRIVATE_DIRS[@]}"; do mkdir -p "$d"; done
  "$TESTCLUSTER" exec "$host" -- bash -c "
    set -e
    for d in ${INSTALL_PRIVATE_DIRS[*]}; do mount -t tmpfs -o mode=755 expanse-test \"\$d\"; done
    chmod 700 /var/lib/expanse-install
    mkdir -p /run/systemd/system
    mount --bind '$FAKE_SYSTEMCTL' /usr/bin/systemctl
    mount --bind '$FAKE_JOURNALCTL' /usr/bin/journalctl"
}

host_systemd_off() {
  local host="$1" d
  "$TESTCLUSTER" exec "$host" -- bash -c "
    for u in /etc/systemd/system/*.service; do
      [[ -e \$u ]] && systemctl stop \"\$(basename \"\$u\")\" >/dev/null 2>&1
    done
    umount /usr/bin/systemctl /usr/bin/journalctl 2>/dev/null
    for d in ${INSTALL_PRIVATE_DIRS[*]}; do umount \"\$d\" 2>/dev/null; done
    true"
}

# host_daemon_env_write HOST — HOST's /etc/expanse/daemon.env becomes stdin (group slurm, mode
# 640), as an operator writes it; what was there is kept in $DIR for host_daemon_env_restore.
host_daemon_env_write() {
  local host="$1"
  if [[ ! -e "$DIR/daemon.env.$host.written" ]]; then
    "$TESTCLUSTER" exec "$host" -- bash -c "mkdir -p /etc/expanse && { cat /etc/expanse/daemon.env 2>/dev/null || true; }" >"$DIR/daemon.env.$host.saved"
    touch "$DIR/daemon.env.$host.written"
  fi
  "$TESTCLUSTER" exec "$host" -- bash -c 'umask 027 && cat >/etc/expanse/daemon.env && chgrp slurm /etc/expanse/daemon.env'
}

# host_daemon_env_restore HOST — puts back what host_daemon_env_write found (or removes the file
# it made); nothing when the test never wrote one there. Safe in an EXIT trap.
host_daemon_env_restore() {
  local host="$1"
  [[ -e "$DIR/daemon.env.$host.written" ]] || return 0
  if [[ -s "$DIR/daemon.env.$host.saved" ]]; then
    "$TESTCLUSTER" exec "$host" -- bash -c 'cat >/etc/expanse/daemon.env' <"$DIR/daemon.env.$host.saved" || true
  else
    "$TESTCLUSTER" exec "$host" -- rm -f /etc/expanse/daemon.env || true
  fi
}

# Prints one line per file under the given paths: path, mode, owner and checksum (symlinks by
# target), so two snapshots compare byte for byte what an install changed. The worker spool is
# left out: samplers write their health reports there all the time.
host_snapshot() {
  local host="$1"
  shift
  "$TESTCLUSTER" exec "$host" -- bash -c '
    for root in "$@"; do
      [[ -e $root ]] || { echo "absent $root"; continue; }
      find "$root" -xdev -path "*/spool" -prune -o \( -type f -o -type d -o -type l \) \
        -printf "%p %m %u:%g %y %l\n" | sort
      find "$root" -xdev -path "*/spool" -prune -o -type f -print0 | sort -z | xargs -0r sha256sum
    done' snapshot "$@"
}

# Number of times every slurmd has logged a reconfiguration, summed; poll it to know that a
# `scontrol reconfigure` run by the installer has reached every node.
slurmd_reconfigure_count() {
  cat "$EXPANSE_TC_STATE"/log/slurmd-*.log 2>/dev/null | grep -c reconfigured || true
}

# assert_same_snapshot BEFORE AFTER WHAT — fails with the differing lines.
assert_same_snapshot() {
  if [[ "$1" != "$2" ]]; then
    fail "$3: the host changed: $(diff <(printf '%s\n' "$1") <(printf '%s\n' "$2") | head -20)"
  fi
  pass "$3: files, modes, owners and contents unchanged ($(printf '%s\n' "$1" | wc -l) lines)"
}

# make_signed_release DIR VERSION... — a signing key ($DIR/release.{key,pub}) and, in
# $DIR/releases, one signed daemon archive per version (the build's expanse-daemon). Run
# `publish_release` once the server (and so its URL) is up.
make_signed_release() {
  local dir="$1" v
  shift
  mkdir -p "$dir/releases" "$dir/stage/bin"
  # Without its debug sections (ASan reports still name functions): the archive is half the
  # size, and every install in the tests downloads, verifies and unpacks it.
  objcopy --strip-debug "$BUILD/bin/expanse-daemon" "$dir/stage/bin/expanse-daemon"
  # A stand-in for the py-spy a real release bundles (Debian has no py-spy to pack).
  printf '#!/bin/sh\necho "py-spy stand-in"\n' >"$dir/stage/bin/py-spy"
  chmod 755 "$dir/stage/bin/py-spy"
  "$EXPANSE" release keygen --private-key "$dir/release.key" --public-key "$dir/release.pub" >/dev/null
  for v in "$@"; do
    "$EXPANSE" release pack --version "$v" --from "$dir/stage" --output-dir "$dir/releases" >/dev/null
  done
  "$EXPANSE" release sign --key "$dir/release.key" "$dir/releases"/*.tar.gz >/dev/null
}

# add_cli_to_mirror DIR VERSION — the build's CLI as a signed archive in $DIR/releases, and the
# mirror's public key as $DIR/releases/release.pub: the server then serves GET /install.
add_cli_to_mirror() {
  local dir="$1" v="$2"
  mkdir -p "$dir/cli-stage/bin"
  cp "$EXPANSE" "$dir/cli-stage/bin/expanse"
  "$EXPANSE" release pack --name expanse --version "$v" --from "$dir/cli-stage" \
    --output-dir "$dir/releases" >/dev/null
  "$EXPANSE" release sign --key "$dir/release.key" "$dir/releases/expanse_${v}_linux_amd64.tar.gz" >/dev/null
  cp "$dir/release.pub" "$dir/releases/release.pub"
}

# publish_release DIR — the signed manifest of $DIR/releases, for the server's mirror at $CP_URL.
publish_release() {
  "$EXPANSE" release manifest --dir "$1/releases" --base-url "$CP_URL/releases" \
    --key "$1/release.key" >/dev/null
  chmod 755 "$DIR/tls" && chmod 644 "$CA_FILE"  # the daemon, as `slurm`, reads the CA
}
