#include "capture/pc_profile.h"

#include <string>

#include <gtest/gtest.h>

#include "capture/trace_segment.h"

namespace expanse::capture {
namespace {

TEST(PcProfile, SumsOneInstructionOverBuffersAndRanksTheBusiestFirst) {
  PcProfile p;
  p.SetState(PcSamplingState::kSampled);
  p.SetPeriod(14);
  p.Add({.function = "relu",
         .cubin_crc = 1,
         .pc_offset = 16,
         .stall_reason = "selected",
         .samples = 3});
  p.Add({.function = "gemm",
         .cubin_crc = 1,
         .pc_offset = 64,
         .stall_reason = "long_scoreboard",
         .samples = 10});
  p.Add({.function = "gemm",
         .cubin_crc = 1,
         .pc_offset = 64,
         .stall_reason = "selected",
         .samples = 2});
  p.Add({.function = "gemm",
         .cubin_crc = 1,
         .pc_offset = 64,
         .stall_reason = "long_scoreboard",
         .samples = 5});
  p.Add({.function = "gemm",
         .cubin_crc = 2,
         .pc_offset = 64,
         .stall_reason = "selected",
         .samples = 1});  // the same offset in another module is another instruction
  p.Add({.function = "idle", .stall_reason = "selected", .samples = 0});  // nothing: not kept
  p.AddTotals(25, 4, false);
  p.AddTotals(0, 0, true);
  const nlohmann::json j = p.ToJson();
  EXPECT_EQ(j.at("state"), "sampled");
  EXPECT_EQ(j.at("period"), 14);
  EXPECT_EQ(j.at("total_samples"), 25);
  EXPECT_EQ(j.at("dropped_samples"), 4);
  EXPECT_EQ(j.at("hardware_buffer_full"), 1);
  EXPECT_EQ(j.at("stall_reasons"), nlohmann::json({{"long_scoreboard", 15}, {"selected", 6}}));
  ASSERT_EQ(j.at("functions").size(), 2u);
  const auto& gemm = j.at("functions").at(0);
  EXPECT_EQ(gemm.at("name"), "gemm");
  EXPECT_EQ(gemm.at("samples"), 18);
  ASSERT_EQ(gemm.at("pcs").size(), 2u);
  EXPECT_EQ(gemm.at("pcs").at(0),
            nlohmann::json({{"cubin_crc", 1},
                            {"pc_offset", 64},
                            {"samples", 17},
                            {"stall_reasons", {{"long_scoreboard", 15}, {"selected", 2}}}}));
  EXPECT_EQ(j.at("functions").at(1).at("name"), "relu");
}

TEST(PcProfile, BeyondItsBoundsSamplesAreCountedNotKept) {
  PcProfile p;
  p.SetState(PcSamplingState::kSampled);
  for (size_t f = 0; f < PcProfile::kMaxFunctions + 3; ++f)
    p.Add({.function = "k" + std::to_string(f), .stall_reason = "selected", .samples = 1});
  for (size_t pc = 0; pc < PcProfile::kMaxPcsPerFunction + 2; ++pc)
    p.Add({.function = "k0", .pc_offset = pc + 1, .stall_reason = "selected", .samples = 2});
  const nlohmann::json j = p.ToJson();
  EXPECT_EQ(j.at("unkept_samples"), 3 + 2 * 3);  // 3 functions; k0 held one PC already
  EXPECT_EQ(j.at("functions").size(), PcProfile::kTopFunctions);
  EXPECT_EQ(j.at("functions").at(0).at("pcs").size(), PcProfile::kTopPcs);
  PcProfile many;
  many.SetState(PcSamplingState::kSampled);
  for (size_t f = 0; f * PcProfile::kMaxPcsPerFunction < PcProfile::kMaxPcs + 1; ++f) {
    for (size_t pc = 0; pc < PcProfile::kMaxPcsPerFunction; ++pc)
      many.Add({.function = "f" + std::to_string(f),
                .pc_offset = pc,
                .stall_reason = "s",
                .samples = 1});
  }
  EXPECT_EQ(many.kept_samples(), PcProfile::kMaxPcs) << "at most kMaxPcs instructions in all";
  const std::string long_name(2000, 'n');
  PcProfile named;
  named.SetState(PcSamplingState::kSampled);
  named.Add({.function = long_name, .stall_reason = long_name, .samples = 1});
  EXPECT_EQ(named.ToJson().at("functions").at(0).at("name").get<std::string>().size(),
            PcProfile::kMaxNameBytes);
}

TEST(PcProfile, MergeAddsEverythingButTheState) {
  PcProfile window, drained;
  window.SetState(PcSamplingState::kSampled);
  drained.Add({.function = "gemm", .pc_offset = 8, .stall_reason = "wait", .samples = 4});
  drained.AddTotals(6, 2, true);
  window.Merge(drained);
  window.Merge(drained);
  const nlohmann::json j = window.ToJson();
  EXPECT_EQ(j.at("state"), "sampled");
  EXPECT_EQ(j.at("total_samples"), 12);
  EXPECT_EQ(j.at("hardware_buffer_full"), 2);
  EXPECT_EQ(j.at("functions").at(0).at("pcs").at(0).at("samples"), 8);
}

TEST(PcProfile, ASegmentSaysWhySamplingWasNotDone) {
  ProcessIdentity process;
  process.job_id = "7";
  process.host = "gpu1";
  TraceSegment untried(
      process, CaptureTrigger{.id = "t", .until_ms = 9, .reason = "gpu_idle", .gpus = {}}, 1);
  EXPECT_EQ(nlohmann::json::parse(untried.ToJson(2)).at("otherData").count("pc_sampling"), 0u)
      << "a window that ended before sampling began says nothing";
  TraceSegment restricted = untried;
  restricted.pc_profile().SetState(PcSamplingState::kRestricted, "RmProfilingAdminOnly=1\n");
  EXPECT_EQ(nlohmann::json::parse(restricted.ToJson(2)).at("otherData").at("pc_sampling"),
            nlohmann::json({{"state", "restricted"}, {"reason", "RmProfilingAdminOnly=1 "}}))
      << "control characters made spaces";
}

}  // namespace
}  // namespace expanse::capture
