#!/usr/bin/env bash
# Trace segments kept in a real S3-compatible bucket (Ceph's RADOS gateway from Debian's
# packages, tests/integration/lib/rgw.sh), the segment store replicas share
# (docs/formats/segment-store.md), behind the real expanse-server binary:
#   - a bucket that does not exist, a wrong secret key and a key file others may read are
#     refused at start, each by name;
#   - a segment sent with the compute credential is one object <compute>/<2 hex>/<sha256>.json
#     in the bucket, byte for byte; listed, downloaded byte for byte; sent again: one object;
#     nothing is written to the server's own disk;
#   - a restarted server still serves it (the bytes are in the bucket);
#   - the gateway down: a new segment is answered 503 segment_store_unavailable and not listed
#     (no record without its bytes); the gateway back: the same segment is taken;
#   - an object changed behind the server's back is refused, not served;
#   - retention (a server restarted with --segment-retention 1s) removes the objects and then
#     the records.
# Usage: segments_s3.sh BUILD_DIR
set -euo pipefail
BUILD="${1:?build directory}"
SERVER="$BUILD/bin/expanse-server"
TEST_NAME=server_segments_s3
here="$(cd "$(dirname "$0")" && pwd)"
fail() {
  printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2
  exit 1
}
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }
source "$here/../lib/rgw.sh"
source "$here/../lib/expanse_server.sh"

DIR="$(mktemp -d "${TMPDIR:-/tmp}/expanse-segments-s3.XXXXXX")"
cleanup() {
  server_stop || true
  rgw_stop
  rm -rf "$DIR"
}
trap cleanup EXIT

rgw_start || fail "the RADOS gateway did not start"
pass "Ceph $(ceph --version | awk '{print $3}') RADOS gateway at $RGW_URL"
[[ "$(s3 PUT /segments -o /dev/null -w '%{http_code}')" == 200 ]] || fail "could not create the bucket"
(umask 077 && printf '%s:%s\n' "$RGW_ACCESS_KEY" "$RGW_SECRET_KEY" >"$DIR/s3.key")

# --- refused at start, by name -------------------------------------------------------------
EXPANSE_ADMIN_PASSWORD='test pass' "$SERVER" admin bootstrap --db "$DIR/db.sqlite" --org acme \
  --org-name "Acme" --email ops@acme.example >"$DIR/boot.json"
start_refused() { # what expected-message extra-args...
  local what="$1" want="$2" out
  shift 2
  if out="$(timeout 60 "$SERVER" serve --db "$DIR/db.sqlite" --control-listen 127.0.0.1:0 \
    --tls-self-signed "$DIR/tls" "$@" 2>&1)"; then
    fail "the server started with $what"
  fi
  [[ "$out" == *"$want"* ]] || fail "start with $what: expected '$want' in: $out"
  pass "start refused with $what: $(grep -F -- "$want" <<<"$out" | head -1 | cut -c1-160)"
}
start_refused "a bucket that does not exist" 'no bucket "nothere"' \
  --segment-s3-url "$RGW_URL/nothere" --segment-s3-credentials-file "$DIR/s3.key"
(umask 077 && printf '%s:wrong-secret\n' "$RGW_ACCESS_KEY" >"$DIR/wrong.key")
start_refused "a wrong secret key" "refuses the access key (HTTP 403)" \
  --segment-s3-url "$RGW_URL/segments" --segment-s3-credentials-file "$DIR/wrong.key"
cp "$DIR/s3.key" "$DIR/open.key" && chmod 644 "$DIR/open.key"
start_refused "a key file others may read" "may be read by others: chmod 600 it" \
  --segment-s3-url "$RGW_URL/segments" --segment-s3-credentials-file "$DIR/open.key"
start_refused "a bucket URL and no key" "--segment-s3-url needs --segment-s3-credentials-file" \
  --segment-s3-url "$RGW_URL/segments"

# --- a segment into the bucket ---------------------------------------------------------------
SERVER_EXTRA_ARGS="--segment-s3-url $RGW_URL/segments/expanse --segment-s3-credentials-file $DIR/s3.key"
server_start || fail "expanse-server did not start with the S3 segment store"
server_register s3test || fail "compute registration"
segment() { # PID
  jq -cn --argjson pid "$1" --argjson start "$(($(date +%s%3N) - 10000))" \
    '{traceEvents: [{ph: "X", cat: "kernel", name: "gemm", pid: $pid, tid: 1, ts: ($start * 1000), dur: 2000}],
      otherData: {format: "expanse-trace-segment/1", job_id: "42", host: "gpu01", pid: $pid, uid: 0,
      window_start_ms: $start, window_end_ms: ($start + 10000), trigger: {id: "42-1-GPU-x", reason: "gpu_idle"}, events: 1}}'
}
send() { # FILE -> HTTP status; the answer in $DIR/answer
  curl -sS -o "$DIR/answer" -w '%{http_code}' --cacert "$CA_FILE" -H "Authorization: Bearer $CREDENTIAL" \
    -H 'Content-Type: application/json' --data-binary @"$1" "$DP_URL/dp/v1/segments"
}
segment 7 >"$DIR/seg7.json"
sha7="$(sha256sum "$DIR/seg7.json" | cut -d' ' -f1)"
[[ "$(send "$DIR/seg7.json")" == 200 ]] || fail "segment refused: $(cat "$DIR/answer")"
key="expanse/$COMPUTE/${sha7:0:2}/$sha7.json"
s3 GET "/segments/$key" -o "$DIR/object" -w '' || fail "GET of the object"
cmp -s "$DIR/seg7.json" "$DIR/object" || fail "the object at $key differs from the segment: $(head -c 300 "$DIR/object")"
pass "the segment is the object $key in the bucket, byte for byte"
listed() { api GET "/api/v1/computes/$COMPUTE/jobs/42/segments"; }
[[ "$(listed | jq -r '.segments[0].sha256')" == "$sha7" ]] || fail "not listed: $(listed)"
api GET "/api/v1/computes/$COMPUTE/jobs/42/segments/$sha7" >"$DIR/download"
cmp -s "$DIR/seg7.json" "$DIR/download" || fail "the download differs: $(head -c 300 "$DIR/download")"
[[ "$(send "$DIR/seg7.json")" == 200 ]] || fail "a resend was refused: $(cat "$DIR/answer")"
[[ "$(jq -r .duplicate "$DIR/answer")" == true ]] || fail "a resend is not a duplicate: $(cat "$DIR/answer")"
s3 GET "/segments?list-type=2&prefix=expanse%2F" >"$DIR/listing"
objects="$(grep -o '<Key>[^<]*</Key>' "$DIR/listing" | wc -l || true)"
[[ "$objects" == 1 ]] || fail "$objects objects in the bucket after a resend: $(head -c 400 "$DIR/listing")"
[[ ! -e "$DIR/db.sqlite.segments" ]] || fail "segments were written to the server's disk: $(ls -R "$DIR/db.sqlite.segments")"
pass "listed, downloaded byte for byte, one object after a resend, nothing on the server's disk"

server_stop
server_start || fail "expanse-server did not start again"
api GET "/api/v1/computes/$COMPUTE/jobs/42/segments/$sha7" >"$DIR/download"
cmp -s "$DIR/seg7.json" "$DIR/download" || fail "the download after a restart differs"
pass "a restarted server serves the segment from the bucket"

# --- the gateway away ------------------------------------------------------------------------
rgw_gateway_stop
segment 8 >"$DIR/seg8.json"
sha8="$(sha256sum "$DIR/seg8.json" | cut -d' ' -f1)"
status="$(send "$DIR/seg8.json")"
[[ "$status" == 503 ]] || fail "with the gateway down: HTTP $status $(cat "$DIR/answer")"
[[ "$(jq -r .error.code "$DIR/answer")" == segment_store_unavailable ]] || fail "the 503's code: $(cat "$DIR/answer")"
[[ "$(listed | jq "[.segments[] | select(.sha256 == \"$sha8\")] | length")" == 0 ]] ||
  fail "a segment whose bytes were not kept is listed: $(listed)"
pass "gateway down: 503 segment_store_unavailable, the segment not listed"
rgw_gateway_start || fail "the gateway did not come back"
[[ "$(send "$DIR/seg8.json")" == 200 ]] || fail "the segment was refused once the gateway was back: $(cat "$DIR/answer")"
api GET "/api/v1/computes/$COMPUTE/jobs/42/segments/$sha8" >"$DIR/download"
cmp -s "$DIR/seg8.json" "$DIR/download" || fail "the download of the segment sent again differs"
pass "gateway back: the segment sent again is taken and served"

# --- an object changed in the bucket ---------------------------------------------------------
segment 9 >"$DIR/other.json"
s3 PUT "/segments/$key" --data-binary @"$DIR/other.json" -o /dev/null || fail "could not overwrite the object"
status="$(curl -sS -o "$DIR/answer" -w '%{http_code}' --cacert "$CA_FILE" -H "Authorization: Bearer $API_TOKEN" \
  "$CP_URL/api/v1/computes/$COMPUTE/jobs/42/segments/$sha7")"
[[ "$status" == 500 ]] || fail "a changed object was served: HTTP $status $(head -c 200 "$DIR/answer")"
[[ "$(jq -r .error.code "$DIR/answer")" == segment_bytes_changed ]] || fail "the refusal's code: $(cat "$DIR/answer")"
pass "an object changed behind the server's back is refused (segment_bytes_changed)"

# --- retention ---------------------------------------------------------------------------------
server_stop
sleep 1
SERVER_EXTRA_ARGS="$SERVER_EXTRA_ARGS --segment-retention 1s"
server_start || fail "expanse-server did not start with a short retention"
expired() {
  s3 GET "/segments?list-type=2&prefix=expanse%2F" >"$DIR/listing" &&
    ! grep -q '<Key>' "$DIR/listing" && [[ "$(listed | jq '.segments | length')" == 0 ]]
}
for _ in $(seq 1 100); do expired && break; sleep 0.2; done
expired || fail "retention left objects or records: $(head -c 400 "$DIR/listing"); $(listed)"
pass "retention removed both objects from the bucket and their records"
