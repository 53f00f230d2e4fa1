// expanse-cupti-helper run as the sampler runs it, against the fake libcuda.so.1 and
// libcupti.so.13 (tests/fakes/cupti): real dlopen, real process, real pipes. The scenario file
// sets what the "driver" answers; the fakes' trace file shows which calls the helper made.
#include <signal.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/child_process.h"
#include "core/subprocess.h"
#include "core/test_temp_dir.h"
#include "cupti/helper_records.h"
#include "cupti/metric_sets.h"

extern char** environ;

namespace expanse::cupti {
namespace {

using std::chrono::milliseconds;

constexpr char kUuid0[] = "GPU-3f0f2b8c-4a4e-6d1e-9b1a-8c2a3e5d7f10";
constexpr char kUuid1[] = "GPU-7a1c9e20-51b3-4c7d-8e2f-0b6d4a9c3e21";

nlohmann::json Device(const char* uuid) {
  return {{"name", "NVIDIA H200"},
          {"uuid", uuid},
          {"chip", "GH100"},
          {"metrics",
           {{"sm__cycles_active.avg.pct_of_peak_sustained_elapsed", 93.5},
            {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", 71.0},
            {"dram__cycles_active.avg.pct_of_peak_sustained_elapsed", 35.0},
            {"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed", 80.0},
            {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 30.0},
            {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed", 12.0},
            {"lts__t_sector_hit_rate.pct", 64.0}}}};
}

nlohmann::json TwoGpus() { return {{"devices", {Device(kUuid0), Device(kUuid1)}}}; }

class CuptiHelperTest : public ::testing::Test {
 protected:
  void SetScenario(const nlohmann::json& scenario) {
    // Written beside and renamed, so the fakes never read half a file; the fakes reload on a
    // new modification time, which a fresh inode always has.
    const std::string tmp = dir_ / "scenario.tmp";
    std::ofstream(tmp) << scenario.dump();
    std::filesystem::rename(tmp, scenario_path_);
  }

  std::vector<std::string> Env() const {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e)
      env.emplace_back(*e);
    env.push_back("EXPANSE_FAKE_CUPTI_SCENARIO=" + scenario_path_);
    env.push_back("EXPANSE_FAKE_CUPTI_TRACE=" + trace_path_);
    return env;
  }

  std::vector<std::string> Argv(std::vector<std::string> tail,
                                const std::string& libcupti = "") const {
    std::vector<std::string> argv = {
        EXPANSE_CUPTI_HELPER, "--libcuda=" + std::string(EXPANSE_FAKES_DIR) + "/cupti/libcuda.so.1",
        "--libcupti=" + (libcupti.empty() ? std::string(EXPANSE_FAKES_DIR) + "/cupti/libcupti.so.13"
                                          : libcupti)};
    argv.insert(argv.end(), tail.begin(), tail.end());
    return argv;
  }

  SubprocessResult Run(std::vector<std::string> argv) {
    SubprocessOptions options;
    options.argv = std::move(argv);
    options.env = Env();
    options.timeout = milliseconds(60'000);
    auto result = RunSubprocess(options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SubprocessResult{};
  }

  nlohmann::json Probe(std::vector<std::string> argv) {
    const auto result = Run(std::move(argv));
    EXPECT_EQ(result.exit_code, 0) << result.stderr_text;
    auto doc = nlohmann::json::parse(result.stdout_text, nullptr, false);
    EXPECT_TRUE(doc.is_object()) << result.stdout_text;
    return doc;
  }

  std::string Trace() const {
    std::ifstream in(trace_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  testing::TempDir dir_{"cupti_helper_test"};
  std::string scenario_path_ = dir_ / "scenario.json";
  std::string trace_path_ = dir_ / "trace.log";
};

TEST_F(CuptiHelperTest, ProbeReportsEachGpuReadyWithTheMetricsItChose) {
  SetScenario(TwoGpus());
  const auto report = Probe(Argv({"probe", "--json"}));
  EXPECT_EQ(report["variant"], "cuda1300");
  EXPECT_EQ(report["cuda_driver_api_version"], "13.0");
  EXPECT_EQ(report["cupti_api_version"], 130001);
  ASSERT_EQ(report["devices"].size(), 2u);
  const auto& gpu = report["devices"][0];
  EXPECT_EQ(gpu["uuid"], kUuid0);
  EXPECT_EQ(gpu["name"], "NVIDIA H200");
  EXPECT_EQ(gpu["compute_capability"], "9.0");
  EXPECT_EQ(gpu["chip"], "GH100");
  EXPECT_EQ(gpu["pm_sampling"], "ok") << gpu.dump();
  EXPECT_EQ(gpu["light_set"]["gpu.sm_active"],
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(gpu["light_set"]["gpu.tensor_active"],
            "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed");
  EXPECT_TRUE(gpu["light_set"].contains("gpu.dram_active"));
  // The chip knows no PCIe or NVLink metric in this scenario: absent, not an error.
  EXPECT_NE(gpu["light_set_absent"].dump().find("gpu.nvlink_rx_bytes_per_s"), std::string::npos);
  EXPECT_EQ(report["devices"][1]["pm_sampling"], "ok");
  // libcupti opens libnvperf_host.so by bare name: the copy beside it served the host calls,
  // not one the loader's search would have found elsewhere (a toolkit's, of another version).
  const std::string perf = std::string(EXPANSE_FAKES_DIR) + "/cupti/libnvperf_host.so";
  EXPECT_EQ(report["libnvperf_host"], perf);
  // It really started sampling, and let go again.
  const std::string trace = Trace();
  EXPECT_NE(trace.find("nvperf=" + perf), std::string::npos) << trace;
  EXPECT_NE(trace.find("cuptiPmSamplingStart dev=0"), std::string::npos) << trace;
  EXPECT_NE(trace.find("cuptiPmSamplingDisable dev=1"), std::string::npos) << trace;
}

TEST_F(CuptiHelperTest, ACandidateNeedingPassesOfItsOwnGivesWayAndLaterSeriesStillFit) {
  // As on real chips (sm__throughput takes 19 passes on GH100): the first candidate of
  // gpu.sm_inst_executed needs passes of its own, so the second is taken; PCIe reads need two,
  // so that series is left out, and the series after it is still placed.
  auto scenario = TwoGpus();
  for (auto& device : scenario["devices"]) {
    device["metrics"]["sm__inst_executed.avg.pct_of_peak_sustained_elapsed"] = 50.0;
    device["metrics"]["pcie__read_bytes.sum.per_second"] = 1e9;
    device["metrics"]["pcie__write_bytes.sum.per_second"] = 2e9;
    device["metric_passes"] = {{"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed", 19},
                               {"pcie__read_bytes.sum.per_second", 2}};
  }
  scenario["devices"][1]["max_metrics_per_pass"] = 5;  // room for five series only
  SetScenario(scenario);
  const auto report = Probe(Argv({"probe", "--json"}));
  const auto& roomy = report["devices"][0];
  ASSERT_EQ(roomy["pm_sampling"], "ok") << roomy.dump();
  EXPECT_EQ(roomy["light_set"]["gpu.sm_inst_executed"],
            "sm__inst_executed.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(roomy["light_set"]["gpu.dram_throughput"],
            "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(roomy["light_set"]["gpu.pcie_tx_bytes_per_s"], "pcie__write_bytes.sum.per_second");
  EXPECT_EQ(roomy["light_set_why_absent"]["gpu.pcie_rx_bytes_per_s"],
            "pcie__read_bytes.sum.per_second: 2 passes alone");
  EXPECT_EQ(roomy["light_set_why_absent"]["gpu.nvlink_rx_bytes_per_s"],
            "nvlrx__bytes.sum.per_second: not on this chip");
  EXPECT_FALSE(roomy["light_set_why_absent"].contains("gpu.sm_inst_executed"));
  const auto& tight = report["devices"][1];
  ASSERT_EQ(tight["pm_sampling"], "ok") << tight.dump();
  EXPECT_EQ(tight["light_set"].size(), 5u) << tight.dump();
  EXPECT_EQ(tight["light_set_why_absent"]["gpu.pcie_tx_bytes_per_s"],
            "pcie__write_bytes.sum.per_second: no room beside the series before it");
}

TEST_F(CuptiHelperTest, PlanWithoutChipListNamesWhatIsMissing) {
  // The fake libcupti, like a CUPTI before 12.6, has no cuptiProfilerHostGetSupportedChips.
  const auto result = Run(Argv({"plan", "--chip", "all"}));
  EXPECT_EQ(result.exit_code, 1) << result.stdout_text;
  const auto report = nlohmann::json::parse(result.stdout_text, nullptr, false);
  ASSERT_TRUE(report.is_object()) << result.stdout_text;
  EXPECT_NE(report.value("reason", "").find("name the chips"), std::string::npos) << report;
}

// The toolkit's own libcupti: its profiler host calls need neither a GPU nor a driver, so the
// counter sets are checked here against what CUPTI really says of each chip. (On an H200 every
// metric once came back CUPTI_ERROR_UNKNOWN; the names were never the cause: see the probe's
// metric_checks.)
class CuptiPlanTest : public CuptiHelperTest {
 protected:
  void SetUp() override {
#ifndef EXPANSE_TOOLKIT_LIBCUPTI
    GTEST_SKIP() << "no CUDA toolkit libcupti found at configure time";
#endif
  }

  nlohmann::json Plan(std::vector<std::string> chips) {
#ifndef EXPANSE_TOOLKIT_LIBCUPTI
    (void)chips;
    return {};
#else
    std::vector<std::string> tail = {"plan"};
    for (auto& chip : chips) {
      tail.push_back("--chip");
      tail.push_back(std::move(chip));
    }
    std::vector<std::string> argv = {EXPANSE_PLAN_HELPER,
                                     std::string("--libcupti=") + EXPANSE_TOOLKIT_LIBCUPTI};
    argv.insert(argv.end(), tail.begin(), tail.end());
    const auto result = Run(argv);
    EXPECT_EQ(result.exit_code, 0) << result.stdout_text << result.stderr_text;
    auto doc = nlohmann::json::parse(result.stdout_text, nullptr, false);
    EXPECT_TRUE(doc.is_object()) << result.stdout_text << result.stderr_text;
    return doc;
#endif
  }

  static std::set<std::string> Series(const nlohmann::json& set) {
    std::set<std::string> names;
    for (const auto& [name, metric] : set["series"].items())
      names.insert(name);
    return names;
  }
};

TEST_F(CuptiPlanTest, DatacentreChipsSampleTheActivitySeriesAndEscalateToMoreInOnePass) {
  const auto report = Plan({"GA100", "GH100", "GB100"});
  EXPECT_TRUE(report["libcupti"].get<std::string>().ends_with("/libcupti.so.13")) << report;
  ASSERT_EQ(report["chips"].size(), 3u) << report;
  for (const auto& chip : report["chips"]) {
    SCOPED_TRACE(chip["chip"].get<std::string>());
    const auto& light = chip["light"];
    ASSERT_FALSE(light.contains("error")) << light;
    EXPECT_EQ(light["passes"], 1);
    for (const char* series : {"gpu.sm_active", "gpu.tensor_active", "gpu.dram_active",
                               "gpu.sm_inst_executed", "gpu.dram_throughput"})
      EXPECT_TRUE(Series(light).contains(series)) << series << " " << light;
    const auto& rich = chip["rich"];
    ASSERT_FALSE(rich.contains("error")) << rich;
    EXPECT_EQ(rich["passes"], 1);
    // The escalation adds evidence of its own, beside the three activity series.
    size_t own = 0;
    std::set<std::string> light_names;
    for (const auto& series : LightSet())
      light_names.insert(series.series);
    for (const auto& name : Series(rich))
      own += light_names.contains(name) ? 0 : 1;
    EXPECT_GE(own, 4u) << rich;
    for (const char* series : {"gpu.sm_active", "gpu.tensor_active", "gpu.dram_active"})
      EXPECT_TRUE(Series(rich).contains(series)) << series;
    // Every absent series says why, candidate by candidate.
    for (const auto& [series, why] : rich["absent"].items())
      EXPECT_NE(why.get<std::string>().find(": "), std::string::npos) << series << " " << why;
  }
  // Hopper: FP32 work beside idle tensor pipes, issue and occupancy, L2 hits, in the one pass
  // (the FMA pipe through NVIDIA's one-pass TriageCompute counter there).
  const auto& hopper = report["chips"][1];
  for (const char* series : {"gpu.fma_pipe_utilization", "gpu.issue_active",
                             "gpu.achieved_occupancy", "gpu.l2_hit_rate", "gpu.fp64_pipe_active"})
    EXPECT_TRUE(Series(hopper["rich"]).contains(series)) << series << " " << hopper["rich"];
  EXPECT_EQ(hopper["rich"]["series"]["gpu.fma_pipe_utilization"],
            "TPC.TriageCompute.sm__inst_executed_pipe_fma_realtime.avg.pct_of_peak_sustained_"
            "elapsed");
}

TEST_F(CuptiPlanTest, EveryChipTheLibraryKnowsIsPlannedOrSaysWhyNot) {
  const auto report = Plan({"all"});
  ASSERT_TRUE(report["chips"].is_array()) << report;
  EXPECT_GE(report["chips"].size(), 20u);
  size_t planned = 0;
  for (const auto& chip : report["chips"]) {
    SCOPED_TRACE(chip["chip"].get<std::string>());
    const auto& light = chip["light"];
    if (light.contains("error")) {
      // Volta: CUPTI's PM sampling starts with Turing.
      EXPECT_NE(light["error"].get<std::string>().find("CUPTI_ERROR_"), std::string::npos);
      continue;
    }
    ++planned;
    EXPECT_EQ(light["passes"], 1);
    EXPECT_TRUE(Series(light).contains("gpu.sm_active")) << light;
  }
  EXPECT_GE(planned, 20u);
}

TEST_F(CuptiPlanTest, AChipCuptiDoesNotKnowGetsItsOwnError) {
  const auto report = Plan({"GH100", "XZ999"});
  ASSERT_EQ(report["chips"].size(), 2u) << report;
  EXPECT_FALSE(report["chips"][0]["light"].contains("error"));
  EXPECT_EQ(report["chips"][1]["light"].value("error", ""),
            "CUPTI_ERROR_INVALID_CHIP_NAME in cuptiProfilerHostInitialize")
      << report["chips"][1];
}

TEST_F(CuptiHelperTest, AMetricRefusedForAnotherReasonRulesOutThatMetricOnly) {
  auto scenario = TwoGpus();
  // As on the H200: CUPTI_ERROR_UNKNOWN for a metric, only with the availability image.
  const char* realtime = "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed";
  const char* tensor = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed";
  scenario["devices"][0]["metrics"][tensor] = 70.0;
  scenario["devices"][0]["refused_metrics"] = {{realtime, 999}};
  SetScenario(scenario);
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling"], "ok") << gpu.dump();
  EXPECT_EQ(gpu["light_set"]["gpu.tensor_active"], tensor);
  ASSERT_EQ(gpu["metric_checks"].size(), 1u) << gpu.dump();
  EXPECT_EQ(gpu["metric_checks"][0]["metric"], realtime);
  EXPECT_EQ(gpu["metric_checks"][0]["result"], "CUPTI_ERROR_UNKNOWN");
  EXPECT_EQ(gpu["metric_checks"][0]["without_availability_image"], "CUPTI_SUCCESS");
  EXPECT_GT(gpu["counter_availability_bytes"].get<int>(), 0);
}

// Every Light metric refused with CUPTI_ERROR_UNKNOWN on host objects made with the GPU's
// counter availability image, as on the H200s; `anyway`: without the image too.
nlohmann::json EveryMetricRefused(bool anyway) {
  auto scenario = TwoGpus();
  nlohmann::json refused = nlohmann::json::object();
  for (const auto& [metric, value] : scenario["devices"][0]["metrics"].items())
    refused[metric] = 999;
  scenario["devices"][0]["refused_metrics"] = refused;
  scenario["devices"][0]["refused_without_image"] = anyway;
  return scenario;
}

TEST_F(CuptiHelperTest, RefusedOnlyWithTheAvailabilityImageTheGpuIsSampledWithoutIt) {
  SetScenario(EveryMetricRefused(/*anyway=*/false));
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling"], "ok") << gpu.dump();
  EXPECT_EQ(gpu["light_set"]["gpu.sm_active"],
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(gpu["counter_availability_image"],
            "refused (CUPTI_ERROR_UNKNOWN in cuptiProfilerHostConfigAddMetrics for every "
            "metric); configured without it");
  // What the image did is still shown, metric by metric.
  ASSERT_FALSE(gpu["metric_checks"].empty()) << gpu.dump();
  EXPECT_EQ(gpu["metric_checks"][0]["result"], "CUPTI_ERROR_UNKNOWN");
  EXPECT_EQ(gpu["metric_checks"][0]["without_availability_image"], "CUPTI_SUCCESS");
  // The other GPU took its image.
  const auto other = Probe(Argv({"probe", "--json"}))["devices"][1];
  EXPECT_EQ(other["pm_sampling"], "ok");
  EXPECT_FALSE(other.contains("counter_availability_image")) << other.dump();
}

TEST_F(CuptiHelperTest, EveryMetricRefusedReportsTheRefusalAndEachCheck) {
  SetScenario(EveryMetricRefused(/*anyway=*/true));
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling"], "unavailable");
  EXPECT_EQ(gpu["pm_sampling_reason"], "CUPTI_ERROR_UNKNOWN");
  EXPECT_EQ(gpu["pm_sampling_detail"], "in cuptiProfilerHostConfigAddMetrics");
  // Each refused Light metric, then the plain reference counters, whatever their result (this
  // chip knows none of them: unknown names, with and without the image).
  const auto& checks = gpu["metric_checks"];
  ASSERT_GE(checks.size(), 6u) << gpu.dump();
  EXPECT_EQ(checks[0]["result"], "CUPTI_ERROR_UNKNOWN");
  EXPECT_EQ(checks[0]["without_availability_image"], "CUPTI_ERROR_UNKNOWN");
  EXPECT_FALSE(gpu.contains("counter_availability_image")) << gpu.dump();
  const auto& last = checks[checks.size() - 1];
  EXPECT_EQ(last["metric"], "pcie__read_bytes.sum");
  EXPECT_EQ(last["result"], "CUPTI_ERROR_INVALID_METRIC_NAME");
  EXPECT_EQ(last["without_availability_image"], "CUPTI_ERROR_INVALID_METRIC_NAME");
  // And what the chip lists for every base name of both sets: the submetrics a name may take
  // (this fake knows its scenario's names), or why there are none.
  std::map<std::string, nlohmann::json> listed;
  for (const auto& item : gpu["metric_catalogue"])
    listed[item["metric"].get<std::string>()] = item;
  ASSERT_TRUE(listed.contains("sm__cycles_active")) << gpu.dump();
  EXPECT_EQ(listed["sm__cycles_active"]["type"], "counter");
  EXPECT_EQ(listed["sm__cycles_active"]["submetrics"],
            nlohmann::json::array({".avg.pct_of_peak_sustained_elapsed"}));
  EXPECT_EQ(listed["dram__throughput"]["type"], "throughput");
  EXPECT_EQ(listed["lts__t_sector_hit_rate"]["type"], "ratio");
  EXPECT_EQ(listed["lts__t_sector_hit_rate"]["submetrics"], nlohmann::json::array({".pct"}));
  EXPECT_EQ(listed["pcie__read_bytes"]["error"],
            "cuptiProfilerHostGetMetricProperties: CUPTI_ERROR_INVALID_METRIC_NAME");
  EXPECT_FALSE(listed["pcie__read_bytes"].contains("submetrics"));
  // A base that failed with the availability image is listed again without it.
  EXPECT_EQ(listed["pcie__read_bytes"]["without_availability_image"]["error"],
            "cuptiProfilerHostGetMetricProperties: CUPTI_ERROR_INVALID_METRIC_NAME");
  EXPECT_FALSE(listed["sm__cycles_active"].contains("without_availability_image"));
}

TEST_F(CuptiHelperTest, NoKnownMetricStillListsWhatTheChipTakes) {
  auto scenario = TwoGpus();
  for (auto& device : scenario["devices"])
    device["metrics"] = nlohmann::json::object();
  scenario["known_metrics"] = {"sm__cycles_active.avg", "sm__cycles_active.sum"};
  SetScenario(scenario);
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling"], "unavailable");
  EXPECT_EQ(gpu["pm_sampling_reason"], "no_metrics");
  EXPECT_FALSE(gpu.contains("metric_checks")) << gpu.dump();  // unknown names, nothing refused
  bool listed = false;
  for (const auto& item : gpu["metric_catalogue"]) {
    if (item["metric"] == "sm__cycles_active") {
      listed = true;
      EXPECT_EQ(item["submetrics"], nlohmann::json::array({".avg", ".sum"}));
    }
  }
  EXPECT_TRUE(listed) << gpu.dump();
}

TEST_F(CuptiHelperTest, AnAcceptedSetIsNotListed) {
  SetScenario(TwoGpus());
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling"], "ok");
  EXPECT_FALSE(gpu.contains("metric_catalogue")) << gpu.dump();
}

TEST_F(CuptiHelperTest, ProbeNamesMissingPrivilegesWithTheFix) {
  auto scenario = TwoGpus();
  scenario["devices"][1]["availability_error"] = 35;  // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
  SetScenario(scenario);
  const auto report = Probe(Argv({"probe", "--json"}));
  EXPECT_EQ(report["devices"][0]["pm_sampling"], "ok");
  const auto& denied = report["devices"][1];
  EXPECT_EQ(denied["pm_sampling"], "unavailable");
  EXPECT_EQ(denied["pm_sampling_reason"], "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  EXPECT_NE(denied["pm_sampling_fix"].get<std::string>().find("CAP_PERFMON"), std::string::npos);
  EXPECT_NE(denied["pm_sampling_fix"].get<std::string>().find("--cupti-mode"), std::string::npos);
  EXPECT_TRUE(report["effective_capabilities"].contains("cap_perfmon"));
}

TEST_F(CuptiHelperTest, ProbeNamesCountersHeldByAnotherProfiler) {
  auto scenario = TwoGpus();
  scenario["devices"][0]["enable_error"] = 26;  // CUPTI_ERROR_HARDWARE_BUSY
  SetScenario(scenario);
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling_reason"], "CUPTI_ERROR_HARDWARE_BUSY");
  EXPECT_EQ(gpu["pm_sampling_detail"], "in cuptiPmSamplingEnable");
  EXPECT_NE(gpu["pm_sampling_fix"].get<std::string>().find("another profiler"), std::string::npos);
}

TEST_F(CuptiHelperTest, ProbeNamesAnUnsupportedConfiguration) {
  auto scenario = TwoGpus();
  scenario["devices"][0]["support"] = {{"vgpu", "disabled"}};
  SetScenario(scenario);
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling_reason"], "unsupported_device");
  EXPECT_EQ(gpu["pm_sampling_detail"], "vgpu: disabled");
}

TEST_F(CuptiHelperTest, ProbeNamesADriverTooOldForTheVariant) {
  auto scenario = TwoGpus();
  scenario["driver_version"] = 12040;
  SetScenario(scenario);
  const auto report = Probe(Argv({"probe", "--json"}));
  ASSERT_EQ(report["devices"].size(), 2u);
  for (const auto& gpu : report["devices"]) {
    EXPECT_EQ(gpu["pm_sampling_reason"], "driver_too_old");
    EXPECT_EQ(gpu["pm_sampling_detail"],
              "the driver serves CUDA 12.4, variant cuda1300 needs 13.0");
  }
  // Nothing was asked of CUPTI.
  EXPECT_EQ(Trace().find("cupti"), std::string::npos);
}

TEST_F(CuptiHelperTest, ProbeCutsTheLightSetToOnePass) {
  auto scenario = TwoGpus();
  scenario["devices"][0]["max_metrics_per_pass"] = 2;
  scenario["devices"][1]["max_metrics_per_pass"] = 2;
  SetScenario(scenario);
  const auto gpu = Probe(Argv({"probe", "--json"}))["devices"][0];
  EXPECT_EQ(gpu["pm_sampling"], "ok");
  ASSERT_EQ(gpu["light_set"].size(), 2u) << gpu.dump();
  EXPECT_TRUE(gpu["light_set"].contains("gpu.sm_active"));
  EXPECT_TRUE(gpu["light_set"].contains("gpu.tensor_active"));
  EXPECT_NE(gpu["light_set_absent"].dump().find("gpu.dram_active"), std::string::npos);
}

TEST_F(CuptiHelperTest, ProbeWithoutUsableLibrariesStillReports) {
  SetScenario(TwoGpus());
  const auto no_cupti = Probe(Argv({"probe", "--json"}, dir_ / "missing/libcupti.so.13"));
  ASSERT_EQ(no_cupti["devices"].size(), 2u);
  EXPECT_EQ(no_cupti["devices"][0]["pm_sampling_reason"], "libcupti_not_found");
  auto argv = Argv({"probe", "--json"});
  argv[1] = "--libcuda=" + dir_ / "missing/libcuda.so.1";
  const auto no_cuda = Probe(argv);
  EXPECT_EQ(no_cuda["reason"], "libcuda_not_found");
  EXPECT_TRUE(no_cuda["devices"].empty());
  // A library that is not CUPTI at all: refused by its missing entry points.
  const auto wrong =
      Probe(Argv({"probe", "--json"}, std::string(EXPANSE_FAKES_DIR) + "/cupti/libcuda.so.1"));
  EXPECT_EQ(wrong["devices"][0]["pm_sampling_reason"], "symbol_missing");
  SetScenario({{"init_error", 100}});
  const auto no_device = Probe(Argv({"probe", "--json"}));
  EXPECT_EQ(no_device["reason"], "CUDA_ERROR_NO_DEVICE");
  EXPECT_EQ(no_device["detail"], "in cuInit");
}

#ifdef EXPANSE_STUB_LIBCUDA
TEST_F(CuptiHelperTest, ProbeRecognisesTheToolkitsStubLibcuda) {
  // The CUDA toolkit's own link-time stub: a real library this machine has, which answers
  // every call with CUDA_ERROR_STUB_LIBRARY as it does on a misconfigured node.
  auto argv = Argv({"probe", "--json"});
  argv[1] = std::string("--libcuda=") + EXPANSE_STUB_LIBCUDA;
  const auto report = Probe(argv);
  EXPECT_EQ(report["reason"], "CUDA_ERROR_STUB_LIBRARY");
  EXPECT_NE(report["fix"].get<std::string>().find("stub"), std::string::npos);
}
#endif

TEST_F(CuptiHelperTest, AHungDriverCallEndsTheHelperWithItsName) {
  auto scenario = TwoGpus();
  scenario["hang_ms"] = {{"cuptiPmSamplingEnable", 30'000}};
  SetScenario(scenario);
  auto argv = Argv({"probe", "--json"});
  argv.insert(argv.begin() + 1, "--call-timeout-ms=200");
  const auto result = Run(argv);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_NE(result.stdout_text.find(R"("reason":"hung_call in cuptiPmSamplingEnable")"),
            std::string::npos)
      << result.stdout_text;
  EXPECT_NE(result.stderr_text.find("hung_call in cuptiPmSamplingEnable"), std::string::npos);
}

// The helper as the sampler runs it: a child with pipes, records read and parsed by the
// sampler's own parser.
class CuptiHelperStreamTest : public CuptiHelperTest {
 protected:
  void Start(std::vector<std::string> flags) {
    std::vector<std::string> tail = {"sample", "--period-ms=100", "--retry-backoff-ms=100"};
    tail.insert(tail.end(), flags.begin(), flags.end());
    auto child = ChildProcess::Start({Argv(tail), Env(), milliseconds(5000)});
    ASSERT_TRUE(child.ok()) << child.status();
    helper_ = std::move(*child);
  }

  // Reads records until `done` says so; fails the test if the helper ends first or a line
  // does not parse. The wait is bounded only so a broken helper fails rather than hangs.
  template <typename Done>
  void ReadUntil(Done done) {
    for (int round = 0; round < 600; ++round) {
      auto batch = helper_->ReadLines(milliseconds(100), kMaxRecordBytes);
      for (const auto& line : batch.lines) {
        auto record = ParseRecord(line);
        ASSERT_TRUE(record.ok()) << line << ": " << record.status();
        records_.push_back(*record);
        if (done(records_.back()))
          return;
      }
      ASSERT_FALSE(batch.closed) << "the helper ended";
    }
    FAIL() << "the awaited record never came";
  }

  static const CounterRecord* Counters(const HelperRecord& record, const char* uuid) {
    const auto* counters = std::get_if<CounterRecord>(&record);
    return counters != nullptr && counters->uuid == uuid ? counters : nullptr;
  }
  static const StatusRecord* Status(const HelperRecord& record, const char* uuid) {
    const auto* status = std::get_if<StatusRecord>(&record);
    return status != nullptr && status->uuid == uuid ? status : nullptr;
  }
  static double Value(const CounterRecord& record, const std::string& series) {
    for (const auto& [name, value] : record.values) {
      if (name == series)
        return value;
    }
    return -1;
  }

  std::unique_ptr<ChildProcess> helper_;
  std::deque<HelperRecord> records_;  // stable addresses for the pointers tests keep
};

TEST_F(CuptiHelperStreamTest, WritesPerSecondMeansOfTheLightSetForEachGpu) {
  SetScenario(TwoGpus());
  Start({});
  const CounterRecord* first = nullptr;
  ReadUntil([&](const HelperRecord& r) { return (first = Counters(r, kUuid1)) != nullptr; });
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->set, CounterSet::kLight);
  EXPECT_EQ(first->device, 1u);
  EXPECT_GT(first->samples, 0u);
  EXPECT_DOUBLE_EQ(Value(*first, "gpu.sm_active"), 0.935);
  EXPECT_DOUBLE_EQ(Value(*first, "gpu.tensor_active"), 0.71);
  EXPECT_DOUBLE_EQ(Value(*first, "gpu.dram_active"), 0.35);
  EXPECT_EQ(Value(*first, "gpu.fma_pipe_utilization"), -1);  // Rich set only
  bool ok_status = false, alive = false;
  for (const auto& record : records_) {
    if (const auto* status = Status(record, kUuid0))
      ok_status = status->pm_sampling == "ok" && !status->series.empty();
    alive = alive || std::holds_alternative<AliveRecord>(record);
  }
  EXPECT_TRUE(ok_status);
  EXPECT_TRUE(alive);

  // New readings reach the next records.
  auto scenario = TwoGpus();
  scenario["devices"][1]["metrics"]["sm__cycles_active.avg.pct_of_peak_sustained_elapsed"] = 2.0;
  SetScenario(scenario);
  ReadUntil([&](const HelperRecord& r) {
    const auto* counters = Counters(r, kUuid1);
    return counters != nullptr && Value(*counters, "gpu.sm_active") == 0.02;
  });

  // Closing its input ends the helper cleanly, every GPU let go.
  helper_->CloseStdin();
  EXPECT_EQ(helper_->Stop(), 0);
  const std::string trace = Trace();
  EXPECT_NE(trace.find("cuptiPmSamplingDisable dev=0"), std::string::npos);
  EXPECT_NE(trace.find("cuptiPmSamplingDisable dev=1"), std::string::npos);
}

TEST_F(CuptiHelperStreamTest, AGpuSampledWithoutItsAvailabilityImageSaysSo) {
  SetScenario(EveryMetricRefused(/*anyway=*/false));
  Start({});
  const CounterRecord* counters = nullptr;
  ReadUntil([&](const HelperRecord& r) { return (counters = Counters(r, kUuid0)) != nullptr; });
  ASSERT_NE(counters, nullptr);
  EXPECT_DOUBLE_EQ(Value(*counters, "gpu.sm_active"), 0.935);
  const StatusRecord* status = nullptr;
  for (const auto& record : records_) {
    if (const auto* found = Status(record, kUuid0))
      status = found;
  }
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(status->pm_sampling, "ok");
  EXPECT_EQ(status->reason,
            "counter_availability_refused (CUPTI_ERROR_UNKNOWN in "
            "cuptiProfilerHostConfigAddMetrics)");
  EXPECT_NE(status->fix.find("without the image"), std::string::npos) << status->fix;
  // The other GPU, whose image CUPTI takes, reports nothing of the kind.
  ReadUntil([&](const HelperRecord& r) {
    const auto* other = Status(r, kUuid1);
    return other != nullptr || (Counters(r, kUuid1) != nullptr);
  });
  for (const auto& record : records_) {
    if (const auto* other = Status(record, kUuid1)) {
      EXPECT_EQ(other->reason, "");
    }
  }
}

TEST_F(CuptiHelperStreamTest, EscalationSwitchesOneGpuToTheRichSetAndBack) {
  SetScenario(TwoGpus());
  Start({});
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  ASSERT_TRUE(helper_->WriteLine(std::string("escalate ") + kUuid0 + " 60"));
  const CounterRecord* rich = nullptr;
  ReadUntil([&](const HelperRecord& r) {
    rich = Counters(r, kUuid0);
    return rich != nullptr && rich->set == CounterSet::kRich;
  });
  ASSERT_NE(rich, nullptr);
  EXPECT_DOUBLE_EQ(Value(*rich, "gpu.fma_pipe_utilization"), 0.12);
  EXPECT_DOUBLE_EQ(Value(*rich, "gpu.l2_hit_rate"), 0.64);
  EXPECT_DOUBLE_EQ(Value(*rich, "gpu.sm_active"), 0.935);  // the Light series carry on
  // The other GPU stays on the Light set.
  ReadUntil([&](const HelperRecord& r) {
    const auto* other = Counters(r, kUuid1);
    return other != nullptr;
  });
  EXPECT_EQ(std::get<CounterRecord>(records_.back()).set, CounterSet::kLight);
  ASSERT_TRUE(helper_->WriteLine(std::string("light ") + kUuid0));
  ReadUntil([&](const HelperRecord& r) {
    const auto* counters = Counters(r, kUuid0);
    return counters != nullptr && counters->set == CounterSet::kLight;
  });
  EXPECT_NE(Trace().find("lts__t_sector_hit_rate.pct"), std::string::npos);
  // Each set is evaluated with the host object that configured it, and every host object is
  // let go by the time the helper ends.
  helper_->CloseStdin();
  EXPECT_EQ(helper_->Stop(), 0);
  const std::string trace = Trace();
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = trace.find(what); at != std::string::npos; at = trace.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_GT(count("cuptiProfilerHostInitialize"), 0u);
  EXPECT_EQ(count("cuptiProfilerHostInitialize"), count("cuptiProfilerHostDeinitialize"));
  // ... all of them before CUPTI's profiler is de-initialised.
  const size_t deinit = trace.rfind("cuptiProfilerDeInitialize");
  ASSERT_NE(deinit, std::string::npos);
  EXPECT_LT(trace.rfind("cuptiProfilerHostDeinitialize"), deinit);
  // Every evaluation names a host object that made a config image (the fake traces host=N).
  std::istringstream lines(trace);
  std::set<std::string> configured, evaluated;
  for (std::string line; std::getline(lines, line);) {
    const size_t host = line.find(" host=");
    if (host == std::string::npos)
      continue;
    const std::string id = line.substr(host + 6, line.find(' ', host + 6) - host - 6);
    if (line.starts_with("cuptiProfilerHostGetConfigImage "))
      configured.insert(id);
    else if (line.starts_with("cuptiProfilerHostEvaluateToGpuValues "))
      evaluated.insert(id);
  }
  EXPECT_GE(evaluated.size(), 2u);  // the Light set's and the Rich set's
  for (const std::string& id : evaluated)
    EXPECT_TRUE(configured.contains(id)) << "host " << id << " evaluated, never configured";
}

// A CUPTI that takes one configuration per sampler (as NVIDIA's sample and OpenXLA use it):
// the switch to the Rich set and back goes through a new sampler each time.
TEST_F(CuptiHelperStreamTest, EscalationOnACuptiThatConfiguresASamplerOnceUsesANewOne) {
  auto scenario = TwoGpus();
  scenario["devices"][0]["reconfigure_error"] = 7;  // CUPTI_ERROR_INVALID_OPERATION
  SetScenario(scenario);
  Start({});
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  ASSERT_TRUE(helper_->WriteLine(std::string("escalate ") + kUuid0 + " 60"));
  const CounterRecord* rich = nullptr;
  ReadUntil([&](const HelperRecord& r) {
    rich = Counters(r, kUuid0);
    return rich != nullptr && rich->set == CounterSet::kRich;
  });
  ASSERT_NE(rich, nullptr);
  EXPECT_DOUBLE_EQ(Value(*rich, "gpu.fma_pipe_utilization"), 0.12);
  ASSERT_TRUE(helper_->WriteLine(std::string("light ") + kUuid0));
  ReadUntil([&](const HelperRecord& r) {
    const auto* counters = Counters(r, kUuid0);
    return counters != nullptr && counters->set == CounterSet::kLight;
  });
  // Without a pause in the GPU's sampling: no status of it said anything but ok.
  for (const auto& record : records_) {
    if (const auto* status = Status(record, kUuid0)) {
      EXPECT_EQ(status->pm_sampling, "ok") << status->reason;
    }
  }
  // Each switch: the refused configuration, then a new sampler for the set.
  const std::string trace = Trace();
  size_t at = trace.find("cuptiPmSamplingSetConfig dev=0");
  int new_samplers = 0;
  while ((at = trace.find("cuptiPmSamplingDisable dev=0", at)) != std::string::npos) {
    const size_t enabled = trace.find("cuptiPmSamplingEnable dev=0", at);
    ASSERT_NE(enabled, std::string::npos) << trace;
    ++new_samplers;
    at = enabled;
  }
  EXPECT_GE(new_samplers, 2) << trace;
}

TEST_F(CuptiHelperStreamTest, ATightPassKeepsTheRichSetsOwnSeriesOverOptionalLightOnes) {
  // Every metric known, five per pass: the Light set keeps its first five, the Rich set the
  // three activity series and its own first two the chip knows, not the Light set's optional
  // ones (series are placed in set order while the pass has room).
  auto scenario = TwoGpus();
  scenario["known_metrics"] = {"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
                               "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                               "pcie__read_bytes.sum.per_second",
                               "sm__issue_active.avg.pct_of_peak_sustained_elapsed"};
  scenario["devices"][0]["max_metrics_per_pass"] = 5;
  SetScenario(scenario);
  Start({});
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  ASSERT_TRUE(helper_->WriteLine(std::string("escalate ") + kUuid0 + " 60"));
  const CounterRecord* rich = nullptr;
  ReadUntil([&](const HelperRecord& r) {
    rich = Counters(r, kUuid0);
    return rich != nullptr && rich->set == CounterSet::kRich;
  });
  ASSERT_NE(rich, nullptr);
  std::vector<std::string> names;
  for (const auto& [name, value] : rich->values)
    names.push_back(name);
  std::sort(names.begin(), names.end());  // a JSON object: in name order
  EXPECT_EQ(names,
            (std::vector<std::string>{"gpu.dram_active", "gpu.fma_pipe_utilization",
                                      "gpu.issue_active", "gpu.sm_active", "gpu.tensor_active"}));
}

TEST_F(CuptiHelperStreamTest, EscalationOffKeepsTheLightSet) {
  SetScenario(TwoGpus());
  Start({"--no-escalation"});
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  ASSERT_TRUE(helper_->WriteLine(std::string("escalate ") + kUuid0 + " 60"));
  // Several more periods of records for that GPU, all Light.
  int seen = 0;
  ReadUntil([&](const HelperRecord& r) {
    const auto* counters = Counters(r, kUuid0);
    if (counters == nullptr)
      return false;
    EXPECT_EQ(counters->set, CounterSet::kLight);
    return ++seen == 5;
  });
  EXPECT_EQ(Trace().find("lts__t_sector_hit_rate.pct"), std::string::npos);
}

TEST_F(CuptiHelperStreamTest, YieldsAGpuWhoseCountersAreTakenAndResumesAfterwards) {
  SetScenario(TwoGpus());
  Start({});
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  // A job's profiler takes GPU 0's counters: decoding fails and re-enabling is refused.
  auto busy = TwoGpus();
  busy["devices"][0]["decode_error"] = 26;
  busy["devices"][0]["enable_error"] = 26;
  SetScenario(busy);
  const StatusRecord* yielded = nullptr;
  ReadUntil([&](const HelperRecord& r) {
    yielded = Status(r, kUuid0);
    return yielded != nullptr && yielded->pm_sampling == "yielded";
  });
  ASSERT_NE(yielded, nullptr);
  EXPECT_EQ(yielded->reason, "yielded_to_job_profiler (CUPTI_ERROR_HARDWARE_BUSY)");
  EXPECT_NE(yielded->fix.find("retries"), std::string::npos);
  // GPU 1 carries on meanwhile.
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid1) != nullptr; });
  // The profiler is done: sampling resumes on GPU 0.
  SetScenario(TwoGpus());
  ReadUntil([&](const HelperRecord& r) {
    const auto* status = Status(r, kUuid0);
    return status != nullptr && status->pm_sampling == "ok";
  });
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  const std::string trace = Trace();
  const size_t disabled = trace.find("cuptiPmSamplingDisable dev=0");
  ASSERT_NE(disabled, std::string::npos);
  // Released at once, enabled again later, CUPTI's profiler initialised again before that.
  const size_t initialised = trace.find("cuptiProfilerInitialize", disabled);
  ASSERT_NE(initialised, std::string::npos);
  EXPECT_NE(trace.find("cuptiPmSamplingEnable dev=0", initialised), std::string::npos);
}

// A GPU lost mid-stream (off the bus, reset): reported unavailable with CUPTI's word for it,
// not as a profiler's, while the other GPU carries on and the helper lives; tried again with
// backoff, and sampled again once it is back.
TEST_F(CuptiHelperStreamTest, ALostGpuIsReportedWhileTheOthersCarryOn) {
  SetScenario(TwoGpus());
  Start({});
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  auto lost = TwoGpus();
  lost["devices"][0]["lost"] = true;
  SetScenario(lost);
  const StatusRecord* gone = nullptr;
  ReadUntil([&](const HelperRecord& r) {
    gone = Status(r, kUuid0);
    return gone != nullptr && gone->pm_sampling != "ok";
  });
  EXPECT_EQ(gone->pm_sampling, "unavailable");
  EXPECT_EQ(gone->reason, "CUPTI_ERROR_UNKNOWN");
  // GPU 1 is sampled meanwhile, GPU 0 not.
  const size_t from = records_.size();
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid1) != nullptr; });
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid1) != nullptr; });
  for (size_t i = from; i < records_.size(); ++i)
    EXPECT_EQ(Counters(records_[i], kUuid0), nullptr) << "a counter of the lost GPU";
  SetScenario(TwoGpus());
  ReadUntil([&](const HelperRecord& r) {
    const auto* status = Status(r, kUuid0);
    return status != nullptr && status->pm_sampling == "ok";
  });
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
}

TEST_F(CuptiHelperStreamTest, ReleasesAGpuOnRequestAndTakesItBackOnResume) {
  SetScenario(TwoGpus());
  Start({});
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid1) != nullptr; });
  ASSERT_TRUE(helper_->WriteLine(std::string("release ") + kUuid1));
  const StatusRecord* yielded = nullptr;
  ReadUntil([&](const HelperRecord& r) {
    yielded = Status(r, kUuid1);
    return yielded != nullptr && yielded->pm_sampling == "yielded";
  });
  EXPECT_EQ(yielded->reason, "yielded_to_job_profiler (a CUDA tool runs in a job)");
  // Let go at once, and not taken back while held: GPU 0 carries on alone.
  int later = 0;
  ReadUntil([&](const HelperRecord& r) {
    EXPECT_EQ(Counters(r, kUuid1), nullptr);
    return Counters(r, kUuid0) != nullptr && ++later == 3;
  });
  EXPECT_NE(Trace().find("cuptiPmSamplingDisable dev=1"), std::string::npos);
  ASSERT_TRUE(helper_->WriteLine(std::string("resume ") + kUuid1));
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid1) != nullptr; });
}

// The sampler repeats its releases as soon as it starts a helper: they are read before the
// first period touches any GPU, so a job's CUDA tool never sees the counters taken even once.
TEST_F(CuptiHelperStreamTest, AReleaseWrittenAtStartIsReadBeforeAnyGpuIsSampled) {
  SetScenario(TwoGpus());
  Start({});
  ASSERT_TRUE(helper_->WriteLine(std::string("release ") + kUuid1));
  ReadUntil([&](const HelperRecord& r) { return Counters(r, kUuid0) != nullptr; });
  EXPECT_EQ(Trace().find("cuptiPmSamplingEnable dev=1"), std::string::npos) << Trace();
  for (const auto& record : records_) {
    if (const auto* status = Status(record, kUuid1)) {
      EXPECT_NE(status->pm_sampling, "ok");
    }
    EXPECT_EQ(Counters(record, kUuid1), nullptr);
  }
}

// More samples in the hardware buffer than one decode's image holds: the rest are decoded in
// the same period, not left for the next (a backlog that would grow and make every mean older
// than its stamp).
TEST_F(CuptiHelperStreamTest, ABacklogLargerThanTheImageIsDecodedWithinThePeriod) {
  auto scenario = TwoGpus();
  for (auto& device : scenario["devices"])
    device["samples_per_decode"] = 300;
  SetScenario(scenario);
  Start({std::string("--devices=") + kUuid0});
  int seen = 0;
  ReadUntil([&](const HelperRecord& r) {
    const auto* counters = Counters(r, kUuid0);
    if (counters == nullptr)
      return false;
    EXPECT_EQ(counters->samples, 300u);
    return ++seen == 3;
  });
}

// Whatever becomes of the sampler (a kill -9 included), its helper does not outlive it and
// keep the GPUs' counters: PR_SET_PDEATHSIG. The helper's parent here is a shell, killed; the
// helper keeps the shell's stdin, its command pipe (a background command's fd 0 is /dev/null
// before any redirection, so the shell's is kept on fd 3 first).
TEST_F(CuptiHelperStreamTest, DiesWithItsParent) {
  SetScenario(TwoGpus());
  std::string command;
  for (const std::string& arg :
       Argv({"sample", "--period-ms=100", std::string("--devices=") + kUuid0}))
    command += "'" + arg + "' ";
  auto parent =
      ChildProcess::Start({{"/bin/sh", "-c", "exec 3<&0; " + command + "<&3 3<&- & echo $!; wait"},
                           Env(),
                           milliseconds(5000)});
  ASSERT_TRUE(parent.ok()) << parent.status();
  pid_t helper = 0;
  for (int round = 0; round < 100 && helper == 0; ++round) {
    for (const auto& line : (*parent)->ReadLines(milliseconds(100), 4096).lines) {
      if (helper == 0)
        helper = static_cast<pid_t>(std::stol(line));
    }
  }
  ASSERT_GT(helper, 0) << "the shell did not say the helper's pid";
  // Gone, or a zombie waiting for whoever adopted it to reap it.
  auto alive = [&] {
    std::ifstream stat("/proc/" + std::to_string(helper) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t end = text.rfind(')');
    return end != std::string::npos && end + 2 < text.size() && text[end + 2] != 'Z';
  };
  // Sampling, so it is past its start-up (the death signal is set before any CUPTI call).
  for (int round = 0; round < 100 && Trace().find("cuptiPmSamplingEnable") == std::string::npos;
       ++round)
    std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(alive()) << "helper " << helper << ": " << Trace();
  ASSERT_EQ(kill((*parent)->pid(), SIGKILL), 0);
  for (int round = 0; round < 100 && alive(); ++round)
    std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(alive()) << "helper " << helper << " outlived its parent by 5 s";
  (*parent)->Stop();
}

TEST_F(CuptiHelperStreamTest, ReportsGpusItCannotSample) {
  auto scenario = TwoGpus();
  scenario["devices"][1]["availability_error"] = 35;
  SetScenario(scenario);
  Start({std::string("--devices=") + kUuid1 + ",GPU-00000000-0000-0000-0000-000000000001"});
  const StatusRecord* denied = nullptr;
  ReadUntil([&](const HelperRecord& r) {
    denied = Status(r, kUuid1);
    return denied != nullptr;
  });
  EXPECT_EQ(denied->pm_sampling, "unavailable");
  EXPECT_EQ(denied->reason, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  bool invisible = false;
  for (const auto& record : records_) {
    if (const auto* status = Status(record, "GPU-00000000-0000-0000-0000-000000000001"))
      invisible = status->reason == "not_visible_to_cuda" && !status->device;
  }
  EXPECT_TRUE(invisible);
  // GPU 0 was not handed over: never touched.
  EXPECT_EQ(Trace().find("cuptiPmSamplingEnable dev=0"), std::string::npos);
}

}  // namespace
}  // namespace expanse::cupti
