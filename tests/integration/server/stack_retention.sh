#!/usr/bin/env bash
# Python stack retention on the real expanse-server binary (--stack-retention, docs/api.md):
#   - stacks of a job's windows two hours and a minute old are stored and listed, kept by the
#     default retention (30 days);
#   - a server restarted with --stack-retention 1h deletes the old window's stacks at start, on
#     its retention thread, keeps the recent one's, and the stacks API says where it cuts
#     (retained_from_ms, about an hour ago);
#   - with --stack-retention 0 (for ever) a two-hour-old window sent again stays, and
#     retained_from_ms is 0.
# Usage: stack_retention.sh BUILD_DIR
set -euo pipefail
BUILD="${1:?build directory}"
SERVER="$BUILD/bin/expanse-server"
TEST_NAME=server_stack_retention
here="$(cd "$(dirname "$0")" && pwd)"
fail() {
  printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2
  exit 1
}
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }
source "$here/../lib/expanse_server.sh"

DIR="$(mktemp -d "${TMPDIR:-/tmp}/expanse-stack-retention.XXXXXX")"
cleanup() {
  server_stop || true
  rm -rf "$DIR"
}
trap cleanup EXIT

server_start || fail "expanse-server did not start"
server_register retention || fail "compute registration"
now_ms=$(($(date +%s) * 1000))
window() { # START_MS FOLDED COUNT
  printf '{"job_id":"42","host":"gpu01","window_start_ms":%d,"window_end_ms":%d,"folded":"%s","thread_state":"gil","count":%d,"gpu_idle":false}' \
    "$1" "$(($1 + 60000))" "$2" "$3"
}
batch="{\"version\":1,\"stream\":\"stacks\",\"sequence\":1,\"stacks\":[$(window $((now_ms - 7200000)) 'train.py:main:1;data.py:load:9' 30),$(window $((now_ms - 60000)) 'train.py:main:1;train.py:step:4' 12)]}"
status="$(curl -sS -o "$DIR/answer.json" -w '%{http_code}' --cacert "$CA_FILE" -H "Authorization: Bearer $CREDENTIAL" \
  -H 'Content-Type: application/json' --data "$batch" "$DP_URL/dp/v1/ingest")"
[[ "$status" == 200 ]] || fail "ingest of two windows' stacks: $status $(cat "$DIR/answer.json")"
stacks() { api GET "/api/v1/computes/$COMPUTE/jobs/42/stacks"; }
[[ "$(stacks | jq '.total_count')" == 42 ]] || fail "both windows' stacks before retention: $(stacks)"
cut="$(stacks | jq '.retained_from_ms')"
((cut >= now_ms - 30 * 86400000 && cut <= now_ms - 30 * 86400000 + 600000)) ||
  fail "retained_from_ms $cut under the default retention is not 30 days before $now_ms"
pass "two windows' stacks stored (42 samples); the default retention cuts 30 days back"

server_stop
SERVER_EXTRA_ARGS="--stack-retention 1h"
server_start || fail "expanse-server did not start with --stack-retention 1h"
for _ in $(seq 1 100); do [[ "$(stacks | jq '.total_count')" == 12 ]] && break; sleep 0.1; done
answer="$(stacks)"
[[ "$(jq '.total_count' <<<"$answer")" == 12 ]] || fail "after a restart with a 1 h retention: $answer"
[[ "$(jq -r '.stacks[0].folded' <<<"$answer")" == 'train.py:main:1;train.py:step:4' ]] || fail "the recent window's stack: $answer"
cut="$(jq '.retained_from_ms' <<<"$answer")"
after_ms=$(($(date +%s) * 1000))
((cut >= now_ms - 3600000 && cut <= after_ms - 3600000 + 1000)) ||
  fail "retained_from_ms $cut is not about an hour before now ($after_ms)"
pass "restarted with --stack-retention 1h: the two-hour-old window deleted at start, the recent one kept; retained_from_ms an hour ago"

# An old window again (as a redelivered batch brings one), then retention off: it stays.
batch="{\"version\":1,\"stream\":\"stacks\",\"sequence\":2,\"stacks\":[$(window $((now_ms - 7200000)) 'train.py:main:1;data.py:load:9' 30)]}"
status="$(curl -sS -o "$DIR/answer.json" -w '%{http_code}' --cacert "$CA_FILE" -H "Authorization: Bearer $CREDENTIAL" \
  -H 'Content-Type: application/json' --data "$batch" "$DP_URL/dp/v1/ingest")"
[[ "$status" == 200 ]] || fail "ingest of an old window's stacks: $status $(cat "$DIR/answer.json")"
server_stop
SERVER_EXTRA_ARGS="--stack-retention 0"
server_start || fail "expanse-server did not start with --stack-retention 0"
sleep 2 # the retention thread's pass runs at start
answer="$(stacks)"
[[ "$(jq '.total_count' <<<"$answer")" == 42 && "$(jq '.retained_from_ms' <<<"$answer")" == 0 &&
  "$(jq '.stack_retention_ms' <<<"$answer")" == 0 ]] || fail "with the retention off: $answer"
pass "--stack-retention 0 keeps stacks for ever: a two-hour-old window stays (retained_from_ms 0)"
