#include "agent/dcgm_enricher.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace dcgm_enricher_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGpu0[] = "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0";
constexpr char kGpu1[] = "GPU-0b5c1a2e-93f4-4d8e-a1c7-5e2f9d3b6a14";
constexpr int64_t kNow = 1'800'000'000'000;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The enrichment against tests/fakes/dcgm/dcgmi, a real process speaking dcgmi's recorded
// formats; the scenario file says what the "host engine" does, and the fake re-reads it every
// dmon interval. Both clocks are manual: silence, deadlines and backoff move only when a test
// advances them, while the fake's output takes real time to arrive.
class DcgmEnricherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Scenario(TwoGpus());
    // A copy of the fake with the mode FindDcgmi asks of a dcgmi: a checkout made under umask
    // 002 has it group-writable, and the enrichment would rightly refuse to run it.
    std::filesystem::copy_file(std::string(EXPANSE_SOURCE_DIR) + "/tests/fakes/dcgm/dcgmi", fake_);
    chmod(fake_.c_str(), 0755);
  }

  static nlohmann::json TwoGpus() {
    return {{"gpus",
             {{{"id", 0},
               {"name", "NVIDIA H200"},
               {"pci_bus_id", "00000000:00:06.0"},
               {"uuid", kGpu0},
               {"values", {{"1002", 0.931}, {"202", 14}, {"1004", 0.5}}}},
              {{"id", 1},
               {"name", "NVIDIA H200"},
               {"pci_bus_id", "00000000:00:07.0"},
               {"uuid", kGpu1},
               {"values", {{"1002", 0.25}, {"202", 0}}}}}}};
  }

  void Scenario(const nlohmann::json& scenario) {
    // Whole-file replace: the fake must never read half a scenario.
    std::ofstream(dir_ / "scenario.tmp") << scenario.dump();
    std::filesystem::rename(dir_ / "scenario.tmp", dir_ / "scenario.json");
  }

  DcgmEnricherOptions Options() {
    DcgmEnricherOptions options;
    options.dcgmi = {fake_, "localhost:5555", std::chrono::milliseconds(100)};
    options.hostname = "n1";
    options.env = std::vector<std::string>{
        "PATH=/usr/bin:/bin", "EXPANSE_FAKE_DCGM_SCENARIO=" + dir_ / "scenario.json",
        "EXPANSE_FAKE_DCGM_LOG=" + dir_ / "calls", "EXPANSE_FAKE_DCGM_STATE=" + dir_ / "state"};
    return options;
  }

  template <typename Done>
  bool TickUntil(DcgmEnricher& enricher, const std::vector<std::string>& gpus, bool cupti,
                 Done done) {
    for (int i = 0; i < 1500; ++i) {
      enricher.Tick(gpus, cupti, buffer_, mu_);
      if (done())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Moves the monotonic clock on by `ms` in steps of 5 s, letting dmon's rows arrive after each,
  // as they would in real time: a jump past the silence limit would rightly stop dmon.
  void AdvanceWhileStreaming(DcgmEnricher& enricher, const std::vector<std::string>& gpus,
                             int64_t ms) {
    for (int64_t done = 0; done < ms; done += 5'000) {
      monotonic_.Advance(std::min<int64_t>(5'000, ms - done));
      const uint64_t rows = enricher.Stats()["rows"].get<uint64_t>();
      ASSERT_TRUE(TickUntil(enricher, gpus, false, [&] {
        return enricher.Stats()["rows"].get<uint64_t>() > rows;
      })) << enricher.Stats().dump();
    }
  }

  // The newest value of (uuid, metric) taken from the buffer so far, keeping the rest.
  std::optional<double> Latest(const std::string& uuid, const std::string& metric) {
    for (auto& record : buffer_.Take())
      taken_.push_back(std::move(record));
    std::optional<double> latest;
    for (const auto& record : taken_) {
      if (record.device == uuid && record.metric == metric && !record.v.empty())
        latest = record.v.back();
    }
    return latest;
  }
  bool Has(const std::string& uuid, const std::string& metric) {
    return Latest(uuid, metric).has_value();
  }

  // The dmon command lines the fake was started with.
  std::vector<std::string> DmonCalls() {
    std::vector<std::string> calls;
    std::istringstream lines(Slurp(dir_ / "calls"));
    for (std::string line; std::getline(lines, line);) {
      if (line.find("\"dmon\"") != std::string::npos)
        calls.push_back(line);
    }
    return calls;
  }

  testing::TempDir dir_{"dcgm_enricher_test"};
  const std::string fake_ = dir_ / "fake-dcgmi";
  ManualClock wall_{kNow};
  ManualClock monotonic_{1'000'000};
  telemetry::SeriesBuffer buffer_;
  std::vector<wire::SeriesRecord> taken_;
  std::mutex mu_;
};

TEST_F(DcgmEnricherTest, DmonFieldsBecomeDcgmSeriesKeyedByTheNvmlUuid) {
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu1, kGpu0}, false, [&] {
    return Has(kGpu1, "gpu.dcgm.sm_active") && Has(kGpu0, "gpu.dcgm.health");
  })) << enricher.Stats().dump();
  EXPECT_DOUBLE_EQ(*Latest(kGpu0, "gpu.dcgm.sm_active"), 0.931);
  EXPECT_DOUBLE_EQ(*Latest(kGpu0, "gpu.dcgm.tensor_active"), 0.5);
  EXPECT_DOUBLE_EQ(*Latest(kGpu0, "gpu.dcgm.pcie_replays"), 14);
  EXPECT_DOUBLE_EQ(*Latest(kGpu1, "gpu.dcgm.sm_active"), 0.25);
  EXPECT_DOUBLE_EQ(*Latest(kGpu0, "gpu.dcgm.health"), 0);  // healthy, and checked
  EXPECT_EQ(taken_[0].host, "n1");
  EXPECT_FALSE(Has(kGpu0, "gpu.sm_active"));  // never under the helper's or NVML's names
  const Capability capability = enricher.Describe();
  EXPECT_EQ(capability.state, "ok") << capability.reason;
  EXPECT_THAT(capability.reason, HasSubstr("dcgmi dmon on 2 GPUs (engine localhost:5555)"));
  // One long-lived dmon for the node, with every catalogue field, DCP ones included.
  const auto calls = DmonCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_THAT(calls[0], HasSubstr("\"-e\", \"202,230,"));
  EXPECT_THAT(calls[0], HasSubstr(",1002,"));
  EXPECT_THAT(calls[0], HasSubstr("\"-d\", \"100\""));
  EXPECT_EQ(enricher.Stats()["dmon_starts"], 1);
}

TEST_F(DcgmEnricherTest, ProfilingFieldsStayOutWhileCuptiHoldsTheCountersAndComeBackAfter) {
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, true,
                        [&] { return Has(kGpu0, "gpu.dcgm.pcie_replays"); }));
  EXPECT_FALSE(Has(kGpu0, "gpu.dcgm.sm_active"));
  EXPECT_THAT(DmonCalls()[0], Not(HasSubstr("1002")));
  EXPECT_THAT(enricher.Describe().reason,
              HasSubstr("profiling fields off: expanse-cupti-helper holds the counters"));
  // CUPTI lets go (the helper stopped): not at once, a helper restart must not bounce dmon...
  for (int i = 0; i < 20; ++i)
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
  EXPECT_EQ(enricher.Stats()["dmon_starts"], 1);
  // ...but once it stayed away past the settling time, dmon comes back with the DCP fields.
  monotonic_.Advance(61'000);
  ASSERT_TRUE(
      TickUntil(enricher, {kGpu0, kGpu1}, false, [&] { return Has(kGpu0, "gpu.dcgm.sm_active"); }));
  ASSERT_EQ(DmonCalls().size(), 2u);
  EXPECT_THAT(DmonCalls()[1], HasSubstr("1002"));
  // And CUPTI taking the counters again drops them at once.
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, true, [&] { return DmonCalls().size() == 3; }));
  EXPECT_THAT(DmonCalls()[2], Not(HasSubstr("1002")));
}

TEST_F(DcgmEnricherTest, ARefusedProfilingWatchGivesADmonWithoutItAndSaysWhy) {
  nlohmann::json scenario = TwoGpus();
  scenario["profiling"] = "module_not_loaded";
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return Has(kGpu0, "gpu.dcgm.pcie_replays");
  })) << enricher.Stats().dump();
  EXPECT_FALSE(Has(kGpu0, "gpu.dcgm.sm_active"));
  const auto calls = DmonCalls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_THAT(calls[0], HasSubstr("1002"));
  EXPECT_THAT(calls[1], Not(HasSubstr("1002")));
  const Capability capability = enricher.Describe();
  EXPECT_EQ(capability.state, "ok");
  EXPECT_THAT(capability.reason, HasSubstr("profiling fields off: the host engine refused them: "
                                           "watch_failed (DCGM_ST_MODULE_NOT_LOADED)"));
  // Asked again after dcp_retry, then less and less often while the engine keeps refusing: each
  // question restarts dmon twice.
  AdvanceWhileStreaming(enricher, {kGpu0, kGpu1}, 605'000);
  EXPECT_EQ(DmonCalls().size(), 4u);  // asked again after 10 minutes
  AdvanceWhileStreaming(enricher, {kGpu0, kGpu1}, 605'000);
  EXPECT_EQ(DmonCalls().size(), 4u) << "the second question waits 20 minutes";
  AdvanceWhileStreaming(enricher, {kGpu0, kGpu1}, 605'000);
  EXPECT_EQ(DmonCalls().size(), 6u);
}

TEST_F(DcgmEnricherTest, AnUnreachableEngineDegradesTheCapabilityAndIsRetriedWithBackoff) {
  nlohmann::json scenario = TwoGpus();
  scenario["engine"] = "unreachable";
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Stats().contains("problem"); }));
  Capability capability = enricher.Describe();
  EXPECT_EQ(capability.state, "degraded");
  EXPECT_THAT(capability.reason, HasSubstr("DCGM unavailable (engine localhost:5555)"));
  EXPECT_THAT(capability.reason, HasSubstr("engine_unreachable"));
  EXPECT_TRUE(buffer_.empty());
  EXPECT_EQ(enricher.Stats()["discoveries"], 1);
  // Within the backoff nothing is tried again.
  for (int i = 0; i < 10; ++i)
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
  EXPECT_EQ(enricher.Stats()["discoveries"], 1);
  // The engine comes back; after the backoff the values flow.
  Scenario(TwoGpus());
  monotonic_.Advance(5'000);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return Has(kGpu0, "gpu.dcgm.pcie_replays"); }));
  EXPECT_EQ(enricher.Describe().state, "ok");
}

TEST_F(DcgmEnricherTest, GpusThisNodesNvmlDoesNotListAreNeverWritten) {
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0}, false, [&] {
    return Has(kGpu0, "gpu.dcgm.sm_active") && enricher.Stats()["unmapped_rows"] > 0;
  })) << enricher.Stats().dump();
  EXPECT_FALSE(Has(kGpu1, "gpu.dcgm.sm_active"));
  EXPECT_EQ(enricher.Stats()["not_listed_by_nvml"][0], kGpu1);
}

TEST_F(DcgmEnricherTest, AnEngineWithOnlyOtherMachinesGpusIsRefused) {
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  const std::string other = "GPU-11111111-2222-3333-4444-555555555555";
  ASSERT_TRUE(
      TickUntil(enricher, {other}, false, [&] { return enricher.Stats().contains("problem"); }));
  EXPECT_THAT(enricher.Describe().reason,
              HasSubstr("lists 2 GPUs, none of them one this node's NVML lists"));
  EXPECT_TRUE(buffer_.empty());
}

TEST_F(DcgmEnricherTest, GarbageAmongRowsIsRefusedAndCountedWhileRowsCount) {
  nlohmann::json scenario = TwoGpus();
  scenario["dmon"] = {{"garbage_every", 1}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return enricher.Stats()["lines_refused"] >= 3 && enricher.Stats()["rows"] >= 6;
  })) << enricher.Stats().dump();
  EXPECT_DOUBLE_EQ(*Latest(kGpu0, "gpu.dcgm.sm_active"), 0.931);
  EXPECT_EQ(enricher.Describe().state, "ok");
  EXPECT_EQ(enricher.Stats()["dmon_starts"], 1);  // hostile lines do not restart it
  // The fake's third garbage line is a header naming other columns: counted where an operator
  // sees it, with the rows it made the parser refuse.
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return enricher.Stats()["header_mismatches"] == 1;
  })) << enricher.Stats().dump();
  EXPECT_TRUE(enricher.Stats().contains("other_entities"));
  EXPECT_TRUE(enricher.Stats().contains("oversized_lines"));
}

TEST_F(DcgmEnricherTest, ALineLongerThanDmonsBoundIsRefusedAndCounted) {
  nlohmann::json scenario = TwoGpus();
  scenario["dmon"] = {{"garbage_every", 1}, {"garbage_lines", {std::string(10'000, 'x')}}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return enricher.Stats()["rows"] >= 4 && enricher.Stats()["lines_refused"] >= 1;
  })) << enricher.Stats().dump();
  EXPECT_GE(enricher.Stats()["oversized_lines"], 1);
  EXPECT_EQ(enricher.Describe().state, "ok");
}

TEST_F(DcgmEnricherTest, FieldsNaOnEveryRowAreNamedUnsupported) {
  nlohmann::json scenario = TwoGpus();
  scenario["unsupported_fields"] = {1011, 1012, 230};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return !enricher.Stats()["unsupported"].empty(); }));
  EXPECT_FALSE(Has(kGpu0, "gpu.dcgm.nvlink_tx_bytes_per_s"));
  EXPECT_THAT(enricher.Describe().reason,
              HasSubstr("unsupported here: gpu.dcgm.nvlink_tx_bytes_per_s "
                        "gpu.dcgm.nvlink_rx_bytes_per_s"));
  // No XID yet is not a missing field.
  EXPECT_THAT(enricher.Describe().reason, Not(HasSubstr("last_xid")));
}

TEST_F(DcgmEnricherTest, AFieldIsNotCalledUnsupportedBeforeEachGpuHadItsRows) {
  // Two intervals on two GPUs are four N/A cells, but only two samples of each GPU: a field
  // that needs two samples for its first value is not missing yet.
  nlohmann::json scenario = TwoGpus();
  scenario["unsupported_fields"] = {1011};
  scenario["dmon"] = {{"hang_after_rounds", 2}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(
      TickUntil(enricher, {kGpu0, kGpu1}, false, [&] { return enricher.Stats()["rows"] >= 4; }));
  for (int i = 0; i < 20; ++i) {
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(enricher.Stats()["unsupported"].empty()) << enricher.Stats().dump();
}

TEST_F(DcgmEnricherTest, HealthFindingsOfGpusThisNodeDoesNotHaveAreLeftOutOfTheReason) {
  // A host engine shared with another machine reports that machine's GPUs too.
  nlohmann::json scenario = TwoGpus();
  scenario["health"] = {{"incidents",
                         {{{"entity_group", "GPU"},
                           {"entity_id", 7},
                           {"system", "Memory system"},
                           {"health", "Failure"},
                           {"message", "Detected 2 volatile double-bit ECC error(s) in GPU 7."}}}}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return Has(kGpu0, "gpu.dcgm.health") && enricher.Describe().state == "ok";
  }));
  EXPECT_THAT(enricher.Describe().reason, Not(HasSubstr("GPU 7")));
  EXPECT_THAT(enricher.Describe().reason, Not(HasSubstr("health fail")));
}

TEST_F(DcgmEnricherTest, HealthFindingsBecomeAPointAndAReason) {
  nlohmann::json scenario = TwoGpus();
  scenario["health"] = {{"incidents",
                         {{{"entity_group", "GPU"},
                           {"entity_id", 1},
                           {"system", "Memory system"},
                           {"health", "Failure"},
                           {"message", "Detected 2 volatile double-bit ECC error(s) in GPU 1."}}}}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(
      TickUntil(enricher, {kGpu0, kGpu1}, false, [&] { return Has(kGpu1, "gpu.dcgm.health"); }));
  EXPECT_DOUBLE_EQ(*Latest(kGpu1, "gpu.dcgm.health"), 2);
  EXPECT_DOUBLE_EQ(*Latest(kGpu0, "gpu.dcgm.health"), 0);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Describe().state == "ok"; }));
  EXPECT_THAT(enricher.Describe().reason,
              HasSubstr("health fail, GPU 1 memory: Detected 2 volatile double-bit ECC error(s) "
                        "in GPU 1."));
  const nlohmann::json finding = enricher.Stats()["health"]["findings"][0];
  EXPECT_EQ(finding["uuid"], kGpu1);
  EXPECT_EQ(finding["system"], "memory");
  // Checked again a minute later, not before.
  const auto checks = enricher.Stats()["health_checks"].get<int>();
  for (int i = 0; i < 10; ++i)
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
  EXPECT_EQ(enricher.Stats()["health_checks"], checks);
  AdvanceWhileStreaming(enricher, {kGpu0, kGpu1}, 60'000);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Stats()["health_checks"] == checks + 1; }));
}

TEST_F(DcgmEnricherTest, WatchesNotEnabledAreSetOnceAndTheNextCheckWorks) {
  nlohmann::json scenario = TwoGpus();
  scenario["health"] = {{"enabled", false}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return Slurp(dir_ / "calls").find("\"-s\", \"a\"") != std::string::npos &&
           std::filesystem::exists(dir_ / "state");
  }));
  EXPECT_FALSE(Has(kGpu0, "gpu.dcgm.health"));
  EXPECT_THAT(enricher.Describe().reason, HasSubstr("health_watches_not_enabled"));
  AdvanceWhileStreaming(enricher, {kGpu0, kGpu1}, 60'000);
  ASSERT_TRUE(
      TickUntil(enricher, {kGpu0, kGpu1}, false, [&] { return Has(kGpu0, "gpu.dcgm.health"); }));
  EXPECT_THAT(enricher.Describe().reason, Not(HasSubstr("health")));
  // Set once: the watches stay in the host engine.
  const std::string calls = Slurp(dir_ / "calls");
  EXPECT_EQ(calls.find("\"-s\", \"a\""), calls.rfind("\"-s\", \"a\""));
}

TEST_F(DcgmEnricherTest, ADmonThatFallsSilentIsStoppedAndRestarted) {
  nlohmann::json scenario = TwoGpus();
  scenario["dmon"] = {{"hang_after_rounds", 2}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(
      TickUntil(enricher, {kGpu0, kGpu1}, false, [&] { return enricher.Stats()["rows"] >= 4; }));
  monotonic_.Advance(31'000);
  enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
  Capability capability = enricher.Describe();
  EXPECT_EQ(capability.state, "degraded");
  EXPECT_THAT(capability.reason, HasSubstr("dcgmi dmon gave no usable row for 30 s; restarting"));
  Scenario(TwoGpus());
  monotonic_.Advance(5'000);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Stats()["dmon_starts"] == 2; }));
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Describe().state == "ok"; }));
}

TEST_F(DcgmEnricherTest, AHungDcgmiIsEndedAtItsDeadline) {
  nlohmann::json scenario = TwoGpus();
  scenario["hang"] = true;
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  for (int i = 0; i < 20; ++i) {
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(enricher.Describe().state, "degraded");
  EXPECT_THAT(enricher.Describe().reason, HasSubstr("dcgmi starting"));
  monotonic_.Advance(20'000);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Stats()["timeouts"] == 1; }));
  EXPECT_THAT(enricher.Describe().reason,
              HasSubstr("dcgmi discovery -l gave no answer within 20 s"));
}

TEST(DcgmiRunTest, AChildThatNeverStopsPrintingIsEndedNotFollowed) {
  auto run = DcgmiRun::Start({"/bin/sh", "-c", "yes 'GPU 0 N/A'"}, std::nullopt, 0,
                             std::chrono::seconds(60), 4096);
  ASSERT_TRUE(run.ok()) << run.status();
  std::optional<DcgmiRunResult> done;
  for (int i = 0; i < 2000 && !done; ++i) {
    done = (*run)->Poll(0);  // the deadline is far off: only the output's size can end it
    if (!done)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->truncated);
  EXPECT_TRUE(done->timed_out);
  EXPECT_LE(done->output.size(), 4096u);
}

TEST(DcgmiRunTest, AnAnswerIsCompleteWhenDcgmiExitsThoughWhatItLeftHoldsItsOutput) {
  // A wrapper that prints, leaves a process holding its stdout, and exits: the answer is
  // there, and the process left behind is ended rather than waited for until the deadline.
  auto run = DcgmiRun::Start({"/bin/sh", "-c", "echo ok; (exec sleep 30) & exit 0"}, std::nullopt,
                             0, std::chrono::seconds(20), 4096);
  ASSERT_TRUE(run.ok()) << run.status();
  std::optional<DcgmiRunResult> done;
  for (int i = 0; i < 400 && !done; ++i) {
    done = (*run)->Poll(0);
    if (!done)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(done);
  EXPECT_FALSE(done->timed_out);
  EXPECT_EQ(done->exit_status, 0);
  EXPECT_EQ(done->output, "ok\n");
}

// A dcgmi something else reaped (SIGCHLD ignored when the daemon was started) has ended: the
// run finishes at once with its status lost, and nothing is left to reap. (A dcgmi stuck in
// the kernel, which no signal ends and no wait reaps, is given up on after its deadline plus
// the kill grace and 2 s; a unit test cannot make such a process.)
TEST(DcgmiRunTest, ADcgmiReapedBehindItsBackEndsTheRun) {
  auto run = DcgmiRun::Start({"/bin/sh", "-c", "exec sleep 60"}, std::nullopt, 0,
                             std::chrono::seconds(1), 4096);
  ASSERT_TRUE(run.ok()) << run.status();
  const pid_t pid = (*run)->pid();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  std::optional<DcgmiRunResult> done = (*run)->Poll(0);
  ASSERT_TRUE(done);
  EXPECT_FALSE(done->timed_out);
  EXPECT_EQ(done->exit_status, ChildProcess::kStatusLost);
  EXPECT_FALSE((*run)->TakeUnreaped());
}

TEST_F(DcgmEnricherTest, DcgmiGetsAMinimalEnvironmentWithoutTheDaemonsSecrets) {
  // A wrapper in front of the fake writes down the environment it was given.
  const std::string wrapper = dir_ / "dcgmi";
  std::ofstream(wrapper) << "#!/bin/sh\nenv >" << (dir_ / "env.txt") << ".tmp; mv "
                         << (dir_ / "env.txt") << ".tmp " << (dir_ / "env.txt") << "\nexec "
                         << fake_ << " \"$@\"\n";
  chmod(wrapper.c_str(), 0755);
  setenv("HTTPS_PROXY", "http://svc:hunter2@proxy.example:3128", 1);
  // Not a secret, and a DCGM installed outside the standard paths needs it (environment modules).
  const char* ld_library_path = std::getenv("LD_LIBRARY_PATH");
  const std::optional<std::string> saved_ld_library_path =
      ld_library_path != nullptr ? std::optional<std::string>(ld_library_path) : std::nullopt;
  setenv("LD_LIBRARY_PATH", "/opt/dcgm-test/lib64", 1);
  DcgmEnricherOptions options = Options();
  options.dcgmi.dcgmi = wrapper;
  options.env.reset();  // what the daemon gives it
  DcgmEnricher enricher(options, wall_, monotonic_);
  const bool ran = TickUntil(enricher, {kGpu0, kGpu1}, false,
                             [&] { return std::filesystem::exists(dir_ / "env.txt"); });
  unsetenv("HTTPS_PROXY");
  if (saved_ld_library_path)
    setenv("LD_LIBRARY_PATH", saved_ld_library_path->c_str(), 1);
  else
    unsetenv("LD_LIBRARY_PATH");
  ASSERT_TRUE(ran);
  const std::string env = Slurp(dir_ / "env.txt");
  EXPECT_THAT(env, Not(HasSubstr("hunter2")));
  EXPECT_THAT(env, HasSubstr("PATH="));
  EXPECT_THAT(env, HasSubstr("LC_ALL=C"));
  EXPECT_THAT(env, HasSubstr("LD_LIBRARY_PATH=/opt/dcgm-test/lib64"));
}

TEST_F(DcgmEnricherTest, ADcgmiOthersCouldHaveWrittenIsNeverRun) {
  const std::string copy = dir_ / "dcgmi";
  std::filesystem::copy_file(fake_, copy);
  chmod(copy.c_str(), 0777);
  DcgmEnricherOptions options = Options();
  options.dcgmi.dcgmi = copy;
  DcgmEnricher enricher(options, wall_, monotonic_);
  for (int i = 0; i < 20; ++i) {
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "calls"));
  EXPECT_EQ(enricher.Describe().state, "degraded");
  EXPECT_THAT(enricher.Describe().reason, HasSubstr("writable by group or others"));
}

TEST_F(DcgmEnricherTest, ADcgmiRefusedAtTheStartIsRunOnceItsModeIsFixed) {
  // Found group-writable when the daemon started: refused, yet checked again every tick, so
  // fixing the mode needs no restart.
  const std::string copy = dir_ / "dcgmi";
  std::filesystem::copy_file(fake_, copy);
  chmod(copy.c_str(), 0775);
  std::optional<DcgmEnricherOptions> options =
      FindDcgmEnrichment(copy, "localhost:5555", std::chrono::milliseconds(100), "/usr/bin:/bin");
  ASSERT_TRUE(options);
  EXPECT_EQ(options->dcgmi.dcgmi, copy);
  options->hostname = "n1";
  options->env = Options().env;
  DcgmEnricher enricher(*options, wall_, monotonic_);
  for (int i = 0; i < 20; ++i) {
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "calls"));
  EXPECT_THAT(enricher.Describe().reason, HasSubstr("writable by group or others"));
  chmod(copy.c_str(), 0755);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return enricher.Stats()["discoveries"].get<int>() >= 1 && enricher.Stats()["rows"] >= 2;
  })) << enricher.Stats().dump();
  EXPECT_EQ(enricher.Describe().state, "ok") << enricher.Describe().reason;
  EXPECT_FALSE(enricher.Stats().contains("refused"));
  // A relative EXPANSE_DCGMI names no file to check again: refused for good.
  options = FindDcgmEnrichment("bin/dcgmi", "localhost:5555", std::chrono::milliseconds(100),
                               "/usr/bin:/bin");
  ASSERT_TRUE(options);
  EXPECT_THAT(options->refused, HasSubstr("absolute"));
  EXPECT_FALSE(FindDcgmEnrichment("", "", std::chrono::milliseconds(100), "/nonexistent"));
}

TEST_F(DcgmEnricherTest, RowsRefusedUnderAHeaderNamingOtherColumnsAreSaidInTheReason) {
  nlohmann::json scenario = TwoGpus();
  scenario["dmon"] = {{"garbage_every", 1}, {"garbage_lines", {"#Entity   FOO   BAR"}}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] {
                          return enricher.Describe().reason.find(
                                     "dmon header names other columns: FOO BAR") !=
                                 std::string::npos;
                        }))
      << enricher.Describe().reason << " " << enricher.Stats().dump();
  EXPECT_THAT(enricher.Stats()["dmon_header"].get<std::string>(), HasSubstr("FOO BAR"));
  EXPECT_GE(enricher.Stats()["header_mismatches"].get<uint64_t>(), 1u);
  EXPECT_EQ(enricher.Stats()["headers_reordered"], 0) << "not a reordering of the fields asked";
  // Once dmon prints its own header again (after the 15th interval), rows are read and the
  // reason clears.
  Scenario(TwoGpus());
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    return enricher.Describe().reason.find("dmon header") == std::string::npos;
  })) << enricher.Describe().reason;
  EXPECT_FALSE(enricher.Stats().contains("dmon_header"));
}

TEST(DcgmiEnvironmentTest, LdLibraryPathIsPassedWhenSet) {
  EXPECT_THAT(DcgmiEnvironment("/usr/bin", "/opt/dcgm/lib"),
              ::testing::Contains("LD_LIBRARY_PATH=/opt/dcgm/lib"));
  for (const std::string& entry : DcgmiEnvironment("/usr/bin", ""))
    EXPECT_THAT(entry, Not(HasSubstr("LD_LIBRARY_PATH")));
  // Empty and relative entries name the working directory or below it: left out.
  EXPECT_THAT(DcgmiEnvironment("/usr/bin", ":/opt/dcgm/lib::lib64:./x:/usr/local/lib:"),
              ::testing::Contains("LD_LIBRARY_PATH=/opt/dcgm/lib:/usr/local/lib"));
  for (const std::string& entry : DcgmiEnvironment("/usr/bin", "::lib"))
    EXPECT_THAT(entry, Not(HasSubstr("LD_LIBRARY_PATH")));
}

TEST_F(DcgmEnricherTest, DmonExitingReportsItsStatusByDcgmName) {
  nlohmann::json scenario = TwoGpus();
  scenario["dmon"] = {{"lose_engine_after_rounds", 1}};
  Scenario(scenario);
  DcgmEnricher enricher(Options(), wall_, monotonic_);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Stats().contains("problem"); }));
  EXPECT_THAT(enricher.Describe().reason,
              HasSubstr("dcgmi dmon exited with status 235 (DCGM_ST_CONNECTION_NOT_VALID)"));
  EXPECT_THAT(enricher.Describe().reason, HasSubstr("read_failed"));
  // It gave rows before it died, but that is not a working engine: each restart waits longer,
  // instead of discovery, a health check and dmon every 5 s.
  monotonic_.Advance(5'000);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false, [&] {
    const auto stats = enricher.Stats();
    return stats["dmon_starts"].get<int>() == 2 && !stats["dmon_running"].get<bool>();
  }));
  monotonic_.Advance(5'000);  // two failures in a row: the third start waits 10 s
  for (int i = 0; i < 200; ++i) {
    enricher.Tick({kGpu0, kGpu1}, false, buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(enricher.Stats()["dmon_starts"].get<int>(), 2) << enricher.Stats().dump();
  monotonic_.Advance(5'000);
  ASSERT_TRUE(TickUntil(enricher, {kGpu0, kGpu1}, false,
                        [&] { return enricher.Stats()["dmon_starts"].get<int>() == 3; }));
}

TEST(FindDcgmiTest, APathIsTakenAsGivenAndANameIsLookedUpOnPath) {
  testing::TempDir dir("find_dcgmi_test");
  const std::string dcgmi = dir / "dcgmi";
  std::ofstream(dcgmi) << "#!/bin/sh\n";
  chmod(dcgmi.c_str(), 0755);
  EXPECT_EQ(FindDcgmi("/opt/dcgm/bin/dcgmi", "/usr/bin"), "/opt/dcgm/bin/dcgmi");
  EXPECT_EQ(FindDcgmi("", "/nonexistent:" + dir.path()), dcgmi);
  EXPECT_EQ(FindDcgmi("dcgmi", dir.path()), dcgmi);
  EXPECT_EQ(FindDcgmi("", "/nonexistent"), "");
}

TEST(FindDcgmiTest, ARelativePathOrAFileOthersCouldHaveWrittenIsRefused) {
  testing::TempDir dir("find_dcgmi_test");
  const std::string dcgmi = dir / "dcgmi";
  std::ofstream(dcgmi) << "#!/bin/sh\n";
  chmod(dcgmi.c_str(), 0755);
  std::string why;
  // Relative: it would name whatever lies under the daemon's working directory.
  EXPECT_EQ(FindDcgmi("bin/dcgmi", dir.path(), &why), "");
  EXPECT_THAT(why, HasSubstr("absolute"));
  // It runs as the service account: whoever can write it can run code as that account.
  chmod(dcgmi.c_str(), 0777);
  why.clear();
  EXPECT_EQ(FindDcgmi(dcgmi, "/usr/bin", &why), "");
  EXPECT_THAT(why, HasSubstr("writable by group or others"));
  why.clear();
  EXPECT_EQ(FindDcgmi("", dir.path(), &why), "");
  EXPECT_THAT(why, HasSubstr("writable by group or others"));
  chmod(dcgmi.c_str(), 0755);
  why.clear();
  EXPECT_EQ(FindDcgmi(dcgmi, "/usr/bin", &why), dcgmi);
  EXPECT_EQ(why, "");
  if (geteuid() == 0) {
    ASSERT_EQ(chown(dcgmi.c_str(), 65534, 65534), 0);
    EXPECT_EQ(FindDcgmi(dcgmi, "/usr/bin", &why), "");
    EXPECT_THAT(why, HasSubstr("owned by uid 65534"));
  }
}

}  // namespace
}  // namespace dcgm_enricher_test
}  // namespace expanse::agent
