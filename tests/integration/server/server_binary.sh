#!/usr/bin/env bash
# The real expanse-server binary: admin bootstrap, HTTPS with a self-signed CA that clients must
# trust explicitly, the install-token flow to an enrolled compute over curl, plain HTTP refused
# off loopback, and a graceful exit on SIGTERM; hostile input (byte ranges, duplicate
# Content-Length, state file modes, sign-in limits, nesting and decompression bombs); a copy of
# the stored samples forwarded to a real VictoriaMetrics (--forward-remote-write), once.
# Usage: server_binary.sh /path/to/expanse-server
set -euo pipefail
SERVER="${1:?path to expanse-server}"
TEST_NAME=server_binary
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }

source "$(dirname "$0")/../lib/victoriametrics.sh"
dir="$(mktemp -d)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; vm_stop; rm -rf "$dir"; }
trap cleanup EXIT
vm_start
(umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/metrics.token")

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

for flag in --install-token-ttl --stale-after --retention --segment-retention --stack-retention --alert-interval; do
  out="$("$SERVER" serve --db "$dir/db.sqlite" --control-listen 127.0.0.1:0 "$flag" 30 2>&1 || true)"
  [[ "$out" == *"$flag: invalid duration \"30\""* ]] || fail "a duration without its unit is not refused by name ($flag): $out"
done
pass "every duration flag without a unit is refused, naming the flag"
# Read into the server's options: a remote store keeps its own retention, so one is refused there.
out="$("$SERVER" serve --db "$dir/db.sqlite" --control-listen 127.0.0.1:0 --telemetry-store remote \
  --telemetry-url "$VM_URL" --retention 30d 2>&1 || true)"
[[ "$out" == *"--retention is for the embedded telemetry store"* ]] ||
  fail "--retention with a remote telemetry store is not refused: $out"
pass "--retention with a remote telemetry store is refused"

mkdir "$dir/releases"
head -c 1048576 /dev/urandom >"$dir/releases/daemon.tar.gz"
(umask 022 && exec "$SERVER" serve --db "$dir/db.sqlite" --control-listen 127.0.0.1:0 \
  --data-listen 127.0.0.1:0 --tls-self-signed "$dir/tls" --releases-dir "$dir/releases" \
  --forward-remote-write "$VM_URL/api/v1/write" --metrics-token-file "$dir/metrics.token") \
  >"$dir/serve.log" 2>&1 &
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
# The site's copy: the batch's three samples in VictoriaMetrics once, and counted in /metrics.
forwarded=0
for _ in $(seq 1 100); do
  forwarded="$(vm_count '{__name__="expanse_gpu_sm_util",compute="'"$compute"'",host="worker1",device="GPU-1"}' \
    $((now_ms / 1000 - 10)) $((now_ms / 1000 + 10)))"
  [[ "$forwarded" == 3 ]] && break
  sleep 0.1
done
[[ "$forwarded" == 3 ]] || fail "VictoriaMetrics got $forwarded forwarded samples, not 3"
metrics="$("${k[@]}" -H "Authorization: Bearer $(cat "$dir/metrics.token")" "$cp_url/metrics")"
grep -qx 'expanse_forward_batches_total{outcome="sent"} 1' <<<"$metrics" ||
  fail "/metrics does not count one forwarded batch: $(grep forward <<<"$metrics")"
pass "--forward-remote-write: the stored batch's 3 samples in VictoriaMetrics, once; /metrics counts it"

# Hostile input (issue 16). Many byte ranges get the content once, not once per range.
ranges="bytes=0-$(printf ',0-%.0s' $(seq 1 1999))"
size="$("${k[@]}" -o /dev/null -w '%{http_code} %{size_download}' -H "Range: $ranges" "$cp_url/")"
page="$("${k[@]}" -o /dev/null -w '%{size_download}' "$cp_url/")"
[[ "$size" == "200 $page" ]] || fail "2,000 ranges on the console page: $size (page: $page bytes)"
ranges="bytes=0-$(printf ',0-%.0s' $(seq 1 499))"
size="$("${k[@]}" -o /dev/null -w '%{http_code} %{size_download}' -H "Range: $ranges" \
  "$cp_url/releases/daemon.tar.gz")"
[[ "$size" == "200 1048576" ]] || fail "500 ranges on a release file: $size"
size="$("${k[@]}" -o /dev/null -w '%{http_code} %{size_download}' -r 1048000- \
  "$cp_url/releases/daemon.tar.gz")"
[[ "$size" == "206 576" ]] || fail "one range of a release file: $size"
pass "many ranges get the whole content once; one range is served"

# Duplicate Content-Length: refused before the body is read.
status="$("${k[@]}" -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -H 'Content-Length: 2' -H 'Content-Length: 40' --data-binary '{}' "$cp_url/api/v1/session" || true)"
[[ "$status" == 400 ]] || fail "duplicate Content-Length: HTTP $status"
pass "duplicate Content-Length is 400"

# State files are the server's alone although it ran under umask 022.
for f in db.sqlite db.sqlite-wal db.sqlite-shm db.sqlite.tsdb/chunks.sqlite db.sqlite.tsdb/wal.log; do
  [[ "$(stat -c %a "$dir/$f")" == 600 ]] || fail "$f has mode $(stat -c %a "$dir/$f")"
done
[[ "$(stat -c %a "$dir/db.sqlite.tsdb")" == 700 ]] || fail "tsdb directory mode"
pass "db.sqlite, its -wal/-shm and the telemetry files are 0600 under umask 022"

# A sign-in limit keyed on the email as typed would give OPS@… fresh tries.
login() {
  "${k[@]}" -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    -d "{\"email\":\"$1\",\"password\":\"wrong\"}" "$cp_url/api/v1/session"
}
codes=""
for email in ops@acme.example OPS@ACME.EXAMPLE Ops@Acme.Example ' ops@acme.example ' oPs@acme.example \
  OPS@acme.example; do
  codes+="$(login "$email") "
done
[[ "$codes" == "401 401 401 401 401 429 " ]] || fail "sign-in limit by normalised email: $codes"
pass "upper-cased and padded emails share the account's sign-in limit"

# Abuse (issue 16): bodies that would nest deep enough to overflow a recursive dump, or expand
# to gigabytes once decoded. Each gets its refusal, the server keeps answering, and its resident
# memory afterwards exceeds what it had just before by at most 64 MiB (docs/api.md, "Limits").
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
rss_before="$(rss_kib)"
abuse() {  # abuse URL FILE HEADER... -> "<http code> <error code>"
  local url="$1" file="$2"
  shift 2
  local out
  out="$("${k[@]}" -w '\n%{http_code}' "$@" --data-binary @"$file" "$url")" || true
  printf '%s %s' "$(tail -n1 <<<"$out")" "$(head -n -1 <<<"$out" | jq -r '.error.code' 2>/dev/null)"
}
printf '{"version":1,"daemon_version":"0.1.0","controller_host":"ctl","extra":%s%s}' \
  "$(head -c 60000 /dev/zero | tr '\0' '[')" "$(head -c 60000 /dev/zero | tr '\0' ']')" \
  >"$dir/nested.json"
got="$(abuse "$cp_url/cp/v1/heartbeat" "$dir/nested.json" -H "Authorization: Bearer $credential" \
  -H 'Content-Type: application/json')"
[[ "$got" == "400 json_too_deep" ]] || fail "heartbeat nested 60,000 deep: $got"
head -c 16777216 /dev/zero | tr '\0' '[' | gzip -c >"$dir/bomb.gz"  # 16 MiB of '[' in ~16 KB
got="$(abuse "$cp_url/api/v1/session" "$dir/bomb.gz" -H 'Content-Encoding: gzip' \
  -H 'Content-Type: application/json')"
[[ "$got" == "413 body_too_large" ]] || fail "gzip bomb on sign-in: $got"
head -c 70000000 /dev/zero | tr '\0' '[' >"$dir/bomb.json"
zstd -q -c "$dir/bomb.json" >"$dir/declared.zst"         # the frame declares its 70 MB
zstd -q -c <"$dir/bomb.json" >"$dir/undeclared.zst"      # streamed: it does not
rm "$dir/bomb.json"
for bomb in declared undeclared; do
  got="$(abuse "$dp_url/dp/v1/ingest" "$dir/$bomb.zst" -H "Authorization: Bearer $credential" \
    -H 'Content-Type: application/zstd')"
  [[ "$got" == "413 body_too_large" ]] || fail "zstd bomb ($bomb size) on ingest: $got"
done
"${k[@]}" -H "Authorization: Bearer $credential" \
  -d '{"version":1,"daemon_version":"0.1.0","controller_host":"ctl"}' "$cp_url/cp/v1/heartbeat" |
  jq -e .compute_id >/dev/null || fail "no heartbeat accepted after the abuse"
rss_after="$(rss_kib)"
echo "server VmRSS: ${rss_before} kB before the abuse, ${rss_after} kB after (bound: +65536 kB)"
((rss_after <= rss_before + 65536)) || fail "the server kept $((rss_after - rss_before)) kB after the abuse"
pass "nested heartbeat 400, gzip bomb on sign-in 413, zstd bombs on ingest 413; memory given back"

# Slow and idle clients (issue 16): they hold no worker, are cut at absolute deadlines, and one
# address cannot take more than its share of connections (docs/api.md, "Limits").
cp_port="${cp_url##*:}"
python3 "$(dirname "$0")/slow_clients.py" 127.0.0.1 "${cp_port%%/*}" || fail "slow clients"
"${k[@]}" "$cp_url/healthz" | jq -e . >/dev/null || fail "no answer after the slow clients"
pass "slow and idle clients hold no worker, are cut at their deadlines, and are capped per address"

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
