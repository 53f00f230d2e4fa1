// Hostile answers: whatever a server, a proxy or an impostor sends, each decoder refuses it with
// a message naming the member, or reads it; never a throw, a crash or a made-up figure.
#include "report/report_decode.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace expanse::report {
namespace report_decode_test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json GoodJob() {
  return {{"compute_id", "cmp_a"},
          {"job_id", "77"},
          {"name", "train"},
          {"user", "ana"},
          {"state", "COMPLETED"},
          {"start_ms", 1000},
          {"end_ms", 2000},
          {"requested", {{"nodes", 1}, {"cpus", 8}, {"gpus", 2}, {"mem_mib", 1024}}},
          {"used",
           {{"gpus_allocated", 2},
            {"gpus_active", 1},
            {"has_gpu_samples", true},
            {"sm_mean", 47.5},
            {"sm_peak", 95},
            {"sm_active_mean", nullptr},
            {"tensor_active_mean", nullptr},
            {"counters_source", nullptr},
            {"gpu_mem_peak_mib", 16384},
            {"allocated_gpu_hours", 0.33},
            {"idle_gpu_hours", 0.16},
            {"idle_tail_ms", 0},
            {"cpu_efficiency", 0.2},
            {"mem_efficiency", nullptr}}},
          {"hosts", {"worker2"}},
          {"gpus", {{{"host", "worker2"}, {"gpu_uuid", "GPU-a"}, {"gpu_index", 0}}}}};
}

// The refusal of `doc` by DecodeJob, which must fail with reason invalid_answer.
std::string JobRefusal(const json& doc) {
  Result<Job> job = DecodeJob(doc.dump());
  EXPECT_FALSE(job.ok()) << doc.dump();
  if (job.ok())
    return "";
  EXPECT_EQ(job.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(job.status().reason(), "invalid_answer");
  return job.status().message();
}

TEST(DecodeJobTest, AGoodAnswerIsRead) {
  Result<Job> job = DecodeJob(GoodJob().dump());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->used.gpus_allocated, 2);
  EXPECT_FALSE(job->used.mem_efficiency.has_value());
  EXPECT_DOUBLE_EQ(*job->used.cpu_efficiency, 0.2);
  ASSERT_EQ(job->gpus.size(), 1u);
  EXPECT_EQ(job->gpus[0].gpu_uuid, "GPU-a");
}

TEST(DecodeJobTest, WrongTypesMissingMembersAndAbsurdFiguresAreRefusedByName) {
  json doc = GoodJob();
  doc["used"]["gpus_allocated"] = "2";
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.used.gpus_allocated"));
  doc = GoodJob();
  doc.erase("used");
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.used is required"));
  doc = GoodJob();
  doc["used"]["sm_mean"] = -1;
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.used.sm_mean"));
  doc = GoodJob();
  doc["used"]["cpu_efficiency"] = 1e300;
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.used.cpu_efficiency"));
  doc = GoodJob();
  doc["job_id"] = 77;
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.job_id"));
  doc = GoodJob();
  doc["name"] = "a\x1b[31mb";
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.name"));
  doc = GoodJob();
  doc["end_ms"] = 500;
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.end_ms is before start_ms"));
  doc = GoodJob();
  doc["gpus"] = json::array({json::object({{"host", "w"}})});
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.gpus[0].gpu_uuid"));
  doc = GoodJob();
  doc["gpus"] = json::array();
  for (size_t i = 0; i <= kMaxGpus; ++i)
    doc["gpus"].push_back(json::object());
  EXPECT_THAT(JobRefusal(doc), HasSubstr("job.gpus"));
}

TEST(DecodeJobTest, TextThatIsNotAJsonObjectIsRefused) {
  for (const std::string body : {"", "null", "[1]", "<html></html>", "{\"job_id\":", "\"x\""}) {
    Result<Job> job = DecodeJob(body);
    ASSERT_FALSE(job.ok()) << body;
    EXPECT_EQ(job.status().reason(), "invalid_answer");
    EXPECT_THAT(job.status().message(), HasSubstr("the server's job answer is malformed"));
  }
  // A nesting bomb is refused while it is read.
  EXPECT_FALSE(DecodeJob(std::string(100'000, '[')).ok());
}

TEST(DecodeTimelineTest, PointsAreCheckedOneByOne) {
  json doc = {{"metric", "gpu.sm_util"},
              {"from_ms", 0},
              {"to_ms", 60'000},
              {"series",
               {{{"host", "w"},
                 {"gpu_uuid", "GPU-a"},
                 {"points", {{0, 1, 2, 1.5}, {1000, nullptr, nullptr, nullptr}}}}}}};
  Result<Timeline> t = DecodeTimeline(doc.dump());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->series.size(), 1u);
  EXPECT_EQ(t->series[0].points.size(), 1u) << "a null bucket reads as unsampled";

  doc["series"][0]["points"] = {{0, "1", 2, 3}};
  t = DecodeTimeline(doc.dump());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("timeline.series[0].points[0][1] must be a number"));
  doc["series"][0]["points"] = {{0, 1, 2}};
  EXPECT_FALSE(DecodeTimeline(doc.dump()).ok());
  doc["series"][0]["points"] = {{-5, 1, 2, 3}};
  EXPECT_FALSE(DecodeTimeline(doc.dump()).ok());
  doc["series"][0]["points"] = json::array();
  for (size_t i = 0; i <= kMaxPointsPerSeries; ++i)
    doc["series"][0]["points"].push_back({0, 0, 0, 0});
  t = DecodeTimeline(doc.dump());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("timeline.series[0].points"));
  doc["series"] = "none";
  EXPECT_FALSE(DecodeTimeline(doc.dump()).ok());
}

TEST(DecodeVerdictsTest, EachVerdictIsChecked) {
  json verdict = {{"code", "over_allocated"},
                  {"from_ms", 0},
                  {"to_ms", 10},
                  {"confidence", 0.9},
                  {"gpus", {"GPU-a"}},
                  {"hosts", {"w"}},
                  {"evidence", {{"gpus_allocated", 2}}},
                  {"suggestion", "ask for 1 GPU, not 2"}};
  json doc = {{"cell_ms", 10'000}, {"verdicts", {verdict}}};
  Result<Verdicts> v = DecodeVerdicts(doc.dump());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->verdicts[0].evidence["gpus_allocated"], 2);

  const auto refused = [&](const char* key, const json& value) {
    json bad = doc;
    bad["verdicts"][0][key] = value;
    Result<Verdicts> r = DecodeVerdicts(bad.dump());
    EXPECT_FALSE(r.ok()) << key;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_THAT(refused("confidence", 2), HasSubstr("verdicts.verdicts[0].confidence"));
  EXPECT_THAT(refused("code", "Bad Code!"), HasSubstr("verdicts.verdicts[0].code"));
  EXPECT_THAT(refused("to_ms", -1), HasSubstr("to_ms"));
  EXPECT_THAT(refused("from_ms", 20), HasSubstr("to_ms is before from_ms"));
  EXPECT_THAT(refused("evidence", json::array()), HasSubstr("evidence must be an object"));
  EXPECT_THAT(refused("gpus", {1, 2}), HasSubstr("gpus"));
}

TEST(DecodeLedgerTest, TotalsAndGpusAreRequired) {
  json doc = {{"requested_gpus", 2},
              {"totals",
               {{"gpus", 2},
                {"never_used_gpus", 1},
                {"requested_gpu_s", 1200},
                {"allocated_gpu_s", 1200},
                {"sampled_gpu_s", 1200},
                {"active_gpu_s", 600},
                {"idle_gpu_s", 600},
                {"idle_share", 0.5}}},
              {"gpus",
               {{{"host", "w"},
                 {"gpu_uuid", "GPU-a"},
                 {"gpu_index", 0},
                 {"allocated_gpu_s", 600},
                 {"sampled_gpu_s", 600},
                 {"active_gpu_s", 600},
                 {"idle_gpu_s", 0},
                 {"never_used", false}}}}};
  Result<Ledger> l = DecodeLedger(doc.dump());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_DOUBLE_EQ(*l->totals.idle_share, 0.5);
  doc["totals"]["idle_share"] = nullptr;
  l = DecodeLedger(doc.dump());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_FALSE(l->totals.idle_share.has_value());
  doc["totals"]["idle_share"] = 7;
  EXPECT_FALSE(DecodeLedger(doc.dump()).ok());
  doc.erase("totals");
  l = DecodeLedger(doc.dump());
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("ledger.totals is required"));
}

TEST(DecodeJobPageTest, AnOversizedPageIsRefused) {
  json doc = {{"jobs", json::array()}};
  for (size_t i = 0; i <= kMaxJobsPerPage; ++i)
    doc["jobs"].push_back(GoodJob());
  Result<std::vector<Job>> page = DecodeJobPage(doc.dump());
  ASSERT_FALSE(page.ok());
  EXPECT_THAT(page.status().message(), HasSubstr("jobs.jobs"));
  doc["jobs"] = {GoodJob(), 3};
  EXPECT_FALSE(DecodeJobPage(doc.dump()).ok());
}

}  // namespace
}  // namespace report_decode_test
}  // namespace expanse::report
