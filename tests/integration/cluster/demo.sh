#!/usr/bin/env bash
# scripts/demo end to end, on the fixture's running cluster and with the build under test
# (EXPANSE_DEMO_BUILD, so nothing is built twice): the demo must reuse the cluster, start
# expanse-server, install the controller and the samplers with the real CLI and submit its jobs.
# Then, signed in as the user it printed (POST /api/v1/session and the cookie), the query API must
# show the compute active, each job with what it requested, the 2-node GPU job's gpu.sm_util
# timeline with points for both of its GPUs (busy phases included), and the idle job's GPU as
# allocated but idle. A second scripts/demo only prints the summary. `scripts/demo stop` must end
# the server and every daemon, give back slurm.conf byte for byte and leave the cluster running.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse, expanse-daemon, expanse-server)}"
DEMO="$REPO_ROOT/scripts/demo"
# Its own state directory and ports, so that a demo someone left running is not taken for ours.
export EXPANSE_DEMO_BUILD="$BUILD" EXPANSE_DEMO_STATE="/var/tmp/expanse-demo-test.$$" \
  EXPANSE_DEMO_PORT=18543 EXPANSE_DEMO_JOB_SECONDS=240
CP_URL="https://127.0.0.1:$EXPANSE_DEMO_PORT"
CA_FILE="$EXPANSE_DEMO_STATE/tls/ca.pem"
PREFIX="$EXPANSE_TC_SHARED/expanse"
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"

# The demo prints a password: its output, the sign-in body and the cookie stay in a private
# directory, and the log shows the output with the password masked.
private="$(mktemp -d)"
shown() { sed -E 's/^(  Password +).*/\1(not shown)/' "$1" | sed 's/^/    | /'; }
cleanup() {
  "$DEMO" stop >/dev/null 2>&1 || true
  rm -rf "$private" "$EXPANSE_DEMO_STATE"
  restore_slurm_conf
}
save_slurm_conf
trap cleanup EXIT
conf_before="$(sha256sum <"$SLURM_CONF")"
# Each host's /etc/expanse (earlier tests may have left a scenario there; the demo must put it
# back) and the systemd stand-in mounts.
host_state() {
  "$TESTCLUSTER" exec "$1" -- bash -c 'cd /etc/expanse && ls -A && sha256sum -- * 2>/dev/null
    findmnt -rn -S expanse-test' || true
}
declare -A before
for h in "$EXPANSE_TC_CONTROLLER" $EXPANSE_TC_WORKERS; do before[$h]="$(host_state "$h")"; done

start=$SECONDS
"$DEMO" >"$private/demo.out" 2>&1 || fail "scripts/demo failed:
$(shown "$private/demo.out" | tail -40)"
shown "$private/demo.out"
pass "scripts/demo finished in $((SECONDS - start))s"
out="$(shown "$private/demo.out")" # what assertions may print: the password masked
assert_match 'SLURM test cluster: already running, reused' "$out" "the demo reused the fixture's cluster"
if nvidia-smi -L >/dev/null 2>&1; then
  assert_match 'The Expanse demo is up: real GPUs' "$out" "the GPUs are labelled real"
else
  assert_match 'The Expanse demo is up: simulated GPUs \(fake NVML\) — this machine has no GPU' "$out" \
    "the GPUs are labelled simulated"
fi
assert_match "Console +$CP_URL/" "$out" "console URL printed"
assert_match "SSL_CERT_FILE=$CA_FILE" "$out" "CA file printed"
assert_match 'heartbeat received: compute cmp_[A-Za-z0-9_-]+ is active' "$out" "the real installer waited for the heartbeat"
email="$(grep -oP '^  Sign in +\K\S+' "$private/demo.out")"
password="$(grep -oP '^  Password +\K\S+' "$private/demo.out")"
[[ -n "$email" && -n "$password" ]] || fail "no sign-in email and password in the demo's output"

# --- signed in as the printed user ------------------------------------------------------------
jq -n --arg e "$email" --arg p "$password" '{email: $e, password: $p}' >"$private/login.json"
password=""
code="$(curl -sS --max-time 20 --cacert "$CA_FILE" -c "$private/cookies" -o "$private/session.json" \
  -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$private/login.json" \
  "$CP_URL/api/v1/session")"
assert_eq 200 "$code" "POST /api/v1/session as $email"
q() { curl -sS --fail-with-body --max-time 20 --cacert "$CA_FILE" -b "$private/cookies" "$CP_URL$1"; }
assert_eq demo "$(q /api/v1/me | jq -r '.organizations[].slug')" "the user's organisation"

compute="$(q /api/v1/orgs/demo/computes | jq -r '.computes[] | select(.name == "demo-cluster") | .id')"
[[ "$compute" == cmp_* ]] || fail "no compute demo-cluster: $(q /api/v1/orgs/demo/computes)"
assert_eq active "$(q "/api/v1/computes/$compute" | jq -r .state)" "state of compute $compute"

# The demo's jobs, by the ids it printed (the cluster may remember earlier jobs of the same name).
jobs="$(q "/api/v1/orgs/demo/jobs?compute=$compute&limit=1000")"
job_of() { grep -oP "^    \K[0-9]+(?= $1 )" "$private/demo.out" | tail -1; }
requested() {
  local id
  id="$(job_of "$1")"
  [[ -n "$id" ]] || fail "the demo printed no job $1"
  jq -c --arg id "$id" '.jobs[] | select(.job_id == $id) | .requested |
    {nodes, cpus, gpus, mem_mib, limit: (.time_limit_s > 0)}' <<<"$jobs"
}
assert_eq '{"nodes":2,"cpus":2,"gpus":2,"mem_mib":800,"limit":true}' "$(requested llm-train-2node)" \
  "requested TRES of llm-train-2node"
assert_eq '{"nodes":1,"cpus":1,"gpus":1,"mem_mib":300,"limit":true}' "$(requested notebook-idle-gpu)" \
  "requested TRES of notebook-idle-gpu"
assert_eq '{"nodes":1,"cpus":1,"gpus":0,"mem_mib":100,"limit":true}' "$(requested cpu-preprocess)" \
  "requested TRES of cpu-preprocess"
assert_eq '{"nodes":1,"cpus":1,"gpus":0,"mem_mib":200,"limit":true}' "$(requested py-tokenize)" \
  "requested TRES of py-tokenize"

train="$(job_of llm-train-2node)"
idle="$(job_of notebook-idle-gpu)"
timeline="$(q "/api/v1/computes/$compute/jobs/$train/timeline?metric=gpu.sm_util")"
assert_eq "$w1 $w2" "$(jq -r '[.series[] | select((.points | length) > 0) | .host] | sort | join(" ")' \
  <<<"$timeline")" "hosts of job $train's GPU series with points"
assert_eq 2 "$(jq '[.series[].gpu_uuid] | unique | length' <<<"$timeline")" "distinct GPUs in job $train's timeline"
# Both GPUs reach a busy phase (the simulated training computes at 84-97 % SM).
busy_on_both() {
  q "/api/v1/computes/$compute/jobs/$train/timeline?metric=gpu.sm_util" |
    jq_holds '[.series[] | select([.points[] | .[2]] | max >= 80)] | length == 2'
}
wait_until 90 "busy phases on both GPUs of job $train" busy_on_both
pass "job $train: both GPUs' sm_util reached a busy phase (>= 80 %)"
# The idle job's GPU: allocated, never used.
idle_gpu() {
  q "/api/v1/computes/$compute/nodes" | jq_holds --arg j "$idle" \
    '[.. | objects | select(.use?.state == "allocated_idle" and (.use.jobs | index($j)))] | length == 1'
}
wait_until 90 "job $idle's GPU reported allocated_idle" idle_gpu
pass "job $idle's GPU is allocated but idle in the heartbeat's GPU view"
assert_eq '1 0' "$(q "/api/v1/computes/$compute/jobs/$idle" | jq -r '"\(.used.gpus_allocated) \(.used.gpus_active)"')" \
  "GPUs allocated and active of job $idle"

# --- a second scripts/demo prints the summary and does nothing else ---------------------------
"$DEMO" >"$private/again.out" 2>&1 || fail "second scripts/demo failed: $(shown "$private/again.out")"
assert_eq 1 "$(grep -c '^== ' "$private/again.out")" "sections printed by a second scripts/demo (the summary only)"
[[ "$(grep '^  Password ' "$private/demo.out")" == "$(grep '^  Password ' "$private/again.out")" ]] ||
  fail "the second scripts/demo printed another password"
pass "the second scripts/demo printed the same password"

# --- stop ---------------------------------------------------------------------------------------
server_pid="$(cat "$EXPANSE_DEMO_STATE/server.pid")"
"$DEMO" stop >"$private/stop.out" 2>&1 || fail "scripts/demo stop failed: $(shown "$private/stop.out")"
shown "$private/stop.out"
kill -0 "$server_pid" 2>/dev/null && fail "expanse-server (pid $server_pid) still runs after stop"
pass "expanse-server (pid $server_pid) ended"
assert_eq "" "$(ss -Hltn "sport = :$EXPANSE_DEMO_PORT" || true)" "listeners on port $EXPANSE_DEMO_PORT"
daemons() { pgrep -af "^$PREFIX/bin/[e]xpanse-daemon" || true; }
left="$(daemons)"
for _ in $(seq 1 25); do
  [[ -z "$left" ]] && break
  sleep 0.2
  left="$(daemons)"
done
assert_eq "" "$left" "expanse-daemon processes left"
assert_eq "$conf_before" "$(sha256sum <"$SLURM_CONF")" "slurm.conf digest after stop vs before the demo"
for h in "$EXPANSE_TC_CONTROLLER" $EXPANSE_TC_WORKERS; do
  assert_eq "${before[$h]}" "$(host_state "$h")" "/etc/expanse and systemd stand-in mounts of $h vs before"
done
[[ ! -e "$EXPANSE_DEMO_STATE" ]] || fail "state directory $EXPANSE_DEMO_STATE left"
pass "state directory removed"
"$TESTCLUSTER" status >/dev/null || fail "the cluster stopped with the demo; it was running before"
for w in "$w1" "$w2"; do
  assert_match '^idle' "$(sinfo -h -n "$w" -o '%t')" "state of $w after stop"
done
assert_match 'nothing to stop' "$("$DEMO" stop 2>&1)" "a second scripts/demo stop"
pass "demo end to end in $((SECONDS - start))s"
