#!/usr/bin/env bash
# `expanse-daemon diagnostics`, the one-node view an operator runs on a worker (the deployment's
# view is `expanse doctor`): the effective runtime settings with where each came from, unknown
# keys, each collector's state and reason, and the GPUs, as JSON. A node with two fake NVML GPUs
# and settings from its daemon.env; then a damaged daemon.env, which is reported while the
# rest is still described with the defaults. Last, a sampler with the profiling agent off: it
# publishes the node's disable marker first, or stops at start naming where it could not.
# Usage: diagnostics.sh BUILD_DIR
set -euo pipefail
BUILD="$(cd "${1:?build directory}" && pwd)"
TEST_NAME=daemon_diagnostics
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }
DAEMON="$BUILD/bin/expanse-daemon"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT

cat >"$DIR/scenario.json" <<'JSON'
{"gpus": [{"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000001", "minor": 3, "sm_util": 87},
          {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000002", "minor": 1, "sm_util": 0}]}
JSON
cat >"$DIR/daemon.env" <<ENV
EXPANSE_NVML_LIBRARY=$BUILD/fakes/nvml/libnvidia-ml.so.1
EXPANSE_PYSTACKS_HZ=7
EXPANSE_LIVE_DETECTION=0
EXPANSE_NOT_A_SETTING=1
ENV
run() { # ENV_FILE
  env -i PATH=/usr/bin:/bin EXPANSE_FAKE_NVML_SCENARIO="$DIR/scenario.json" \
    "$DAEMON" --env-file "$1" --shared-prefix "$DIR/prefix" --hostname w1 diagnostics
}
run "$DIR/daemon.env" >"$DIR/out.json" || fail "diagnostics exited non-zero"
q() { jq -r "$1" "$DIR/out.json"; }
[[ "$(q .settings.EXPANSE_PYSTACKS_HZ)" == 7 && "$(q .settings.EXPANSE_LIVE_DETECTION)" == 0 ]] ||
  fail "settings not as daemon.env says: $(q .settings)"
[[ "$(q .settings.sources.EXPANSE_PYSTACKS_HZ)" == "$DIR/daemon.env" ]] || fail "no source: $(q .settings.sources)"
[[ "$(q .settings.sources.EXPANSE_PYSTACKS_BURST_HZ)" == null ]] || fail "a default named a source"
[[ "$(q '.settings.unknown_keys[0]')" == "EXPANSE_NOT_A_SETTING ($DIR/daemon.env)" ]] ||
  fail "the unknown key was not reported: $(q .settings.unknown_keys)"
pass "effective settings with their source; a default names none; the unknown key is reported"

[[ "$(q .gpus.backend)/$(q .gpus.state)/$(q '.gpus.inventory.gpus | length')" == nvml/ok/2 ]] ||
  fail "GPUs: $(q '.gpus | {backend, state, detail}')"
[[ "$(q .capabilities.nvml.state)" == ok && "$(q .capabilities.nvml.reason)" == "2 GPUs" ]] ||
  fail "nvml capability: $(q .capabilities.nvml)"
[[ "$(q .capabilities.cupti.state)" == absent &&
  "$(q .capabilities.cupti.reason)" == *"$DIR/prefix/lib/cupti-nodes/w1/bin/expanse-cupti-helper"* ]] ||
  fail "cupti capability: $(q .capabilities.cupti)"
[[ "$(q .capabilities.dcgm.state)" == absent && "$(q .capabilities.dcgm.reason)" == *"dcgmi not found"* ]] ||
  fail "dcgm capability: $(q .capabilities.dcgm)"
pass "the two GPUs through NVML; CUPTI and DCGM absent, each with where it looked"

printf 'export EXPANSE_PYSTACKS_HZ=7\n' >"$DIR/bad.env"
run "$DIR/bad.env" >"$DIR/out.json" || fail "diagnostics of a node with a damaged daemon.env exited non-zero"
[[ "$(q .settings_error)" == *"line 1: 'export' is not allowed"* ]] ||
  fail "the damaged file was not reported: $(q .settings_error)"
[[ "$(q .settings.EXPANSE_PYSTACKS_HZ)" != 7 && "$(q .capabilities.nvml.state)" == absent &&
  "$(q .capabilities.nvml.reason)" == *"cannot load libnvidia-ml.so.1"* ]] ||
  fail "with the defaults, NVML should be the system's (absent here): $(q .capabilities.nvml)"
pass "a damaged daemon.env is reported, and the node described with the defaults"

# --- EXPANSE_PROFILING_AGENT_ENABLE=0: the disable marker before anything else, or no service ---
# (The operator guide: a service that cannot publish the marker fails at start with the path.)
printf 'EXPANSE_PROFILING_AGENT_ENABLE=0\n' >"$DIR/agent-off.env"
sampler=(env -i PATH=/usr/bin:/bin EXPANSE_FAKE_NVML_SCENARIO="$DIR/scenario.json" "$DAEMON"
  --role sampler --env-file "$DIR/agent-off.env" --shared-prefix "$DIR/prefix" --hostname w1
  --state-dir "$DIR/state" --events-dir "$DIR/events")
touch "$DIR/a-file"
rc=0
timeout 30 "${sampler[@]}" --control-dir "$DIR/a-file/control" 2>"$DIR/marker.err" || rc=$?
[[ $rc == 1 ]] || fail "a sampler that cannot publish the disable marker exited $rc: $(tail -3 "$DIR/marker.err")"
grep -q "cannot publish the profiling-agent disable marker $DIR/a-file/control/disabled" "$DIR/marker.err" ||
  fail "the failure does not name the marker's path: $(tail -3 "$DIR/marker.err")"
pass "a sampler that cannot publish the disable marker stops at start, naming its path"
"${sampler[@]}" --control-dir "$DIR/control" >/dev/null 2>"$DIR/sampler.err" &
sampler_pid=$!
for _ in $(seq 1 100); do [[ -f "$DIR/control/disabled" ]] && break; sleep 0.1; done
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
grep -q 'EXPANSE_PROFILING_AGENT_ENABLE=0' "$DIR/control/disabled" 2>/dev/null ||
  fail "no disable marker at $DIR/control/disabled: $(tail -3 "$DIR/sampler.err")"
pass "a sampler with EXPANSE_PROFILING_AGENT_ENABLE=0 published $DIR/control/disabled"
