#include "server/alert_evaluator.h"

#include <algorithm>
#include <array>
#include <utility>

#include <nlohmann/json.hpp>

#include "server/efficiency_rollup.h"
#include "server/job_usage.h"
#include "server/verdict_evidence.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr int64_t kHourMs = 3'600'000;
constexpr int kJobPage = 1'000;
constexpr int kRetryBatch = 100;
constexpr size_t kMaxSummaryBytes = 1'000;

constexpr std::array<std::string_view, 10> kVerdictCodes = {
    "no_process",         "over_allocated", "host_bound", "input_bound",      "io_wait",
    "communication_wait", "stuck",          "sync_bound", "memory_oversized", "cpu_only"};

std::string StoredMessage(const AlertText& alert) {
  return json{{"subject", alert.subject}, {"text", alert.text}, {"facts", alert.facts}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

AlertText MessageFromStore(const std::string& stored) {
  AlertText alert;
  const json doc = json::parse(stored, nullptr, false);
  if (!doc.is_object())
    return alert;
  alert.subject = doc.value("subject", "");
  alert.text = doc.value("text", "");
  if (auto facts = doc.find("facts"); facts != doc.end() && facts->is_object())
    alert.facts = *facts;
  return alert;
}

std::string Summary(const std::string& subject) {
  return subject.size() <= kMaxSummaryBytes ? subject : subject.substr(0, kMaxSummaryBytes);
}

// A delivery of `alert` about `subject` to claim; `job` is null for a digest.
store::AlertDelivery NewDelivery(const store::AlertRule& rule, std::string subject,
                                 const store::JobRecord* job, std::string user,
                                 const AlertText& alert, int64_t now_ms) {
  store::AlertDelivery d;
  d.rule_id = rule.id;
  d.org_id = rule.org_id;
  d.subject = std::move(subject);
  if (job != nullptr) {
    d.compute_id = job->compute_id;
    d.job_id = job->job_id;
  }
  d.user = std::move(user);
  d.summary = Summary(alert.subject);
  d.message = StoredMessage(alert);
  d.created_at_ms = now_ms;
  return d;
}

}  // namespace

std::string AlertEvaluator::OrgConsole(int64_t org_id) {
  if (options_.console_url.empty())
    return "";
  Result<store::Organization> org = store_.GetOrganization(org_id);
  return org.ok() ? options_.console_url + "/#/o/" + org->slug : "";
}

bool IsVerdictCode(std::string_view code) {
  return std::find(kVerdictCodes.begin(), kVerdictCodes.end(), code) != kVerdictCodes.end();
}

AlertEvaluator::AlertEvaluator(store::Store& store, tsdb::TelemetryStore& tsdb, Clock& clock,
                               AlertSender& sender, AlertEvaluatorOptions options)
    : store_(store), tsdb_(tsdb), clock_(clock), sender_(sender), options_(std::move(options)) {}

Result<AlertRound> AlertEvaluator::RunOnce() {
  AlertRound round;
  const int64_t now_ms = clock_.NowMs();
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<store::AlertRule> rules, store_.ListAlertRules(0));
  round.rules = static_cast<int64_t>(rules.size());
  // By organisation: every rule (for the retries), and the verdict rules.
  std::map<int64_t, std::vector<store::AlertRule>> of_org, verdict_rules;
  for (const store::AlertRule& rule : rules) {
    of_org[rule.org_id].push_back(rule);
    if (rule.kind == "verdict")
      verdict_rules[rule.org_id].push_back(rule);
  }
  for (const auto& [org_id, org_rules] : of_org)
    RetryDeliveries(org_id, org_rules, now_ms, round);
  for (const auto& [org_id, org_rules] : verdict_rules)
    EvaluateVerdictRules(org_id, org_rules, now_ms, round);
  for (const store::AlertRule& rule : rules) {
    if (rule.kind == "digest")
      EvaluateDigest(rule, now_ms, round);
  }
  // Forget digest rules that are gone.
  std::erase_if(digest_done_to_ms_, [&](const auto& entry) {
    return std::none_of(rules.begin(), rules.end(),
                        [&](const store::AlertRule& r) { return r.id == entry.first; });
  });
  return round;
}

void AlertEvaluator::EvaluateVerdictRules(int64_t org_id,
                                          const std::vector<store::AlertRule>& rules,
                                          int64_t now_ms, AlertRound& round) {
  Result<std::vector<store::Compute>> computes = store_.ListComputes(org_id);
  if (!computes.ok()) {
    round.errors.push_back("computes of organisation " + std::to_string(org_id) + ": " +
                           computes.status().message());
    return;
  }
  store::JobStore& jobs = store_.Jobs();
  for (const store::Compute& compute : *computes) {
    if (compute.state == store::ComputeState::kDeprovisioned)
      continue;
    std::map<std::string, GpuModel> models;
    if (auto heartbeat = store_.LatestHeartbeat(compute.id); heartbeat.ok())
      models = GpuModelsFromHeartbeat(heartbeat->body_json);
    store::JobFilter filter;
    filter.compute_ids = {compute.id};
    filter.from_ms = now_ms - options_.lookback_ms;
    filter.limit = kJobPage;
    for (int seen = 0; seen < options_.max_jobs_per_compute; seen += kJobPage) {
      filter.offset = seen;
      Result<std::vector<store::JobRecord>> page = jobs.ListJobs(filter);
      if (!page.ok()) {
        round.errors.push_back("jobs of " + compute.id + ": " + page.status().message());
        break;
      }
      for (const store::JobRecord& job : *page) {
        if (job.start_ms == 0)
          continue;  // pending: nothing to say yet
        auto allocations = jobs.GpuAllocations(compute.id, job.job_id);
        auto events = jobs.NodeEvents(compute.id, job.job_id);
        if (!allocations.ok() || !events.ok() || allocations->empty())
          continue;  // verdicts are about GPUs
        const std::vector<std::string> hosts = JobHosts(job, *allocations, *events);
        Result<JobCells> cells = GatherJobCells(tsdb_, job, *allocations, hosts, models, now_ms);
        if (!cells.ok()) {
          round.errors.push_back("job " + compute.id + "/" + job.job_id + ": " +
                                 cells.status().message());
          continue;
        }
        Result<std::vector<Verdict>> verdicts = JobVerdicts(jobs, job, *cells, options_.thresholds);
        if (!verdicts.ok()) {
          round.errors.push_back("job " + compute.id + "/" + job.job_id + ": " +
                                 verdicts.status().message());
          continue;
        }
        ++round.jobs_evaluated;
        EvaluateJob(rules, job, *cells, *verdicts, now_ms, round);
      }
      if (page->size() < static_cast<size_t>(kJobPage))
        break;
    }
  }
}

void AlertEvaluator::EvaluateJob(const std::vector<store::AlertRule>& rules,
                                 const store::JobRecord& job, const JobCells& cells,
                                 const std::vector<Verdict>& verdicts, int64_t now_ms,
                                 AlertRound& round) {
  for (const store::AlertRule& rule : rules) {
    // The longest interval of the rule's verdict, if it lasted long enough.
    const Verdict* match = nullptr;
    for (const Verdict& v : verdicts) {
      if (v.code != rule.verdict || v.to_ms - v.from_ms < rule.min_duration_s * 1000)
        continue;
      if (match == nullptr || v.to_ms - v.from_ms > match->to_ms - match->from_ms)
        match = &v;
    }
    if (match == nullptr)
      continue;
    const AlertText alert = VerdictAlertText(rule, job, *match, OrgConsole(rule.org_id));
    const store::AlertDelivery delivery =
        NewDelivery(rule, RunSubject(rule, job), &job, job.user, alert, now_ms);
    Result<store::AlertDelivery> claimed = store_.ClaimAlertDelivery(delivery);
    if (claimed.ok()) {
      Deliver(rule, *claimed, alert, now_ms, round);
    } else if (claimed.status().code() != StatusCode::kAlreadyExists) {
      round.errors.push_back("claiming " + delivery.subject + ": " + claimed.status().message());
    } else if (!rule.action.empty()) {
      // Only a verdict that runs to now (within two cells) still holds.
      const bool ongoing = cells.running && match->to_ms >= cells.end_ms - 2 * cells.cell_ms;
      if (ongoing)
        MaybeAct(rule, job, *match, now_ms, round);
    }
  }
}

std::string AlertEvaluator::RunSubject(const store::AlertRule& rule, const store::JobRecord& job) {
  const std::string subject = job.compute_id + "/" + job.job_id;
  if (job.start_ms <= 0)
    return subject;
  // created_at_ms is the server's clock and start_ms the cluster's: the margin keeps a cluster
  // clock that runs ahead from making the same run look new (and warned again).
  constexpr int64_t kClockMarginMs = 10 * 60'000;
  Result<store::AlertDelivery> first = store_.GetAlertDelivery(rule.id, subject);
  if (first.ok() && first->created_at_ms + kClockMarginMs < job.start_ms)
    return subject + "@" + std::to_string(job.start_ms);
  return subject;
}

void AlertEvaluator::MaybeAct(const store::AlertRule& rule, const store::JobRecord& job,
                              const Verdict& verdict, int64_t now_ms, AlertRound& round) {
  if (job.end_ms != 0)
    return;  // the job ended: nothing to act on
  const std::string subject = RunSubject(rule, job);
  Result<store::AlertDelivery> warning = store_.GetAlertDelivery(rule.id, subject);
  if (!warning.ok() || warning->state != "sent" ||
      now_ms - warning->updated_at_ms < rule.action_grace_s * 1000)
    return;  // no warning went out yet, or its grace has not passed
  const std::string action_subject = subject + "/" + rule.action;
  if (store_.GetAlertDelivery(rule.id, action_subject).ok())
    return;  // acted on before (or by another replica)
  const bool dry_run = rule.action_dry_run;
  if (!dry_run) {
    // The request first (one per compute, kind and job: made again it is AlreadyExists): an
    // action claimed and then not requested would be told to the user and never done.
    // The controller runs scancel when its next heartbeat's answer carries the request, and
    // reports the outcome in the heartbeat after (audited as compute_request.done/failed).
    store::ComputeRequest request;
    request.compute_id = job.compute_id;
    request.org_id = rule.org_id;
    request.kind = rule.action;
    request.job_id = job.job_id;
    request.reason = ("alert rule " + std::to_string(rule.id) + ": " + verdict.code + " for " +
                      HumanDuration(verdict.to_ms - verdict.from_ms))
                         .substr(0, 512);
    request.rule_id = rule.id;
    request.created_at_ms = now_ms;
    request.replaces_made_before_ms = job.start_ms;  // an earlier run's request is done
    if (auto made = store_.CreateComputeRequest(request);
        !made.ok() && made.status().code() != StatusCode::kAlreadyExists) {
      round.errors.push_back("requesting scancel of " + subject + ": " + made.status().message());
      return;  // asked again next round
    }
  }
  const AlertText alert = ActionText(rule, job, verdict, dry_run, OrgConsole(rule.org_id));
  Result<store::AlertDelivery> claimed =
      store_.ClaimAlertDelivery(NewDelivery(rule, action_subject, &job, job.user, alert, now_ms));
  if (!claimed.ok())
    return;  // another replica acted meanwhile
  ++round.actions;
  Audit(rule, *claimed, "alert.action", now_ms);
  Deliver(rule, *claimed, alert, now_ms, round);
}

void AlertEvaluator::EvaluateDigest(const store::AlertRule& rule, int64_t now_ms,
                                    AlertRound& round) {
  const int64_t period_ms = rule.period_s * 1000;
  if (period_ms <= 0 || now_ms < rule.created_at_ms + period_ms)
    return;  // the first period has not ended
  const int64_t to_ms = rule.created_at_ms + (now_ms - rule.created_at_ms) / period_ms * period_ms;
  const int64_t from_ms = to_ms - period_ms;
  if (auto done = digest_done_to_ms_.find(rule.id);
      done != digest_done_to_ms_.end() && done->second >= to_ms)
    return;
  Result<std::vector<store::Compute>> computes = store_.ListComputes(rule.org_id);
  if (!computes.ok()) {
    round.errors.push_back("digest " + std::to_string(rule.id) + ": " +
                           computes.status().message());
    return;
  }
  RollupOptions options;
  for (const store::Compute& c : *computes)
    options.compute_ids.push_back(c.id);
  if (options.compute_ids.empty()) {
    digest_done_to_ms_[rule.id] = to_ms;
    return;
  }
  options.group_by = LedgerGroupBy::kUser;
  options.window = {from_ms, to_ms};
  options.now_ms = now_ms;
  options.max_jobs = kMaxRollupJobs;
  Result<Rollup> rollup = RollUpLedgers(store_.Jobs(), tsdb_, options);
  if (!rollup.ok()) {
    round.errors.push_back("digest " + std::to_string(rule.id) + ": " + rollup.status().message());
    return;
  }
  for (const RollupGroup& user : rollup->groups) {
    if (user.key.empty() || user.totals.allocated_ms <= 0)
      continue;
    const AlertText alert = DigestText(rule, user, from_ms, to_ms, OrgConsole(rule.org_id));
    Result<store::AlertDelivery> claimed = store_.ClaimAlertDelivery(
        NewDelivery(rule, "digest/" + user.key + "/" + std::to_string(from_ms), nullptr, user.key,
                    alert, now_ms));
    if (claimed.ok())
      Deliver(rule, *claimed, alert, now_ms, round);
  }
  digest_done_to_ms_[rule.id] = to_ms;
}

void AlertEvaluator::RetryDeliveries(int64_t org_id, const std::vector<store::AlertRule>& rules,
                                     int64_t now_ms, AlertRound& round) {
  for (const std::string_view state : {"retry", "pending"}) {
    Result<std::vector<store::AlertDelivery>> waiting =
        store_.ListAlertDeliveries(org_id, 0, state, kRetryBatch);
    if (!waiting.ok())
      continue;
    for (store::AlertDelivery& d : *waiting) {
      const int64_t wait_ms = state == "retry" ? options_.retry_after_ms * std::max(1, d.attempts)
                                               : options_.abandoned_after_ms;
      if (now_ms - d.updated_at_ms < wait_ms)
        continue;
      auto rule = std::find_if(rules.begin(), rules.end(),
                               [&](const store::AlertRule& r) { return r.id == d.rule_id; });
      if (rule == rules.end())
        continue;  // the rule was disabled meanwhile
      Result<bool> taken = store_.TakeAlertDelivery(d.id, state, d.updated_at_ms, now_ms);
      if (!taken.ok()) {
        round.errors.push_back("taking delivery " + std::to_string(d.id) + ": " +
                               taken.status().message());
        continue;
      }
      if (!*taken)
        continue;
      if (state == "pending" && now_ms - d.created_at_ms > options_.abandoned_max_age_ms) {
        // News no longer: left by an older server, or by an evaluation long ago.
        d.state = "failed";
        d.last_error =
            "left pending by an evaluation that ended before sending it; too old to "
            "send now";
        d.updated_at_ms = now_ms;
        if (Status s = store_.UpdateAlertDelivery(d); !s.ok())
          round.errors.push_back("recording delivery " + std::to_string(d.id) + ": " + s.message());
        ++round.failed;
        continue;
      }
      Deliver(*rule, d, MessageFromStore(d.message), now_ms, round);
    }
  }
}

void AlertEvaluator::Deliver(const store::AlertRule& rule, store::AlertDelivery delivery,
                             const AlertText& alert, int64_t now_ms, AlertRound& round) {
  delivery.updated_at_ms = now_ms;
  Result<int64_t> sent_last_hour = store_.CountAlertDeliveries(rule.id, "sent", now_ms - kHourMs);
  if (sent_last_hour.ok() && *sent_last_hour >= rule.max_per_hour) {
    delivery.state = "throttled";
    delivery.last_error =
        "over the rule's " + std::to_string(rule.max_per_hour) + " messages per hour; not sent";
    ++round.throttled;
  } else {
    const std::string target = ExpandAlertTarget(rule.target, delivery.user);
    Status sent = OkStatus();
    if (rule.target.find("{user}") != std::string::npos && delivery.user.empty()) {
      sent = FailedPreconditionError("the target names {user}, and the job has no user");
    } else {
      sent = sender_.Send(rule.channel, target, alert);
    }
    ++delivery.attempts;
    if (sent.ok()) {
      delivery.state = "sent";
      delivery.last_error.clear();
      ++round.sent;
    } else {
      const bool transient =
          sent.code() == StatusCode::kUnavailable || sent.code() == StatusCode::kDeadlineExceeded;
      delivery.last_error = sent.message().substr(0, 500);
      if (transient && delivery.attempts < options_.max_attempts) {
        delivery.state = "retry";
        ++round.retry;
      } else {
        delivery.state = "failed";
        ++round.failed;
      }
    }
  }
  if (Status s = store_.UpdateAlertDelivery(delivery); !s.ok())
    round.errors.push_back("recording delivery " + std::to_string(delivery.id) + ": " +
                           s.message());
  if (delivery.state != "retry")
    Audit(rule, delivery, "alert." + delivery.state, now_ms);
}

void AlertEvaluator::Audit(const store::AlertRule& rule, const store::AlertDelivery& delivery,
                           const std::string& action, int64_t now_ms) {
  store::AuditEvent event;
  event.at_ms = now_ms;
  event.org_id = rule.org_id;
  event.actor = "alerts";
  event.action = action;
  event.target = delivery.subject;
  json detail = {{"rule_id", rule.id},         {"rule", rule.name},
                 {"channel", rule.channel},    {"delivery_id", delivery.id},
                 {"state", delivery.state},    {"attempts", delivery.attempts},
                 {"summary", delivery.summary}};
  if (!delivery.last_error.empty())
    detail["error"] = delivery.last_error;
  if (action == "alert.action")
    detail["dry_run"] = rule.action_dry_run;
  event.detail_json = detail.dump(-1, ' ', false, json::error_handler_t::replace);
  (void)store_.AppendAudit(event);
}

}  // namespace expanse::server
