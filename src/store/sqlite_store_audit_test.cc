// SqliteStore: the audit log.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_audit_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kNow;
using store_testing::kOddText;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class AuditTest : public store_testing::SqliteStoreTest {
 protected:
  void Append(int64_t at_ms, int64_t org_id, const std::string& action) {
    AuditEvent event;
    event.at_ms = at_ms;
    event.org_id = org_id;
    event.actor = "user:1";
    event.action = action;
    event.target = "cmp_a";
    event.detail_json = "{}";
    event.remote_addr = "192.0.2.1";
    ASSERT_TRUE(store().AppendAudit(event).ok());
  }

  std::vector<std::string> Actions(int64_t org_id, int limit) {
    const Result<std::vector<AuditEvent>> events = store().ListAudit(org_id, limit);
    EXPECT_TRUE(events.ok()) << events.status();
    std::vector<std::string> actions;
    for (const AuditEvent& event : events.ok() ? *events : std::vector<AuditEvent>{}) {
      actions.push_back(event.action);
    }
    return actions;
  }
};
INSTANTIATE_TEST_SUITE_P(Backings, AuditTest, kBackings, BackingName);

// The readiness check's read (GET /readyz); a database that is away is tested in
// pg_connection_test.cc and server.replicas_postgres.
TEST_P(AuditTest, PingAnswersWhileTheDatabaseDoes) { EXPECT_TRUE(store().Ping().ok()); }

TEST_P(AuditTest, NewestFirstWithTiesInReverseInsertionOrder) {
  Append(kNow + 2, 1, "b");
  Append(kNow + 1, 1, "a");
  Append(kNow + 3, 2, "c");
  Append(kNow + 3, 0, "d");
  EXPECT_THAT(Actions(0, 10), ElementsAre("d", "c", "b", "a"));
  EXPECT_THAT(Actions(0, 2), ElementsAre("d", "c"));
}

TEST_P(AuditTest, OrganizationFilter) {
  Append(kNow + 1, 1, "a");
  Append(kNow + 2, 2, "b");
  Append(kNow + 3, 1, "c");
  Append(kNow + 4, 0, "anonymous");
  EXPECT_THAT(Actions(1, 10), ElementsAre("c", "a"));
  EXPECT_THAT(Actions(1, 1), ElementsAre("c"));
  EXPECT_THAT(Actions(2, 10), ElementsAre("b"));
  EXPECT_THAT(Actions(3, 10), IsEmpty());
}

TEST_P(AuditTest, FieldsAreStoredVerbatim) {
  AuditEvent event;
  event.at_ms = kNow;
  event.org_id = 5;
  event.actor = kOddText;
  event.action = kOddText;
  event.target = kOddText;
  event.detail_json = kOddText;
  event.remote_addr = kOddText;
  ASSERT_TRUE(store().AppendAudit(event).ok());
  const Result<std::vector<AuditEvent>> events = store().ListAudit(5, 1);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1U);
  const AuditEvent& stored = events->front();
  EXPECT_GT(stored.id, 0);
  EXPECT_EQ(stored.at_ms, kNow);
  EXPECT_EQ(stored.org_id, 5);
  EXPECT_EQ(stored.actor, kOddText);
  EXPECT_EQ(stored.action, kOddText);
  EXPECT_EQ(stored.target, kOddText);
  EXPECT_EQ(stored.detail_json, kOddText);
  EXPECT_EQ(stored.remote_addr, kOddText);
}

TEST_P(AuditTest, LimitMustBePositive) {
  EXPECT_EQ(store().ListAudit(0, 0).status(),
            InvalidArgumentError("audit list limit is 0; it must be at least 1"));
  EXPECT_EQ(store().ListAudit(0, -5).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sqlite_store_audit_test
}  // namespace expanse::store
