#include "doctor/health_report.h"

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor/checks.h"
#include "spool/spool_file.h"

namespace expanse::doctor {
namespace {

using ::testing::HasSubstr;

std::string HealthFile(const std::string& host, const std::string& payload,
                       int64_t created_ms = 1'800'000'000'000) {
  spool::SpoolFile file{host, "boot-a", 7, created_ms, {{"worker_health", payload}}};
  Result<std::string> bytes = spool::EncodeSpoolFile(file);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : "";
}

// What agent/sampler_role.cc writes, trimmed to the members the doctor reads.
nlohmann::json Report() {
  return {
      {"version", 1},
      {"host", "w1"},
      {"last_sample_ms", 1'799'999'999'000},
      {"capabilities",
       {{"nvml", {{"state", "ok"}, {"reason", ""}}},
        {"dcgm", {{"state", "degraded"}, {"reason", "no host engine"}}}}},
      {"inventory",
       {{"backend", "nvml"},
        {"gpus",
         {{{"index", 0}, {"uuid", "GPU-a"}, {"minor", 3}}, {{"index", 1}, {"uuid", "GPU-b"}}}}}},
      {"gpu_use",
       {{{"uuid", "GPU-a"},
         {"state", "in_use"},
         {"jobs", {42}},
         {"processes",
          {{{"pid", 99},
            {"job_id", 42},
            {"of_allocated_job", false},
            {"outside_cgroup", false}}}}}}},
      {"job_devices",
       {{{"job_id", "42"},
         {"state", "disagrees"},
         {"allocated_gpus", {"GPU-a"}},
         {"cgroup_gpus", {"GPU-a", "GPU-b"}}},
        {{"job_id", "43"}, {"state", "not_checked"}, {"detail", "cgroup v2"}},
        {{"job_id", "44"}, {"state", "on_fire"}},
        {{"state", "agrees"}},
        7}},
      {"spool", {{"records_written", 10}, {"write_errors", 2}, {"records_dropped", 1}}},
      {"problem", "spool full"}};
}

TEST(DoctorHealthReport, ReadsTheSamplersReport) {
  Result<NodeFacts> node = ReadHealthFile(HealthFile("w1", Report().dump()), "w1");
  ASSERT_TRUE(node.ok()) << node.status().message();
  EXPECT_EQ(node->host, "w1");
  EXPECT_EQ(node->written_ms, 1'800'000'000'000);
  EXPECT_EQ(node->last_sample_ms, 1'799'999'999'000);
  ASSERT_EQ(node->gpus.size(), 2u);
  EXPECT_EQ(node->gpus[0].uuid, "GPU-a");
  EXPECT_EQ(node->gpus[0].minor, 3u);
  EXPECT_FALSE(node->gpus[1].minor.has_value());
  EXPECT_EQ(node->capabilities.at("dcgm").state, "degraded");
  EXPECT_EQ(node->capabilities.at("dcgm").reason, "no host engine");
  ASSERT_EQ(node->gpu_use.size(), 1u);
  EXPECT_EQ(node->gpu_use[0].jobs, std::vector<std::string>{"42"});
  ASSERT_EQ(node->gpu_use[0].processes.size(), 1u);
  EXPECT_EQ(node->gpu_use[0].processes[0].job_id, "42");
  EXPECT_FALSE(node->gpu_use[0].processes[0].of_allocated_job);
  // An entry with an unknown state, without a job or not an object is skipped.
  ASSERT_EQ(node->job_devices.size(), 2u);
  EXPECT_EQ(node->job_devices[0].job_id, "42");
  EXPECT_EQ(node->job_devices[0].state, "disagrees");
  EXPECT_EQ(node->job_devices[0].allocated_gpus, std::vector<std::string>{"GPU-a"});
  EXPECT_EQ(node->job_devices[0].cgroup_gpus, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(node->job_devices[1].detail, "cgroup v2");
  EXPECT_EQ(node->spool_write_errors, 2u);
  EXPECT_EQ(node->spool_records_dropped, 1u);
  EXPECT_EQ(node->problem, "spool full");
}

TEST(DoctorHealthReport, RefusesGarbage) {
  for (const std::string& bytes :
       {std::string(), std::string("garbage"), std::string(5000, '\0'), std::string(1, '\xff')}) {
    Result<NodeFacts> node = ReadHealthFile(bytes, "w1");
    ASSERT_FALSE(node.ok());
    EXPECT_THAT(node.status().message(), HasSubstr("health.rec is damaged"));
  }
}

TEST(DoctorHealthReport, RefusesAReportOfAnotherHost) {
  Result<NodeFacts> other = ReadHealthFile(HealthFile("w2", Report().dump()), "w1");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("written by \"w2\""));
  nlohmann::json lying = Report();
  lying["host"] = "w9";
  Result<NodeFacts> inner = ReadHealthFile(HealthFile("w1", lying.dump()), "w1");
  ASSERT_FALSE(inner.ok());
  EXPECT_THAT(inner.status().message(), HasSubstr("names host \"w9\""));
}

TEST(DoctorHealthReport, RefusesPayloadsThatAreNotAnObject) {
  for (const char* payload : {"[]", "nul", "{\"host\":", "\"text\""}) {
    Result<NodeFacts> node = ReadHealthFile(HealthFile("w1", payload), "w1");
    EXPECT_FALSE(node.ok()) << payload;
  }
  std::string deep(100, '[');
  EXPECT_FALSE(ParseHealthPayload("{\"a\":" + deep, "w1", 0).ok());
}

TEST(DoctorHealthReport, WrongTypesAreSkippedNotThrown) {
  const nlohmann::json odd = {{"host", "w1"},
                              {"last_sample_ms", "soon"},
                              {"capabilities", {{"dcgm", "degraded"}, {"BAD KEY", {{"state", 1}}}}},
                              {"inventory", {{"gpus", {1, "x", {{"uuid", 5}, {"minor", -1}}}}}},
                              {"gpu_use", {{{"jobs", {{{"a", 1}}}}, {"processes", {7}}}}},
                              {"spool", {{"write_errors", -3}}},
                              {"problem", {1, 2}}};
  Result<NodeFacts> node = ParseHealthPayload(odd.dump(), "w1", 5);
  ASSERT_TRUE(node.ok()) << node.status().message();
  EXPECT_EQ(node->last_sample_ms, 0);
  EXPECT_TRUE(node->capabilities.empty());
  EXPECT_TRUE(node->gpus.empty());  // the first non-object ends the list
  ASSERT_EQ(node->gpu_use.size(), 1u);
  EXPECT_TRUE(node->gpu_use[0].jobs.empty());
  EXPECT_TRUE(node->gpu_use[0].processes.empty());
  EXPECT_EQ(node->spool_write_errors, 0u);
  EXPECT_EQ(node->problem, "");
}

// Times a worker wrote are clamped to the wire's range, so the checks' subtractions cannot
// overflow (INT64_MIN as a sample time, a spool file dated past year 9999).
TEST(DoctorHealthReport, TimesOutsideTheWiresRangeCountAsAbsent) {
  nlohmann::json odd = Report();
  odd["last_sample_ms"] = std::numeric_limits<int64_t>::min();
  Result<NodeFacts> node = ParseHealthPayload(odd.dump(), "w1", -5);
  ASSERT_TRUE(node.ok()) << node.status().message();
  EXPECT_EQ(node->last_sample_ms, 0);
  EXPECT_EQ(node->written_ms, 0);
  odd["last_sample_ms"] = std::numeric_limits<int64_t>::max();
  node = ReadHealthFile(HealthFile("w1", odd.dump(), std::numeric_limits<int64_t>::max()), "w1");
  ASSERT_TRUE(node.ok()) << node.status().message();
  EXPECT_EQ(node->last_sample_ms, 0);
  EXPECT_EQ(node->written_ms, 0);
}

TEST(DoctorHealthReport, HugeListsAreCapped) {
  nlohmann::json report = Report();
  report["inventory"]["gpus"] = nlohmann::json::array();
  for (int i = 0; i < 5000; ++i)
    report["inventory"]["gpus"].push_back({{"uuid", "GPU-" + std::to_string(i)}, {"minor", i}});
  report["problem"] = std::string(60000, 'x');
  Result<NodeFacts> node = ParseHealthPayload(report.dump(), "w1", 0);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->gpus.size(), 256u);
  EXPECT_LE(node->problem.size(), 1024u);
}

TEST(DoctorHealthReport, ControlCharactersInTextAreQuoted) {
  nlohmann::json report = Report();
  report["capabilities"]["dcgm"]["reason"] = "a\x1b[31mred";
  Result<NodeFacts> node = ParseHealthPayload(report.dump(), "w1", 0);
  ASSERT_TRUE(node.ok());
  EXPECT_THAT(node->capabilities.at("dcgm").reason, ::testing::Not(HasSubstr("\x1b")));
}

TEST(DoctorHealthReport, TextCutInsideACharacterStaysValidUtf8InFindings) {
  nlohmann::json report = Report();
  std::string reason = "x";
  for (int i = 0; i < 300; ++i)
    reason += "\xc3\xa9";  // é: cut at 512 bytes, the last one loses its second byte
  report["capabilities"]["dcgm"]["reason"] = reason;
  Result<NodeFacts> node = ParseHealthPayload(report.dump(), "w1", 1'800'000'000'000);
  ASSERT_TRUE(node.ok());
  node->arrived_ms = node->written_ms;
  DeploymentFacts facts;
  facts.now_ms = node->written_ms;
  facts.nodes = {*node};
  const std::vector<Finding> findings = RunChecks(facts);
  ASSERT_FALSE(findings.empty());
  EXPECT_NO_THROW((void)FindingsJson(findings, "", facts.now_ms).dump());
}

TEST(DoctorHealthReport, C1ControlsInTextAreQuoted) {
  // U+009B is CSI, U+0085 NEL: valid UTF-8 that a terminal still obeys.
  nlohmann::json report = Report();
  report["job_devices"] = {{{"job_id", "42"},
                            {"state", "unreadable"},
                            {"detail",
                             "a\xc2\x9b"
                             "2Jb"}},
                           {{"job_id", "43"},
                            {"state", "not_checked"},
                            {"detail",
                             "c\xc2\x85"
                             "d"}}};
  report["capabilities"]["dcgm"]["reason"] =
      "e\xc2\x9b"
      "31mred";
  Result<NodeFacts> node = ParseHealthPayload(report.dump(), "w1", 1'800'000'000'000);
  ASSERT_TRUE(node.ok());
  node->arrived_ms = node->written_ms;
  DeploymentFacts facts;
  facts.now_ms = node->written_ms;
  facts.nodes = {*node};
  const std::vector<Finding> findings = RunChecks(facts);
  bool unreadable = false;
  for (const Finding& f : findings) {
    EXPECT_THAT(f.seen, ::testing::Not(HasSubstr("\xc2\x9b"))) << f.code;
    EXPECT_THAT(f.seen, ::testing::Not(HasSubstr("\xc2\x85"))) << f.code;
    unreadable |= f.code == "ATTRIBUTION_DEVICES_UNREADABLE";
  }
  EXPECT_TRUE(unreadable);
  EXPECT_THAT(FindingsText(findings), ::testing::Not(HasSubstr("\xc2\x9b")));
}

TEST(DoctorFindingsJson, NonAsciiTextIsEscapedInTheJson) {
  // Whatever reaches a finding, --json writes it as \u escapes, never raw C1 bytes.
  const std::vector<Finding> findings = {{"NODE_PROBLEM", Severity::kInfo, "w1",
                                          "busy \xc2\x9b"
                                          "2J \xc3\xa9",
                                          ""}};
  const std::string text = FindingsJsonText(findings, "", 1);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\xc2\x9b")));
  EXPECT_THAT(text, HasSubstr("\\u009b2J \\u00e9"));
  EXPECT_EQ(nlohmann::json::parse(text)["findings"][0]["seen"],
            "busy \xc2\x9b"
            "2J \xc3\xa9");
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
}  // namespace expanse::doctor
