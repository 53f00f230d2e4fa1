// SqliteStore: alert rules and deliveries.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_alerts_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kNow;
using store_testing::kOddText;

class AlertStoreTest : public store_testing::SqliteStoreTest {
 protected:
  AlertRule Rule(int64_t org_id, const std::string& verdict = "stuck") {
    AlertRule rule;
    rule.org_id = org_id;
    rule.name = "stuck jobs";
    rule.kind = "verdict";
    rule.verdict = verdict;
    rule.min_duration_s = 900;
    rule.channel = "webhook";
    rule.target = "https://hooks.example.com/x";
    rule.max_per_hour = 10;
    rule.created_by = "user:1";
    rule.created_at_ms = kNow;
    return rule;
  }
  AlertDelivery Delivery(const AlertRule& rule, const std::string& subject, int64_t at_ms) {
    AlertDelivery d;
    d.rule_id = rule.id;
    d.org_id = rule.org_id;
    d.subject = subject;
    d.compute_id = "cmp_a";
    d.job_id = "42";
    d.user = "ana";
    d.summary = "job 42 stuck";
    d.created_at_ms = at_ms;
    return d;
  }
};

TEST_P(AlertStoreTest, RulesRoundTripPerOrganisation) {
  const Organization acme = MakeOrganization("acme");
  const Organization other = MakeOrganization("other");
  AlertRule digest = Rule(acme.id);
  digest.kind = "digest";
  digest.verdict = "";
  digest.period_s = 7 * 86'400;
  digest.channel = "email";
  digest.target = "{user}@example.com";
  // Cut where a character ends: PostgreSQL refuses text that is not UTF-8.
  digest.name = kOddText.substr(0, 58);
  digest.enabled = false;
  Result<AlertRule> a = store().CreateAlertRule(Rule(acme.id));
  Result<AlertRule> b = store().CreateAlertRule(digest);
  Result<AlertRule> c = store().CreateAlertRule(Rule(other.id, "no_process"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();

  Result<std::vector<AlertRule>> of_acme = store().ListAlertRules(acme.id);
  ASSERT_TRUE(of_acme.ok()) << of_acme.status();
  ASSERT_EQ(of_acme->size(), 2u);
  EXPECT_EQ((*of_acme)[0].verdict, "stuck");
  EXPECT_EQ((*of_acme)[0].min_duration_s, 900);
  EXPECT_TRUE((*of_acme)[0].action_dry_run);
  EXPECT_EQ((*of_acme)[1].name, digest.name);
  EXPECT_EQ((*of_acme)[1].period_s, 7 * 86'400);
  EXPECT_EQ((*of_acme)[1].target, "{user}@example.com");
  EXPECT_FALSE((*of_acme)[1].enabled);

  // The evaluator's list: every organisation's enabled rules.
  Result<std::vector<AlertRule>> enabled = store().ListAlertRules(0);
  ASSERT_TRUE(enabled.ok());
  ASSERT_EQ(enabled->size(), 2u);
  EXPECT_EQ((*enabled)[0].id, a->id);
  EXPECT_EQ((*enabled)[1].id, c->id);
}

TEST_P(AlertStoreTest, SchemaRefusesRulesThatMakeNoSense) {
  const Organization acme = MakeOrganization();
  AlertRule no_verdict = Rule(acme.id, "");
  EXPECT_EQ(store().CreateAlertRule(no_verdict).status().code(), StatusCode::kInvalidArgument);
  AlertRule digest_with_verdict = Rule(acme.id);
  digest_with_verdict.kind = "digest";
  digest_with_verdict.period_s = 3600;
  EXPECT_EQ(store().CreateAlertRule(digest_with_verdict).status().code(),
            StatusCode::kInvalidArgument);
  AlertRule sms = Rule(acme.id);
  sms.channel = "sms";
  EXPECT_EQ(store().CreateAlertRule(sms).status().code(), StatusCode::kInvalidArgument);
  AlertRule flood = Rule(acme.id);
  flood.max_per_hour = 0;
  EXPECT_EQ(store().CreateAlertRule(flood).status().code(), StatusCode::kInvalidArgument);
  AlertRule orphan = Rule(acme.id + 100);
  EXPECT_EQ(store().CreateAlertRule(orphan).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store().ListAlertRules(acme.id)->empty());
}

TEST_P(AlertStoreTest, OneDeliveryPerRuleAndSubject) {
  const Organization acme = MakeOrganization();
  const AlertRule rule = *store().CreateAlertRule(Rule(acme.id));
  Result<AlertDelivery> first = store().ClaimAlertDelivery(Delivery(rule, "cmp_a/42", kNow));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->state, "pending");
  EXPECT_GT(first->id, 0);
  EXPECT_EQ(store().ClaimAlertDelivery(Delivery(rule, "cmp_a/42", kNow + 1)).status().code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(store().ClaimAlertDelivery(Delivery(rule, "cmp_a/43", kNow + 2)).ok());

  Result<AlertDelivery> got = store().GetAlertDelivery(rule.id, "cmp_a/42");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->id, first->id);
  EXPECT_EQ(got->user, "ana");
  EXPECT_EQ(store().GetAlertDelivery(rule.id, "cmp_a/44").status().code(), StatusCode::kNotFound);

  AlertDelivery sent = *first;
  sent.state = "sent";
  sent.attempts = 1;
  sent.updated_at_ms = kNow + 10;
  ASSERT_TRUE(store().UpdateAlertDelivery(sent).ok());
  EXPECT_EQ(*store().CountAlertDeliveries(rule.id, "sent", kNow), 1);
  EXPECT_EQ(*store().CountAlertDeliveries(rule.id, "sent", kNow + 11), 0);
  EXPECT_EQ(*store().CountAlertDeliveries(rule.id, "pending", 0), 1);

  Result<std::vector<AlertDelivery>> list = store().ListAlertDeliveries(acme.id, 0, "", 10);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].subject, "cmp_a/42");  // updated last
  EXPECT_EQ((*list)[0].attempts, 1);
  EXPECT_EQ((*list)[1].state, "pending");
  EXPECT_EQ(store().ListAlertDeliveries(acme.id, 0, "sent", 10)->size(), 1u);
  EXPECT_EQ(store().ListAlertDeliveries(acme.id + 1, 0, "", 10)->size(), 0u);

  AlertDelivery unknown = sent;
  unknown.id = 999;
  EXPECT_EQ(store().UpdateAlertDelivery(unknown).code(), StatusCode::kNotFound);
  unknown = sent;
  unknown.state = "lost";
  EXPECT_EQ(store().UpdateAlertDelivery(unknown).code(), StatusCode::kInvalidArgument);
}

TEST_P(AlertStoreTest, DeletingARuleTakesItsDeliveries) {
  const Organization acme = MakeOrganization("acme");
  const Organization other = MakeOrganization("other");
  const AlertRule rule = *store().CreateAlertRule(Rule(acme.id));
  ASSERT_TRUE(store().ClaimAlertDelivery(Delivery(rule, "cmp_a/42", kNow)).ok());
  EXPECT_EQ(store().DeleteAlertRule(other.id, rule.id).code(), StatusCode::kNotFound);
  Result<AlertRule> paused = store().SetAlertRuleEnabled(acme.id, rule.id, false);
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_FALSE(paused->enabled);
  EXPECT_TRUE(store().ListAlertRules(0)->empty());  // the evaluator skips it
  EXPECT_EQ(store().ListAlertRules(acme.id)->size(), 1u);
  EXPECT_EQ(store().SetAlertRuleEnabled(other.id, rule.id, true).status().code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(store().SetAlertRuleEnabled(acme.id, rule.id, true)->enabled);
  ASSERT_TRUE(store().DeleteAlertRule(acme.id, rule.id).ok());
  EXPECT_TRUE(store().ListAlertRules(acme.id)->empty());
  EXPECT_TRUE(store().ListAlertDeliveries(acme.id, 0, "", 10)->empty());
  EXPECT_EQ(store().DeleteAlertRule(acme.id, rule.id).code(), StatusCode::kNotFound);
  EXPECT_EQ(store().ListAlertDeliveries(acme.id, 0, "", 0).status().code(),
            StatusCode::kInvalidArgument);
}

// A scancel request of rule 1 for `job_id` on compute `c`, made at kNow.
ComputeRequest ScancelOf(const Compute& c, const std::string& job_id, const std::string& reason) {
  ComputeRequest r;
  r.compute_id = c.id;
  r.org_id = c.org_id;
  r.kind = "scancel";
  r.job_id = job_id;
  r.reason = reason;
  r.rule_id = 1;
  r.created_at_ms = kNow;
  return r;
}

TEST_P(AlertStoreTest, ComputeRequestsArePendingUntilTheirComputeReports) {
  const Compute a = MakeCompute("cmp_a");
  const Compute b = MakeCompute("cmp_b");
  ComputeRequest r = ScancelOf(a, "42", "alert rule 1: stuck for 20 min");
  Result<ComputeRequest> made = store().CreateComputeRequest(r);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->state, "pending");
  EXPECT_EQ(store().CreateComputeRequest(r).status().code(), StatusCode::kAlreadyExists);
  r.job_id = "43";
  ASSERT_TRUE(store().CreateComputeRequest(r).ok());
  ComputeRequest other = r;
  other.compute_id = "cmp_none";
  EXPECT_EQ(store().CreateComputeRequest(other).status().code(), StatusCode::kNotFound);

  Result<std::vector<ComputeRequest>> pending = store().ListComputeRequests(a.id, "pending", 10);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_EQ((*pending)[0].job_id, "42");
  EXPECT_TRUE(store().ListComputeRequests(b.id, "", 10)->empty());

  // Another compute cannot report on it; its own compute can, once.
  EXPECT_EQ(store().FinishComputeRequest(b.id, made->id, true, "", kNow).status().code(),
            StatusCode::kNotFound);
  Result<ComputeRequest> done =
      store().FinishComputeRequest(a.id, made->id, true, "scancel 42: done", kNow + 5);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, "done");
  EXPECT_EQ(done->result, "scancel 42: done");
  EXPECT_EQ(done->updated_at_ms, kNow + 5);
  EXPECT_EQ(store().FinishComputeRequest(a.id, made->id, false, "again", kNow).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store().ListComputeRequests(a.id, "pending", 10)->size(), 1u);
  // The other pending request (its id need not follow: PostgreSQL's identities skip the ids of
  // refused inserts).
  const int64_t other_id = store().ListComputeRequests(a.id, "pending", 10)->front().id;
  EXPECT_EQ(store()
                .FinishComputeRequest(a.id, other_id, false, std::string(600, 'x'), kNow)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// Two replicas that read the same delivery waiting for a retry: one takes it.
TEST_P(AlertStoreTest, ADeliveryIsTakenForASendByOneEvaluationOnly) {
  const Organization acme = MakeOrganization();
  const AlertRule rule = *store().CreateAlertRule(Rule(acme.id));
  Result<AlertDelivery> claimed = store().ClaimAlertDelivery(Delivery(rule, "cmp_a/42", kNow));
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  AlertDelivery failed = *claimed;
  failed.state = "retry";
  failed.attempts = 1;
  failed.updated_at_ms = kNow + 10;
  ASSERT_TRUE(store().UpdateAlertDelivery(failed).ok());
  EXPECT_FALSE(*store().TakeAlertDelivery(failed.id, "pending", kNow + 10, kNow + 60'000));
  EXPECT_FALSE(*store().TakeAlertDelivery(failed.id, "retry", kNow, kNow + 60'000));
  EXPECT_TRUE(*store().TakeAlertDelivery(failed.id, "retry", kNow + 10, kNow + 60'000));
  EXPECT_FALSE(*store().TakeAlertDelivery(failed.id, "retry", kNow + 10, kNow + 60'001));
  EXPECT_EQ(store().GetAlertDelivery(rule.id, "cmp_a/42")->updated_at_ms, kNow + 60'000);
}

// A scancel for a job's next run (requeued, or an id used again) makes the earlier run's
// request pending again, under a new id (a controller runs each id once); one made in this run
// stays one.
TEST_P(AlertStoreTest, AComputeRequestOfAnEarlierRunIsMadeAgain) {
  const Compute a = MakeCompute("cmp_a");
  ComputeRequest r = ScancelOf(a, "42", "first run");
  Result<ComputeRequest> made = store().CreateComputeRequest(r);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE(store().FinishComputeRequest(a.id, made->id, true, "cancelled", kNow + 5).ok());
  r.reason = "second run";
  r.created_at_ms = kNow + 100;
  r.replaces_made_before_ms = kNow + 50;  // the second run's start
  Result<ComputeRequest> again = store().CreateComputeRequest(r);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_GT(again->id, made->id);
  EXPECT_EQ(
      store().FinishComputeRequest(a.id, made->id, true, "old outcome", kNow + 101).status().code(),
      StatusCode::kNotFound);  // the earlier run's report finishes nothing now
  Result<std::vector<ComputeRequest>> pending = store().ListComputeRequests(a.id, "pending", 10);
  ASSERT_TRUE(pending.ok() && pending->size() == 1u);
  EXPECT_EQ((*pending)[0].reason, "second run");
  EXPECT_EQ((*pending)[0].result, "");
  EXPECT_EQ((*pending)[0].id, again->id);
  EXPECT_EQ(store().CreateComputeRequest(r).status().code(), StatusCode::kAlreadyExists);
}

INSTANTIATE_TEST_SUITE_P(Backings, AlertStoreTest, kBackings, BackingName);

}  // namespace
}  // namespace sqlite_store_alerts_test
}  // namespace expanse::store
