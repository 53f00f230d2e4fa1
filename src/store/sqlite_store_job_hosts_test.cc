// SqliteStore as a JobStore: per-node Prolog/Epilog events and GPU allocations.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
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

TEST_P(JobHostsTest, NodeEventsAreIdempotentAndTheFirstDeliveryWins) {
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
  EXPECT_THAT(Events("1"), ElementsAre("gpu01:start@0", "gpu02:start@5", "gpu01:end@100"));
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

}  // namespace
}  // namespace expanse::store
