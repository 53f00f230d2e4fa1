#include "agent/batch_builder.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::agent {
namespace batch_builder_test {
namespace {

using nlohmann::json;

constexpr char kGoldenBatch[] =
    R"({"gpu_allocations":[{"from_ms":1000,"gpu_index":0,"gpu_minor":0,"gpu_uuid":"GPU-a","host":"w1","job_id":"8","slurm_job_id":8,"to_ms":0}],)"
    R"("job_events":[{"at_ms":1000,"host":"w1","job_id":"8","kind":"start"}],)"
    R"("jobs":[{"account":"ml","end_ms":0,"job_id":"8","name":"train","nodes":"w1","observed_ms":2000,"partition":"gpu","req_cpus":8,"req_gpus":1,"req_mem_mib":16384,"req_nodes":1,"start_ms":1000,"state":"RUNNING","submit_ms":500,"time_limit_s":3600,"user":"ada"}],)"
    R"("sequence":42,"series":[{"device":"GPU-a","dt":[0,1000],)"
    R"("host":"w1","metric":"gpu.util_pct","t0":1000,"v":[12.5,100.0]}],)"
    R"("stacks":[{"count":3,"folded":"a.py:main:1","gpu_idle":false,"host":"w1","job_id":"8","thread_state":"gil","window_end_ms":60000,"window_start_ms":1}],)"
    R"("stream":"telemetry","version":1})";

// The elements taken; fails the test when any was refused.
uint64_t Taken(const BatchBuilder::Intake& intake) {
  EXPECT_EQ(intake.refused, 0u) << intake.first_refusal;
  return intake.accepted;
}

// What the server checks of a batch's sections, restated: every element an object with the
// members the ingest format requires, of the right types. The exact rules are the wire
// decoders', which both sides use; this catches a record passed on without them.
void ExpectOnlyWellTyped(const json& doc) {
  for (const auto& s : doc["series"]) {
    ASSERT_TRUE(s.is_object()) << s;
    EXPECT_TRUE(s["host"].is_string()) << s;
    EXPECT_TRUE(s["metric"].is_string()) << s;
    EXPECT_TRUE(s["t0"].is_number_integer()) << s;
    EXPECT_EQ(s["dt"].size(), s["v"].size()) << s;
  }
  for (const char* section : {"job_events", "gpu_allocations", "stacks"}) {
    if (!doc.contains(section))
      continue;
    for (const auto& e : doc[section]) {
      ASSERT_TRUE(e.is_object()) << e;
      EXPECT_TRUE(e["job_id"].is_string()) << e;
      EXPECT_TRUE(e["host"].is_string()) << e;
    }
  }
}

// What a broken or hostile worker wrote, each of which used to end the controller (nlohmann's
// value() threw on a wrongly typed member) or make the server refuse the whole batch.
TEST(BatchBuilderTest, HostileRecordsAreRefusedByPathAndTheRestIsKept) {
  struct Case {
    const char* kind;
    const char* payload;
    const char* refusal;  // a part of the first refusal's message
  };
  const Case cases[] = {
      {"job_event", R"({"version":"1"})", "version"},
      {"job_event", R"({"version":1,"kind":"start","job_id":"8","host":"w1","at_ms":"now"})",
       "job_event.at_ms must be an integer"},
      {"job_event", R"([5,"x",null])", "not a version 1 object"},
      {"gpu_series", R"([5,"x",null])", "gpu_series[0] must be an object"},
      {"gpu_series", R"([{"host":7,"metric":"m","t0":1,"dt":[0],"v":[1]}])",
       "gpu_series[0].host must be a string"},
      {"gpu_series", R"([{"host":"w1","metric":"m","t0":"1","dt":[0],"v":[1]}])",
       "gpu_series[0].t0 must be an integer"},
      {"gpu_series", R"([{"host":"w1","metric":"m","t0":9223372036854775800,"dt":[0],"v":[1]}])",
       "gpu_series[0].t0 must be an integer"},
      {"gpu_allocation", R"({"job_id":8,"host":"w1","gpu_uuid":"G","from_ms":1})",
       "gpu_allocation.job_id must be a string"},
      {"gpu_allocation", R"("x")", "gpu_allocation must be an object"},
      {"py_stacks", R"([{"job_id":"8"}])", "py_stacks[0].host is required"},
      {"gpu_series", "[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]", "deeper than 8 levels"},
  };
  for (const Case& c : cases) {
    BatchBuilder batch;
    BatchBuilder::Intake intake;
    ASSERT_NO_THROW(intake = batch.AddSpoolRecord(c.kind, c.payload)) << c.payload;
    EXPECT_EQ(intake.accepted, 0u) << c.payload;
    EXPECT_GE(intake.refused, 1u) << c.payload;
    EXPECT_NE(intake.first_refusal.message().find(c.refusal), std::string::npos)
        << c.payload << ": " << intake.first_refusal;
    EXPECT_TRUE(batch.empty()) << c.payload;
    ASSERT_NO_THROW(batch.RenameJobs([](const std::string&) { return std::string("x"); }));
  }

  // One bad element among good ones costs only itself.
  BatchBuilder batch;
  const BatchBuilder::Intake mixed = batch.AddSpoolRecord("gpu_series", R"([
      {"host":"w1","metric":"gpu.sm_util","t0":1000,"dt":[0,1000],"v":[1,2]},
      {"host":"w1","metric":"gpu.sm_util","t0":"1000","dt":[0],"v":[1]},
      5,
      {"host":"w2","device":"job/9","metric":"job.cpu_cores","t0":1000,"dt":[0],"v":[3]}])");
  EXPECT_EQ(mixed.accepted, 2u);
  EXPECT_EQ(mixed.refused, 2u);
  EXPECT_EQ(mixed.first_refusal.reason(), "bad_record");
  EXPECT_EQ(batch.samples(), 3u);
  batch.RenameJobs([](const std::string& id) -> std::optional<std::string> {
    return id == "9" ? std::optional<std::string>("4_2") : std::nullopt;
  });
  const json doc = batch.Render(1, "telemetry");
  ASSERT_EQ(doc["series"].size(), 2u);
  EXPECT_EQ(doc["series"][1]["device"], "job/4_2");
  ExpectOnlyWellTyped(doc);
}

// A worker's spool file may only hold series and stacks of its own host: others are refused
// and counted, what names its own is taken. (Job events and allocations carry SLURM's
// NodeName, which may differ from the host's name: the live detector checks those.)
TEST(BatchBuilderTest, RecordsOfAnotherHostThanTheSpoolsAreRefused) {
  BatchBuilder batch;
  const BatchBuilder::Intake series = batch.AddSpoolRecord("gpu_series", R"([
      {"host":"w1","device":"GPU-a","metric":"gpu.sm_util","t0":1000,"dt":[0],"v":[5]},
      {"host":"w2","device":"GPU-b","metric":"gpu.sm_util","t0":1000,"dt":[0],"v":[5]}])",
                                                           "w1");
  EXPECT_EQ(series.accepted, 1u);
  EXPECT_EQ(series.refused, 1u);
  EXPECT_EQ(series.first_refusal.reason(), "wrong_host");
  EXPECT_NE(series.first_refusal.message().find("gpu_series[1] names host \"w2\""),
            std::string::npos)
      << series.first_refusal;
  for (const auto& [kind, payload] : std::vector<std::pair<std::string, std::string>>{
           {"py_stacks", R"([{"job_id":"8","host":"w2","window_start_ms":1,
                              "window_end_ms":60000,"folded":"a.py:main:1",
                              "thread_state":"gil","count":3,"gpu_idle":false}])"}}) {
    const BatchBuilder::Intake intake = batch.AddSpoolRecord(kind, payload, "w1");
    EXPECT_EQ(intake.accepted, 0u) << kind;
    EXPECT_EQ(intake.first_refusal.reason(), "wrong_host") << kind;
    // Without a spool host (the controller's own records) the same record is taken.
    EXPECT_EQ(batch.AddSpoolRecord(kind, payload).accepted, 1u) << kind;
  }
}

TEST(BatchBuilderTest, RendersSectionsAndRenamesArrayTasks) {
  BatchBuilder batch;
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(Taken(batch.AddSpoolRecord("job_event", R"({"version":1,"kind":"start","job_id":"8",
                                  "host":"w1","at_ms":1000,"slurm_job_id":8})")),
            1u);
  EXPECT_EQ(Taken(batch.AddSpoolRecord("gpu_allocation", R"({"job_id":"8","host":"w1",
                                  "gpu_uuid":"GPU-a","from_ms":1000,"to_ms":0})")),
            1u);
  EXPECT_EQ(Taken(batch.AddSpoolRecord("gpu_series", R"([{"host":"w1","device":"job/8",
                                  "metric":"job.mem_used_mib","t0":1000,"dt":[0],"v":[5]}])")),
            1u);
  EXPECT_EQ(Taken(batch.AddSpoolRecord("py_stacks", R"([{"job_id":"8","host":"w1",
                                  "window_start_ms":1,"window_end_ms":60000,
                                  "folded":"a.py:main:1","thread_state":"gil","count":3,
                                  "gpu_idle":false}])")),
            1u);
  EXPECT_EQ(batch.AddSpoolRecord("py_stacks", R"({"not":"an array"})").refused, 1u);
  // From a newer sampler: ignored, neither taken nor refused.
  const BatchBuilder::Intake future = batch.AddSpoolRecord("future_kind", "{}");
  EXPECT_EQ(future.accepted + future.refused, 0u);
  EXPECT_EQ(batch.AddSpoolRecord("gpu_series", "{not json").first_refusal.reason(), "invalid_json");
  EXPECT_EQ(batch.samples(), 1u);

  // SLURM 22.05 gives the Prolog only SLURM_JOB_ID; squeue knows job 8 as array task 7_1.
  batch.RenameJobs([](const std::string& id) -> std::optional<std::string> {
    if (id == "8")
      return "7_1";
    return std::nullopt;
  });
  const nlohmann::json doc = batch.Render(42, "telemetry");
  EXPECT_EQ(doc["sequence"], 42);
  EXPECT_EQ(doc["stream"], "telemetry");
  EXPECT_EQ(doc["job_events"][0]["job_id"], "7_1");
  EXPECT_EQ(doc["gpu_allocations"][0]["job_id"], "7_1");
  EXPECT_EQ(doc["series"][0]["device"], "job/7_1");
  EXPECT_EQ(doc["stacks"][0]["job_id"], "7_1");
  EXPECT_EQ(doc["stacks"][0]["count"], 3);
  EXPECT_FALSE(doc.contains("jobs"));
}

// The capture agents' windows a worker's sampler spooled: taken by the wire's rules, refused
// by path when bad or another host's, renamed like every other job id, rendered as their own
// section.
TEST(BatchBuilderTest, CaptureAggregatesAreCheckedAndRendered) {
  const std::string aggregate = R"({"format":"expanse-capture-aggregate/1","job_id":"8",
      "host":"w1","pid":77,"uid":1000,"window_start_ms":1000,"window_end_ms":11000,
      "kernels":{"count":2,"gpu_ns":500,"top":[{"name":"gemm","count":2,"gpu_ns":500}]}})";
  BatchBuilder batch;
  EXPECT_EQ(Taken(batch.AddSpoolRecord("capture_aggregates", "[" + aggregate + "]", "w1")), 1u);
  EXPECT_FALSE(batch.empty());
  const BatchBuilder::Intake other_host =
      batch.AddSpoolRecord("capture_aggregates", "[" + aggregate + "]", "w2");
  EXPECT_EQ(other_host.refused, 1u);
  EXPECT_EQ(other_host.first_refusal.reason(), "wrong_host");
  json bad = json::parse(aggregate);
  bad["kernels"]["count"] = 1;
  const BatchBuilder::Intake refused =
      batch.AddSpoolRecord("capture_aggregates", json::array({bad}).dump(), "w1");
  EXPECT_EQ(refused.refused, 1u);
  EXPECT_NE(refused.first_refusal.message().find("kernels.count"), std::string::npos)
      << refused.first_refusal;
  batch.RenameJobs([](const std::string& id) -> std::optional<std::string> {
    return id == "8" ? std::optional<std::string>("7_1") : std::nullopt;
  });
  const json doc = batch.Render(1, "telemetry");
  ASSERT_EQ(doc["capture_aggregates"].size(), 1u);
  EXPECT_EQ(doc["capture_aggregates"][0]["job_id"], "7_1");
  EXPECT_EQ(doc["capture_aggregates"][0]["kernels"]["top"][0]["name"], "gemm");
}

// The bytes of a batch with one element of every section, pinned: daemons already installed
// send exactly this shape, and the server must keep reading it (docs/formats/ingest-batch.md).
// A change here is a format change: version it, and keep the server reading both.
TEST(BatchBuilderTest, TheRenderedBatchKeepsItsFormatByteForByte) {
  BatchBuilder batch;
  batch.AddSeries({wire::SeriesRecord{.host = "w1",
                                      .device = "GPU-a",
                                      .metric = "gpu.util_pct",
                                      .t0 = 1000,
                                      .dt = {0, 1000},
                                      .v = {12.5, 100}}});
  EXPECT_EQ(Taken(batch.AddSpoolRecord("job_event", R"({"version":1,"kind":"start","job_id":"8",
                                  "host":"w1","at_ms":1000,"slurm_job_id":8})")),
            1u);
  batch.AddAllocation(wire::GpuAllocationRecord{.job_id = "8",
                                                .host = "w1",
                                                .gpu_uuid = "GPU-a",
                                                .gpu_index = 0,
                                                .gpu_minor = 0,
                                                .from_ms = 1000,
                                                .to_ms = 0,
                                                .slurm_job_id = 8});
  wire::JobRecord job;
  job.job_id = "8";
  job.name = "train";
  job.user = "ada";
  job.account = "ml";
  job.partition = "gpu";
  job.state = "RUNNING";
  job.nodes = "w1";
  job.submit_ms = 500;
  job.start_ms = 1000;
  job.req_nodes = 1;
  job.req_cpus = 8;
  job.req_gpus = 1;
  job.req_mem_mib = 16384;
  job.time_limit_s = 3600;
  job.observed_ms = 2000;
  batch.AddJob(job);
  batch.AddStacks({wire::StackRecord{.job_id = "8",
                                     .host = "w1",
                                     .window_start_ms = 1,
                                     .window_end_ms = 60000,
                                     .folded = "a.py:main:1",
                                     .thread_state = "gil",
                                     .count = 3,
                                     .gpu_idle = false}});
  EXPECT_EQ(batch.Render(42, "telemetry").dump(), kGoldenBatch);
}

}  // namespace
}  // namespace batch_builder_test
}  // namespace expanse::agent
