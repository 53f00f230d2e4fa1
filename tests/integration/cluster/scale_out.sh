#!/usr/bin/env bash
# The scale-out tier on the real SLURM cluster (issue 21, docs/scaling.md): two expanse-server
# replicas on one real PostgreSQL, telemetry in a real VictoriaMetrics (--telemetry-store
# remote), HAProxy from Debian in front of both planes. Then, as an operator would:
#   - the controller installs through the balancer (`expanse compute install` from a signed
#     release the replicas mirror), heartbeats and uploads through it;
#   - a GPU job runs on both workers; the replica holding the daemon's data-plane connection is
#     killed -9 during ingest and comes back; the console signs in through the balancer
#     while it is away;
#   - PostgreSQL is stopped for 30 s during ingest: the replicas answer 503 with Retry-After,
#     the daemon's outbox keeps its batches (its log says so), and drains once it is back;
#   - then every sample each worker's sampler took is in VictoriaMetrics exactly once (its own
#     tick count, per GPU, at distinct timestamps), and each replica's API gives the job's
#     timeline with exactly the samples VictoriaMetrics holds for the job's time;
#   - an install token exchanged through both replicas at once gives one credential.
source "$(dirname "$0")/../lib/testlib.sh"
BUILD="${EXPANSE_BUILD_DIR:?EXPANSE_BUILD_DIR (the build with expanse, expanse-daemon, expanse-server)}"
SERVER="$BUILD/bin/expanse-server"
EXPANSE="$BUILD/bin/expanse"
FAKE_NVML="$BUILD/fakes/nvml/libnvidia-ml.so.1"
source "$(dirname "$0")/../lib/expanse_server.sh"
source "$(dirname "$0")/../lib/install_env.sh"
source "$(dirname "$0")/../lib/postgres.sh"
source "$(dirname "$0")/../lib/victoriametrics.sh"

DIR="$(shared_scratch)"
prefix="$DIR/prefix"
ctl="$EXPANSE_TC_CONTROLLER"
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"
declare -A cp_port dp_port replica_pid
haproxy_pid=""

pg_paused=""
cleanup() {
  [[ -z "$pg_paused" ]] || pg_resume || true  # the uninstall deprovisions through the replicas
  if [[ -e "$DIR/installed" ]]; then
    "$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" "$EXPANSE" compute uninstall \
      --type slurm --role controller --shared-prefix "$prefix" --slurm-conf "$SLURM_CONF" \
      >"$DIR/uninstall.log" 2>&1 || true
  fi
  host_systemd_off "$ctl" || true
  local host
  for host in $EXPANSE_TC_WORKERS; do
    "$TESTCLUSTER" exec "$host" -- pkill -f "$prefix/bin/[e]xpanse-daemon" 2>/dev/null || true
    "$TESTCLUSTER" exec "$host" -- rm -f /etc/expanse/fake-nvml.json 2>/dev/null || true
  done
  for host in $ctl $EXPANSE_TC_WORKERS; do host_daemon_env_restore "$host"; done
  [[ -z "$haproxy_pid" ]] || { kill "$haproxy_pid" 2>/dev/null; wait "$haproxy_pid" 2>/dev/null; } || true
  for n in "${!replica_pid[@]}"; do kill "${replica_pid[$n]}" 2>/dev/null || true; done
  for n in "${!replica_pid[@]}"; do wait "${replica_pid[$n]}" 2>/dev/null || true; done
  pg_stop
  vm_stop
  restore_slurm_conf
  [[ -z "${passed:-}" ]] || rm -rf "$DIR"
}
save_slurm_conf
trap cleanup EXIT

# --- the tier: PostgreSQL, VictoriaMetrics, two replicas, HAProxy ------------------------------
pg_start || fail "PostgreSQL did not start"
vm_start || fail "VictoriaMetrics did not start"
EXPANSE_ADMIN_PASSWORD='test pass' "$SERVER" admin bootstrap --db "$PG_URI" --org acme \
  --org-name Acme --email ops@acme.example >"$DIR/boot.json" || fail "bootstrap on PostgreSQL"
API_TOKEN="$(jq -r .api_token "$DIR/boot.json")"
make_signed_release "$DIR" 1.0.0

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Replica N on fixed ports, so a restarted one comes back where the balancer expects it.
start_replica() {
  local n="$1" log="$DIR/serve$1.log" i
  "$SERVER" serve --database "$PG_URI" --telemetry-store remote --telemetry-url "$VM_URL" \
    --control-listen "127.0.0.1:${cp_port[$n]}" --data-listen "127.0.0.1:${dp_port[$n]}" \
    --tls-self-signed "$DIR/tls" --credential-rate 1000 --releases-dir "$DIR/releases" \
    >>"$log" 2>&1 &
  replica_pid[$n]=$!
  for i in $(seq 1 300); do
    [[ "$(grep -c 'console API' "$log")" -ge "$2" ]] && return 0
    sleep 0.1
  done
  fail "replica $n did not start: $(tail -5 "$log")"
}
for n in 1 2; do
  cp_port[$n]="$(free_port)"
  dp_port[$n]="$(free_port)"
  start_replica "$n" 1
done
CA_FILE="$DIR/tls/ca.pem"

# Both planes through the balancer: TLS passed through (the replicas hold the certificate), a
# replica in rotation while its /readyz answers, as docs/scaling.md has it.
lb_cp="$(free_port)"
lb_dp="$(free_port)"
backend() { # NAME PORT_ARRAY
  local -n ports="$2"
  printf 'backend %s\n  balance roundrobin\n  option httpchk GET /readyz\n  http-check expect status 200\n' "$1"
  printf '  server r1 127.0.0.1:%s check check-ssl verify none inter 300 fall 2 rise 1\n' "${ports[1]}"
  printf '  server r2 127.0.0.1:%s check check-ssl verify none inter 300 fall 2 rise 1\n' "${ports[2]}"
}
{
  printf 'global\n  maxconn 256\ndefaults\n  mode tcp\n  retries 3\n  option redispatch\n'
  printf '  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n'
  printf 'frontend control\n  bind 127.0.0.1:%s\n  default_backend control_replicas\n' "$lb_cp"
  printf 'frontend data\n  bind 127.0.0.1:%s\n  default_backend data_replicas\n' "$lb_dp"
  backend control_replicas cp_port
  backend data_replicas dp_port
} >"$DIR/haproxy.cfg"
haproxy -db -f "$DIR/haproxy.cfg" >"$DIR/haproxy.log" 2>&1 &
haproxy_pid=$!
CP_URL="https://127.0.0.1:$lb_cp"
DP_URL="https://127.0.0.1:$lb_dp"
planes_ready() { curl -fsS --cacert "$CA_FILE" "$CP_URL/readyz" && curl -fsS --cacert "$CA_FILE" "$DP_URL/readyz"; }
wait_until 30 "both planes through HAProxy" planes_ready
publish_release "$DIR" || fail "release manifest"
pass "PostgreSQL, VictoriaMetrics, replicas r1 and r2, HAProxy at $CP_URL and $DP_URL"

# --- the hosts: simulated GPUs on the workers, daemon.env, the installer through the balancer ---
mkdir -p "$DIR/fake-nvml" "$prefix"
cp "$FAKE_NVML" "$DIR/fake-nvml/"
chmod -R a+rX "$DIR/fake-nvml"
declare -A gpus
for w in $EXPANSE_TC_WORKERS; do
  read -r lo hi < <(grep "NodeName=$w " "$(dirname "$SLURM_CONF")/gres.conf" |
    grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' ')
  gpus[$w]="GPU-$w-minor$lo GPU-$w-minor$hi"
  "$TESTCLUSTER" exec "$w" -- bash -c "mkdir -p /etc/expanse && cat >/etc/expanse/fake-nvml.json" <<JSON
{"gpus": [{"uuid": "GPU-$w-minor$lo", "minor": $lo, "sm_util": 71, "memory_used_mib": 4096},
          {"uuid": "GPU-$w-minor$hi", "minor": $hi, "sm_util": 3, "memory_used_mib": 0}]}
JSON
  # No sampler of an earlier test may hold the node's lock: this test counts its sampler's ticks.
  # Only this host's (its network namespace): another test cluster may run beside this one.
  # shellcheck disable=SC2016
  "$TESTCLUSTER" exec "$w" -- bash -c 'pkill --ns $$ --nslist net -f "[e]xpanse-daemon.*--role sampler"' 2>/dev/null || true
done
for host in $ctl $EXPANSE_TC_WORKERS; do
  host_daemon_env_write "$host" <<ENV
SLURM_CONF=$SLURM_CONF
SSL_CERT_FILE=$CA_FILE
EXPANSE_NVML_LIBRARY=$DIR/fake-nvml/libnvidia-ml.so.1
ENV
done
host_systemd_on "$ctl"

COMPUTE="$(api POST /api/v1/orgs/acme/computes '{"name":"big","type":"slurm"}' | jq -r .id)"
[[ "$COMPUTE" == cmp_* ]] || fail "compute through the balancer"
token="$(api POST "/api/v1/computes/$COMPUTE/install-tokens" | jq -r .token)"
touch "$DIR/installed"
out="$(EXPANSE_INSTALL_TOKEN="$token" "$TESTCLUSTER" exec "$ctl" -- env SSL_CERT_FILE="$CA_FILE" \
  "$EXPANSE" compute install --type slurm --shared-prefix "$prefix" --releases-url "$CP_URL/releases" \
  --cosign-key "$DIR/release.pub" --control-plane "$CP_URL" --data-plane "$DP_URL" \
  --slurm-conf "$SLURM_CONF" --heartbeat-timeout 60s --patch-slurm-conf=true \
  --daemon-version 1.0.0 2>&1)" || fail "install through the balancer failed: $out"
assert_match "heartbeat received: compute $COMPUTE is active" "$out" "the install's first heartbeat, through the balancer"

# --- a GPU job on both workers; replica killed -9 during ingest; PostgreSQL away for 30 s ------
sampler_log_lines() { "$TESTCLUSTER" exec "$1" -- bash -c 'cat /var/lib/expanse/sampler.log 2>/dev/null | wc -l'; }
declare -A log_from
for w in $EXPANSE_TC_WORKERS; do log_from[$w]="$(sampler_log_lines "$w")"; done
job="$(submit -N 2 -w "$w1,$w2" --gres=gpu:1 -o /dev/null --wrap 'sleep 75')"
job_sampled() { api GET "/api/v1/computes/$COMPUTE/jobs/$job/timeline" | jq_holds '[.series[].points | length] | length == 2 and min > 0'; }
wait_until 90 "samples of job $job through the balancer" job_sampled

# The replica the daemon's uploads reach now: the one holding the balancer's connection for
# them (the controller uploads every 10 s; a replica closes an idle connection after 2 s).
connections() { ss -Htn state established "( sport = :${dp_port[$1]} )" | grep -c . || true; }
victim=""
for _ in $(seq 1 300); do
  for n in 1 2; do (($(connections "$n") > 0)) && { victim=$n; break 2; }; done
  sleep 0.1
done
[[ -n "$victim" ]] || fail "no replica held a data-plane connection from the balancer in 30 s"
other=$((3 - victim))
journal() { "$TESTCLUSTER" exec "$ctl" -- journalctl -u expanse-daemon; }
count_in_journal() { local log; log="$(journal)"; grep -c -- "$1" <<<"$log" || true; }
kill -9 "${replica_pid[$victim]}"
wait "${replica_pid[$victim]}" 2>/dev/null || true
login="$(curl -sS --max-time 20 --cacert "$CA_FILE" -H 'Content-Type: application/json' \
  --data '{"email":"ops@acme.example","password":"test pass"}' "$CP_URL/api/v1/session")"
[[ "$(jq -r '.csrf_token // empty' <<<"$login")" != "" ]] || fail "console sign-in through the balancer with r$victim down: $login"
sleep 12  # at least one flush of the controller (10 s) goes to the survivor
start_replica "$victim" 2
pass "r$victim killed -9 while it held the daemon's uploads, and started again; the console signed in through the balancer meanwhile"

credential="$("$TESTCLUSTER" exec "$ctl" -- jq -r .credential /var/lib/slurm/.expanse/config.json)"
# No failure streak from the kill still open (each streak logs one failure and one recovery).
uploads_healthy() { (($(count_in_journal 'upload failed (') == $(count_in_journal 'uploads resumed after'))); }
wait_until 60 "the daemon's uploads to recover from the kill" uploads_healthy
failed_before="$(count_in_journal 'upload failed (')"
resumed_before="$(count_in_journal 'uploads resumed after')"
pg_paused=1
pg_pause
ingest_headers="$(curl -sS --max-time 20 --cacert "$CA_FILE" -o /dev/null -D - \
  -H "Authorization: Bearer $credential" -H 'Content-Type: application/json' \
  --data '{"version":1,"stream":"probe","sequence":1,"series":[]}' \
  "https://127.0.0.1:${dp_port[$other]}/dp/v1/ingest")"
[[ "$ingest_headers" =~ HTTP/[0-9.]+\ 503 ]] || fail "ingest with PostgreSQL down: $ingest_headers"
grep -qi '^retry-after: [0-9]' <<<"$ingest_headers" || fail "no Retry-After with PostgreSQL down: $ingest_headers"
sleep 30
pg_resume
pg_paused=""
pass "PostgreSQL stopped for 30 s during ingest: the data plane answered 503 with Retry-After"

wait_job_done "$job" 120
assert_eq COMPLETED "$(job_state "$job")" "job $job"
# The daemon met the outage (a failed upload logged after PostgreSQL went away, with its
# promise to keep the batch) and came through it (uploads resumed after that).
failed_after="$(count_in_journal 'upload failed (.*); retrying with backoff, nothing is dropped')"
((failed_after > failed_before)) ||
  fail "the daemon logged no failed upload while PostgreSQL was away: $(journal | tail -5)"
pass "the daemon's log: upload failed while PostgreSQL was away, nothing dropped"
uploads_resumed() { (($(count_in_journal 'uploads resumed after') > resumed_before)); }
wait_until 120 "the daemon's uploads to resume after PostgreSQL came back" uploads_resumed

# --- counts: every sample each sampler took, once ----------------------------------------------
# (The hosts share one process namespace: each sampler is found by its node's pid file.)
declare -A ticks
for w in $EXPANSE_TC_WORKERS; do
  pid="$("$TESTCLUSTER" exec "$w" -- cat /var/lib/expanse/sampler/sampler.pid | awk '{print $1}' || true)"
  [[ "$(readlink "/proc/$pid/exe")" == "$prefix/bin/expanse-daemon" ]] || fail "no sampler runs on $w (pid file: $pid)"
  kill -TERM "$pid"
  wait_until 30 "the sampler on $w to stop" test ! -e "/proc/$pid"
  ticks[$w]="$("$TESTCLUSTER" exec "$w" -- tail -n +"$((log_from[$w] + 1))" /var/lib/expanse/sampler.log |
    grep -oP 'sampler stopped after \K[0-9]+' | tail -1 || true)"
  [[ -n "${ticks[$w]}" ]] || fail "no tick count in $w's sampler log"
done
# Raw samples of one GPU series in VictoriaMetrics: one timestamp (ms) per line.
vm_samples() { # HOST UUID
  curl -fsS "$VM_URL/internal/force_flush" >/dev/null
  curl -fsS "$VM_URL/api/v1/export" --data-urlencode \
    "match[]={__name__=\"expanse_gpu_sm_util\",compute=\"$COMPUTE\",host=\"$1\",device=\"$2\"}" |
    jq -r '.timestamps[]'
}
all_stored() {
  local w g
  for w in $EXPANSE_TC_WORKERS; do
    for g in ${gpus[$w]}; do
      [[ "$(vm_samples "$w" "$g" | grep -c . || true)" -ge "${ticks[$w]}" ]] || return 1
    done
  done
}
wait_until 180 "every sample the samplers took in VictoriaMetrics" all_stored
sleep 3  # anything still in flight would land now
for w in $EXPANSE_TC_WORKERS; do
  for g in ${gpus[$w]}; do
    stamps="$(vm_samples "$w" "$g")"
    n="$(grep -c . <<<"$stamps" || true)"
    distinct="$(sort -u <<<"$stamps" | grep -c . || true)"
    [[ "$n" == "${ticks[$w]}" && "$distinct" == "$n" ]] ||
      fail "$w's sampler took ${ticks[$w]} samples of $g; VictoriaMetrics holds $n ($distinct distinct)"
  done
done
pass "VictoriaMetrics holds every sample the samplers took, once: $w1 ${ticks[$w1]}, $w2 ${ticks[$w2]} per GPU"

# The job's timeline through each replica: exactly the samples VictoriaMetrics holds for the
# job's GPUs in the job's time [start, end).
job_ended() { api GET "/api/v1/computes/$COMPUTE/jobs/$job" | jq_holds '.end_ms > 0 and all(.gpus[]; .to_ms > 0)'; }
wait_until 120 "the end of job $job at the server" job_ended
record="$(api GET "/api/v1/computes/$COMPUTE/jobs/$job")"
start_ms="$(jq -r .start_ms <<<"$record")"
end_ms="$(jq -r .end_ms <<<"$record")"
want=0
while read -r host uuid; do
  in_job="$(vm_samples "$host" "$uuid" | awk -v a="$start_ms" -v b="$end_ms" '$1 >= a && $1 < b' | grep -c . || true)"
  want=$((want + in_job))
done < <(jq -r '.gpus[] | "\(.host) \(.gpu_uuid)"' <<<"$record")
((want > 0)) || fail "VictoriaMetrics holds no sample of job $job's GPUs in its time"
for n in 1 2; do
  got="$(curl -sS --max-time 20 --cacert "$CA_FILE" -H "Authorization: Bearer $API_TOKEN" \
    "https://127.0.0.1:${cp_port[$n]}/api/v1/computes/$COMPUTE/jobs/$job/timeline?metric=gpu.sm_util&points=10000" |
    jq '[.series[].points[]] | length')"
  assert_eq "$want" "$got" "samples in job $job's timeline through r$n"
done
pass "job $job's timeline through r1 and r2: the $want samples VictoriaMetrics holds for it"

# --- one install token, exchanged through both replicas at once: one credential ---------------
other_compute="$(api POST /api/v1/orgs/acme/computes '{"name":"other","type":"slurm"}' | jq -r .id)"
token2="$(api POST "/api/v1/computes/$other_compute/install-tokens" | jq -r .token)"
body="{\"token\":\"$token2\",\"hostname\":\"$ctl\",\"daemon_version\":\"1.0.0\",\"role\":\"controller\"}"
exchanges=()
for n in 1 2; do
  curl -sS --max-time 20 --cacert "$CA_FILE" -d "$body" \
    "https://127.0.0.1:${cp_port[$n]}/cp/v1/install-tokens/exchange" >"$DIR/exchange$n.json" &
  exchanges+=($!)
done
wait "${exchanges[@]}"
credentials="$(cat "$DIR"/exchange?.json | jq -r '.credential // empty' | grep -c '^exp_cc_' || true)"
assert_eq 1 "$credentials" "credentials from one token exchanged through both replicas at once"
assert_eq install_token_used "$(cat "$DIR"/exchange?.json | jq -r '.error.code // empty')" "the other exchange's refusal"
dead="$(api GET "/api/v1/computes/$COMPUTE" | jq -r '.heartbeat.outbox.dead_lettered_batches // 0')"
assert_eq 0 "$dead" "batches the daemon dead-lettered"
passed=1
