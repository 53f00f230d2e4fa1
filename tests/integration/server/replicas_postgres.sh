#!/usr/bin/env bash
# Two expanse-server replicas on one real PostgreSQL (Debian's package, started by the test):
# what must happen once happens once whichever replica a request reaches (docs/scaling.md).
#   - the organisation bootstrapped with `admin bootstrap --db postgresql://…`;
#   - an install token exchanged by both replicas at once: one credential, the other refused;
#   - that credential's heartbeat through the other replica; a re-issued token's exchange
#     revokes it on both;
#   - a console session made on one replica works on the other, and signing out on the other
#     ends it on the first;
#   - a job ingested through one replica is listed by the other;
#   - the database stopped: 503 with Retry-After; started again: served again, no restart;
#   - HAProxy from Debian in front (TLS passed through, /readyz as its check): every request
#     answered while one replica is killed -9 and when it is back; a token exchanged twice
#     through it gives one credential;
#   - the database's schema version is the store's newest, the same one SQLite's would have.
# Usage: replicas_postgres.sh BUILD_DIR
set -euo pipefail
BUILD="${1:?build directory}"
SERVER="$BUILD/bin/expanse-server"
TEST_NAME=server_replicas_postgres
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib/postgres.sh"
fail() {
  printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2
  exit 1
}
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }

DIR="$(mktemp -d "${TMPDIR:-/tmp}/expanse-replicas.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pg_stop
  rm -rf "$DIR"
}
trap cleanup EXIT
pg_start
pass "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') at $PG_URI"

EXPANSE_ADMIN_PASSWORD='test pass' "$SERVER" admin bootstrap --db "$PG_URI" --org acme \
  --org-name Acme --email ops@acme.example >"$DIR/boot.json"
API_TOKEN="$(jq -r .api_token "$DIR/boot.json")"
[[ "$API_TOKEN" == exp_at_* ]] || fail "bootstrap on PostgreSQL: $(cat "$DIR/boot.json")"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Replica N: its own ports and telemetry directory, the shared database. Ports are fixed so a
# restarted replica comes back where the balancer expects it.
declare -A cp_port dp_port replica_pid
start_replica() {
  local n="$1" log="$DIR/serve$1.log"
  : >"$log"
  "$SERVER" serve --database "$PG_URI" --tsdb-dir "$DIR/tsdb$n" --control-listen "127.0.0.1:${cp_port[$n]}" \
    --data-listen "127.0.0.1:${dp_port[$n]}" --tls-self-signed "$DIR/tls" --credential-rate 1000 \
    --metrics-token-file "$DIR/metrics.token" >>"$log" 2>&1 &
  replica_pid[$n]=$!
  pids+=($!)
  local i
  for i in $(seq 1 150); do grep -q 'console API' "$log" && return 0; sleep 0.1; done
  fail "replica $n did not start: $(cat "$log")"
}
(umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$DIR/metrics.token")
for n in 1 2; do
  cp_port[$n]="$(free_port)"
  dp_port[$n]="$(free_port)"
  start_replica "$n"
done
A="https://127.0.0.1:${cp_port[1]}"
B="https://127.0.0.1:${cp_port[2]}"
DP_A="https://127.0.0.1:${dp_port[1]}"
CA="$DIR/tls/ca.pem"
pass "replicas at $A and $B"

# HAProxy from Debian in front of both control planes: TLS passes through (the replicas' own
# certificate), and a replica is in rotation while its /readyz answers 200.
lb_port="$(free_port)"
cat >"$DIR/haproxy.cfg" <<CFG
global
  maxconn 256
defaults
  mode tcp
  retries 3
  option redispatch
  timeout connect 2s
  timeout client 30s
  timeout server 30s
frontend control
  bind 127.0.0.1:$lb_port
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  server a 127.0.0.1:${cp_port[1]} check check-ssl verify none inter 300 fall 2 rise 1
  server b 127.0.0.1:${cp_port[2]} check check-ssl verify none inter 300 fall 2 rise 1
CFG
haproxy -db -f "$DIR/haproxy.cfg" >"$DIR/haproxy.log" 2>&1 &
pids+=($!)
LB="https://127.0.0.1:$lb_port"
k=(curl -sS --max-time 20 --cacert "$CA")
api() { # URL METHOD PATH [BODY]
  local url="$1" method="$2" path="$3" body="${4:-}"
  if [[ "$method" == POST ]]; then
    "${k[@]}" -H "Authorization: Bearer $API_TOKEN" -X POST -H 'Content-Type: application/json' \
      --data "${body:-{\}}" "$url$path"
  else
    "${k[@]}" -H "Authorization: Bearer $API_TOKEN" "$url$path"
  fi
}

compute="$(api "$A" POST /api/v1/orgs/acme/computes '{"name":"c1","type":"slurm"}' | jq -r .id)"
[[ "$compute" == cmp_* ]] || fail "compute through A"
[[ "$(api "$B" GET "/api/v1/computes/$compute" | jq -r .id)" == "$compute" ]] ||
  fail "the compute made through A is not known to B"

# The same install token exchanged through both replicas at the same moment.
token="$(api "$B" POST "/api/v1/computes/$compute/install-tokens" | jq -r .token)"
body="{\"token\":\"$token\",\"hostname\":\"ctl\",\"daemon_version\":\"0.1.0\",\"role\":\"controller\"}"
"${k[@]}" -d "$body" "$A/cp/v1/install-tokens/exchange" >"$DIR/x1.json" &
x1=$!
"${k[@]}" -d "$body" "$B/cp/v1/install-tokens/exchange" >"$DIR/x2.json" &
x2=$!
wait "$x1" "$x2"
credentials="$(cat "$DIR/x1.json" "$DIR/x2.json" | jq -r '.credential // empty' | grep -c '^exp_cc_' || true)"
refusals="$(cat "$DIR/x1.json" "$DIR/x2.json" | jq -r '.error.code // empty')"
[[ "$credentials" == 1 ]] || fail "one install token exchanged through both replicas gave $credentials credentials: $(cat "$DIR"/x*.json)"
[[ "$refusals" == install_token_used ]] || fail "the losing exchange: $refusals"
credential="$(cat "$DIR/x1.json" "$DIR/x2.json" | jq -r '.credential // empty')"
pass "one install token raced through both replicas: one credential, the other refused ($refusals)"

heartbeat() { # URL CREDENTIAL -> HTTP status
  "${k[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" \
    -d '{"version":1,"daemon_version":"0.1.0","controller_host":"ctl"}' "$1/cp/v1/heartbeat"
}
[[ "$(heartbeat "$A" "$credential")" == 200 && "$(heartbeat "$B" "$credential")" == 200 ]] ||
  fail "the credential's heartbeats through both replicas"
[[ "$(api "$A" GET "/api/v1/computes/$compute" | jq -r .state)" == active ]] || fail "compute not active"
pass "the credential works through both replicas; the compute is active"

# A re-issued token's exchange (through B) replaces the credential: refused on both at once.
token2="$(api "$A" POST "/api/v1/computes/$compute/install-tokens" | jq -r .token)"
body2="{\"token\":\"$token2\",\"hostname\":\"ctl\",\"daemon_version\":\"0.1.0\",\"role\":\"controller\"}"
credential2="$("${k[@]}" -d "$body2" "$B/cp/v1/install-tokens/exchange" | jq -r .credential)"
[[ "$credential2" == exp_cc_* ]] || fail "second exchange"
for url in "$A" "$B"; do
  [[ "$(heartbeat "$url" "$credential")" == 401 ]] || fail "the replaced credential still works at $url"
  [[ "$(heartbeat "$url" "$credential2")" == 200 ]] || fail "the new credential at $url"
done
pass "a replaced credential is refused by both replicas at once"

# A console session: signed in on A, used and ended on B.
login="$("${k[@]}" -c "$DIR/cookies" -H 'Content-Type: application/json' \
  --data '{"email":"ops@acme.example","password":"test pass"}' "$A/api/v1/session")"
csrf="$(jq -r .csrf_token <<<"$login")"
[[ "$("${k[@]}" -b "$DIR/cookies" "$B/api/v1/me" | jq -r .email)" == ops@acme.example ]] ||
  fail "the session made on A is unknown to B"
[[ "$("${k[@]}" -o /dev/null -w '%{http_code}' -b "$DIR/cookies" -H "X-CSRF-Token: $csrf" -X DELETE "$B/api/v1/session")" == 200 ]] ||
  fail "signing out on B"
[[ "$("${k[@]}" -o /dev/null -w '%{http_code}' -b "$DIR/cookies" "$A/api/v1/me")" == 401 ]] ||
  fail "the session signed out on B still works on A"
pass "a session made on A works on B, and signing out on B ends it on A"

# A job ingested through A's data plane is listed through B.
now_ms=$(($(date +%s) * 1000))
batch="{\"version\":1,\"stream\":\"telemetry\",\"sequence\":1,\"series\":[],
  \"jobs\":[{\"job_id\":\"77\",\"state\":\"RUNNING\",\"user\":\"ana\",\"account\":\"ml\",\"partition\":\"gpu\",
             \"req_gpus\":1,\"start_ms\":$((now_ms - 60000)),\"end_ms\":0,\"observed_ms\":$now_ms}]}"
status="$("${k[@]}" -o "$DIR/ingest.json" -w '%{http_code}' -H "Authorization: Bearer $credential2" \
  -H 'Content-Type: application/json' --data "$batch" "$DP_A/dp/v1/ingest")"
[[ "$status" == 200 ]] || fail "ingest through A: $status $(cat "$DIR/ingest.json")"
[[ "$(api "$B" GET "/api/v1/orgs/acme/jobs" | jq -r '[.jobs[].job_id] | join(",")')" == 77 ]] ||
  fail "job 77 ingested through A is not listed by B"
pass "a job ingested through A is listed by B"

# The database away: the replicas answer 503 with Retry-After (a daemon's outbox keeps the
# batch and sends it again), and serve again once it is back, without a restart of their own.
pg_pause
headers="$("${k[@]}" -o /dev/null -D - -H "Authorization: Bearer $credential2" \
  -H 'Content-Type: application/json' --data "$batch" "$DP_A/dp/v1/ingest")"
[[ "$headers" =~ HTTP/[0-9.]+\ 503 ]] || fail "ingest with the database down: $headers"
grep -qi '^retry-after: [0-9]' <<<"$headers" || fail "no Retry-After on the 503: $headers"
[[ "$(heartbeat "$B" "$credential2")" == 503 ]] || fail "heartbeat with the database down"
[[ "$("${k[@]}" -o /dev/null -w '%{http_code}' "$B/readyz")" == 503 ]] || fail "/readyz with the database down"
[[ "$("${k[@]}" -o /dev/null -w '%{http_code}' "$B/healthz")" == 200 ]] || fail "/healthz with the database down"
scrape() { "${k[@]}" -H "Authorization: Bearer $(cat "$DIR/metrics.token")" "$1/metrics"; }
grep -qx 'expanse_store_up 0' <<<"$(scrape "$B")" || fail "/metrics with the database down: $(scrape "$B" | head -20)"
pg_resume
status="$("${k[@]}" -o "$DIR/ingest.json" -w '%{http_code}' -H "Authorization: Bearer $credential2" \
  -H 'Content-Type: application/json' --data "${batch/\"sequence\":1/\"sequence\":2}" "$DP_A/dp/v1/ingest")"
[[ "$status" == 200 ]] || fail "ingest once the database is back: $status $(cat "$DIR/ingest.json")"
[[ "$(heartbeat "$B" "$credential2")" == 200 ]] || fail "heartbeat once the database is back"
[[ "$("${k[@]}" -o /dev/null -w '%{http_code}' "$B/readyz")" == 200 ]] || fail "/readyz once the database is back"
metrics="$(scrape "$B")"
grep -qx 'expanse_store_up 1' <<<"$metrics" || fail "/metrics once the database is back: $metrics"
grep -q "^expanse_compute_up{compute=\"$compute\",state=\"active\"} 1$" <<<"$metrics" ||
  fail "/metrics lacks the compute: $metrics"
grep -qE '^expanse_heartbeats_total [1-9]' <<<"$metrics" || fail "/metrics counted no heartbeat on B: $metrics"
pass "database stopped: 503 with Retry-After from both replicas, /readyz 503 (/healthz 200), /metrics expanse_store_up 0; back: both serve again"

# Through the balancer: every request answered while one replica is killed (-9) and brought
# back; the balancer's readiness check takes it out and puts it back.
me_through_lb() { "${k[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $API_TOKEN" "$LB/api/v1/me"; }
wait_until_ok() { local i; for i in $(seq 1 100); do [[ "$(me_through_lb)" == 200 ]] && return 0; sleep 0.1; done; return 1; }
wait_until_ok || fail "nothing answers through HAProxy: $(cat "$DIR/haproxy.log")"
kill -9 "${replica_pid[1]}"
wait "${replica_pid[1]}" 2>/dev/null || true
answered=0
for i in $(seq 1 20); do [[ "$(me_through_lb)" == 200 ]] && answered=$((answered + 1)); done
[[ "$answered" == 20 ]] || fail "with replica A killed, $answered of 20 requests answered through HAProxy"
# An install token exchanged twice through the balancer: one credential.
token3="$(api "$LB" POST "/api/v1/computes/$compute/install-tokens" | jq -r .token)"
body3="{\"token\":\"$token3\",\"hostname\":\"ctl\",\"daemon_version\":\"0.1.0\",\"role\":\"controller\"}"
start_replica 1
for i in $(seq 1 100); do grep -q 'replicas/a is UP' "$DIR/haproxy.log" && break; sleep 0.1; done
grep -q 'replicas/a is DOWN' "$DIR/haproxy.log" || fail "HAProxy never took replica A out: $(cat "$DIR/haproxy.log")"
grep -q 'replicas/a is UP' "$DIR/haproxy.log" || fail "HAProxy never put replica A back: $(cat "$DIR/haproxy.log")"
"${k[@]}" -d "$body3" "$LB/cp/v1/install-tokens/exchange" >"$DIR/y1.json" &
y1=$!
"${k[@]}" -d "$body3" "$LB/cp/v1/install-tokens/exchange" >"$DIR/y2.json" &
y2=$!
wait "$y1" "$y2"
[[ "$(cat "$DIR/y1.json" "$DIR/y2.json" | jq -r '.credential // empty' | grep -c '^exp_cc_' || true)" == 1 ]] ||
  fail "one token exchanged twice through HAProxy: $(cat "$DIR"/y*.json)"
answered=0
for i in $(seq 1 20); do [[ "$(me_through_lb)" == 200 ]] && answered=$((answered + 1)); done
[[ "$answered" == 20 ]] || fail "after replica A came back, $answered of 20 answered through HAProxy"
pass "through HAProxy: 20 of 20 answered with replica A killed, again once it was back; a token exchanged twice through it gives one credential"

# One schema, the store's newest, applied once though two replicas and the bootstrap opened it.
versions="$(pg_as "$PG_BIN/psql" -h "$PG_DIR" -U postgres -d expanse -Atc \
  'SELECT string_agg(version::text, $$,$$ ORDER BY version) FROM schema_migrations')"
[[ "$versions" =~ ^1(,[0-9]+)+$ ]] || fail "schema_migrations: $versions"
pass "schema versions applied once each: $versions"
