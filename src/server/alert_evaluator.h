// The alert evaluator: what `expanse-server serve` runs every --alert-interval. For each
// organisation's enabled rules (docs/formats/alerts.md):
//   - verdict rules: every job running (or ended within the look-back) on the organisation's
//     computes gets its verdicts (the API's rules, verdict_evidence.h); a verdict lasting at
//     least the rule's min_duration fires one message per (rule, job);
//   - a rule's scancel action: a job warned at least action_grace_s ago whose verdict still
//     holds is reported (dry run) or cancelled through its controller;
//   - digest rules: once a period has ended, one message per user with GPU time in it (the
//     idle ledger rolled up per user, efficiency_rollup.h).
// Deduplication is the store's (one delivery per rule and subject, claimed by an INSERT, also
// between replicas); throttling caps a rule's sent messages per hour (the rest are recorded
// as throttled); failures that may pass are retried with a growing delay, a few times. Every
// outcome is a delivery row and an audit event ("alert.sent", "alert.throttled",
// "alert.failed", "alert.action").
#ifndef EXPANSE_SERVER_ALERT_EVALUATOR_H_
#define EXPANSE_SERVER_ALERT_EVALUATOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "server/alert_messages.h"
#include "server/alert_sender.h"
#include "server/verdict_rules.h"
#include "store/store.h"
#include "tsdb/telemetry_store.h"

namespace expanse::server {

// The verdict codes a rule may name (docs/formats/verdicts.md).
bool IsVerdictCode(std::string_view code);

struct AlertEvaluatorOptions {
  std::string console_url;  // for links in messages; "" = none
  // A job that ended this recently is still evaluated (its last verdicts can still fire).
  int64_t lookback_ms = 5 * 60'000;
  int max_attempts = 5;             // sends of one message before it is given up
  int64_t retry_after_ms = 60'000;  // times the attempts made: the delay before a retry
  // A delivery claimed this long ago and still pending was left by an evaluation that ended
  // before its send (a crash, the database away at the update): it is sent again. Far longer
  // than a send's deadlines (15 s webhook, 30 s mail).
  int64_t abandoned_after_ms = 10 * 60'000;
  // One claimed longer ago than this is not sent but marked failed: news no longer.
  int64_t abandoned_max_age_ms = 24 * 3600'000;
  int max_jobs_per_compute = 5'000;  // a bound on one round's work
  VerdictThresholds thresholds;
};

// What one round did.
struct AlertRound {
  int64_t rules = 0;
  int64_t jobs_evaluated = 0;
  int64_t sent = 0;
  int64_t throttled = 0;
  int64_t failed = 0;               // given up
  int64_t retry = 0;                // failed now, tried again later
  int64_t actions = 0;              // scancel actions taken or (dry run) reported
  std::vector<std::string> errors;  // rounds go on past a compute or rule that fails
};

class AlertEvaluator {
 public:
  AlertEvaluator(store::Store& store, tsdb::TelemetryStore& tsdb, Clock& clock, AlertSender& sender,
                 AlertEvaluatorOptions options);

  // One round over every enabled rule. Fails only when the rules cannot be read.
  Result<AlertRound> RunOnce();

 private:
  void EvaluateVerdictRules(int64_t org_id, const std::vector<store::AlertRule>& rules,
                            int64_t now_ms, AlertRound& round);
  void EvaluateJob(const std::vector<store::AlertRule>& rules, const store::JobRecord& job,
                   const JobCells& cells, const std::vector<Verdict>& verdicts, int64_t now_ms,
                   AlertRound& round);
  void MaybeAct(const store::AlertRule& rule, const store::JobRecord& job, const Verdict& verdict,
                int64_t now_ms, AlertRound& round);
  void EvaluateDigest(const store::AlertRule& rule, int64_t now_ms, AlertRound& round);
  // Sends again what failed in a way that may pass, and what an evaluation left pending. Each
  // is taken first (Store::TakeAlertDelivery), so replicas evaluating together send it once.
  void RetryDeliveries(int64_t org_id, const std::vector<store::AlertRule>& rules, int64_t now_ms,
                       AlertRound& round);
  // What a message about this run of `job` is claimed under: "<compute>/<job>", or, when the
  // rule's delivery about that was made before this run started (an earlier run of a requeued
  // job, or an earlier job with the same id), "<compute>/<job>@<start ms>".
  std::string RunSubject(const store::AlertRule& rule, const store::JobRecord& job);
  // Sends a claimed delivery (or records it throttled) and stores the outcome.
  void Deliver(const store::AlertRule& rule, store::AlertDelivery delivery, const AlertText& alert,
               int64_t now_ms, AlertRound& round);
  // "<console_url>/#/o/<org slug>", or "" without a console URL.
  std::string OrgConsole(int64_t org_id);
  void Audit(const store::AlertRule& rule, const store::AlertDelivery& delivery,
             const std::string& action, int64_t now_ms);

  store::Store& store_;
  tsdb::TelemetryStore& tsdb_;
  Clock& clock_;
  AlertSender& sender_;
  AlertEvaluatorOptions options_;
  // Per digest rule, the last period whose users were all claimed (by this process).
  std::map<int64_t, int64_t> digest_done_to_ms_;
};

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_ALERT_EVALUATOR_H_
