#include "agent/slurm_job_record.h"

#include <string>

#include <gtest/gtest.h>

#include "wire/field_reader.h"

namespace expanse::agent {
namespace {

// Every cut is within the limit, a prefix of the list up to a whole entry, and, where it ends
// inside a bracket, closed again.
TEST(FitNodeListTest, CutsAtTheLastWholeEntryThatFits) {
  EXPECT_EQ(FitNodeList("gpu[01-04]", 64), "gpu[01-04]");
  EXPECT_EQ(FitNodeList("a[1-3],bb,cc", 9), "a[1-3],bb");  // the comma at the limit itself
  EXPECT_EQ(FitNodeList("a[1-3],bb,cc", 8), "a[1-3]");
  // One bracket, as SLURM writes a big job on one prefix: cut inside it and closed.
  EXPECT_EQ(FitNodeList("gpu[0001-0003,0005,0007,0009]", 20), "gpu[0001-0003,0005]");
  // Whichever keeps more: the bracket's inside beats an early top-level comma.
  EXPECT_EQ(FitNodeList("x,gpu[0001-0003,0005,0007,0009]", 22), "x,gpu[0001-0003,0005]");
  // No comma at all: nothing that names a host fits.
  EXPECT_EQ(FitNodeList(std::string(100, 'n'), 50), "");
  // A stray ']' does not hide the entries after it.
  EXPECT_EQ(FitNodeList("a],b,c,d", 6), "a],b,c");
  EXPECT_EQ(FitNodeList("rack\t1,b", 64), "rack?1,b");
}

TEST(FitNodeListTest, ALargeJobsListFitsTheRecord) {
  std::string nodes = "gpu[";
  for (int i = 0; nodes.size() < 6000; i += 2)
    nodes += (i == 0 ? "" : ",") + std::to_string(10000 + i);
  nodes += "]";
  const std::string fitted = FitNodeList(nodes);
  ASSERT_LE(fitted.size(), wire::kMaxJobNodesBytes);
  EXPECT_GT(fitted.size(), wire::kMaxJobNodesBytes - 8);
  ASSERT_TRUE(fitted.ends_with("]"));
  const std::string inside = fitted.substr(0, fitted.size() - 1);
  EXPECT_TRUE(nodes.starts_with(inside + ",")) << fitted.substr(fitted.size() - 20);
}

TEST(SlurmJobRecordTest, TimesAndCountsWithinWhatTheStoreTakes) {
  slurm::JobInfo job;
  job.job_id = "42";
  job.state = "COMPLETED";
  job.start_ms = 2'000'000;
  job.end_ms = 1'000'000;  // a requeued job's previous end, before its new start
  job.submit_ms = -5;
  job.req_cpus = -1;
  job.time_limit_s = 3600;
  wire::JobRecord r = SlurmJobRecord(job, wire::kMaxTimeMs + 1);
  EXPECT_EQ(r.start_ms, 2'000'000);
  EXPECT_EQ(r.end_ms, 0);
  EXPECT_EQ(r.submit_ms, 0);
  EXPECT_EQ(r.req_cpus, 0);
  EXPECT_EQ(r.time_limit_s, 3600);
  EXPECT_EQ(r.observed_ms, wire::kMaxTimeMs);

  job.end_ms = 3'000'000;
  EXPECT_EQ(SlurmJobRecord(job, 5).end_ms, 3'000'000);
}

TEST(SlurmJobRecordTest, OnlyCleanIdsWithinTheLimitAreStorable) {
  EXPECT_TRUE(StorableJobId("123_4"));
  EXPECT_FALSE(StorableJobId(""));
  EXPECT_FALSE(StorableJobId("123_[5-9]"));
  EXPECT_FALSE(StorableJobId(std::string(65, '1')));
  EXPECT_TRUE(StorableJobId(std::string(64, '1')));
  EXPECT_FALSE(StorableJobId("12\t3"));
  EXPECT_FALSE(StorableJobId("12\xFF"));
}

}  // namespace
}  // namespace expanse::agent
