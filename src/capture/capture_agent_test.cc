#include "capture/capture_agent.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "capture/capture_trigger.h"

namespace expanse::capture {
namespace {

class CaptureAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/capture_agent_XXXXXX";
    control_ = mkdtemp(tmpl);
    std::filesystem::create_directory(control_ + "/capture");
    std::filesystem::create_directory(control_ + "/phase-b");
    options_.control_dir = control_;
    options_.spool_dir = control_ + "/capture";
    options_.window_ms = 10000;
    options_.trace_window_ms = 5000;
    options_.min_free_bytes = 0;
    process_.job_id = "42";
    process_.host = "gpu7";
    process_.pid = 777;
  }
  void TearDown() override { std::filesystem::remove_all(control_); }

  CaptureAgent& Agent() {
    if (!agent_)
      agent_ = std::make_unique<CaptureAgent>(options_, process_, [this] { return now_; });
    return *agent_;
  }
  std::vector<std::string> Files(const std::string& prefix) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(options_.spool_dir)) {
      const std::string name = e.path().filename();
      if (name.rfind(prefix, 0) == 0)
        names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  nlohmann::json Json(const std::string& name) {
    std::ifstream in(options_.spool_dir + "/" + name);
    return nlohmann::json::parse(in);
  }
  std::string Log() {
    std::ifstream in(options_.spool_dir + "/" + Agent().LogFileName());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  void Trigger(const std::string& id, uint64_t until_ms) {
    std::ofstream(control_ + "/phase-b/42") << TriggerJson({id, until_ms, "gpu_idle", {"GPU-a"}});
  }
  static Activity Kernel(uint64_t at_ms, const char* name = "gemm") {
    Activity a;
    a.kind = ActivityKind::kKernel;
    a.start_ns = at_ms * 1000000;
    a.end_ns = a.start_ns + 2000000;
    a.name = name;
    return a;
  }

  std::string control_;
  AgentOptions options_;
  ProcessIdentity process_;
  uint64_t now_ = 1'000'000;
  std::unique_ptr<CaptureAgent> agent_;
};

TEST_F(CaptureAgentTest, SpoolsOneAggregatePerWindowWithActivity) {
  Agent().OnActivity(Kernel(now_ + 10));
  Agent().OnActivity(Kernel(now_ + 20));
  now_ += 9000;
  Agent().Tick();
  EXPECT_TRUE(Files("agg-").empty());  // the window is not over
  now_ += 1000;
  Agent().Tick();
  ASSERT_EQ(Files("agg-"), std::vector<std::string>{"agg-42-gpu7-777-1010000.json"});
  const nlohmann::json doc = Json("agg-42-gpu7-777-1010000.json");
  EXPECT_EQ(doc.at("format"), "expanse-capture-aggregate/1");
  EXPECT_EQ(doc.at("job_id"), "42");
  EXPECT_EQ(doc.at("window_start_ms"), 1000000);
  EXPECT_EQ(doc.at("window_end_ms"), 1010000);
  EXPECT_EQ(doc.at("kernels").at("count"), 2);
  EXPECT_EQ(doc.at("kernels").at("gpu_ns"), 4000000);
  EXPECT_EQ(doc.at("kernels").at("top").at(0).at("name"), "gemm");
  // A window without activity writes nothing.
  now_ += 10000;
  Agent().Tick();
  EXPECT_EQ(Files("agg-").size(), 1u);
}

TEST_F(CaptureAgentTest, ATriggerRecordsOneBoundedTraceSegment) {
  Trigger("t1", now_ + 60000);
  Agent().Tick();  // sees the trigger: the trace starts now, for trace_window_ms
  const uint64_t started = now_;
  Agent().OnActivity(Kernel(now_ + 100, "during"));
  now_ += 4000;
  Agent().Tick();
  EXPECT_TRUE(Files("seg-").empty());
  now_ += 1000;
  Agent().Tick();
  const auto segments = Files("seg-");
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0], "seg-42-gpu7-777-" + std::to_string(started) + ".json");
  const nlohmann::json doc = Json(segments[0]);
  EXPECT_EQ(doc.at("otherData").at("trigger").at("id"), "t1");
  EXPECT_EQ(doc.at("otherData").at("window_end_ms"), started + 5000);
  EXPECT_EQ(doc.at("otherData").at("events"), 1);
  // The same trigger does not start another window; a new one does.
  Agent().OnActivity(Kernel(now_ + 10));
  now_ += 2000;
  Agent().Tick();
  now_ += 6000;
  Agent().Tick();
  EXPECT_EQ(Files("seg-").size(), 1u);
  Trigger("t2", now_ + 60000);
  Agent().Tick();
  now_ += 5000;
  Agent().Tick();
  EXPECT_EQ(Files("seg-").size(), 2u);
}

TEST_F(CaptureAgentTest, ATraceNeverRunsPastItsTriggersDeadline) {
  Trigger("t1", now_ + 2000);
  Agent().Tick();
  now_ += 2000;
  Agent().Tick();
  const auto segments = Files("seg-");
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(Json(segments[0]).at("otherData").at("window_end_ms"), now_);
}

TEST_F(CaptureAgentTest, AnExpiredTriggerIsIgnored) {
  Trigger("old", now_ - 1);
  Agent().Tick();
  now_ += 20000;
  Agent().Tick();
  EXPECT_TRUE(Files("seg-").empty());
}

TEST_F(CaptureAgentTest, ABadTriggerIsNotedOnceInTheLog) {
  std::ofstream(control_ + "/phase-b/42") << "{not json";
  Agent().Tick();
  Agent().Tick();
  const std::string log = Log();
  EXPECT_NE(log.find("phase B trigger ignored"), std::string::npos) << log;
  EXPECT_EQ(log.find("phase B trigger ignored"), log.rfind("phase B trigger ignored")) << log;
  EXPECT_TRUE(Files("seg-").empty());
}

TEST_F(CaptureAgentTest, FinishSpoolsTheOpenWindowAndTrace) {
  Trigger("t1", now_ + 60000);
  Agent().Tick();
  Agent().OnActivity(Kernel(now_ + 1));
  now_ += 300;
  Agent().Finish();
  EXPECT_EQ(Files("agg-").size(), 1u);
  EXPECT_EQ(Files("seg-").size(), 1u);
}

TEST_F(CaptureAgentTest, ASpoolThatCannotTakeTheFileIsNotedNotFatal) {
  options_.min_free_bytes = ~uint64_t{0} >> 4;
  Agent().OnActivity(Kernel(now_));
  now_ += 10000;
  Agent().Tick();
  Agent().OnActivity(Kernel(now_));
  now_ += 10000;
  Agent().Tick();
  EXPECT_TRUE(Files("agg-").empty());
  const std::string log = Log();
  EXPECT_NE(log.find("aggregate not written"), std::string::npos) << log;
  EXPECT_EQ(log.find("aggregate not written"), log.rfind("aggregate not written")) << log;
}

TEST_F(CaptureAgentTest, DroppedRecordsAreCounted) {
  Agent().OnDropped(12);
  now_ += 10000;
  Agent().Tick();
  ASSERT_EQ(Files("agg-").size(), 1u);
  EXPECT_EQ(Json(Files("agg-")[0]).at("dropped_records"), 12);
}

}  // namespace
}  // namespace expanse::capture
