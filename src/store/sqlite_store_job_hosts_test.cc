// SqliteStore as a JobStore: per-node Prolog/Epilog events and GPU allocations.
#include <cstddef>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_job_hosts_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kHour;
using store_testing::kNow;
using store_testing::kOddText;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

JobNodeEvent Event(const std::string& job_id, const std::string& host, const std::string& kind,
                   int64_t at_ms, const std::string& compute_id = "cmp_a") {
  return {compute_id, job_id, host, kind, at_ms};
}

GpuAllocation Allocation(const std::string& job_id, const std::string& gpu_uuid, int64_t from_ms,
                         int64_t to_ms = 0, int64_t gpu_index = 0,
                         const std::string& host = "gpu01") {
  GpuAllocation allocation;
  allocation.compute_id = "cmp_a";
  allocation.job_id = job_id;
  allocation.host = host;
  allocation.gpu_uuid = gpu_uuid;
  allocation.gpu_index = gpu_index;
  allocation.gpu_minor = gpu_index;
  allocation.from_ms = from_ms;
  allocation.to_ms = to_ms;
  return allocation;
}

class JobHostsTest : public store_testing::SqliteStoreTest {
 protected:
  void SetUp() override {
    SqliteStoreTest::SetUp();
    MakeCompute("cmp_a");
  }

  JobStore& jobs() { return store().Jobs(); }

  // "host:kind@offset from kNow" of each event of the job.
  std::vector<std::string> Events(const std::string& job_id) {
    const Result<std::vector<JobNodeEvent>> events = jobs().NodeEvents("cmp_a", job_id);
    EXPECT_TRUE(events.ok()) << events.status();
    std::vector<std::string> described;
    for (const JobNodeEvent& event : events.ok() ? *events : std::vector<JobNodeEvent>{}) {
      described.push_back(event.host + ":" + event.kind + "@" + std::to_string(event.at_ms - kNow));
    }
    return described;
  }

  // "job/uuid[from,to)" with times as offsets from kNow, to "open" when 0.
  static std::vector<std::string> Describe(const Result<std::vector<GpuAllocation>>& allocations) {
    EXPECT_TRUE(allocations.ok()) << allocations.status();
    std::vector<std::string> described;
    for (const GpuAllocation& a : allocations.ok() ? *allocations : std::vector<GpuAllocation>{}) {
      described.push_back(a.job_id + "/" + a.gpu_uuid + "[" + std::to_string(a.from_ms - kNow) +
                          "," + (a.to_ms == 0 ? "open" : std::to_string(a.to_ms - kNow)) + ")");
    }
    return described;
  }

  void Put(const std::vector<GpuAllocation>& allocations) {
    const Status status = jobs().PutGpuAllocations(allocations);
    ASSERT_TRUE(status.ok()) << status;
  }
};
INSTANTIATE_TEST_SUITE_P(Backings, JobHostsTest, kBackings, BackingName);

// One event of each kind per host, the latest: a requeued job's run on the host again.
TEST_P(JobHostsTest, NodeEventsAreIdempotentAndTheLatestRunWins) {
  // No job record is needed: the Prolog may report before squeue shows the job.
  ASSERT_TRUE(jobs()
                  .AddNodeEvents(
                      {Event("1", "gpu02", "start", kNow + 5), Event("1", "gpu01", "start", kNow)})
                  .ok());
  ASSERT_TRUE(jobs()
                  .AddNodeEvents({Event("1", "gpu01", "start", kNow + 99),
                                  Event("1", "gpu01", "end", kNow + 100),
                                  Event("1", "gpu01", "end", kNow + 100)})
                  .ok());
  EXPECT_THAT(Events("1"), ElementsAre("gpu02:start@5", "gpu01:start@99", "gpu01:end@100"));
  ASSERT_TRUE(jobs().AddNodeEvents({Event("1", "gpu01", "start", kNow + 1)}).ok());
  EXPECT_THAT(Events("1"), ElementsAre("gpu02:start@5", "gpu01:start@99", "gpu01:end@100"));
  EXPECT_THAT(Events("2"), IsEmpty());
  EXPECT_TRUE(jobs().AddNodeEvents({}).ok());
}

TEST_P(JobHostsTest, NodeEventsKeepOddHostNamesVerbatim) {
  ASSERT_TRUE(jobs().AddNodeEvents({Event("1", kOddText, "start", kNow)}).ok());
  const Result<std::vector<JobNodeEvent>> events = jobs().NodeEvents("cmp_a", "1");
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1U);
  EXPECT_EQ(events->front().host, kOddText);
  EXPECT_EQ(events->front().compute_id, "cmp_a");
  EXPECT_EQ(events->front().job_id, "1");
}

TEST_P(JobHostsTest, BadNodeEventsAreRefusedAndTheBatchChangesNothing) {
  EXPECT_EQ(jobs().AddNodeEvents(
                {Event("1", "gpu01", "start", kNow), Event("1", "gpu01", "begin", kNow)}),
            InvalidArgumentError("events[1]: kind \"begin\" is not \"start\" or \"end\""));
  EXPECT_EQ(jobs().AddNodeEvents({Event("1", "", "start", kNow)}),
            InvalidArgumentError("events[0]: host is empty"));
  EXPECT_EQ(jobs().AddNodeEvents({Event("1", "gpu01", "end", 0)}),
            InvalidArgumentError("events[0]: at_ms is 0; it must be positive"));
  EXPECT_EQ(jobs().AddNodeEvents(
                {Event("1", "gpu01", "start", kNow), Event("1", "gpu01", "end", kNow, "cmp_zz")}),
            NotFoundError("compute cmp_zz not found"));
  EXPECT_THAT(Events("1"), IsEmpty());
  EXPECT_EQ(jobs().NodeEvents("cmp_zz", "1").status(), NotFoundError("compute cmp_zz not found"));
}

// A daemon naming made-up GPUs or hosts cannot grow one job without end: the call that would
// pass the bound is refused whole; other jobs and repeats of rows stored go on.
TEST_P(JobHostsTest, AJobHoldsAtMostTheBoundOfAllocationsAndEvents) {
  std::vector<GpuAllocation> allocations;
  std::vector<JobNodeEvent> events;
  for (int64_t i = 0; i < JobStore::kMaxRowsPerJob; ++i) {
    allocations.push_back(Allocation("1", "GPU-" + std::to_string(i), kNow));
    events.push_back(
        Event("1", "gpu" + std::to_string(i / 2), i % 2 == 0 ? "start" : "end", kNow + i));
  }
  Put(allocations);
  ASSERT_TRUE(jobs().AddNodeEvents(events).ok());
  const Status more = jobs().PutGpuAllocations(
      {Allocation("2", "GPU-other-job", kNow), Allocation("1", "GPU-one-more", kNow)});
  EXPECT_EQ(more.code(), StatusCode::kInvalidArgument) << more;
  EXPECT_NE(more.message().find("job 1 would have 16385 rows in gpu_allocations"),
            std::string::npos)
      << more;
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "2")), IsEmpty());  // the call, whole
  EXPECT_EQ(jobs().AddNodeEvents({Event("1", "one-more-host", "start", kNow)}).code(),
            StatusCode::kInvalidArgument);
  Put({Allocation("1", "GPU-7", kNow, kNow + 5), Allocation("2", "GPU-other-job", kNow)});
  EXPECT_EQ(jobs().GpuAllocations("cmp_a", "1")->size(),
            static_cast<size_t>(JobStore::kMaxRowsPerJob));
}

TEST_P(JobHostsTest, AllocationIntervalOnlyWidens) {
  Put({Allocation("1", "GPU-a", kNow + 10)});
  // Reported again later, from a later first sighting: the earliest from_ms stays.
  Put({Allocation("1", "GPU-a", kNow + 20)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), ElementsAre("1/GPU-a[10,open)"));
  // An earlier sighting moves from_ms back; the Epilog closes it.
  Put({Allocation("1", "GPU-a", kNow + 5, kNow + 50)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), ElementsAre("1/GPU-a[5,50)"));
  // A late "still allocated" report does not reopen it; a later close moves to_ms on.
  Put({Allocation("1", "GPU-a", kNow + 10)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), ElementsAre("1/GPU-a[5,50)"));
  Put({Allocation("1", "GPU-a", kNow + 10, kNow + 40)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), ElementsAre("1/GPU-a[5,50)"));
  Put({Allocation("1", "GPU-a", kNow + 10, kNow + 60)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), ElementsAre("1/GPU-a[5,60)"));
}

// A requeued job holds the GPU again in a new run: an opening at or after the stored end
// replaces the ended run (widened, the row would count the time between the runs); its close
// then widens as before.
TEST_P(JobHostsTest, ANewRunOnTheSameGpuReplacesTheEndedOne) {
  Put({Allocation("1", "GPU-a", kNow + 5, kNow + 50)});
  Put({Allocation("1", "GPU-a", kNow + 80)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), ElementsAre("1/GPU-a[80,open)"));
  Put({Allocation("1", "GPU-a", kNow + 80, kNow + 120)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), ElementsAre("1/GPU-a[80,120)"));
  // The first run closed at the second's start by a node that saw no Epilog, then the opening.
  Put({Allocation("2", "GPU-a", kNow + 5)});
  Put({Allocation("2", "GPU-a", kNow + 5, kNow + 70), Allocation("2", "GPU-a", kNow + 70)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "2")), ElementsAre("2/GPU-a[70,open)"));
  // An Epilog's close at its own time is no opening: it closes the run.
  Put({Allocation("2", "GPU-a", kNow + 90, kNow + 90)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "2")), ElementsAre("2/GPU-a[70,90)"));
  // A run closed at its own start (the clock stepped back) is not reopened by its opening
  // delivered again.
  Put({Allocation("3", "GPU-a", kNow + 40, kNow + 40)});
  Put({Allocation("3", "GPU-a", kNow + 40)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "3")), ElementsAre("3/GPU-a[40,40)"));
}

TEST_P(JobHostsTest, KnownGpuIndexIsNotForgotten) {
  Put({Allocation("1", "GPU-a", kNow, 0, 3)});
  Put({Allocation("1", "GPU-a", kNow, 0, -1)});
  Result<std::vector<GpuAllocation>> allocations = jobs().GpuAllocations("cmp_a", "1");
  ASSERT_TRUE(allocations.ok()) << allocations.status();
  ASSERT_EQ(allocations->size(), 1U);
  EXPECT_EQ(allocations->front().gpu_index, 3);
  EXPECT_EQ(allocations->front().gpu_minor, 3);
  EXPECT_EQ(allocations->front().host, "gpu01");
  Put({Allocation("1", "GPU-a", kNow, 0, 5)});
  EXPECT_EQ(jobs().GpuAllocations("cmp_a", "1")->front().gpu_index, 5);
}

TEST_P(JobHostsTest, AllocationsOfAJobAreOrderedByHostAndIndex) {
  Put({Allocation("1", "GPU-b", kNow, 0, 1, "gpu02"), Allocation("1", "GPU-c", kNow, 0, 1),
       Allocation("1", "GPU-d", kNow, 0, 0), Allocation("2", "GPU-e", kNow)});
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")),
              ElementsAre("1/GPU-d[0,open)", "1/GPU-c[0,open)", "1/GPU-b[0,open)"));
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "3")), IsEmpty());
}

TEST_P(JobHostsTest, HostAllocationsOverlappingAWindow) {
  Put({Allocation("1", "GPU-a", kNow + 100, kNow + 200),
       Allocation("2", "GPU-a", kNow + 200, kNow + 300), Allocation("3", "GPU-b", kNow + 250, 0, 1),
       Allocation("4", "GPU-a", kNow + 100, kNow + 200, 0, "gpu02")});
  const auto host = [&](int64_t from, int64_t to) {
    return Describe(jobs().HostGpuAllocations("cmp_a", "gpu01", from, to));
  };
  // [200, 250): job 1 ended exactly at 200, job 3 starts exactly at 250; neither overlaps.
  EXPECT_THAT(host(kNow + 200, kNow + 250), ElementsAre("2/GPU-a[200,300)"));
  EXPECT_THAT(host(kNow + 199, kNow + 251),
              ElementsAre("1/GPU-a[100,200)", "2/GPU-a[200,300)", "3/GPU-b[250,open)"));
  // A still-held GPU overlaps everything after its start.
  EXPECT_THAT(host(kNow + kHour, 0), ElementsAre("3/GPU-b[250,open)"));
  EXPECT_THAT(host(0, kNow + 150), ElementsAre("1/GPU-a[100,200)"));
  EXPECT_THAT(host(0, 0), ElementsAre("1/GPU-a[100,200)", "2/GPU-a[200,300)", "3/GPU-b[250,open)"));
  EXPECT_THAT(Describe(jobs().HostGpuAllocations("cmp_a", "gpu03", 0, 0)), IsEmpty());
}

TEST_P(JobHostsTest, BadAllocationsAreRefusedAndTheBatchChangesNothing) {
  GpuAllocation no_uuid = Allocation("1", "", kNow);
  EXPECT_EQ(jobs().PutGpuAllocations({Allocation("1", "GPU-a", kNow), no_uuid}),
            InvalidArgumentError("allocations[1]: gpu_uuid is empty"));
  EXPECT_EQ(jobs().PutGpuAllocations({Allocation("1", "GPU-a", 0)}),
            InvalidArgumentError("allocations[0]: from_ms is 0; it must be positive"));
  EXPECT_EQ(jobs().PutGpuAllocations({Allocation("1", "GPU-a", kNow, kNow - 1)}),
            InvalidArgumentError("allocations[0]: to_ms (2023-11-14T22:13:19.999Z) is before "
                                 "from_ms (2023-11-14T22:13:20.000Z)"));
  EXPECT_EQ(
      jobs().PutGpuAllocations({Allocation("1", "GPU-a", kNow, 0, -2)}),
      InvalidArgumentError("allocations[0]: gpu_index is -2; it must be -1 (unknown) or more"));
  GpuAllocation elsewhere = Allocation("1", "GPU-b", kNow);
  elsewhere.compute_id = "cmp_zz";
  EXPECT_EQ(jobs().PutGpuAllocations({Allocation("1", "GPU-a", kNow), elsewhere}),
            NotFoundError("compute cmp_zz not found"));
  EXPECT_THAT(Describe(jobs().GpuAllocations("cmp_a", "1")), IsEmpty());
  EXPECT_EQ(jobs().HostGpuAllocations("cmp_a", "gpu01", kNow, kNow - 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().HostGpuAllocations("cmp_a", "", 0, 0).status(),
            InvalidArgumentError("host GPU allocations: host is empty"));
  EXPECT_EQ(jobs().HostGpuAllocations("cmp_zz", "gpu01", 0, 0).status(),
            NotFoundError("compute cmp_zz not found"));
}

// Every field of an event or allocation, for comparing the batch reads with the per-job ones.
std::string Fields(const JobNodeEvent& e) {
  return e.compute_id + "|" + e.job_id + "|" + e.host + "|" + e.kind + "|" +
         std::to_string(e.at_ms);
}
std::string Fields(const GpuAllocation& a) {
  return a.compute_id + "|" + a.job_id + "|" + a.host + "|" + a.gpu_uuid + "|" +
         std::to_string(a.gpu_index) + "|" + std::to_string(a.gpu_minor) + "|" +
         std::to_string(a.from_ms) + "|" + std::to_string(a.to_ms);
}
template <typename Row>
std::vector<std::string> AllFields(const std::vector<Row>& rows) {
  std::vector<std::string> fields;
  for (const Row& row : rows)
    fields.push_back(Fields(row));
  return fields;
}

TEST_P(JobHostsTest, BatchReadsGiveEachJobWhatTheSingleReadsGive) {
  MakeCompute("cmp_b");
  // Quotes and IN-list punctuation in an id are bound like any other byte.
  const std::string kOddId = "7') OR ('1'='1, %";
  ASSERT_TRUE(
      jobs()
          .AddNodeEvents(
              {Event("1", "gpu02", "start", kNow + 5), Event("1", "gpu01", "end", kNow + 9),
               Event("1", "gpu01", "start", kNow + 5), Event("2", "gpu03", "start", kNow),
               Event(kOddId, "gpu04", "start", kNow), Event("1", "gpu09", "start", kNow, "cmp_b")})
          .ok());
  GpuAllocation other_compute = Allocation("1", "GPU-x", kNow);
  other_compute.compute_id = "cmp_b";
  Put({Allocation("1", "GPU-b", kNow, 0, 1, "gpu02"), Allocation("1", "GPU-c", kNow, kNow + 5, 1),
       Allocation("1", "GPU-a", kNow, 0, 0), Allocation("3", "GPU-d", kNow, 0, -1),
       Allocation(kOddId, "GPU-e", kNow), other_compute});
  // "4" has no rows at all; "1" is asked for twice.
  const std::vector<std::string> ids = {"3", "1", kOddId, "2", "4", "1"};
  const Result<NodeEventsByJob> events = jobs().NodeEventsFor("cmp_a", ids);
  const Result<GpuAllocationsByJob> allocations = jobs().GpuAllocationsFor("cmp_a", ids);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_TRUE(allocations.ok()) << allocations.status();
  EXPECT_EQ(events->size(), 3u);
  EXPECT_EQ(allocations->size(), 3u);
  for (const std::string& id : ids) {
    const auto single_events = jobs().NodeEvents("cmp_a", id);
    const auto single_allocations = jobs().GpuAllocations("cmp_a", id);
    ASSERT_TRUE(single_events.ok() && single_allocations.ok());
    const auto e = events->find(id);
    const auto a = allocations->find(id);
    EXPECT_EQ(e == events->end() ? std::vector<std::string>{} : AllFields(e->second),
              AllFields(*single_events))
        << id;
    EXPECT_EQ(a == allocations->end() ? std::vector<std::string>{} : AllFields(a->second),
              AllFields(*single_allocations))
        << id;
  }
  EXPECT_THAT(AllFields(events->at("1")),
              ElementsAre(Fields(Event("1", "gpu01", "start", kNow + 5)),
                          Fields(Event("1", "gpu02", "start", kNow + 5)),
                          Fields(Event("1", "gpu01", "end", kNow + 9))));
}

TEST_P(JobHostsTest, BatchReadsOfManyJobsTakeSeveralStatements) {
  // More than two IN lists' worth (500 ids each), and a count that is no power of two.
  constexpr int kJobs = 1203;
  std::vector<std::string> ids;
  std::vector<GpuAllocation> allocations;
  std::vector<JobNodeEvent> events;
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = std::to_string(i);
    ids.push_back(id);
    allocations.push_back(Allocation(id, "GPU-" + id, kNow + i));
    events.push_back(Event(id, "gpu01", "start", kNow + i));
  }
  Put(allocations);
  ASSERT_TRUE(jobs().AddNodeEvents(events).ok());
  for (std::size_t asked : {std::size_t{1}, std::size_t{9}, std::size_t{500}, ids.size()}) {
    const std::vector<std::string> some(ids.begin(), ids.begin() + static_cast<long>(asked));
    const Result<GpuAllocationsByJob> by_job = jobs().GpuAllocationsFor("cmp_a", some);
    const Result<NodeEventsByJob> events_by_job = jobs().NodeEventsFor("cmp_a", some);
    ASSERT_TRUE(by_job.ok()) << by_job.status();
    ASSERT_TRUE(events_by_job.ok()) << events_by_job.status();
    ASSERT_EQ(by_job->size(), asked);
    ASSERT_EQ(events_by_job->size(), asked);
    for (std::size_t i = 0; i < asked; ++i) {
      ASSERT_THAT(AllFields(by_job->at(ids[i])), ElementsAre(Fields(allocations[i])));
      ASSERT_THAT(AllFields(events_by_job->at(ids[i])), ElementsAre(Fields(events[i])));
    }
  }
}

TEST_P(JobHostsTest, BatchReadsCheckTheirArguments) {
  EXPECT_TRUE(jobs().GpuAllocationsFor("cmp_a", {}).value().empty());
  EXPECT_TRUE(jobs().NodeEventsFor("cmp_a", {}).value().empty());
  EXPECT_EQ(jobs().GpuAllocationsFor("cmp_a", {"1", ""}).status(),
            InvalidArgumentError("GPU allocations: job_id is empty"));
  EXPECT_EQ(jobs().NodeEventsFor("", {"1"}).status(),
            InvalidArgumentError("node events: compute_id is empty"));
  EXPECT_EQ(jobs().NodeEventsFor("cmp_a", {std::string(65, '9')}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().GpuAllocationsFor("cmp_zz", {"1"}).status(),
            NotFoundError("compute cmp_zz not found"));
  EXPECT_EQ(jobs().NodeEventsFor("cmp_zz", {}).status(), NotFoundError("compute cmp_zz not found"));
}

}  // namespace
}  // namespace sqlite_store_job_hosts_test
}  // namespace expanse::store
