#!/usr/bin/env bash
# Alerts delivered for real (issue 19, item 5): a real expanse-server fed by the real daemon (a
# worker sampler with the fake NVML and its hooks, the controller's outbox) evaluates its
# organisation's alert rules and delivers
#   - webhooks (Slack/Mattermost JSON) to a local HTTP receiver: once per job, throttled over
#     the rule's hourly cap, retried after a 503, given up after a 404;
#   - mail through OpenSMTPD from Debian's packages, on loopback, delivering to a maildir the
#     test reads: one per job to the job's user, and a per-user digest once its period ends;
# every outcome audited; a restarted server sends nothing twice.
# Usage: alerts.sh BUILD_DIR
set -euo pipefail
BUILD="${1:?build directory}"
SERVER="$BUILD/bin/expanse-server"
DAEMON="$BUILD/bin/expanse-daemon"
FAKE_NVML="$BUILD/fakes/nvml/libnvidia-ml.so.1"
TEST_NAME=server_alerts
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib/expanse_server.sh"
fail() {
  printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2
  for f in "$DIR"/*.log; do echo "== $f" >&2; tail -20 "$f" >&2; done
  exit 1
}
pass() { printf 'ok   [%s]: %s\n' "$TEST_NAME" "$*"; }
command -v smtpd >/dev/null || fail "smtpd is missing (scripts/setup packages installs opensmtpd)"

DIR="$(mktemp -d)"
chmod 711 "$DIR" # the mail server delivers as nobody, into $DIR/mail
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  server_stop || true
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- a mail server on loopback: mail for @expanse.test lands in $DIR/mail/<user>/new ----------
SMTP_PORT="$(free_port)"
mkdir -p "$DIR/mail" && chown nobody "$DIR/mail"
printf '%s\n' 'table vusers { "@expanse.test" = "nobody" }' \
  "listen on 127.0.0.1 port $SMTP_PORT" \
  "action \"deliver\" maildir \"$DIR/mail/%{rcpt.user}\" virtual <vusers>" \
  'match from any for domain "expanse.test" action "deliver"' >"$DIR/smtpd.conf"
smtpd -n -f "$DIR/smtpd.conf" >"$DIR/smtpd-check.log" 2>&1 || fail "smtpd.conf: $(cat "$DIR/smtpd-check.log")"
smtpd -d -f "$DIR/smtpd.conf" >"$DIR/smtpd.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do grep -q 'starting' "$DIR/smtpd.log" && break; sleep 0.1; done
pass "OpenSMTPD listening on 127.0.0.1:$SMTP_PORT, delivering to maildirs under $DIR/mail"

# --- a webhook receiver ----------------------------------------------------------------------
python3 "$here/webhook_receiver.py" "$DIR/webhook.port" "$DIR/webhooks.jsonl" >"$DIR/receiver.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do [[ -s "$DIR/webhook.port" ]] && break; sleep 0.1; done
[[ -s "$DIR/webhook.port" ]] || fail "the webhook receiver did not start"
HOOK="http://127.0.0.1:$(cat "$DIR/webhook.port")"
: >"$DIR/webhooks.jsonl"

# --- the server, with mail, evaluating every 2 s ---------------------------------------------
SERVER_EXTRA_ARGS="--alert-interval 2s --alert-loopback-webhooks --smtp-url smtp://127.0.0.1:$SMTP_PORT --smtp-from alerts@expanse.test"
server_start || fail "server did not start"
prefix="$DIR/shared"
mkdir -p "$prefix" "$DIR/worker1" "$DIR/ctl"
server_register alerts "$prefix" || fail "registration"
printf 'SSL_CERT_FILE=%s\n' "$CA_FILE" >"$DIR/daemon.env"

rule() { api POST /api/v1/orgs/acme/alert-rules "$1" | jq -r '.id // empty'; }
r_hook="$(rule "{\"name\":\"too many GPUs\",\"verdict\":\"over_allocated\",\"channel\":\"webhook\",\"target\":\"$HOOK/hook\",\"max_per_hour\":1}")"
r_mail="$(rule '{"name":"tell the user","verdict":"over_allocated","channel":"email","target":"{user}@expanse.test"}')"
r_flaky="$(rule "{\"name\":\"flaky receiver\",\"verdict\":\"over_allocated\",\"channel\":\"webhook\",\"target\":\"$HOOK/flaky\"}")"
r_gone="$(rule "{\"name\":\"gone receiver\",\"verdict\":\"over_allocated\",\"channel\":\"webhook\",\"target\":\"$HOOK/gone\"}")"
r_digest="$(rule '{"name":"digest","kind":"digest","period_s":60,"channel":"email","target":"{user}@expanse.test"}')"
[[ -n "$r_hook" && -n "$r_mail" && -n "$r_flaky" && -n "$r_gone" && -n "$r_digest" ]] ||
  fail "rules not created: $(api GET /api/v1/orgs/acme/alert-rules)"
pass "rules: over_allocated to a webhook (1 an hour), by mail to the job's user, to a flaky and to a gone receiver; a 60 s digest"

# --- two jobs of two GPUs each on worker1: in each, one GPU busy and the other never used ------
# (Each job its own GPUs: two jobs given the same GPUs would be sharing them, gres/shard, and
# neither is then charged with the other's kernels.)
printf '%s\n' '{"gpus": [' \
  '  {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000001", "minor": 0, "sm_util": 87, "memory_used_mib": 1000,' \
  '   "processes": [{"pid": 4242, "used_memory_mib": 900}]},' \
  '  {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000002", "minor": 1, "sm_util": 0},' \
  '  {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000003", "minor": 2, "sm_util": 87, "memory_used_mib": 1000,' \
  '   "processes": [{"pid": 4243, "used_memory_mib": 900}]},' \
  '  {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000004", "minor": 3, "sm_util": 0}]}' >"$DIR/scenario.json"
export EXPANSE_FAKE_NVML_SCENARIO="$DIR/scenario.json"
printf 'NodeName=worker1 Name=gpu File=/dev/nvidia[0-3]\n' >"$DIR/gres.conf"
# SLURM's view: a stand-in squeue printing a real 22.05 capture as two running jobs of ana.
start_s=$(($(date +%s) - 1))
mkdir -p "$DIR/bin"
printf '%s\n' '#!/bin/sh' \
  "exec jq '.jobs |= [(.[0] | .job_id = 77 | .user_name = \"ana\" | .start_time = $start_s | .end_time = 0 | .job_state = \"RUNNING\"), (.[0] | .job_id = 78 | .user_name = \"ana\" | .start_time = $start_s | .end_time = 0 | .job_state = \"RUNNING\")]' \"$here/../../fixtures/slurm/squeue_running.json\"" \
  >"$DIR/bin/squeue"
chmod +x "$DIR/bin/squeue"
for job_gpus in 77:0,1 78:2,3; do
  job="${job_gpus%%:*}" gpus="${job_gpus#*:}"
  env -i SLURM_JOB_ID=$job SLURMD_NODENAME=worker1 SLURM_JOB_USER=ana SLURM_JOB_GPUS=$gpus \
    CUDA_VISIBLE_DEVICES=$gpus "$DAEMON" hook prolog --events-dir "$DIR/worker1/events" \
    >>"$DIR/prolog.log" 2>&1 || fail "prolog of job $job exited non-zero"
done
common=(--env-file "$DIR/daemon.env" --nvml-library "$FAKE_NVML" --interval 200ms
  --slow-interval 1s --flush-interval 1s --control-dir "$DIR/control")
"$DAEMON" --role sampler --shared-prefix "$prefix" --hostname worker1 --state-dir "$DIR/worker1" \
  --events-dir "$DIR/worker1/events" --gres-conf "$DIR/gres.conf" "${common[@]}" \
  >"$DIR/sampler.log" 2>&1 &
pids+=($!)
PATH="$DIR/bin:$PATH" "$DAEMON" --role controller --config "$DIR/config.json" --hostname ctl \
  --state-dir "$DIR/ctl" --events-dir "$DIR/ctl/events" --heartbeat-interval 1s "${common[@]}" \
  >"$DIR/controller.log" 2>&1 &
pids+=($!)

deliveries() { api GET "/api/v1/orgs/acme/alert-deliveries?limit=100"; }
states_of() { # RULE: the rule's delivery states, sorted
  deliveries | jq -r --argjson r "$1" '[.alert_deliveries[] | select(.rule_id == $r) | .state] | sort | join(",")'
}
settled() {
  [[ "$(states_of "$r_hook")" == "sent,throttled" && "$(states_of "$r_mail")" == "sent,sent" &&
     "$(states_of "$r_gone")" == "failed,failed" ]]
}
for _ in $(seq 1 120); do settled && break; sleep 0.5; done
settled || fail "verdict alerts did not settle: $(deliveries)"

# --- webhooks ----------------------------------------------------------------------------------
posts="$(jq -s '[.[] | select(.path == "/hook")]' "$DIR/webhooks.jsonl")"
[[ "$(jq length <<<"$posts")" == 1 ]] || fail "POSTs to /hook: $posts"
[[ "$(jq -r '.[0].content_type' <<<"$posts")" == application/json ]] || fail "content type: $posts"
text="$(jq -r '.[0].body | fromjson | .text' <<<"$posts")"
[[ "$text" =~ \[Expanse\]\ job\ 7[78]\ \(ana\):\ over_allocated ]] || fail "webhook text: $text"
[[ "$text" == *"Suggestion: ask for 1 GPU, not 2 (--gres=gpu:1)"* ]] || fail "no suggestion in: $text"
[[ "$text" == *'"gpus_active":1'* ]] || fail "no evidence in: $text"
[[ "$(jq -r '.[0].body | fromjson | .expanse.verdict.code' <<<"$posts")" == over_allocated ]] ||
  fail "the webhook's expanse.verdict: $posts"
throttled="$(deliveries | jq -r --argjson r "$r_hook" '.alert_deliveries[] | select(.rule_id == $r and .state == "throttled") | .error')"
[[ "$throttled" == *"1 messages per hour"* ]] || fail "the throttled delivery's note: $throttled"
pass "webhook: one Slack-style message with the verdict, its suggestion and evidence; the other job's throttled (1 an hour)"
gone="$(jq -s '[.[] | select(.path == "/gone")] | length' "$DIR/webhooks.jsonl")"
[[ "$gone" == 2 ]] || fail "POSTs to /gone: $gone"
error="$(deliveries | jq -r --argjson r "$r_gone" '[.alert_deliveries[] | select(.rule_id == $r) | .error] | unique | join(";")')"
[[ "$error" == "the webhook answered HTTP 404" ]] || fail "the 404's delivery error: $error"
pass "a receiver answering 404 is given up at once (failed, with the answer)"

# --- mail ----------------------------------------------------------------------------------------
mails() { grep -l "$1" "$DIR"/mail/ana/new/* 2>/dev/null | wc -l; }
for _ in $(seq 1 40); do [[ "$(mails 'over_allocated')" -ge 2 ]] && break; sleep 0.25; done
[[ "$(mails '^Subject: \[Expanse\] job 77 (ana): over_allocated')" == 1 &&
   "$(mails '^Subject: \[Expanse\] job 78 (ana): over_allocated')" == 1 ]] ||
  fail "mails in ana's maildir: $(grep -h '^Subject' "$DIR"/mail/ana/new/* 2>/dev/null)"
mail="$(grep -l 'job 77 (ana)' "$DIR"/mail/ana/new/* | head -1)"
grep -q '^From: alerts@expanse.test' "$mail" || fail "From: $(head -12 "$mail")"
grep -q '^To: ana@expanse.test' "$mail" || fail "To: $(head -12 "$mail")"
grep -q '^Auto-Submitted: auto-generated' "$mail" || fail "Auto-Submitted: $(head -12 "$mail")"
grep -q 'Suggestion: ask for 1 GPU, not 2' "$mail" || fail "the mail's text: $(cat "$mail")"
pass "mail through OpenSMTPD: one per job, to the job's user (ana@expanse.test), From the configured sender"

# --- a 503, then the retry ---------------------------------------------------------------------
for _ in $(seq 1 200); do [[ "$(states_of "$r_flaky")" == "sent,sent" ]] && break; sleep 0.5; done
[[ "$(states_of "$r_flaky")" == "sent,sent" ]] || fail "the flaky receiver's deliveries: $(deliveries)"
flaky="$(jq -s -c '[.[] | select(.path == "/flaky") | .status]' "$DIR/webhooks.jsonl")"
[[ "$flaky" == "[503,200,200]" ]] || fail "POSTs to /flaky answered $flaky"
attempts="$(deliveries | jq -r --argjson r "$r_flaky" '[.alert_deliveries[] | select(.rule_id == $r) | .attempts] | sort | join(",")')"
[[ "$attempts" == "1,2" ]] || fail "attempts of the flaky deliveries: $attempts"
pass "a receiver answering 503 got that message again a minute later (2 attempts), each message once"

# --- the digest, once its 60 s period has ended ---------------------------------------------------
for _ in $(seq 1 200); do [[ "$(mails '^Subject: \[Expanse\] GPU digest for ana')" == 1 ]] && break; sleep 0.5; done
digest="$(grep -l '^Subject: \[Expanse\] GPU digest for ana' "$DIR"/mail/ana/new/* | head -1)"
[[ -n "$digest" ]] || fail "no digest mail: $(deliveries)"
grep -q 'jobs with GPUs: *2' "$digest" || fail "the digest: $(cat "$digest")"
grep -q 'GPUs never used: *2 of 4' "$digest" || fail "the digest: $(cat "$digest")"
pass "a digest for ana after its period: 2 jobs, 2 of 4 GPUs never used"

# --- audited; a restart sends nothing twice ---------------------------------------------------------
audit="$(api GET '/api/v1/orgs/acme/audit?limit=200')"
for action in alert_rule.created alert.sent alert.throttled alert.failed; do
  jq -e --arg a "$action" '[.events[] | select(.action == $a)] | length > 0' <<<"$audit" >/dev/null ||
    fail "no $action in the audit log"
done
[[ "$(jq '[.events[] | select(.action == "alert.sent")] | length' <<<"$audit")" == 6 ]] ||
  fail "alert.sent events: $(jq -c '[.events[] | select(.action | startswith("alert"))]' <<<"$audit")"
pass "audited: rules created, 6 sent (webhook, 2 mails, 2 to the flaky receiver, digest), throttled, failed"
posts_before="$(wc -l <"$DIR/webhooks.jsonl")"
mails_before="$(ls "$DIR"/mail/ana/new | wc -l)"
server_stop
server_start || fail "server did not restart"
sleep 8 # four rounds
[[ "$(wc -l <"$DIR/webhooks.jsonl")" == "$posts_before" && "$(ls "$DIR"/mail/ana/new | wc -l)" == "$mails_before" ]] ||
  fail "the restarted server sent again: $(tail -3 "$DIR/webhooks.jsonl")"
pass "a restarted server sends nothing twice"
