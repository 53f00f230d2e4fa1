// SqliteStore as a JobStore: job records, the job list query, and the migration that added
// them. Node events and GPU allocations are tested in sqlite_store_job_hosts_test.cc.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/migrations.h"
#include "store/sqlite_connection.h"
#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_jobs_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kHour;
using store_testing::kNow;
using store_testing::kOddText;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

JobRecord Job(const std::string& compute_id, const std::string& job_id, int64_t start_ms,
              int64_t end_ms = 0, int64_t observed_ms = kNow) {
  JobRecord job;
  job.compute_id = compute_id;
  job.job_id = job_id;
  job.name = "train";
  job.user = "alice";
  job.account = "physics";
  job.partition = "gpu";
  job.state = end_ms != 0 ? "COMPLETED" : start_ms != 0 ? "RUNNING" : "PENDING";
  job.nodes = "gpu[01-02]";
  job.submit_ms = start_ms != 0 ? start_ms - 1000 : kNow - kHour;
  job.start_ms = start_ms;
  job.end_ms = end_ms;
  job.req_nodes = 2;
  job.req_cpus = 16;
  job.req_gpus = 8;
  job.req_mem_mib = 65536;
  job.time_limit_s = 7200;
  job.observed_ms = observed_ms;
  return job;
}

class JobsTest : public store_testing::SqliteStoreTest {
 protected:
  void SetUp() override {
    SqliteStoreTest::SetUp();
    MakeCompute("cmp_a");
    MakeCompute("cmp_b");
  }

  JobStore& jobs() { return store().Jobs(); }

  void Upsert(const std::vector<JobRecord>& records) {
    const Status status = jobs().UpsertJobs(records);
    ASSERT_TRUE(status.ok()) << status;
  }

  static JobFilter FilterOf(std::vector<std::string> compute_ids = {"cmp_a"}) {
    JobFilter filter;
    filter.compute_ids = std::move(compute_ids);
    return filter;
  }

  // "compute/job" of each listed job, in the order returned.
  std::vector<std::string> Listed(const JobFilter& filter) {
    const Result<std::vector<JobRecord>> listed = jobs().ListJobs(filter);
    EXPECT_TRUE(listed.ok()) << listed.status();
    std::vector<std::string> keys;
    for (const JobRecord& job : listed.ok() ? *listed : std::vector<JobRecord>{}) {
      keys.push_back(job.compute_id + "/" + job.job_id);
    }
    return keys;
  }

  // Three jobs on cmp_a and one on cmp_b that differ in every filtered field.
  void AddVariedJobs() {
    JobRecord first = Job("cmp_a", "1", kNow);
    JobRecord second = Job("cmp_a", "2", kNow + 1000, kNow + 2000);
    second.user = "bob";
    second.account = "chemistry";
    JobRecord third = Job("cmp_a", "3", kNow + 3000, kNow + 4000);
    third.state = "FAILED";
    third.partition = "debug";
    JobRecord other = Job("cmp_b", "1", kNow + 5000);
    Upsert({first, second, third, other});
  }
};
INSTANTIATE_TEST_SUITE_P(Backings, JobsTest, kBackings, BackingName);

TEST_P(JobsTest, UpsertStoresEveryField) {
  const JobRecord job = Job("cmp_a", "42", kNow, kNow + kHour);
  Upsert({job});
  const Result<JobRecord> stored = jobs().GetJob("cmp_a", "42");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->compute_id, "cmp_a");
  EXPECT_EQ(stored->job_id, "42");
  EXPECT_EQ(stored->name, job.name);
  EXPECT_EQ(stored->user, job.user);
  EXPECT_EQ(stored->account, job.account);
  EXPECT_EQ(stored->partition, job.partition);
  EXPECT_EQ(stored->state, "COMPLETED");
  EXPECT_EQ(stored->nodes, job.nodes);
  EXPECT_EQ(stored->submit_ms, job.submit_ms);
  EXPECT_EQ(stored->start_ms, kNow);
  EXPECT_EQ(stored->end_ms, kNow + kHour);
  EXPECT_EQ(stored->req_nodes, 2);
  EXPECT_EQ(stored->req_cpus, 16);
  EXPECT_EQ(stored->req_gpus, 8);
  EXPECT_EQ(stored->req_mem_mib, 65536);
  EXPECT_EQ(stored->time_limit_s, 7200);
  EXPECT_EQ(stored->observed_ms, kNow);
}

TEST_P(JobsTest, NewerOrEqualObservationUpdatesOlderIsIgnored) {
  Upsert({Job("cmp_a", "7", 0, 0, kNow)});
  Upsert({Job("cmp_a", "7", kNow + 10, 0, kNow + 10)});
  EXPECT_EQ(jobs().GetJob("cmp_a", "7")->state, "RUNNING");
  // A redelivered, older report does not roll the job back to pending.
  Upsert({Job("cmp_a", "7", 0, 0, kNow)});
  EXPECT_EQ(jobs().GetJob("cmp_a", "7")->state, "RUNNING");
  // The same observation time replaces (a redelivery carries the same data anyway).
  JobRecord same_time = Job("cmp_a", "7", kNow + 10, 0, kNow + 10);
  same_time.name = "renamed";
  Upsert({same_time});
  EXPECT_EQ(jobs().GetJob("cmp_a", "7")->name, "renamed");
}

TEST_P(JobsTest, StaleRecordLaterInTheSameBatchIsIgnored) {
  Upsert({Job("cmp_a", "7", kNow, kNow + 50, kNow + 60), Job("cmp_a", "7", kNow, 0, kNow + 20)});
  const Result<JobRecord> stored = jobs().GetJob("cmp_a", "7");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state, "COMPLETED");
  EXPECT_EQ(stored->end_ms, kNow + 50);
  EXPECT_EQ(stored->observed_ms, kNow + 60);
}

TEST_P(JobsTest, ArrayAndHeterogeneousIdsAreSeparateJobs) {
  Upsert({Job("cmp_a", "123", kNow), Job("cmp_a", "123_4", kNow), Job("cmp_a", "123+1", kNow),
          Job("cmp_b", "123", kNow)});
  for (const std::string id : {"123", "123_4", "123+1"}) {
    const Result<JobRecord> stored = jobs().GetJob("cmp_a", id);
    ASSERT_TRUE(stored.ok()) << id << ": " << stored.status();
    EXPECT_EQ(stored->job_id, id);
  }
  EXPECT_THAT(Listed(FilterOf({"cmp_a", "cmp_b"})),
              ElementsAre("cmp_a/123", "cmp_b/123", "cmp_a/123+1", "cmp_a/123_4"));
}

TEST_P(JobsTest, GetJobNotFound) {
  EXPECT_EQ(jobs().GetJob("cmp_a", "999").status(),
            NotFoundError("job 999 of compute cmp_a not found"));
  EXPECT_EQ(jobs().GetJob("cmp_zz", "1").status(), NotFoundError("compute cmp_zz not found"));
  EXPECT_EQ(jobs().GetJob("cmp_a", "").status(), InvalidArgumentError("job: job_id is empty"));
}

TEST_P(JobsTest, EachFilterAlone) {
  AddVariedJobs();
  EXPECT_THAT(Listed(FilterOf()), ElementsAre("cmp_a/3", "cmp_a/2", "cmp_a/1"));
  EXPECT_THAT(Listed(FilterOf({"cmp_b"})), ElementsAre("cmp_b/1"));
  EXPECT_THAT(Listed(FilterOf({"cmp_b", "cmp_a"})),
              ElementsAre("cmp_b/1", "cmp_a/3", "cmp_a/2", "cmp_a/1"));

  JobFilter states = FilterOf();
  states.states = {"FAILED", "RUNNING"};
  EXPECT_THAT(Listed(states), ElementsAre("cmp_a/3", "cmp_a/1"));
  JobFilter user = FilterOf();
  user.user = "bob";
  EXPECT_THAT(Listed(user), ElementsAre("cmp_a/2"));
  JobFilter account = FilterOf();
  account.account = "physics";
  EXPECT_THAT(Listed(account), ElementsAre("cmp_a/3", "cmp_a/1"));
  JobFilter partition = FilterOf();
  partition.partition = "debug";
  EXPECT_THAT(Listed(partition), ElementsAre("cmp_a/3"));
  // Exact, case-sensitive matches.
  JobFilter upper = FilterOf();
  upper.user = "ALICE";
  EXPECT_THAT(Listed(upper), IsEmpty());
}

TEST_P(JobsTest, FiltersCombine) {
  AddVariedJobs();
  JobFilter filter = FilterOf({"cmp_a", "cmp_b"});
  filter.user = "alice";
  filter.account = "physics";
  filter.partition = "gpu";
  EXPECT_THAT(Listed(filter), ElementsAre("cmp_b/1", "cmp_a/1"));
  filter.states = {"RUNNING"};
  filter.to_ms = kNow + 5000;  // cmp_b/1 starts exactly there
  EXPECT_THAT(Listed(filter), ElementsAre("cmp_a/1"));
  filter.states = {"COMPLETED"};
  EXPECT_THAT(Listed(filter), IsEmpty());
}

TEST_P(JobsTest, TimeOverlapEdges) {
  Upsert({Job("cmp_a", "ends-at-from", kNow - kHour, kNow),
          Job("cmp_a", "ends-after-from", kNow - kHour, kNow + 1),
          Job("cmp_a", "running-since-before", kNow - 2 * kHour),
          Job("cmp_a", "starts-at-to", kNow + kHour, kNow + 2 * kHour),
          Job("cmp_a", "starts-before-to", kNow + kHour - 1), Job("cmp_a", "pending", 0)});
  JobFilter window = FilterOf();
  window.from_ms = kNow;
  window.to_ms = kNow + kHour;
  EXPECT_THAT(Listed(window), ElementsAre("cmp_a/starts-before-to", "cmp_a/ends-after-from",
                                          "cmp_a/running-since-before"));

  JobFilter from_only = FilterOf();
  from_only.from_ms = kNow;
  EXPECT_THAT(Listed(from_only),
              ElementsAre("cmp_a/starts-at-to", "cmp_a/starts-before-to", "cmp_a/ends-after-from",
                          "cmp_a/running-since-before"));

  JobFilter to_only = FilterOf();
  to_only.to_ms = kNow - kHour;
  EXPECT_THAT(Listed(to_only), ElementsAre("cmp_a/running-since-before"));

  // Without a time bound the pending job is listed too, ordered by its submit time.
  EXPECT_THAT(Listed(FilterOf()),
              ElementsAre("cmp_a/starts-at-to", "cmp_a/starts-before-to", "cmp_a/ends-after-from",
                          "cmp_a/ends-at-from", "cmp_a/pending", "cmp_a/running-since-before"));
}

TEST_P(JobsTest, PendingJobsAreOrderedBySubmitTime) {
  JobRecord early = Job("cmp_a", "early", 0);
  early.submit_ms = kNow - 10;
  JobRecord late = Job("cmp_a", "late", 0);
  late.submit_ms = kNow + 10;
  Upsert({early, late, Job("cmp_a", "started", kNow)});
  EXPECT_THAT(Listed(FilterOf()), ElementsAre("cmp_a/late", "cmp_a/started", "cmp_a/early"));
}

TEST_P(JobsTest, Pagination) {
  std::vector<JobRecord> records;
  for (int i = 0; i < 5; ++i) {
    records.push_back(Job("cmp_a", "job" + std::to_string(i), kNow + i));
  }
  records.push_back(Job("cmp_a", "tie", kNow + 4));
  Upsert(records);
  JobFilter page = FilterOf();
  page.limit = 2;
  EXPECT_THAT(Listed(page), ElementsAre("cmp_a/job4", "cmp_a/tie"));
  page.offset = 2;
  EXPECT_THAT(Listed(page), ElementsAre("cmp_a/job3", "cmp_a/job2"));
  page.offset = 4;
  EXPECT_THAT(Listed(page), ElementsAre("cmp_a/job1", "cmp_a/job0"));
  page.offset = 6;
  EXPECT_THAT(Listed(page), IsEmpty());
  page.offset = 0;
  page.limit = 1000;
  EXPECT_EQ(Listed(page).size(), 6U);
}

// The list order spelled out: start (submit for a job not started) descending, then job id and
// compute id in byte order.
std::vector<std::string> ExpectedOrder(std::vector<JobRecord> records) {
  const auto sort_ms = [](const JobRecord& j) {
    return j.start_ms != 0 ? j.start_ms : j.submit_ms;
  };
  std::sort(records.begin(), records.end(), [&](const JobRecord& a, const JobRecord& b) {
    if (sort_ms(a) != sort_ms(b))
      return sort_ms(a) > sort_ms(b);
    return std::tie(a.job_id, a.compute_id) < std::tie(b.job_id, b.compute_id);
  });
  std::vector<std::string> keys;
  for (const JobRecord& job : records)
    keys.push_back(job.compute_id + "/" + job.job_id);
  return keys;
}

// Pages of random jobs (pending and started, with ties in time and in job id across computes)
// against the order spelled out, for few computes (one ordered read per compute, merged) and
// many (one sort).
TEST_P(JobsTest, PagesFollowTheListOrderForFewAndManyComputes) {
  for (const int computes : {1, 3, 40}) {
    std::vector<std::string> ids;
    for (int c = 0; c < computes; ++c) {
      ids.push_back("cmp_p" + std::to_string(computes) + "_" + std::to_string(c));
      MakeCompute(ids.back());
    }
    std::mt19937 random(static_cast<unsigned>(computes));
    std::vector<JobRecord> records;
    for (int i = 0; i < 400; ++i) {
      const std::string compute = ids[random() % ids.size()];
      const int64_t start = random() % 4 == 0 ? 0 : kNow + static_cast<int64_t>(random() % 50);
      JobRecord job = Job(compute, std::to_string(random() % 300), start);
      job.submit_ms = kNow + static_cast<int64_t>(random() % 50) - 10;
      job.user = random() % 2 == 0 ? "alice" : "bob";
      records.push_back(job);
    }
    Upsert(records);
    // Upserts of one key keep the last record.
    std::map<std::pair<std::string, std::string>, JobRecord> stored;
    for (const JobRecord& job : records)
      stored[{job.compute_id, job.job_id}] = job;
    std::vector<JobRecord> all, bobs;
    for (const auto& [key, job] : stored) {
      all.push_back(job);
      if (job.user == "bob")
        bobs.push_back(job);
    }
    for (const bool only_bob : {false, true}) {
      const std::vector<std::string> expected = ExpectedOrder(only_bob ? bobs : all);
      JobFilter page = FilterOf(ids);
      page.user = only_bob ? "bob" : "";
      page.limit = 37;
      std::vector<std::string> listed;
      for (page.offset = 0; page.offset < static_cast<int>(expected.size()) + 37;
           page.offset += page.limit) {
        for (std::string& key : Listed(page))
          listed.push_back(std::move(key));
      }
      EXPECT_EQ(listed, expected) << computes << " computes, only bob: " << only_bob;
    }
  }
}

TEST_P(JobsTest, ListJobsRefusesBadFilters) {
  JobFilter filter = FilterOf();
  filter.limit = 0;
  EXPECT_EQ(jobs().ListJobs(filter).status(),
            InvalidArgumentError("job filter: limit is 0; it must be between 1 and 1000"));
  filter.limit = 1001;
  EXPECT_EQ(jobs().ListJobs(filter).status().code(), StatusCode::kInvalidArgument);
  filter.limit = 10;
  filter.offset = -1;
  EXPECT_EQ(jobs().ListJobs(filter).status(),
            InvalidArgumentError("job filter: offset is -1; it must not be negative"));
  EXPECT_EQ(jobs().ListJobs(FilterOf({})).status(),
            InvalidArgumentError("job filter: compute_ids is empty; name at least one compute"));
  EXPECT_EQ(jobs().ListJobs(FilterOf({"cmp_a", ""})).status(),
            InvalidArgumentError("job filter: compute_ids[1] is empty"));
  JobFilter backwards = FilterOf();
  backwards.from_ms = kNow;
  backwards.to_ms = kNow;
  EXPECT_EQ(jobs().ListJobs(backwards).status(),
            InvalidArgumentError("job filter: to_ms (2023-11-14T22:13:20.000Z) must be after "
                                 "from_ms (2023-11-14T22:13:20.000Z)"));
  EXPECT_EQ(jobs().ListJobs(FilterOf({"cmp_a", "cmp_zz"})).status(),
            NotFoundError("compute cmp_zz not found"));
}

TEST_P(JobsTest, InvalidRecordsAreRefusedNamingTheField) {
  JobRecord no_compute = Job("", "1", kNow);
  EXPECT_EQ(jobs().UpsertJobs({no_compute}), InvalidArgumentError("jobs[0]: compute_id is empty"));
  EXPECT_EQ(jobs().UpsertJobs({Job("cmp_a", "1", kNow), Job("cmp_a", "", kNow)}),
            InvalidArgumentError("jobs[1]: job_id is empty"));
  EXPECT_EQ(jobs().UpsertJobs({Job("cmp_a", std::string(65, '9'), kNow)}),
            InvalidArgumentError("jobs[0]: job_id \"" + std::string(65, '9') +
                                 "\" is 65 bytes; at most 64 are allowed"));
  EXPECT_TRUE(jobs().UpsertJobs({Job("cmp_a", std::string(64, '9'), kNow)}).ok());
  JobRecord negative = Job("cmp_a", "1", kNow);
  negative.req_gpus = -1;
  EXPECT_EQ(jobs().UpsertJobs({negative}),
            InvalidArgumentError("jobs[0]: req_gpus is -1; it must not be negative"));
  EXPECT_EQ(jobs().UpsertJobs({Job("cmp_a", "1", kNow, kNow - 1)}),
            InvalidArgumentError("jobs[0]: end_ms (2023-11-14T22:13:19.999Z) is before start_ms "
                                 "(2023-11-14T22:13:20.000Z)"));
  // Cancelled while pending: an end without a start is fine.
  EXPECT_TRUE(jobs().UpsertJobs({Job("cmp_a", "cancelled", 0, kNow)}).ok());
}

TEST_P(JobsTest, BatchWithOneBadRecordChangesNothing) {
  Upsert({Job("cmp_a", "1", 0, 0, kNow)});
  EXPECT_EQ(jobs()
                .UpsertJobs({Job("cmp_a", "1", kNow, 0, kNow + 1), Job("cmp_a", "2", kNow),
                             Job("cmp_a", "3", kNow, kNow - 5)})
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().UpsertJobs({Job("cmp_a", "1", kNow, 0, kNow + 1), Job("cmp_a", "2", kNow),
                               Job("cmp_zz", "3", kNow)}),
            NotFoundError("compute cmp_zz not found"));
  EXPECT_EQ(jobs().GetJob("cmp_a", "1")->state, "PENDING");
  EXPECT_EQ(jobs().GetJob("cmp_a", "2").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(jobs().UpsertJobs({}).ok());
}

TEST_P(JobsTest, TextIsStoredVerbatimAndMatchedExactly) {
  JobRecord odd = Job("cmp_a", "1", kNow);
  odd.name = kOddText;
  odd.user = kOddText;
  odd.account = kOddText;
  odd.partition = kOddText;
  odd.state = kOddText;
  odd.nodes = kOddText;
  Upsert({odd, Job("cmp_a", "2", kNow)});
  const Result<JobRecord> stored = jobs().GetJob("cmp_a", "1");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->name, kOddText);
  EXPECT_EQ(stored->user, kOddText);
  EXPECT_EQ(stored->account, kOddText);
  EXPECT_EQ(stored->partition, kOddText);
  EXPECT_EQ(stored->state, kOddText);
  EXPECT_EQ(stored->nodes, kOddText);

  JobFilter filter = FilterOf();
  filter.user = kOddText;
  filter.account = kOddText;
  filter.partition = kOddText;
  filter.states = {kOddText};
  EXPECT_THAT(Listed(filter), ElementsAre("cmp_a/1"));
  // Wildcards are plain characters: no LIKE or GLOB matching.
  JobFilter wildcard = FilterOf();
  wildcard.user = "%";
  EXPECT_THAT(Listed(wildcard), IsEmpty());
  wildcard.user = "Robert'); DROP TABLE users;--*";
  EXPECT_THAT(Listed(wildcard), IsEmpty());
}

TEST_P(JobsTest, JobsIsTheSameStore) {
  // Jobs() hands out the one object for the Store's lifetime.
  EXPECT_EQ(&store().Jobs(), &store().Jobs());
}

// A database written by a server that knew only schema version 1.
TEST(JobsMigrationTest, VersionOneDatabaseIsMigratedKeepingItsData) {
  const store_testing::TempDir dir;
  const std::string path = dir.path() + "/store.db";
  {
    Result<sqlite_internal::SqliteConnection> db =
        sqlite_internal::SqliteConnection::Open(path, 5000);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(db->ExecuteScript(sqlite_internal::Migrations()[0].sql).ok());
    ASSERT_TRUE(db->ExecuteScript(
                      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                      "applied_at_ms INTEGER NOT NULL) STRICT; "
                      "INSERT INTO schema_migrations VALUES (1, 1); "
                      "INSERT INTO organizations (slug, name, created_at_ms) "
                      "VALUES ('acme', 'Acme', 5); "
                      "INSERT INTO computes (id, org_id, name, type, state, created_at_ms, "
                      "created_by_user, pinned_daemon_version, control_plane_url, data_plane_url) "
                      "VALUES ('cmp_old', 1, 'old', 'slurm', 'active', 5, 0, '0.1.0', 'c', 'd'); "
                      // Heartbeat history from before it was bounded: a year before the
                      // newest, a day before it, the newest (migration 12 keeps the last two).
                      "INSERT INTO credentials (compute_id, secret_hash, created_at_ms, hostname, "
                      "daemon_version, slurm_version, role) "
                      "VALUES ('cmp_old', 'h', 1, 'c', 'v', 's', 'controller'); "
                      "INSERT INTO heartbeats (compute_id, credential_id, received_at_ms, "
                      "controller_host, daemon_version, body_json) VALUES "
                      "('cmp_old', 1, 1000, 'c', 'v', '{}'), "
                      "('cmp_old', 1, 31536000000, 'c', 'v', '{}'), "
                      "('cmp_old', 1, 31622400000, 'c', 'v', '{}')")
                    .ok());
  }
  SqliteStoreOptions options;
  options.path = path;
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const Result<Compute> compute = (*store)->GetCompute("cmp_old");
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_EQ(compute->state, ComputeState::kActive);
  EXPECT_EQ((*store)->GetOrganizationBySlug("acme")->name, "Acme");
  ASSERT_TRUE((*store)->Jobs().UpsertJobs({Job("cmp_old", "1", kNow)}).ok());
  EXPECT_EQ((*store)->Jobs().GetJob("cmp_old", "1")->start_ms, kNow);

  Result<sqlite_internal::SqliteConnection> db =
      sqlite_internal::SqliteConnection::Open(path, 5000);
  ASSERT_TRUE(db.ok()) << db.status();
  Result<sqlite_internal::SqliteStatement> versions = db->Query(
      "SELECT group_concat(version, ',') FROM "
      "(SELECT version FROM schema_migrations ORDER BY version)");
  ASSERT_TRUE(versions.ok()) << versions.status();
  const Result<bool> has_row = versions->Step();
  ASSERT_TRUE(has_row.ok() && *has_row) << has_row.status();
  EXPECT_EQ(versions->ColumnText(0), "1,2,3,4,5,6,7,8,9,10,11,12,13");
  Result<sqlite_internal::SqliteStatement> heartbeats = db->Query(
      "SELECT group_concat(received_at_ms, ',') FROM "
      "(SELECT received_at_ms FROM heartbeats ORDER BY received_at_ms)");
  ASSERT_TRUE(heartbeats.ok()) << heartbeats.status();
  ASSERT_TRUE(*heartbeats->Step());
  EXPECT_EQ(heartbeats->ColumnText(0), "31536000000,31622400000");
}

// A database at schema version 3 with jobs in it: version 4 indexes the list order, and the
// list is the same as before.
TEST(JobsMigrationTest, VersionThreeJobsAreListedInOrderAfterTheUpgrade) {
  const store_testing::TempDir dir;
  const std::string path = dir.path() + "/store.db";
  {
    Result<sqlite_internal::SqliteConnection> db =
        sqlite_internal::SqliteConnection::Open(path, 5000);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(db->ExecuteScript(sqlite_internal::Migrations()[i].sql).ok());
    ASSERT_TRUE(db->ExecuteScript(
                      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                      "applied_at_ms INTEGER NOT NULL) STRICT; "
                      "INSERT INTO schema_migrations VALUES (1, 1), (2, 1), (3, 1); "
                      "INSERT INTO organizations (slug, name, created_at_ms) "
                      "VALUES ('acme', 'Acme', 5); "
                      "INSERT INTO computes (id, org_id, name, type, state, created_at_ms, "
                      "created_by_user, pinned_daemon_version, control_plane_url, data_plane_url) "
                      "VALUES ('cmp_old', 1, 'old', 'slurm', 'active', 5, 0, '0.1.0', 'c', 'd'); "
                      "INSERT INTO jobs VALUES "
                      "('cmp_old', 'started', '', '', '', '', 'RUNNING', '', 10, 30, 0, 0, 0, 0, "
                      "0, 0, 1), "
                      "('cmp_old', 'pending', '', '', '', '', 'PENDING', '', 40, 0, 0, 0, 0, 0, "
                      "0, 0, 1), "
                      "('cmp_old', 'early', '', '', '', '', 'COMPLETED', '', 1, 20, 25, 0, 0, 0, "
                      "0, 0, 1)")
                    .ok());
  }
  SqliteStoreOptions options;
  options.path = path;
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(options);
  ASSERT_TRUE(store.ok()) << store.status();
  JobFilter filter;
  filter.compute_ids = {"cmp_old"};
  const auto listed_ids = [&]() {
    const Result<std::vector<JobRecord>> listed = (*store)->Jobs().ListJobs(filter);
    EXPECT_TRUE(listed.ok()) << listed.status();
    std::vector<std::string> ids;
    for (const JobRecord& job : listed.ok() ? *listed : std::vector<JobRecord>{})
      ids.push_back(job.job_id);
    return ids;
  };
  EXPECT_THAT(listed_ids(), ElementsAre("pending", "started", "early"));
  // A job that starts moves in the list: the generated column follows start_ms.
  JobRecord started = Job("cmp_old", "pending", 50);
  started.submit_ms = 40;
  ASSERT_TRUE((*store)->Jobs().UpsertJobs({started}).ok());
  EXPECT_THAT(listed_ids(), ElementsAre("pending", "started", "early"));
  started = Job("cmp_old", "pending", 25);
  started.submit_ms = 20;
  started.observed_ms = kNow + 1;
  ASSERT_TRUE((*store)->Jobs().UpsertJobs({started}).ok());
  EXPECT_THAT(listed_ids(), ElementsAre("started", "pending", "early"));

  Result<sqlite_internal::SqliteConnection> db =
      sqlite_internal::SqliteConnection::Open(path, 5000);
  ASSERT_TRUE(db.ok()) << db.status();
  Result<sqlite_internal::SqliteStatement> plan = db->Query(
      "EXPLAIN QUERY PLAN SELECT rowid FROM jobs WHERE compute_id = ?1 "
      "ORDER BY sort_ms DESC, job_id, compute_id LIMIT 10",
      std::string_view("cmp_old"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::string details;
  while (plan->Step().value_or(false))
    details += plan->ColumnText(3) + "\n";
  EXPECT_THAT(details, ::testing::HasSubstr("jobs_by_compute_sort"));
  EXPECT_THAT(details, ::testing::Not(::testing::HasSubstr("TEMP B-TREE")));
}

}  // namespace
}  // namespace sqlite_store_jobs_test
}  // namespace expanse::store
