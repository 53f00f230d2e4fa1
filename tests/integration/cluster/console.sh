#!/usr/bin/env bash
# The web console in headless Chromium (console/tests/console_flow.mjs) against a real
# expanse-server and this SLURM cluster. The browser signs in, adds a compute and copies the
# install script and token from the panel; this script then runs that exact install script on
# the controller (the real `expanse compute install` from a locally signed release, under the
# systemd stand-in), the panel turns active, a GPU job runs on the workers (fake NVML) and the
# browser opens the job's timeline. Screenshots: $EXPANSE_BUILD_DIR/test-artifacts/console/.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse, expanse-daemon, expanse-server)}"
SERVER="$BUILD/bin/expanse-server"
EXPANSE="$BUILD/bin/expanse"
FAKE_NVML="$BUILD/fakes/nvml/libnvidia-ml.so.1"
source "$(dirname "$0")/../lib/expanse_server.sh"
source "$(dirname "$0")/../lib/install_env.sh"

DIR="$(shared_scratch)"
prefix="$DIR/prefix"
ctl="$EXPANSE_TC_CONTROLLER"
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"
artifacts="$BUILD/test-artifacts/console"
rm -rf "$artifacts"  # screenshots of this run only
cleanup() {
  # The install wrote the controller's real /etc/expanse and slurm.conf wiring: undo it.
  if [[ -e "$DIR/installed" ]]; then
    "$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" "$EXPANSE" compute uninstall \
      --type slurm --role controller --shared-prefix "$prefix" --slurm-conf "$SLURM_CONF" >"$DIR/uninstall.log" 2>&1 || true
  fi
  host_systemd_off "$ctl" || true
  for w in $EXPANSE_TC_WORKERS; do
    if [[ -e "$DIR/sampler.$w" ]]; then
      "$TESTCLUSTER" exec "$w" -- "$EXPANSE" compute uninstall --type slurm --role sampler \
        --shared-prefix "$prefix" >>"$DIR/uninstall.log" 2>&1 || true
    fi
    host_systemd_off "$w" || true
    "$TESTCLUSTER" exec "$w" -- pkill -f "$prefix/bin/[e]xpanse-daemon" 2>/dev/null || true
    "$TESTCLUSTER" exec "$w" -- rm -f /etc/expanse/fake-nvml.json 2>/dev/null || true
  done
  for host in $ctl $EXPANSE_TC_WORKERS; do host_daemon_env_restore "$host"; done
  server_stop || true
  restore_slurm_conf
}
save_slurm_conf
trap cleanup EXIT
command -v chromium >/dev/null || fail "Debian's chromium is not installed (scripts/setup installs it)"
[[ -d "$REPO_ROOT/console/node_modules/playwright-core" ]] ||
  fail "playwright-core is missing from console/node_modules (scripts/setup runs npm ci there)"

# A signed release at the version the server pins, mirrored by the server.
make_signed_release "$DIR" 1.0.0
add_cli_to_mirror "$DIR" 1.0.0
SERVER_EXTRA_ARGS="--releases-dir $DIR/releases --daemon-version 1.0.0" server_start ||
  fail "expanse-server did not start"
publish_release "$DIR" || fail "release manifest"
viewer_password="viewer-$RANDOM-$RANDOM"
EXPANSE_ADMIN_PASSWORD="$viewer_password" "$SERVER" admin add-user --db "$DIR/db.sqlite" \
  --org acme --email viewer@acme.example --role viewer --slurm-user viewer1 >/dev/null || fail "viewer user"
# A second organisation where the owner of the first is only a viewer: the switcher and the
# actions follow the organisation.
EXPANSE_ADMIN_PASSWORD="beta-$RANDOM-$RANDOM" "$SERVER" admin bootstrap --db "$DIR/db.sqlite" \
  --org beta --org-name "Beta Lab" --email owner@beta.example >/dev/null || fail "second organisation"
EXPANSE_ADMIN_PASSWORD='test pass' "$SERVER" admin add-user --db "$DIR/db.sqlite" --org beta \
  --email ops@acme.example --role viewer >/dev/null || fail "owner of acme as viewer of beta"
pass "server at $CP_URL with a signed release 1.0.0; owner and viewer users; a second organisation"

# Simulated GPUs on the workers: one busy, one idle each (tests/fakes/nvml).
for w in $EXPANSE_TC_WORKERS; do
  read -r lo hi < <(grep "NodeName=$w " "$(dirname "$SLURM_CONF")/gres.conf" |
    grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
  "$TESTCLUSTER" exec "$w" -- bash -c "mkdir -p /etc/expanse && cat >/etc/expanse/fake-nvml.json" <<JSON
{"gpus": [{"uuid": "GPU-$w-minor$lo", "minor": $lo, "sm_util": 88, "memory_used_mib": 30000},
          {"uuid": "GPU-$w-minor$hi", "minor": $hi, "sm_util": 0, "memory_used_mib": 0}]}
JSON
done

# What an operator's controller has: the CLI on PATH and sudo. This machine has neither, so
# the install script finds stand-ins: `sudo` that runs its command as root (it is root already)
# and `expanse` that adds the test's release mirror, its signing key and slurm.conf to the
# script's own flags (a production CLI has the official mirror and key built in).
mkdir -p "$DIR/shim"
cat >"$DIR/shim/sudo" <<'SH'
#!/bin/bash
while [[ "${1:-}" == --preserve-env=* ]]; do shift; done
exec "$@"
SH
cat >"$DIR/shim/expanse" <<SH
#!/bin/bash
exec "$EXPANSE" "\$@" --releases-url "$CP_URL/releases" --cosign-key "$DIR/release.pub" \
  --slurm-conf "$SLURM_CONF"
SH
chmod 755 "$DIR/shim/sudo" "$DIR/shim/expanse"
for host in $ctl $EXPANSE_TC_WORKERS; do host_systemd_on "$host"; done
# Each host's daemon.env, as an operator would set it here: SLURM_CONF (the cluster's is not in
# /etc/slurm), the simulated GPUs (a copy of the fake NVML the `slurm` account can read) and
# Python stacks in 10 s windows instead of a minute. Whatever was there comes back at the end.
mkdir -p "$DIR/fake-nvml" "$prefix"  # the shared prefix exists before an install (preflight)
cp "$FAKE_NVML" "$DIR/fake-nvml/"
chmod -R a+rX "$DIR/fake-nvml"
for host in $ctl $EXPANSE_TC_WORKERS; do
  host_daemon_env_write "$host" <<ENV
SLURM_CONF=$SLURM_CONF
EXPANSE_NVML_LIBRARY=$DIR/fake-nvml/libnvidia-ml.so.1
EXPANSE_PYSTACKS_WINDOW_SECONDS=10
EXPANSE_PYSTACKS_CPU_PERCENT=10
ENV
done
# It trains until the test has seen its stacks (the file named by its argument appears).
cat >"$DIR/train.py" <<'PY'
import os, sys, time

def load_batch(n):
    return sum(i * i for i in range(n))

def train(stop):
    deadline = time.time() + 180
    while time.time() < deadline and not os.path.exists(stop):
        load_batch(20000)

train(sys.argv[1])
PY

# Called back by the browser test (see console_flow.mjs).
console_install() { # SCRIPT, token on stdin
  touch "$DIR/installed"
  "$TESTCLUSTER" exec "$ctl" -- env PATH="$DIR/shim:$PATH" SSL_CERT_FILE="$CA_FILE" bash "$1" 2>&1
  # Then, as the panel's assistant prompt has it, the sampler service on each static worker (its
  # unit grants the ptrace access Python stacks need).
  local w
  for w in $w1 $w2; do
    touch "$DIR/sampler.$w"
    "$TESTCLUSTER" exec "$w" -- "$EXPANSE" compute install --type slurm --role sampler \
      --shared-prefix "$prefix" 2>&1 || return 1
  done
}
console_job() { # COMPUTE
  local job
  rm -f "$DIR/stop"
  # Both GPUs of each node, the busy and the idle one: the job page then has a verdict
  # (over_allocated) for its ribbon.
  job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:2 -J train -o "$DIR/job-%j.out" --wrap "srun /usr/bin/python3 $DIR/train.py $DIR/stop")"
  if ! (wait_until 150 "Python stacks of job $job at the server" bash -c \
    "api GET /api/v1/computes/$1/jobs/$job/stacks | jq_holds '.total_count >= 5' >/dev/null" >&2); then
    api GET "/api/v1/computes/$1" | jq -c '.heartbeat.workers' >&2
    touch "$DIR/stop"
    return 1
  fi
  touch "$DIR/stop"
  wait_job_done "$job" 120 >&2
  wait_until 90 "GPU samples of job $job at the server" bash -c \
    "api GET /api/v1/computes/$1/jobs/$job/timeline | jq_holds '[.series[].points | length] | length >= 2 and min > 0' >/dev/null" >&2
  # Until the server has the job's end (Epilog, or sacct once a minute) its verdicts reach to now,
  # and over_allocated fades once the GPUs' samples cover less than half of that: wait for the end,
  # so that the page and the API the browser compares it with answer alike.
  wait_until 150 "the end of job $job at the server" bash -c \
    "api GET /api/v1/computes/$1/jobs/$job | jq_holds '.end_ms > 0' >/dev/null" >&2
  wait_until 60 "the over_allocated verdict of job $job" bash -c \
    "api GET /api/v1/computes/$1/jobs/$job/verdicts | jq_holds '[.verdicts[].code] | index(\"over_allocated\") != null' >/dev/null" >&2
  # A trace segment of the job, sent as the installed controller sends a relayed one (with its
  # credential, to POST /dp/v1/segments): the job page lists it for download.
  local credential
  credential="$("$TESTCLUSTER" exec "$ctl" -- cat /var/lib/slurm/.expanse/config.json | jq -r .credential)"
  jq -cn --arg job "$job" --arg host "$w1" --argjson start "$(($(date +%s%3N) - 10000))" \
    '{traceEvents: [{ph: "X", cat: "kernel", name: "gemm", pid: 4242, tid: 1000000,
    ts: ($start * 1000 + 100), dur: 2000}], otherData: {format: "expanse-trace-segment/1",
    job_id: $job, host: $host, pid: 4242, uid: 0, window_start_ms: $start,
    window_end_ms: ($start + 10000), trigger: {id: ($job + "-1-GPU-x"), reason: "gpu_idle"}, events: 1}}' \
    >"$DIR/segment.json"
  curl -sS --fail-with-body --cacert "$CA_FILE" -H "Authorization: Bearer $credential" \
    -H 'Content-Type: application/json' --data-binary @"$DIR/segment.json" "$DP_URL/dp/v1/segments" >&2 ||
    return 1
  # And two windows of a capture agent's aggregates (this job loads no CUDA), in a batch of a
  # stream of their own, as the controller uploads what its workers' agents spooled: the page
  # shows the kernels and each window.
  jq -cn --arg job "$job" --arg host "$w1" --argjson start "$(($(date +%s%3N) - 20000))" '
    def window($i; $gemms): {format: "expanse-capture-aggregate/1", job_id: $job, rank: "0",
      host: $host, pid: 4242, uid: 0, window_start_ms: ($start + $i * 10000),
      window_end_ms: ($start + ($i + 1) * 10000), devices: [0],
      kernels: {count: ($gemms + 1), gpu_ns: ($gemms * 100000000 + 500000),
        top: [{name: "void gemm<float, 128>(float*)", count: $gemms, gpu_ns: ($gemms * 100000000)},
              {name: "relu", count: 1, gpu_ns: 500000}], other: {count: 0, gpu_ns: 0}},
      memcpy: {htod: {count: 1, bytes: 3145728, gpu_ns: 1000}},
      sync: {device: {count: 2, wall_ns: 4000000}}, nvtx: {ranges: [], marks: 0},
      dropped_records: 0};
    {version: 1, stream: "console-test-capture", sequence: 1,
     capture_aggregates: [window(0; 20), window(1; 30)]}' >"$DIR/capture.json"
  curl -sS --fail-with-body --cacert "$CA_FILE" -H "Authorization: Bearer $credential" \
    -H 'Content-Type: application/json' --data-binary @"$DIR/capture.json" "$DP_URL/dp/v1/ingest" >&2 ||
    return 1
  # And ten seconds of hardware counters of the job's first GPU on $w1, as a worker's CUPTI
  # helper reports them (this cluster has no helper): the job page charts them under their
  # source, the jobs list's SM/tensor column sums them up.
  local detail
  detail="$(api GET "/api/v1/computes/$1/jobs/$job")" || return 1
  jq -c --arg host "$w1" '[.gpus[] | select(.host == $host)][0] as $gpu |
    def series($metric; $v): {host: $host, device: $gpu.gpu_uuid, metric: $metric,
      t0: ($gpu.from_ms + 2000), dt: ([0] + [range(9) | 1000]), v: [range(10) | $v]};
    {version: 1, stream: "console-test-counters", sequence: 1,
     series: [series("gpu.sm_active"; 0.62), series("gpu.tensor_active"; 0.41)]}' \
    <<<"$detail" >"$DIR/counters.json" || return 1
  curl -sS --fail-with-body --cacert "$CA_FILE" -H "Authorization: Bearer $credential" \
    -H 'Content-Type: application/json' --data-binary @"$DIR/counters.json" "$DP_URL/dp/v1/ingest" >&2 ||
    return 1
  echo "$job"
}
console_hook() {
  case "$1" in
    install) console_install "$2" ;;
    job) console_job "$2" ;;
    *) echo "console_hook: unknown step $1" >&2; return 2 ;;
  esac
}
export -f console_hook console_install console_job submit wait_job_done job_state job_finished wait_until api fail
export DIR CA_FILE CP_URL DP_URL API_TOKEN TESTCLUSTER ctl w1 w2 SLURM_CONF EXPANSE prefix EXPANSE_TC_WORKERS TEST_NAME

cd "$REPO_ROOT/console"
EXPANSE_CONSOLE_URL="$CP_URL" EXPANSE_CONSOLE_EMAIL=ops@acme.example \
  EXPANSE_CONSOLE_PASSWORD='test pass' EXPANSE_CONSOLE_VIEWER_EMAIL=viewer@acme.example \
  EXPANSE_CONSOLE_VIEWER_PASSWORD="$viewer_password" EXPANSE_CONSOLE_PREFIX="$prefix" \
  EXPANSE_CONSOLE_HOOK='console_hook' EXPANSE_CONSOLE_ARTIFACTS="$artifacts" \
  node tests/console_flow.mjs || fail "the browser flow failed (screenshots in $artifacts)"
pass "console flow in Chromium; screenshots in $artifacts"
