#!/usr/bin/env bash
# The real expanse-server binary: admin bootstrap, HTTPS with a self-signed CA that clients must
# trust explicitly, the install-token flow to an enrolled compute over curl, plain HTTP refused
# off loopback, and a graceful exit on SIGTERM.
# Usage: server_binary.sh /path/to/expanse-server
set -euo pipefail
SERVER="${1:?path to expanse-server}"
TEST_NAME=server_binary
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }

dir="$(mktemp -d)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

EXPANSE_ADMIN_PASSWORD='s3cret pass' "$SERVER" admin bootstrap --db "$dir/db.sqlite" --org acme \
  --org-name "Acme Research" --email ops@acme.example >"$dir/boot.json"
api_token="$(jq -r .api_token "$dir/boot.json")"
[[ "$api_token" == exp_at_* ]] || fail "bootstrap printed no API token: $(cat "$dir/boot.json")"
pass "admin bootstrap issued an API token"
if "$SERVER" admin bootstrap --db "$dir/db.sqlite" --org acme --org-name A --email x@y.z 2>"$dir/err"; then
  fail "bootstrap without a password succeeded"
fi
grep -q 'EXPANSE_ADMIN_PASSWORD' "$dir/err" || fail "no hint about the password variable: $(cat "$dir/err")"
pass "bootstrap without a password is refused with a hint"

out="$("$SERVER" serve --db "$dir/db.sqlite" --control-listen 0.0.0.0:0 2>&1 || true)"
[[ "$out" == *"plain HTTP is only allowed on loopback"* ]] || fail "plain HTTP on 0.0.0.0 not refused: $out"
pass "plain HTTP off loopback is refused"

"$SERVER" serve --db "$dir/db.sqlite" --control-listen 127.0.0.1:0 --data-listen 127.0.0.1:0 \
  --tls-self-signed "$dir/tls" >"$dir/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q 'console API' "$dir/serve.log" && break; sleep 0.1; done
cp_url="$(grep -oP 'control plane \K\S+' "$dir/serve.log")" || fail "no control plane URL: $(cat "$dir/serve.log")"
dp_url="$(grep -oP 'data plane +\K\S+' "$dir/serve.log")"
[[ "$cp_url" == https://* && "$dp_url" == https://* && "$cp_url" != "$dp_url" ]] ||
  fail "expected two distinct HTTPS planes, got $cp_url and $dp_url"
pass "control plane $cp_url and data plane $dp_url"

curl -sS --max-time 5 "$cp_url/healthz" >/dev/null 2>&1 && fail "a client that does not trust the CA connected"
pass "a client without the CA is refused"
k=(curl -sS --max-time 10 --cacert "$dir/tls/ca.pem")
[[ "$("${k[@]}" "$dp_url/healthz" | jq -r .plane)" == data ]] || fail "data plane health"
pass "data plane healthz over TLS with ca.pem"

compute="$("${k[@]}" -H "Authorization: Bearer $api_token" -d '{"name":"test cluster","type":"slurm"}' \
  "$cp_url/api/v1/orgs/acme/computes" | jq -r .id)"
[[ "$compute" == cmp_* ]] || fail "no compute id"
issued="$("${k[@]}" -H "Authorization: Bearer $api_token" -H 'Content-Length: 0' -X POST \
  "$cp_url/api/v1/computes/$compute/install-tokens")"
token="$(jq -r .token <<<"$issued")"
[[ "$(jq -r .data_plane_url <<<"$issued")" == "$dp_url" ]] || fail "token panel data plane URL: $issued"
pass "install token issued with the plane URLs"

intro="$("${k[@]}" -d "{\"token\":\"$token\"}" "$cp_url/cp/v1/install-tokens/introspect")"
[[ "$(jq -r .compute.id <<<"$intro")" == "$compute" ]] || fail "introspection: $intro"
body="{\"token\":\"$token\",\"hostname\":\"ctl\",\"daemon_version\":\"0.1.0\",\"role\":\"controller\"}"
credential="$("${k[@]}" -d "$body" "$cp_url/cp/v1/install-tokens/exchange" | jq -r .credential)"
[[ "$credential" == exp_cc_* ]] || fail "no credential"
again="$("${k[@]}" -d "$body" "$cp_url/cp/v1/install-tokens/exchange" | jq -r .error.code)"
[[ "$again" == install_token_used ]] || fail "second exchange: $again"
pass "token introspected, exchanged once, refused the second time"

"${k[@]}" -H "Authorization: Bearer $credential" \
  -d '{"version":1,"daemon_version":"0.1.0","controller_host":"ctl"}' "$cp_url/cp/v1/heartbeat" >/dev/null
enrolled="$("${k[@]}" -H "Authorization: Bearer $credential" "$cp_url/cp/v1/enrolment?wait_ms=100" | jq -r .enrolled)"
[[ "$enrolled" == true ]] || fail "not enrolled after a heartbeat"
state="$("${k[@]}" -H "Authorization: Bearer $api_token" "$cp_url/api/v1/computes/$compute" | jq -r .state)"
[[ "$state" == active ]] || fail "compute state $state"
pass "first heartbeat enrolled the credential; compute is active"

now_ms=$(($(date +%s) * 1000))
batch="{\"version\":1,\"stream\":\"telemetry\",\"sequence\":1,
  \"series\":[{\"host\":\"worker1\",\"device\":\"GPU-1\",\"metric\":\"gpu.sm_util\",\"t0\":$((now_ms - 3000)),\"dt\":[0,1000,1000],\"v\":[50,60,70]}],
  \"jobs\":[{\"job_id\":\"42\",\"state\":\"RUNNING\",\"user\":\"ana\",\"req_gpus\":1,\"start_ms\":$((now_ms - 3000)),\"observed_ms\":$now_ms}],
  \"gpu_allocations\":[{\"job_id\":\"42\",\"host\":\"worker1\",\"gpu_uuid\":\"GPU-1\",\"from_ms\":$((now_ms - 3000))}]}"
ingest() { "${k[@]}" -H "Authorization: Bearer $credential" -H 'Content-Type: application/json' -d "$batch" "$dp_url/dp/v1/ingest"; }
[[ "$(ingest | jq -r .duplicate)" == false ]] || fail "first ingest"
[[ "$(ingest | jq -r .duplicate)" == true ]] || fail "a repeated batch was not recognised"
job="$("${k[@]}" -H "Authorization: Bearer $api_token" "$cp_url/api/v1/orgs/acme/jobs" | jq -c '.jobs[0]')"
[[ "$(jq -r .used.sm_peak <<<"$job")" == 70 && "$(jq -r .used.gpus_active <<<"$job")" == 1 ]] ||
  fail "job usage after ingest: $job"
pass "a batch ingested on the data plane (once, though sent twice) shows in the job's usage"

kill -TERM "$pid"
wait "$pid" || fail "expanse-server exited non-zero on SIGTERM"
pid=""
grep -q 'shutting down' "$dir/serve.log" || fail "no graceful shutdown line"
pass "SIGTERM shuts down gracefully"

# What was acknowledged survives a restart.
"$SERVER" serve --db "$dir/db.sqlite" --control-listen 127.0.0.1:0 --tls-self-signed "$dir/tls" \
  >"$dir/serve2.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q 'console API' "$dir/serve2.log" && break; sleep 0.1; done
cp_url="$(grep -oP 'control plane \K\S+' "$dir/serve2.log")"
grep -q 'generated\|new CA' "$dir/serve2.log" && fail "the self-signed CA was replaced on restart"
job="$("${k[@]}" -H "Authorization: Bearer $api_token" "$cp_url/api/v1/orgs/acme/jobs" | jq -c '.jobs[0]')"
[[ "$(jq -r .used.sm_peak <<<"$job")" == 70 ]] || fail "job usage after restart: $job"
pass "jobs and telemetry survive a restart, and the same ca.pem still verifies the server"
