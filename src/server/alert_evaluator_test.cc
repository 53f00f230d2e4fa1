// Alerts end to end inside one server: rules made through the API, jobs ingested from a
// compute's daemon, the evaluator's rounds on an injected clock, and a recording sender at the
// seam where messages leave (webhook and mail delivery are tested for real in
// tests/integration/server/alerts.sh).
#include "server/alert_evaluator.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"

namespace expanse::server {
namespace alert_evaluator_test {
namespace {

using api_testing::kStart;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kTenMinutes = 600'000;

struct Sent {
  std::string channel;
  std::string target;
  AlertText alert;
};

class RecordingSender final : public AlertSender {
 public:
  Status Send(std::string_view channel, std::string_view target, const AlertText& alert) override {
    if (!failures.empty()) {
      Status s = failures.front();
      failures.erase(failures.begin());
      return s;
    }
    sent.push_back({std::string(channel), std::string(target), alert});
    return OkStatus();
  }
  bool can_email() const override { return true; }
  bool loopback_webhooks() const override { return false; }
  std::vector<Sent> sent;
  std::vector<Status> failures;  // returned, in order, before anything is sent
};

// Job `job` on two GPUs of worker2 from `start` for ten minutes (running when `running`), one
// sample a second: one GPU busy with its process, the other idle with none: over_allocated
// and no_process.
std::string JobBatch(const std::string& job, int64_t start, bool running, int sequence) {
  json series = json::array();
  const std::string a = "GPU-" + job + "-busy", b = "GPU-" + job + "-idle";
  for (const auto& [device, metric, value] :
       std::vector<std::tuple<std::string, std::string, double>>{{a, "gpu.sm_util", 95},
                                                                 {a, "gpu.processes", 1},
                                                                 {b, "gpu.sm_util", 0},
                                                                 {b, "gpu.processes", 0}}) {
    series.push_back(api_testing::TenMinuteSeries(device, metric, value, start));
  }
  json allocations = json::array();
  int index = 0;
  for (const std::string& gpu : {a, b}) {
    allocations.push_back({{"job_id", job},
                           {"host", "worker2"},
                           {"gpu_uuid", gpu},
                           {"gpu_index", index++},
                           {"from_ms", start},
                           {"to_ms", running ? 0 : start + kTenMinutes}});
  }
  return json{{"version", 1},
              {"stream", "telemetry"},
              {"sequence", sequence},
              {"series", series},
              {"jobs",
               {{{"job_id", job},
                 {"name", "train"},
                 {"state", running ? "RUNNING" : "COMPLETED"},
                 {"user", "ana"},
                 {"account", "ml"},
                 {"partition", "gpu"},
                 {"req_gpus", 2},
                 {"start_ms", start},
                 {"end_ms", running ? 0 : start + kTenMinutes},
                 {"observed_ms", start}}}},
              {"gpu_allocations", allocations}}
      .dump();
}

class AlertEvaluatorTest : public api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
  }

  void Ingest(const std::string& job, bool running = false, int64_t start = kStart) {
    Reply r = Call("POST", "/dp/v1/ingest", JobBatch(job, start, running, ++sequence_),
                   Bearer(credential_));
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // SQL on the server's database beside the server (a trigger that makes a write fail).
  void ExecuteOnDatabase(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "db.sqlite").c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    const std::string message = error != nullptr ? error : "";
    sqlite3_free(error);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }

  int64_t MakeRule(const json& rule) {
    Reply r = Call("POST", "/api/v1/orgs/acme/alert-rules", rule.dump(), Bearer(token_));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.body.value("id", int64_t{0});
  }

  // A rule that warns of over_allocated and then, with no grace, has the job cancelled.
  int64_t MakeScancelRule() {
    return MakeRule({{"name", "cancel idle jobs"},
                     {"verdict", "over_allocated"},
                     {"channel", "webhook"},
                     {"target", "https://hooks.example.org/x"},
                     {"action", "scancel"},
                     {"action_grace_s", 0},
                     {"action_dry_run", false}});
  }

  AlertRound Round(AlertEvaluatorOptions options = {}) {
    AlertEvaluator evaluator(app_->store(), app_->telemetry(), clock_, sender_, options);
    Result<AlertRound> round = evaluator.RunOnce();
    EXPECT_TRUE(round.ok()) << round.status();
    EXPECT_TRUE(round.ok() && round->errors.empty())
        << (round.ok() && !round->errors.empty() ? round->errors.front() : "");
    return round.ok() ? *round : AlertRound{};
  }

  json Deliveries(const std::string& query = "") {
    Reply r = Call("GET", "/api/v1/orgs/acme/alert-deliveries" + query, "", Bearer(token_));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body["alert_deliveries"];
  }

  std::vector<std::string> AuditActions() {
    std::vector<std::string> out;
    auto events = app_->store().ListAudit(0, 100);
    for (const auto& e : events.ok() ? *events : std::vector<store::AuditEvent>{}) {
      if (e.action.starts_with("alert."))
        out.push_back(e.action);
    }
    return out;
  }

  RecordingSender sender_;
  std::string compute_;
  std::string credential_;
  int sequence_ = 0;
};

// A job's name is its user's to choose; a chat service must show it as written, not ping a
// channel or show a disguised link. The facts keep it raw for receivers that read them.
TEST(WebhookBodyTest, AJobsNameCannotPingOrLinkInAChat) {
  AlertText alert;
  alert.subject = "[Expanse] job 77 (ana): over_allocated";
  alert.text = "job 77 \"<!channel> @here [reset](https://evil.example) a&b\" of ana\n";
  alert.facts = {{"job_name", "<!channel> @here"}};
  const json body = json::parse(WebhookBody(alert));
  const std::string text = body["text"].get<std::string>();
  EXPECT_EQ(text,
            "[Expanse] job 77 (ana): over_allocated\njob 77 \"&lt;!channel&gt; @\u200bhere "
            "[reset]\u200b(https://evil.example) a&amp;b\" of ana\n");
  EXPECT_EQ(body["expanse"]["job_name"], "<!channel> @here");
  EXPECT_EQ(ChatSafeText("a]b ] ("), "a]b ] (");
}

TEST_F(AlertEvaluatorTest, AVerdictRuleFiresOncePerJobWithItsEvidence) {
  Ingest("77");
  MakeRule({{"name", "too many GPUs"},
            {"verdict", "over_allocated"},
            {"channel", "webhook"},
            {"target", "https://hooks.example.org/hook"}});
  clock_.Set(kStart + kTenMinutes + 60'000);
  AlertEvaluatorOptions options;
  options.console_url = "https://expanse.example.org";
  AlertRound first = Round(options);
  EXPECT_EQ(first.jobs_evaluated, 1);
  EXPECT_EQ(first.sent, 1);
  ASSERT_EQ(sender_.sent.size(), 1u);
  const Sent& s = sender_.sent[0];
  EXPECT_EQ(s.channel, "webhook");
  EXPECT_EQ(s.target, "https://hooks.example.org/hook");
  EXPECT_EQ(s.alert.subject, "[Expanse] job 77 (ana): over_allocated for 10 min on worker2");
  EXPECT_THAT(s.alert.text, HasSubstr("Suggestion: ask for 1 GPU, not 2 (--gres=gpu:1)"));
  EXPECT_THAT(s.alert.text, HasSubstr("\"gpus_active\":1"));
  EXPECT_THAT(s.alert.text,
              HasSubstr("https://expanse.example.org/#/o/acme/computes/" + compute_ + "/jobs/77"));
  EXPECT_EQ(s.alert.facts["verdict"]["code"], "over_allocated");
  EXPECT_EQ(s.alert.facts["job_id"], "77");
  const json body = json::parse(WebhookBody(s.alert));
  EXPECT_THAT(body["text"].get<std::string>(), HasSubstr("over_allocated"));

  // The next rounds find the delivery made: nothing new.
  clock_.Set(kStart + kTenMinutes + 120'000);
  EXPECT_EQ(Round(options).sent, 0);
  EXPECT_EQ(sender_.sent.size(), 1u);
  const json listed = Deliveries();
  ASSERT_EQ(listed.size(), 1u) << listed.dump();
  EXPECT_EQ(listed[0]["state"], "sent");
  EXPECT_EQ(listed[0]["subject"], compute_ + "/77");
  EXPECT_EQ(listed[0]["attempts"], 1);
  EXPECT_EQ(AuditActions(), std::vector<std::string>({"alert.sent"}));
}

TEST_F(AlertEvaluatorTest, AVerdictShorterThanTheRulesDurationDoesNotFire) {
  Ingest("77");
  MakeRule({{"name", "idle GPUs for an hour"},
            {"verdict", "no_process"},
            {"min_duration_s", 3600},
            {"channel", "webhook"},
            {"target", "https://hooks.example.org/x"}});
  MakeRule({{"name", "stuck"},
            {"verdict", "stuck"},
            {"channel", "webhook"},
            {"target", "https://hooks.example.org/y"}});
  clock_.Set(kStart + kTenMinutes + 60'000);
  AlertRound round = Round();
  EXPECT_EQ(round.jobs_evaluated, 1);
  EXPECT_EQ(round.sent, 0);
  EXPECT_TRUE(sender_.sent.empty());
  EXPECT_TRUE(Deliveries().empty());
}

TEST_F(AlertEvaluatorTest, ARuleOverItsHourlyCapRecordsTheRestAsThrottled) {
  Ingest("77");
  Ingest("78");
  Ingest("79");
  MakeRule({{"name", "too many GPUs"},
            {"verdict", "over_allocated"},
            {"channel", "webhook"},
            {"target", "https://hooks.example.org/x"},
            {"max_per_hour", 2}});
  clock_.Set(kStart + kTenMinutes + 60'000);
  AlertRound round = Round();
  EXPECT_EQ(round.sent, 2);
  EXPECT_EQ(round.throttled, 1);
  EXPECT_EQ(sender_.sent.size(), 2u);
  const json throttled = Deliveries("?state=throttled");
  ASSERT_EQ(throttled.size(), 1u);
  EXPECT_THAT(throttled[0]["error"].get<std::string>(), HasSubstr("2 messages per hour"));
  EXPECT_EQ(AuditActions().size(), 3u);
}

TEST_F(AlertEvaluatorTest, AFailureThatMayPassIsRetriedAndAFinalOneIsGivenUp) {
  Ingest("77");
  MakeRule({{"name", "too many GPUs"},
            {"verdict", "over_allocated"},
            {"channel", "webhook"},
            {"target", "https://hooks.example.org/x"}});
  sender_.failures = {UnavailableError("the webhook answered HTTP 503")};
  clock_.Set(kStart + kTenMinutes + 60'000);
  EXPECT_EQ(Round().retry, 1);
  EXPECT_EQ(Deliveries()[0]["state"], "retry");
  EXPECT_EQ(Deliveries()[0]["error"], "the webhook answered HTTP 503");
  // Too soon for the retry: nothing.
  clock_.Set(kStart + kTenMinutes + 90'000);
  EXPECT_EQ(Round().sent, 0);
  clock_.Set(kStart + kTenMinutes + 130'000);
  EXPECT_EQ(Round().sent, 1);
  EXPECT_EQ(Deliveries()[0]["state"], "sent");
  EXPECT_EQ(Deliveries()[0]["attempts"], 2);
  ASSERT_EQ(sender_.sent.size(), 1u);
  EXPECT_THAT(sender_.sent[0].alert.subject, HasSubstr("job 77"));  // rebuilt from the store

  Ingest("78");
  sender_.failures = {FailedPreconditionError("the webhook answered HTTP 404")};
  EXPECT_EQ(Round().failed, 1);
  EXPECT_EQ(Deliveries("?state=failed").size(), 1u);
  EXPECT_EQ(AuditActions(), std::vector<std::string>({"alert.failed", "alert.sent"}));
}

TEST_F(AlertEvaluatorTest, AWeeklyDigestGoesToEachUserOncePerPeriod) {
  store::AlertRule rule;
  rule.org_id = app_->store().GetOrganizationBySlug("acme")->id;
  rule.name = "hourly digest";
  rule.kind = "digest";
  rule.period_s = 3600;
  rule.channel = "email";
  rule.target = "{user}@example.org";
  rule.max_per_hour = 100;
  rule.created_by = "user:1";
  rule.created_at_ms = kStart - 60'000;
  ASSERT_TRUE(app_->store().CreateAlertRule(rule).ok());
  Ingest("77");
  clock_.Set(kStart + 1'000'000);  // the first period has not ended
  EXPECT_EQ(Round().sent, 0);
  clock_.Set(kStart + 3'600'000);
  AlertEvaluatorOptions options;
  AlertEvaluator evaluator(app_->store(), app_->telemetry(), clock_, sender_, options);
  ASSERT_EQ(evaluator.RunOnce()->sent, 1);
  ASSERT_EQ(sender_.sent.size(), 1u);
  EXPECT_EQ(sender_.sent[0].channel, "email");
  EXPECT_EQ(sender_.sent[0].target, "ana@example.org");
  EXPECT_EQ(sender_.sent[0].alert.subject,
            "[Expanse] GPU digest for ana: 0.2 of 0.3 GPU-hours idle");
  EXPECT_THAT(sender_.sent[0].alert.text, HasSubstr("GPUs never used:       1 of 2"));
  EXPECT_EQ(sender_.sent[0].alert.facts["idle_gpu_s"], 600);
  // Later in the same period, and from a fresh evaluator (a restart, another replica): once.
  clock_.Set(kStart + 3'700'000);
  EXPECT_EQ(evaluator.RunOnce()->sent, 0);
  EXPECT_EQ(Round().sent, 0);
  EXPECT_EQ(Deliveries()[0]["subject"], "digest/ana/" + std::to_string(kStart - 60'000));
}

TEST_F(AlertEvaluatorTest, AScancelActionIsADryRunAfterTheWarningsGrace) {
  Ingest("77", /*running=*/true);
  MakeRule({{"name", "cancel idle jobs"},
            {"verdict", "over_allocated"},
            {"channel", "webhook"},
            {"target", "https://hooks.example.org/x"},
            {"action", "scancel"},
            {"action_grace_s", 300}});
  clock_.Set(kStart + kTenMinutes + 5'000);
  EXPECT_EQ(Round().sent, 1);  // the warning
  clock_.Set(kStart + kTenMinutes + 60'000);
  EXPECT_EQ(Round().actions, 0);  // within the grace
  // The grace has passed and the job still holds a GPU it does not use.
  clock_.Set(kStart + kTenMinutes + 310'000);
  AlertRound act = Round();
  EXPECT_EQ(act.actions, 1);
  ASSERT_EQ(sender_.sent.size(), 2u);
  EXPECT_EQ(sender_.sent[1].alert.subject,
            "[Expanse] job 77 (ana): would have been cancelled (dry run)");
  EXPECT_EQ(sender_.sent[1].alert.facts["action"]["dry_run"], true);
  EXPECT_EQ(Round().actions, 0);  // once
  EXPECT_EQ(Deliveries()[0]["subject"], compute_ + "/77/scancel");
  EXPECT_THAT(AuditActions(), ::testing::Contains("alert.action"));
  EXPECT_TRUE(app_->store().ListComputeRequests(compute_, "", 10)->empty());  // a dry run
}

TEST_F(AlertEvaluatorTest, AScancelActionAsksTheControllerThroughTheHeartbeat) {
  Ingest("77", /*running=*/true);
  MakeScancelRule();
  clock_.Set(kStart + kTenMinutes + 5'000);
  EXPECT_EQ(Round().sent, 1);  // the warning
  AlertRound act = Round();
  EXPECT_EQ(act.actions, 1);
  ASSERT_EQ(sender_.sent.size(), 2u);
  EXPECT_EQ(sender_.sent[1].alert.subject, "[Expanse] job 77 (ana): cancellation requested");

  // The controller's heartbeat answer carries the request until the controller reports it.
  const auto heartbeat = [&](const json& body) {
    return Call("POST", "/cp/v1/heartbeat", body.dump(), Bearer(credential_));
  };
  const json plain = {{"version", 1}, {"daemon_version", "0.1.0"}, {"controller_host", "ctl"}};
  Reply first = heartbeat(plain);
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(first.body["requests"].size(), 1u) << first.body;
  const json request = first.body["requests"][0];
  EXPECT_EQ(request["kind"], "scancel");
  EXPECT_EQ(request["job_id"], "77");
  EXPECT_THAT(request["reason"].get<std::string>(), HasSubstr("over_allocated"));
  EXPECT_EQ(heartbeat(plain).body["requests"].size(), 1u);  // again, not yet reported

  json reported = plain;
  reported["request_results"] = {
      {{"id", request["id"]}, {"ok", true}, {"message", "scancel 77: exit 0"}}};
  Reply second = heartbeat(reported);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_TRUE(second.body["requests"].empty());
  auto requests = app_->store().ListComputeRequests(compute_, "", 10);
  ASSERT_EQ(requests->size(), 1u);
  EXPECT_EQ((*requests)[0].state, "done");
  EXPECT_EQ((*requests)[0].result, "scancel 77: exit 0");
  auto events = app_->store().ListAudit(0, 50);
  EXPECT_TRUE(std::any_of(events->begin(), events->end(), [&](const store::AuditEvent& e) {
    return e.action == "compute_request.done" && e.target == compute_ + "/77";
  }));
  EXPECT_EQ(Round().actions, 0);  // once

  // A hostile report: not an object, or a bad id, is refused with the heartbeat.
  json bad = plain;
  bad["request_results"] = {{{"id", "1"}, {"ok", true}}};
  EXPECT_EQ(heartbeat(bad).status, 400);
  bad["request_results"] = {{{"id", 1}, {"ok", "yes"}}};
  EXPECT_EQ(heartbeat(bad).status, 400);
}

// A requeued job's next run is a new subject: its warning goes out, and its scancel is asked
// again, under a new request id (the controller runs each id once).
TEST_F(AlertEvaluatorTest, ARequeuedJobsNextRunIsWarnedAndCancelledAgain) {
  Ingest("77", /*running=*/true);
  MakeScancelRule();
  clock_.Set(kStart + kTenMinutes + 5'000);
  EXPECT_EQ(Round().sent, 1);
  EXPECT_EQ(Round().actions, 1);
  auto requests = app_->store().ListComputeRequests(compute_, "", 10);
  ASSERT_TRUE(requests.ok() && requests->size() == 1u);
  const int64_t request_id = (*requests)[0].id;
  ASSERT_TRUE(app_->store()
                  .FinishComputeRequest(compute_, request_id, true, "scancel 77: cancelled",
                                        kStart + kTenMinutes + 6'000)
                  .ok());

  Ingest("77");  // the first run ends (its Epilog closes its GPUs), and the job is requeued
  const int64_t second_start = kStart + 3 * kTenMinutes;
  Ingest("77", /*running=*/true, second_start);
  clock_.Set(second_start + kTenMinutes + 5'000);
  EXPECT_EQ(Round().sent, 1);  // the warning about this run
  EXPECT_EQ(Round().actions, 1);
  EXPECT_EQ(Round().actions, 0);  // once per run
  EXPECT_EQ(Deliveries("?state=sent").size(), 4u);
  EXPECT_EQ(Deliveries()[0]["subject"],
            compute_ + "/77@" + std::to_string(second_start) + "/scancel");
  requests = app_->store().ListComputeRequests(compute_, "pending", 10);
  ASSERT_TRUE(requests.ok() && requests->size() == 1u);
  EXPECT_GT((*requests)[0].id, request_id);  // a new id: the controller runs each id once
  EXPECT_EQ((*requests)[0].created_at_ms, second_start + kTenMinutes + 5'000);
}

// The scancel is requested before the action is claimed: a request that could not be stored
// is asked for again in the next round, not announced to the user and never made.
TEST_F(AlertEvaluatorTest, AScancelThatCouldNotBeRequestedIsAskedForAgain) {
  Ingest("77", /*running=*/true);
  MakeScancelRule();
  clock_.Set(kStart + kTenMinutes + 5'000);
  EXPECT_EQ(Round().sent, 1);  // the warning
  ExecuteOnDatabase(
      "CREATE TRIGGER refuse BEFORE INSERT ON compute_requests "
      "BEGIN SELECT RAISE(FAIL, 'disk I/O error'); END");
  AlertEvaluator evaluator(app_->store(), app_->telemetry(), clock_, sender_, {});
  Result<AlertRound> failed = evaluator.RunOnce();
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->actions, 0);
  ASSERT_EQ(failed->errors.size(), 1u);
  EXPECT_THAT(failed->errors[0], HasSubstr("requesting scancel of " + compute_ + "/77"));
  EXPECT_EQ(sender_.sent.size(), 1u);  // no "cancellation requested"
  ExecuteOnDatabase("DROP TRIGGER refuse");
  EXPECT_EQ(Round().actions, 1);
  EXPECT_EQ(app_->store().ListComputeRequests(compute_, "pending", 10)->size(), 1u);
  ASSERT_EQ(sender_.sent.size(), 2u);
  EXPECT_EQ(sender_.sent[1].alert.subject, "[Expanse] job 77 (ana): cancellation requested");
}

// A delivery claimed by an evaluation that ended before sending it (a crash, the database away
// at the update) is sent once it has been pending far longer than a send takes.
TEST_F(AlertEvaluatorTest, ADeliveryLeftPendingIsSentLater) {
  Ingest("77");
  const int64_t rule_id = MakeRule({{"name", "too many GPUs"},
                                    {"verdict", "over_allocated"},
                                    {"channel", "webhook"},
                                    {"target", "https://hooks.example.org/x"}});
  const int64_t claimed_at = kStart + kTenMinutes + 60'000;
  store::AlertDelivery left;
  left.rule_id = rule_id;
  left.org_id = app_->store().ListAlertRules(0)->front().org_id;
  left.subject = compute_ + "/77";
  left.compute_id = compute_;
  left.job_id = "77";
  left.user = "ana";
  left.message = json{{"subject", "[Expanse] job 77 (ana): over_allocated"}, {"text", "t"}}.dump();
  left.created_at_ms = claimed_at;
  ASSERT_TRUE(app_->store().ClaimAlertDelivery(left).ok());
  clock_.Set(claimed_at + 60'000);
  EXPECT_EQ(Round().sent, 0);  // may still be being sent
  clock_.Set(claimed_at + 11 * 60'000);
  EXPECT_EQ(Round().sent, 1);
  ASSERT_EQ(sender_.sent.size(), 1u);
  EXPECT_EQ(sender_.sent[0].alert.subject, "[Expanse] job 77 (ana): over_allocated");
  EXPECT_EQ(Deliveries()[0]["state"], "sent");
  EXPECT_EQ(Round().sent, 0);

  // One left pending for more than a day is news no longer: failed, not sent.
  left.subject = compute_ + "/78";
  left.job_id = "78";
  ASSERT_TRUE(app_->store().ClaimAlertDelivery(left).ok());
  clock_.Set(claimed_at + 25 * 3'600'000LL);
  const AlertRound late = Round();
  EXPECT_EQ(late.sent, 0);
  EXPECT_EQ(late.failed, 1);
  EXPECT_EQ(sender_.sent.size(), 1u);
  const json failed = Deliveries("?state=failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["subject"], compute_ + "/78");
  EXPECT_THAT(failed[0]["error"].get<std::string>(), HasSubstr("too old to send now"));
}

TEST_F(AlertEvaluatorTest, TheApiRefusesRulesThatCannotWork) {
  const auto refused = [&](const json& rule) {
    Reply r = Call("POST", "/api/v1/orgs/acme/alert-rules", rule.dump(), Bearer(token_));
    EXPECT_GE(r.status, 400) << rule.dump();
    return r.body["error"].value("message", "") + " " + Code(r);
  };
  const json base = {{"name", "r"},
                     {"verdict", "stuck"},
                     {"channel", "webhook"},
                     {"target", "https://hooks.example.org/x"}};
  json bad = base;
  bad["verdict"] = "slow";
  EXPECT_THAT(refused(bad), HasSubstr("verdict must be one of"));
  bad = base;
  bad["target"] = "http://hooks.example.org/x";  // clear text to another machine
  EXPECT_THAT(refused(bad), HasSubstr("target:"));
  bad = base;
  bad["target"] = "http://127.0.0.1:8080/admin";  // this machine: not without the server's flag
  EXPECT_THAT(refused(bad), HasSubstr("--alert-loopback-webhooks"));
  bad["target"] = "https://[::1]/x";
  EXPECT_THAT(refused(bad), HasSubstr("webhooks to this machine (\"::1\")"));
  bad = base;
  bad["channel"] = "email";
  bad["target"] = "ops@example.org";  // this server has no SMTP server
  EXPECT_THAT(refused(bad), HasSubstr("email_not_configured"));
  bad = base;
  bad["min_duration_s"] = "15m";
  EXPECT_THAT(refused(bad), HasSubstr("min_duration_s must be an integer"));
  bad = base;
  bad["kind"] = "digest";
  EXPECT_THAT(refused(bad), HasSubstr("a digest rule names no verdict"));

  const int64_t id = MakeRule(base);
  Reply listed = Call("GET", "/api/v1/orgs/acme/alert-rules", "", Bearer(token_));
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(listed.body["alert_rules"].size(), 1u);
  EXPECT_EQ(listed.body["alert_rules"][0]["target"], "https://hooks.example.org/x");
  EXPECT_EQ(listed.body["alert_rules"][0]["action"], nullptr);
  EXPECT_EQ(listed.body["email"], false);
  const std::string rule_path = "/api/v1/orgs/acme/alert-rules/" + std::to_string(id);
  Reply paused = Call("PATCH", rule_path, R"({"enabled":false})", Bearer(token_));
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(paused.body["enabled"], false);
  EXPECT_EQ(Call("PATCH", rule_path, R"({"name":"x"})", Bearer(token_)).status, 400);
  EXPECT_EQ(Call("PATCH", rule_path + "9", R"({"enabled":true})", Bearer(token_)).status, 404);
  Reply deleted = Call("DELETE", rule_path, "", Bearer(token_));
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(
      Call("DELETE", "/api/v1/orgs/acme/alert-rules/" + std::to_string(id), "", Bearer(token_))
          .status,
      404);
}

}  // namespace
}  // namespace alert_evaluator_test
}  // namespace expanse::server
