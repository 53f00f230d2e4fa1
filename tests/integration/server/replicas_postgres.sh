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
#   - a credential a replica remembers from earlier batches is refused by both once replaced,
#     though batches of samples alone are authenticated from memory (the claim checks it);
#   - trace segments in a real S3 bucket (Ceph's RADOS gateway): a segment-scoped grant issued
#     by one replica admits the segment at the other; sent through one, downloaded from the
#     other byte for byte;
#   - telemetry in a real VictoriaMetrics (--telemetry-store remote): a batch sent to both
#     replicas is stored once; two streams of batches sent while a replica is killed -9 (each
#     retried on the other, as a daemon behind the balancer does) arrive exactly once, counted
#     through the API and through VictoriaMetrics itself; VictoriaMetrics down: 503 with
#     Retry-After, the batch stored once it is back; every query of the Grafana dashboard
#     (packaging/grafana) answers with data;
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
source "$here/../lib/victoriametrics.sh"
source "$here/../lib/rgw.sh"
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
  vm_stop
  rgw_stop
  rm -rf "$DIR"
}
trap cleanup EXIT
pg_start
pass "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') at $PG_URI"
vm_start
pass "VictoriaMetrics $(dpkg-query -W -f='${Version}' victoria-metrics) at $VM_URL"
rgw_start || fail "the RADOS gateway did not start"
[[ "$(s3 PUT /segments -o /dev/null -w '%{http_code}')" == 200 ]] || fail "could not create the bucket"
(umask 077 && printf '%s:%s\n' "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" >"$DIR/s3.key")
pass "Ceph RADOS gateway at $RGW_URL, bucket segments"

EXPANSE_ADMIN_PASSWORD='test pass' "$SERVER" admin bootstrap --db "$PG_URI" --org acme \
  --org-name Acme --email ops@acme.example >"$DIR/boot.json"
API_TOKEN="$(jq -r .api_token "$DIR/boot.json")"
[[ "$API_TOKEN" == exp_at_* ]] || fail "bootstrap on PostgreSQL: $(cat "$DIR/boot.json")"

# Telemetry flags that cannot work are refused at start, each with what to do.
refused() { # WANT_TEXT ARGS...
  local want="$1" out rc=0
  shift
  out="$("$SERVER" serve --database "$PG_URI" --control-listen 127.0.0.1:0 "$@" 2>&1)" || rc=$?
  [[ "$rc" == 1 && "$out" == *"$want"* ]] || fail "serve $* exited $rc: $out (expected: $want)"
}
refused "need --telemetry-store remote" --telemetry-url "$VM_URL"
refused "needs --telemetry-url" --telemetry-store remote
refused "plain http" --telemetry-store remote --telemetry-url http://vm.example:8428
refused "--tsdb-dir is for the embedded telemetry store" --telemetry-store remote --telemetry-url "$VM_URL" --tsdb-dir "$DIR/x"
refused "--tsdb-dir is required with a PostgreSQL --db" --telemetry-store embedded
pass "telemetry flags that cannot work are refused at start"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Replica N: its own ports; the shared database and telemetry store. Ports are fixed so a
# restarted replica comes back where the balancer expects it.
declare -A cp_port dp_port replica_pid
start_replica() {
  local n="$1" log="$DIR/serve$1.log"
  : >"$log"
  "$SERVER" serve --database "$PG_URI" --telemetry-store remote --telemetry-url "$VM_URL" --control-listen "127.0.0.1:${cp_port[$n]}" \
    --data-listen "127.0.0.1:${dp_port[$n]}" --tls-self-signed "$DIR/tls" --credential-rate 1000 \
    --metrics-token-file "$DIR/metrics.token" --segment-s3-url "$RGW_URL/segments" \
    --segment-s3-credentials-file "$DIR/s3.key" >>"$log" 2>&1 &
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
DP_B="https://127.0.0.1:${dp_port[2]}"
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
             \"req_gpus\":1,\"start_ms\":$((now_ms - 900000)),\"end_ms\":0,\"observed_ms\":$now_ms}]}"
status="$("${k[@]}" -o "$DIR/ingest.json" -w '%{http_code}' -H "Authorization: Bearer $credential2" \
  -H 'Content-Type: application/json' --data "$batch" "$DP_A/dp/v1/ingest")"
[[ "$status" == 200 ]] || fail "ingest through A: $status $(cat "$DIR/ingest.json")"
[[ "$(api "$B" GET "/api/v1/orgs/acme/jobs" | jq -r '[.jobs[].job_id] | join(",")')" == 77 ]] ||
  fail "job 77 ingested through A is not listed by B"
pass "a job ingested through A is listed by B"

# A trace segment of job 77 in the shared bucket: its grant asked of A, the segment sent to B
# with it (grants are signed, not stored: any replica checks any replica's), downloaded from A.
start_ms=$((now_ms - 10000))
jq -cn --argjson start "$start_ms" '{traceEvents: [{ph: "X", cat: "kernel", name: "gemm", pid: 7,
  tid: 1, ts: ($start * 1000), dur: 2000}], otherData: {format: "expanse-trace-segment/1",
  job_id: "77", host: "gpu01", pid: 7, uid: 0, window_start_ms: $start,
  window_end_ms: ($start + 10000), trigger: {id: "77-1-GPU-x", reason: "gpu_idle"}, events: 1}}' \
  >"$DIR/segment.json"
sha="$(sha256sum "$DIR/segment.json" | cut -d' ' -f1)"
grant="$("${k[@]}" -H "Authorization: Bearer $credential2" -H 'Content-Type: application/json' \
  --data "{\"host\":\"gpu01\",\"sha256\":\"$sha\",\"bytes\":$(stat -c %s "$DIR/segment.json")}" \
  "$DP_A/dp/v1/segment-grants" | jq -r .grant)"
[[ "$grant" == exp_sg_* ]] || fail "no segment grant from A: $grant"
status="$("${k[@]}" -o "$DIR/segment.answer" -w '%{http_code}' -H "Authorization: Bearer $grant" \
  -H 'Content-Type: application/json' --data-binary @"$DIR/segment.json" "$DP_B/dp/v1/segments")"
[[ "$status" == 200 ]] || fail "the segment with A's grant at B: $status $(cat "$DIR/segment.answer")"
api "$A" GET "/api/v1/computes/$compute/jobs/77/segments/$sha" >"$DIR/segment.download"
cmp -s "$DIR/segment.json" "$DIR/segment.download" ||
  fail "the segment sent to B, downloaded from A, differs: $(head -c 300 "$DIR/segment.download")"
pass "a segment granted by A, sent to B, kept in the S3 bucket, downloaded from A byte for byte"

# --- Telemetry in VictoriaMetrics, shared by both replicas ---------------------------------------
# Batch SEQ: GPU-a and GPU-b of node01 in job 77's GPUs, ten one-second samples each, at
# t0 + SEQ*10 s; so every batch adds 20 samples and no two batches share a timestamp.
t0=$((now_ms / 1000 - 900))
allocations='"gpu_allocations":[{"job_id":"77","host":"node01","gpu_uuid":"GPU-a","gpu_index":0,"gpu_minor":0,"from_ms":'"$((t0 * 1000))"',"to_ms":0},{"job_id":"77","host":"node01","gpu_uuid":"GPU-b","gpu_index":1,"gpu_minor":1,"from_ms":'"$((t0 * 1000))"',"to_ms":0}]'
telemetry_batch() { # SEQ
  local start=$(((t0 + $1 * 10) * 1000))
  printf '{"version":1,"stream":"gpu","sequence":%d,%s,"series":[' "$1" "$allocations"
  printf '{"host":"node01","device":"GPU-a","metric":"gpu.sm_util","t0":%d,"dt":[0,1000,1000,1000,1000,1000,1000,1000,1000,1000],"v":[1,2,3,4,5,6,7,8,9,10]},' "$start"
  printf '{"host":"node01","device":"GPU-b","metric":"gpu.sm_util","t0":%d,"dt":[0,1000,1000,1000,1000,1000,1000,1000,1000,1000],"v":[50,50,50,50,50,50,50,50,50,50]}]}' "$start"
}
send_batch() { # DATA_PLANE_URL SEQ -> HTTP status; the answer in $DIR/answer.json, headers in $DIR/answer.h
  "${k[@]}" -o "$DIR/answer.json" -D "$DIR/answer.h" -w '%{http_code}' -H "Authorization: Bearer $credential2" \
    -H 'Content-Type: application/json' --data "$(telemetry_batch "$2")" "$1/dp/v1/ingest" || echo 000
}
[[ "$(send_batch "$DP_A" 1)" == 200 ]] || fail "telemetry through A: $(cat "$DIR/answer.json")"
jq -e '.duplicate == false and .samples == 20 and .durable == true' "$DIR/answer.json" >/dev/null ||
  fail "batch 1 through A: $(cat "$DIR/answer.json")"
[[ "$(send_batch "$DP_B" 1)" == 200 ]] || fail "the same batch through B: $(cat "$DIR/answer.json")"
jq -e '.duplicate == true and .samples == 0' "$DIR/answer.json" >/dev/null ||
  fail "batch 1 again through B is not a duplicate: $(cat "$DIR/answer.json")"
in_vm() { vm_count '{__name__="expanse_gpu_sm_util",compute="'"$compute"'",host="node01"}' "$t0" "$((t0 + 899))"; }
[[ "$(in_vm)" == 20 ]] || fail "VictoriaMetrics holds $(in_vm) samples after batch 1 sent to both replicas, not 20"
pass "a batch sent to both replicas is stored once in VictoriaMetrics (20 samples; B answered duplicate)"

# Two streams of batches, one starting at each replica, while replica A is killed -9 and
# restarted: a request in flight on A when it dies gets no answer, and the batch goes to the
# other replica, as a daemon's outbox behind the balancer retries it (for up to 90 s: a batch
# A had claimed when it died is "in flight" until the claim lapses, a minute). Every batch ends
# up stored exactly once.
send_stream() { # FIRST_URL OTHER_URL SEQ... ; prints one line per batch delivered
  local first="$1" other="$2" seq attempt target
  shift 2
  for seq in "$@"; do
    for attempt in $(seq 1 180); do
      target="$first"
      ((attempt % 2 == 0)) && target="$other"
      if [[ "$("${k[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $credential2" \
        -H 'Content-Type: application/json' --data "$(telemetry_batch "$seq")" "$target/dp/v1/ingest" 2>/dev/null)" == 200 ]]; then
        echo "$seq"
        continue 2
      fi
      sleep 0.5
    done
    echo "batch $seq reached neither replica in 90 s" >&2
  done
}
: >"$DIR/stream1"
: >"$DIR/stream2"
send_stream "$DP_A" "$DP_B" $(seq 2 2 41) >"$DIR/stream1" &
stream1=$!
send_stream "$DP_B" "$DP_A" $(seq 3 2 41) >"$DIR/stream2" &
stream2=$!
# A dies once each stream is under way, while requests are in flight on it.
for i in $(seq 1 200); do (($(cat "$DIR/stream1" "$DIR/stream2" | wc -l) >= 6)) && break; sleep 0.05; done
kill -9 "${replica_pid[1]}"
wait "${replica_pid[1]}" 2>/dev/null || true
sleep 1
start_replica 1
wait "$stream1" "$stream2"
sent="$(cat "$DIR/stream1" "$DIR/stream2" | sort -un | wc -l)"
[[ "$sent" == 40 ]] || fail "$sent of 40 batches delivered with replica A killed mid-stream"
[[ "$(in_vm)" == $((20 * (sent + 1))) ]] ||
  fail "VictoriaMetrics holds $(in_vm) samples after $((sent + 1)) batches of 20 (replica A killed mid-stream)"
# The same through the API of each replica: job 77's timeline (it started at t0), in buckets
# well under a second, so that each sample is a point.
timeline_samples() { # URL
  api "$1" GET "/api/v1/computes/$compute/jobs/77/timeline?metric=gpu.sm_util&points=10000" |
    jq '[.series[].points[]] | length'
}
for url in "$A" "$B"; do
  n="$(timeline_samples "$url")"
  [[ "$n" == $((20 * (sent + 1))) ]] || fail "job 77's timeline through $url has $n points, not $((20 * (sent + 1)))"
done
pass "$((sent + 1)) batches, replica A killed -9 and restarted mid-stream: $((20 * (sent + 1))) samples, each once, in VictoriaMetrics and in both replicas' timelines"

# VictoriaMetrics away: the batch is refused with 503 and Retry-After (the sender keeps it);
# back: the same batch is stored, once.
vm_pause
[[ "$(send_batch "$DP_B" 50)" == 503 ]] || fail "ingest with VictoriaMetrics down: $(cat "$DIR/answer.json")"
grep -qi '^retry-after: [0-9]' "$DIR/answer.h" || fail "no Retry-After with VictoriaMetrics down: $(cat "$DIR/answer.h")"
vm_resume
[[ "$(send_batch "$DP_A" 50)" == 200 ]] || fail "the batch once VictoriaMetrics is back: $(cat "$DIR/answer.json")"
jq -e '.duplicate == false and .samples == 20' "$DIR/answer.json" >/dev/null ||
  fail "the batch once VictoriaMetrics is back: $(cat "$DIR/answer.json")"
[[ "$(in_vm)" == $((20 * (sent + 2))) ]] || fail "VictoriaMetrics holds $(in_vm) samples after it came back"
pass "VictoriaMetrics down: 503 with Retry-After; back: the batch stored once"

# Each of 20 new batches given to both replicas at once, as a daemon's retry can race its first
# attempt. VictoriaMetrics would keep a sample written twice once (its dedup, which takeovers
# after a crash rely on), so its count cannot show a second write: the replicas' own count of
# batches written to it can. Each batch must be written once, by whichever replica claimed it
# in the ledger; the other answers it as a duplicate or as in flight (then it is sent again,
# as a daemon does, until it is answered).
scrape() { "${k[@]}" -H "Authorization: Bearer $(cat "$DIR/metrics.token")" "$1/metrics"; }
# A counter summed over both replicas: batches written (a failed write counts too), failed writes.
replicas_counter() { { scrape "$A"; scrape "$B"; } | awk -v f="$1" '$1 == f { n += $2 } END { print n + 0 }'; }
written_batches() { replicas_counter expanse_remote_write_batches_total; }
written_before="$(written_batches)"
failed_before="$(replicas_counter expanse_remote_write_failures_total)"
in_vm_before="$(in_vm)"
raced() { # URL SEQ -> "stored", "duplicate" once answered 200 (503 in flight: sent again)
  local i status
  for i in $(seq 1 180); do
    status="$("${k[@]}" -o "$DIR/race-$2-${1##*:}.json" -w '%{http_code}' -H "Authorization: Bearer $credential2" \
      -H 'Content-Type: application/json' --data "$(telemetry_batch "$2")" "$1/dp/v1/ingest" || echo 000)"
    if [[ "$status" == 200 ]]; then
      jq -r 'if .duplicate then "duplicate" else "stored \(.samples)" end' "$DIR/race-$2-${1##*:}.json"
      return
    fi
    sleep 0.5
  done
  echo "unanswered"
}
: >"$DIR/race.answers"
for seq in $(seq 70 89); do
  raced "$DP_A" "$seq" >>"$DIR/race.answers" &
  racer_a=$!
  raced "$DP_B" "$seq" >>"$DIR/race.answers" &
  wait "$racer_a" "$!"  # not a bare wait: the replicas are this shell's children too
done
[[ "$(grep -c '^stored 20$' "$DIR/race.answers")" == 20 && "$(grep -c '^duplicate$' "$DIR/race.answers")" == 20 ]] ||
  fail "20 batches raced to both replicas: answers $(sort "$DIR/race.answers" | uniq -c | tr '\n' ';')"
[[ "$(in_vm)" == $((in_vm_before + 400)) ]] || fail "VictoriaMetrics holds $(in_vm) samples after 20 raced batches, not $((in_vm_before + 400))"
failed=$(($(replicas_counter expanse_remote_write_failures_total) - failed_before))
[[ "$failed" == 0 ]] || fail "$failed remote writes failed while the batches were raced (a retried write counts twice)"
written=$(($(written_batches) - written_before))
[[ "$written" == 20 ]] || fail "the replicas wrote $written batches to VictoriaMetrics for 20 raced to both, not 20"
pass "20 batches raced to both replicas: each stored once (20 stored, 20 duplicate answers), 400 samples in VictoriaMetrics, 20 batch writes counted by the replicas themselves"

# The Grafana dashboard (packaging/grafana/expanse-gpus.json): each variable's label_values and
# each panel's query run against this VictoriaMetrics, on what the replicas wrote, must answer
# with data. A batch of the other metrics its panels show comes first.
other="{\"version\":1,\"stream\":\"gpu\",\"sequence\":60,\"series\":["
for gpu in GPU-a GPU-b; do
  for m in gpu.sm_active:0.5 gpu.mem_used_mib:2048 gpu.power_w:300; do
    other+="{\"host\":\"node01\",\"device\":\"$gpu\",\"metric\":\"${m%%:*}\",\"t0\":$(((t0 + 600) * 1000)),\"dt\":[0,1000],\"v\":[${m##*:},${m##*:}]},"
  done
done
other+="{\"host\":\"node01\",\"device\":\"job/77\",\"metric\":\"job.cpu_used_cores\",\"t0\":$(((t0 + 600) * 1000)),\"dt\":[0,1000],\"v\":[3,3]}]}"
status="$("${k[@]}" -o "$DIR/answer.json" -w '%{http_code}' -H "Authorization: Bearer $credential2" \
  -H 'Content-Type: application/json' --data "$other" "$DP_B/dp/v1/ingest")"
[[ "$status" == 200 ]] || fail "the dashboard's batch: $status $(cat "$DIR/answer.json")"
curl -fsS "$VM_URL/internal/force_flush" >/dev/null
dashboard="$here/../../../packaging/grafana/expanse-gpus.json"
substitute() { sed -e "s/\\\$compute/$compute/g" -e 's/\$host/.*/g' -e 's/\$__interval/10m/g'; }
checked=0
while IFS= read -r q; do
  [[ "$q" =~ ^label_values\((.*),\ *([a-z_]+)\)$ ]] || fail "a dashboard variable's query is not label_values(SELECTOR, LABEL): $q"
  sel="$(substitute <<<"${BASH_REMATCH[1]}")" label="${BASH_REMATCH[2]}"
  values="$(curl -fsS "$VM_URL/api/v1/label/$label/values" --data-urlencode "match[]=$sel" \
    --data-urlencode "start=$t0" --data-urlencode "end=$((t0 + 900))" | jq -r '.data[]')"
  want="$compute"
  [[ "$label" == host ]] && want=node01
  grep -qx "$want" <<<"$values" || fail "dashboard variable $q gives [$values], without $want"
  checked=$((checked + 1))
done < <(jq -r '.templating.list[] | select(.type == "query") | .query' "$dashboard")
while IFS=$'\t' read -r title expr; do
  q="$(substitute <<<"$expr")"
  answer="$(curl -sS "$VM_URL/api/v1/query_range" --data-urlencode "query=$q" --data-urlencode "start=$t0" \
    --data-urlencode "end=$((t0 + 900))" --data-urlencode step=60 --data-urlencode nocache=1)"
  jq -e '.status == "success" and (.data.result | length) >= 1' <<<"$answer" >/dev/null ||
    fail "dashboard panel \"$title\": $q answered $answer"
  checked=$((checked + 1))
done < <(jq -r '.panels[] | .title as $t | .targets[] | [$t, .expr] | @tsv' "$dashboard")
pass "the Grafana dashboard: $checked queries run against VictoriaMetrics, each with data"

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
# B's writes to VictoriaMetrics: the streams' batches, and the one it could not write while
# VictoriaMetrics was down; nothing waiting now.
for family in expanse_remote_write_batches_total expanse_remote_write_duration_seconds_count \
  expanse_remote_write_failures_total; do
  grep -qE "^$family [1-9]" <<<"$metrics" || fail "/metrics on B: no $family above 0: $(grep expanse_remote <<<"$metrics")"
done
grep -qx 'expanse_remote_write_waiting_batches 0' <<<"$metrics" ||
  fail "/metrics on B: batches still waiting: $(grep expanse_remote <<<"$metrics")"
pass "database stopped: 503 with Retry-After from both replicas, /readyz 503 (/healthz 200), /metrics expanse_store_up 0; back: both serve again; B's remote writes counted"

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

# A credential a replica remembers is still checked for revocation: the batch's claim does it.
# Batches of samples alone (no records, so no read of the credential of their own) with the
# newest credential: the first at each replica reads it, the second is taken from memory. Then
# the credential is replaced (an exchange through A): batches of samples alone are refused by
# both replicas, and nothing of them is stored.
credential3="$(cat "$DIR/y1.json" "$DIR/y2.json" | jq -r '.credential // empty' | grep '^exp_cc_')"
bare_batch() { # SEQ
  local start=$(((t0 + $1 * 10) * 1000))
  printf '{"version":1,"stream":"bare","sequence":%d,"series":[' "$1"
  printf '{"host":"node02","device":"GPU-c","metric":"gpu.sm_util","t0":%d,"dt":[0,1000,1000],"v":[1,2,3]}]}' "$start"
}
send_bare() { # DATA_PLANE_URL SEQ CREDENTIAL -> HTTP status; the answer in $DIR/bare.json
  "${k[@]}" -o "$DIR/bare.json" -w '%{http_code}' -H "Authorization: Bearer $3" \
    -H 'Content-Type: application/json' --data "$(bare_batch "$2")" "$1/dp/v1/ingest" || echo 000
}
seq=60
for url in "$DP_A" "$DP_B" "$DP_A" "$DP_B"; do
  [[ "$(send_bare "$url" "$seq" "$credential3")" == 200 ]] ||
    fail "a batch of samples alone through $url: $(cat "$DIR/bare.json")"
  jq -e '.duplicate == false and .samples == 3' "$DIR/bare.json" >/dev/null ||
    fail "batch $seq of samples alone through $url: $(cat "$DIR/bare.json")"
  seq=$((seq + 1))
done
bare_in_vm() { vm_count '{__name__="expanse_gpu_sm_util",compute="'"$compute"'",host="node02"}' "$t0" "$((t0 + 899))"; }
[[ "$(bare_in_vm)" == 12 ]] || fail "VictoriaMetrics holds $(bare_in_vm) samples of 4 batches of 3 alone"
token4="$(api "$A" POST "/api/v1/computes/$compute/install-tokens" | jq -r .token)"
body4="{\"token\":\"$token4\",\"hostname\":\"ctl\",\"daemon_version\":\"0.1.0\",\"role\":\"controller\"}"
credential4="$("${k[@]}" -d "$body4" "$A/cp/v1/install-tokens/exchange" | jq -r .credential)"
[[ "$credential4" == exp_cc_* ]] || fail "the exchange that replaces the remembered credential"
for url in "$DP_A" "$DP_B"; do
  [[ "$(send_bare "$url" "$seq" "$credential3")" == 401 ]] ||
    fail "a replaced credential's batch of samples alone through $url: $(cat "$DIR/bare.json")"
  [[ "$(jq -r .error.code "$DIR/bare.json")" == credential_revoked ]] ||
    fail "the refusal's code at $url: $(cat "$DIR/bare.json")"
  seq=$((seq + 1))
done
[[ "$(bare_in_vm)" == 12 ]] || fail "VictoriaMetrics holds $(bare_in_vm) samples after the refused batches, not 12"
[[ "$(send_bare "$DP_B" "$seq" "$credential4")" == 200 ]] || fail "the new credential's batch: $(cat "$DIR/bare.json")"
pass "batches of samples alone: a remembered credential works at both replicas; once replaced, refused by both (credential_revoked), nothing stored"

# One schema, the store's newest, applied once though two replicas and the bootstrap opened it.
versions="$(pg_as "$PG_BIN/psql" -h "$PG_DIR" -U postgres -d expanse -Atc \
  'SELECT string_agg(version::text, $$,$$ ORDER BY version) FROM schema_migrations')"
[[ "$versions" =~ ^1(,[0-9]+)+$ ]] || fail "schema_migrations: $versions"
pass "schema versions applied once each: $versions"
