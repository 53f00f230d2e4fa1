# Assertions and SLURM helpers for the bash integration tests (sourced).
# Every assertion prints what it checked, so a passing run shows that the test really ran.
# shellcheck shell=bash
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
TESTCLUSTER="$REPO_ROOT/tests/cluster/testcluster"
TEST_NAME="$(basename "${BASH_SOURCE[-1]}" .sh)"

fail() {
  printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2
  exit 1
}
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }

assert_eq() { # expected actual what
  [[ "$1" == "$2" ]] || fail "$3: expected '$1', got '$2'"
  pass "$3 = '$2'"
}

assert_match() { # regex actual what
  [[ "$2" =~ $1 ]] || fail "$3: '$2' does not match /$1/"
  pass "$3 matches /$1/"
}

assert_file_contains() { # file fixed-string what
  [[ -f "$1" ]] || fail "$3: file $1 does not exist"
  grep -qF -- "$2" "$1" || fail "$3: $1 does not contain '$2' (it has: $(head -c 400 "$1"))"
  pass "$3"
}

# jq_holds FILTER [jq options...] — `jq -e`, except that no input at all fails too: jq 1.6 exits
# 0 on empty input, so a `curl … | jq -e` whose curl got nothing would pass. Exported, so a
# `bash -c` condition of wait_until can use it.
jq_holds() {
  local input
  input="$(cat)"
  [[ -n "$input" ]] || return 1
  jq -e "$@" >/dev/null <<<"$input"
}
export -f jq_holds

# wait_until SECONDS WHAT CMD... — polls CMD every 0.2 s.
wait_until() {
  local seconds="$1" what="$2" i
  shift 2
  for ((i = 0; i < seconds * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  fail "timed out after ${seconds}s waiting for: $what"
}

# --- SLURM -------------------------------------------------------------------------------------
eval "$("$TESTCLUSTER" env)"

job_state() { scontrol show job "$1" 2>/dev/null | grep -oP 'JobState=\K\S+' || echo GONE; }
job_finished() { [[ "$(job_state "$1")" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|GONE)$ ]]; }

# Submits a batch job (sbatch arguments as given) and prints its id.
submit() { sbatch --parsable "$@" | cut -d';' -f1; }

wait_job_done() { # jobid [seconds]
  wait_until "${2:-60}" "job $1 to finish (state $(job_state "$1"))" job_finished "$1"
}

# Keeps a copy of slurm.conf and puts it back (with a reconfigure) when the test exits,
# so a test that wires hooks cannot leak them into the next test.
SAVED_SLURM_CONF=""
save_slurm_conf() {
  SAVED_SLURM_CONF="$(mktemp)"
  cp -p "$SLURM_CONF" "$SAVED_SLURM_CONF"
  trap restore_slurm_conf EXIT
}
restore_slurm_conf() {
  [[ -n "$SAVED_SLURM_CONF" ]] || return 0
  cp -p "$SAVED_SLURM_CONF" "$SLURM_CONF"
  rm -f "$SAVED_SLURM_CONF"
  SAVED_SLURM_CONF="" # restored once: dc_finish, then the EXIT trap, both call this
  "$TESTCLUSTER" reconfigure
}

# A host's /etc/expanse files a test rewrites (daemon.env through the role or the installer,
# the fake NVML scenario), kept in the root-only directory $1 and put back by
# restore_host_etc_files, so the next test finds them as they were. Restoring a host never
# saved does nothing.
save_host_etc_files() {
  local keep="$1" h="$2" f
  for f in daemon.env fake-nvml.json; do
    if "$TESTCLUSTER" exec "$h" -- test -e "/etc/expanse/$f"; then
      "$TESTCLUSTER" exec "$h" -- cat "/etc/expanse/$f" >"$keep/saved-$h-$f"
    fi
  done
  touch "$keep/saved-$h"
}
restore_host_etc_files() {
  local keep="$1" h="$2" f
  [[ -f "$keep/saved-$h" ]] || return 0
  for f in daemon.env fake-nvml.json; do
    if [[ -f "$keep/saved-$h-$f" ]]; then
      # shellcheck disable=SC2016
      "$TESTCLUSTER" exec "$h" -- bash -c 'cat >"/etc/expanse/$1"' restore "$f" <"$keep/saved-$h-$f"
    else
      "$TESTCLUSTER" exec "$h" -- rm -f "/etc/expanse/$f"
    fi
  done
}

# A fresh scratch directory on the shared prefix, visible on every host.
shared_scratch() {
  local d="$EXPANSE_TC_SHARED/$TEST_NAME.$$"
  rm -rf "$d"
  mkdir -p "$d"
  chmod 777 "$d"
  echo "$d"
}
