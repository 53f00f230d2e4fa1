#include "cupti/helper_records.h"

#include <gtest/gtest.h>

namespace expanse::cupti {
namespace {

constexpr char kUuid[] = "GPU-3f0f2b8c-4a4e-6d1e-9b1a-8c2a3e5d7f10";

TEST(HelperRecordsTest, CounterRecordsRoundTrip) {
  CounterRecord record{1764700000,
                       2,
                       kUuid,
                       CounterSet::kRich,
                       {{"gpu.sm_active", 0.935}, {"gpu.tensor_active", 0.71}},
                       10};
  const auto parsed = ParseRecord(RenderRecord(record));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& back = std::get<CounterRecord>(*parsed);
  EXPECT_EQ(back.unix_ms, 1764700000);
  EXPECT_EQ(back.device, 2u);
  EXPECT_EQ(back.uuid, kUuid);
  EXPECT_EQ(back.set, CounterSet::kRich);
  EXPECT_EQ(back.samples, 10u);
  ASSERT_EQ(back.values.size(), 2u);
  EXPECT_EQ(back.values[0].first, "gpu.sm_active");
  EXPECT_DOUBLE_EQ(back.values[0].second, 0.935);
}

TEST(HelperRecordsTest, StatusAndAliveRecordsRoundTrip) {
  StatusRecord status{
      0, kUuid, "unavailable", "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", "grant CAP_PERFMON", {}};
  const auto parsed = ParseRecord(RenderRecord(status));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::get<StatusRecord>(*parsed).reason, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  EXPECT_EQ(std::get<StatusRecord>(*parsed).fix, "grant CAP_PERFMON");
  const auto fatal = ParseRecord(RenderRecord(FatalRecord{"hung_call in cuInit"}));
  ASSERT_TRUE(fatal.ok());
  EXPECT_EQ(std::get<FatalRecord>(*fatal).reason, "hung_call in cuInit");
  EXPECT_FALSE(ParseRecord(R"({"kind":"fatal","reason":"a\u0007b"})").ok());
  const auto alive = ParseRecord(RenderRecord(AliveRecord{42}));
  ASSERT_TRUE(alive.ok());
  EXPECT_EQ(std::get<AliveRecord>(*alive).unix_ms, 42);
}

TEST(HelperRecordsTest, RefusesHostileRecordsWithTheReason) {
  const std::string u = kUuid;
  const struct {
    std::string line;
    std::string reason;
  } cases[] = {
      {"not json", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {R"({"kind":"nope"})", "unknown record kind"},
      {R"({"kind":"alive","t_ms":-1})", "not a time"},
      {R"({"kind":"counters","t_ms":5,"device":0,"uuid":"GPU-x","set":"light","samples":1,"values":{}})",
       "not a GPU UUID"},
      {R"({"kind":"counters","t_ms":5,"device":99,"uuid":")" + u +
           R"(","set":"light","samples":1,"values":{}})",
       "out of range"},
      {R"({"kind":"counters","t_ms":5,"device":0,"uuid":")" + u +
           R"(","set":"light","samples":1,"values":{"job.cpu":1}})",
       "not a gpu.* series"},
      {R"({"kind":"counters","t_ms":5,"device":0,"uuid":")" + u +
           R"(","set":"light","samples":1,"values":{"gpu.sm_active":"1"}})",
       "not a finite number"},
      {R"({"kind":"counters","t_ms":5,"device":0,"uuid":")" + u +
           R"(","set":"heavy","samples":1,"values":{}})",
       "neither light nor rich"},
      {R"({"kind":"status","device":0,"uuid":")" + u + R"(","pm_sampling":"maybe"})",
       "not ok, unavailable or yielded"},
      {R"({"kind":"status","device":0,"uuid":")" + u +
           R"(","pm_sampling":"ok","reason":"a\u0001b"})",
       "not plain text"},
      {std::string(kMaxRecordBytes + 1, ' '), "longer than"},
  };
  for (const auto& c : cases) {
    const auto parsed = ParseRecord(c.line);
    ASSERT_FALSE(parsed.ok()) << c.line;
    EXPECT_NE(parsed.status().message().find(c.reason), std::string::npos)
        << c.line << " -> " << parsed.status();
  }
}

// Only the series of the record's own counter set: a name NVML's series use (gpu.sm_util,
// gpu.ecc_uncorrected) would land under the same key as NVML's samples.
TEST(HelperRecordsTest, CounterValuesNameOnlyTheSeriesOfTheirSet) {
  const std::string head = R"({"kind":"counters","t_ms":5,"device":0,"uuid":")" +
                           std::string(kUuid) + R"(","samples":1,"set":)";
  for (const char* line : {R"("light","values":{"gpu.sm_util":0}})",
                           R"("light","values":{"gpu.ecc_uncorrected":1e9}})",
                           R"("light","values":{"gpu.power_w":1}})",
                           R"("light","values":{"gpu.l2_hit_rate":0.5}})",  // Rich only
                           R"("rich","values":{"gpu.x":0.5}})"}) {
    const auto parsed = ParseRecord(head + line);
    ASSERT_FALSE(parsed.ok()) << line;
    EXPECT_NE(parsed.status().message().find("is not a series of the"), std::string::npos)
        << parsed.status();
  }
  EXPECT_TRUE(ParseRecord(head + R"("rich","values":{"gpu.l2_hit_rate":0.5}})").ok());
  EXPECT_TRUE(ParseRecord(head + R"("light","values":{"gpu.pcie_rx_bytes_per_s":1e9}})").ok());

  // A helper of an earlier release names gpu.sm_inst_executed by its old name: read as the new.
  const auto old_name = ParseRecord(head + R"("light","values":{"gpu.sm_throughput":0.4}})");
  ASSERT_TRUE(old_name.ok()) << old_name.status();
  const auto& counters = std::get<CounterRecord>(*old_name);
  ASSERT_EQ(counters.values.size(), 1u);
  EXPECT_EQ(counters.values[0].first, "gpu.sm_inst_executed");
  EXPECT_DOUBLE_EQ(counters.values[0].second, 0.4);
  const auto both = ParseRecord(
      head + R"("light","values":{"gpu.sm_throughput":0.4,"gpu.sm_inst_executed":0.5}})");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("twice"), std::string::npos) << both.status();
}

// metrics.md declares the activity series ratios 0..1 and the byte rates non-negative. A PM
// counter may read a little over its sustained peak: up to 1.05 is kept, as 1. A value beyond
// its series' range drops only that value, counted in the record: a memory-bound job whose DRAM
// throughput bursts above the sustained peak keeps its GPU's other series.
TEST(HelperRecordsTest, ValuesOutOfRangeAreDroppedAndCountedAndTheOthersKept) {
  const std::string head = R"({"kind":"counters","t_ms":5,"device":0,"uuid":")" +
                           std::string(kUuid) + R"(","samples":1,"set":"light","values":)";
  std::vector<std::pair<std::string, double>> dropped = {{"left over", 1}};
  const auto burst =
      ParseRecord(head + R"({"gpu.dram_throughput":1.2,"gpu.sm_active":0.5}})", &dropped);
  ASSERT_TRUE(burst.ok()) << burst.status();
  const auto& record = std::get<CounterRecord>(*burst);
  ASSERT_EQ(record.values.size(), 1u);
  EXPECT_EQ(record.values[0].first, "gpu.sm_active");
  EXPECT_DOUBLE_EQ(record.values[0].second, 0.5);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].first, "gpu.dram_throughput");
  EXPECT_DOUBLE_EQ(dropped[0].second, 1.2);
  EXPECT_TRUE(ParseRecord(head + R"({"gpu.dram_throughput":1.2}})").ok());  // none asked for

  for (const char* values : {R"({"gpu.sm_active":250})", R"({"gpu.sm_active":-0.5})",
                             R"({"gpu.dram_active":1.06})", R"({"gpu.pcie_tx_bytes_per_s":-1})"}) {
    const auto parsed = ParseRecord(head + values + "}", &dropped);
    ASSERT_TRUE(parsed.ok()) << values << ": " << parsed.status();
    EXPECT_TRUE(std::get<CounterRecord>(*parsed).values.empty()) << values;
    EXPECT_EQ(dropped.size(), 1u) << values;
  }
  const auto near_peak =
      ParseRecord(head + R"({"gpu.sm_active":1.04,"gpu.tensor_active":0}})", &dropped);
  ASSERT_TRUE(near_peak.ok()) << near_peak.status();
  const auto& values = std::get<CounterRecord>(*near_peak).values;
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].second + values[1].second, 1.0);
  EXPECT_TRUE(dropped.empty());
}

TEST(HelperRecordsTest, CommandsRoundTripAndWindowsAreBounded) {
  const auto escalate = ParseCommand(
      RenderCommand({HelperCommand::Kind::kEscalate, kUuid, std::chrono::seconds(30)}));
  ASSERT_TRUE(escalate.ok()) << escalate.status();
  EXPECT_EQ(escalate->uuid, kUuid);
  EXPECT_EQ(escalate->window, std::chrono::seconds(30));
  const auto long_one = ParseCommand(std::string("escalate ") + kUuid + " 99999");
  ASSERT_TRUE(long_one.ok());
  EXPECT_EQ(long_one->window, kMaxEscalation);
  const auto light = ParseCommand(std::string("light ") + kUuid);
  ASSERT_TRUE(light.ok());
  EXPECT_EQ(light->kind, HelperCommand::Kind::kLight);
  for (const auto kind : {HelperCommand::Kind::kRelease, HelperCommand::Kind::kResume}) {
    const auto parsed = ParseCommand(RenderCommand({kind, kUuid, {}}));
    ASSERT_TRUE(parsed.ok()) << RenderCommand({kind, kUuid, {}});
    EXPECT_EQ(parsed->kind, kind);
    EXPECT_EQ(parsed->uuid, kUuid);
  }
}

TEST(HelperRecordsTest, RefusesMalformedCommands) {
  const std::string u = kUuid;
  for (const std::string& line : std::vector<std::string>{
           "", "escalate", "escalate " + u, "escalate " + u + " 0", "escalate " + u + " 5s",
           "escalate GPU-zz 5", "stop " + u, "light " + u + " extra"}) {
    EXPECT_FALSE(ParseCommand(line).ok()) << line;
  }
}

TEST(HelperRecordsTest, GpuUuids) {
  EXPECT_TRUE(IsGpuUuid(kUuid));
  EXPECT_TRUE(IsGpuUuid("MIG-3f0f2b8c-4a4e"));
  EXPECT_FALSE(IsGpuUuid("GPU-"));
  EXPECT_FALSE(IsGpuUuid("gpu-3f0f2b8c"));
  EXPECT_FALSE(IsGpuUuid("GPU-3f0f 2b8c"));
}

}  // namespace
}  // namespace expanse::cupti
