#include "agent/counter_helper.h"

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "cupti/helper_records.h"

namespace expanse::agent {
namespace counter_helper_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGpu0[] = "GPU-3f0f2b8c-4a4e-6d1e-9b1a-8c2a3e5d7f10";
constexpr char kGpu1[] = "GPU-7a1c9e20-51b3-4c7d-8e2f-0b6d4a9c3e21";
constexpr int64_t kNow = 1'800'000'000'000;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The helper is a shell script standing in for expanse-cupti-helper: it logs its arguments and
// the commands it receives, prints the lines of `output`, then (unless told to exit) reads
// commands until its input closes.
class CounterHelperTest : public ::testing::Test {
 protected:
  void WriteHelper(const std::string& output, const std::string& then = "") {
    std::ofstream(dir_ / "output") << output;
    const std::string script =
        "#!/bin/sh\n"
        "echo \"$*\" >> '" +
        dir_ / "argv" +
        "'\n"
        "cat '" +
        dir_ / "output" + "'\n" + then + "while read -r line; do echo \"$line\" >> '" +
        dir_ / "commands" + "'; done\n";
    std::ofstream(helper_) << script;
    chmod(helper_.c_str(), 0755);
  }

  CounterHelperOptions Options() {
    CounterHelperOptions options;
    options.helper = helper_;
    options.hostname = "n1";
    options.silence_limit = std::chrono::milliseconds(30'000);
    options.restart_initial = std::chrono::milliseconds(5'000);
    return options;
  }

  // Ticks until `done` holds; the helper is a real process, so its lines take real time.
  template <typename Done>
  bool TickUntil(CounterHelper& helper, const std::vector<std::string>& gpus, Done done) {
    for (int i = 0; i < 1000; ++i) {
      helper.Tick(gpus, buffer_, mu_);
      if (done())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::string Counters(const char* uuid, int64_t at_ms, double sm_active) {
    cupti::CounterRecord record{
        at_ms, 0, uuid, cupti::CounterSet::kLight, {{"gpu.sm_active", sm_active}}, 10};
    return cupti::RenderRecord(record) + "\n";
  }
  std::string Status(const char* uuid, const std::string& state, const std::string& reason = "",
                     const std::string& fix = "") {
    cupti::StatusRecord record{0, uuid, state, reason, fix, {}};
    if (state == "ok")
      record.series = {"gpu.sm_active", "gpu.tensor_active"};
    return cupti::RenderRecord(record) + "\n";
  }

  testing::TempDir dir_{"counter_helper_test"};
  std::string helper_ = dir_ / "expanse-cupti-helper";
  ManualClock clock_{kNow};
  telemetry::SeriesBuffer buffer_;
  std::mutex mu_;
};

TEST_F(CounterHelperTest, CountersBecomeSeriesAndTheCapabilityIsOk) {
  WriteHelper(Status(kGpu0, "ok") + Status(kGpu1, "ok") + Counters(kGpu0, kNow - 1000, 0.935) +
              Counters(kGpu1, kNow - 1000, 0.25) + Counters(kGpu0, kNow, 0.5));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu1, kGpu0}, [&] { return buffer_.samples() == 3; }));
  const auto series = buffer_.Take();
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].host, "n1");
  EXPECT_EQ(series[0].device, kGpu0);
  EXPECT_EQ(series[0].metric, "gpu.sm_active");
  EXPECT_EQ(series[0].t0, kNow - 1000);
  ASSERT_EQ(series[0].v.size(), 2u);
  EXPECT_DOUBLE_EQ(series[0].v[0], 0.935);
  const Capability capability = helper.Describe();
  EXPECT_EQ(capability.state, "ok");
  EXPECT_THAT(capability.reason, HasSubstr("PM sampling on 2 GPUs"));
  // It was started for exactly the GPUs NVML lists, in a stable order.
  EXPECT_THAT(Slurp(dir_ / "argv"), HasSubstr(std::string("sample --devices=") + kGpu0 + "," +
                                              kGpu1 + " --period-ms=1000"));
}

TEST_F(CounterHelperTest, AGpuSampledWithACaveatIsOkAndTheCapabilitySaysWhich) {
  const std::string note =
      "counter_availability_refused (CUPTI_ERROR_UNKNOWN in cuptiProfilerHostConfigAddMetrics)";
  WriteHelper(Status(kGpu0, "ok") + Status(kGpu1, "ok", note, "CUPTI refused ..."));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(
      TickUntil(helper, {kGpu0, kGpu1}, [&] { return helper.Stats()["gpus"].size() == 2; }));
  const Capability capability = helper.Describe();
  EXPECT_EQ(capability.state, "ok");
  EXPECT_THAT(capability.reason, HasSubstr("PM sampling on 2 GPUs"));
  EXPECT_THAT(capability.reason, HasSubstr("; 1 of them: " + note));
  EXPECT_EQ(helper.Stats()["gpus"][kGpu1]["reason"], note);
}

TEST_F(CounterHelperTest, HostileLinesAreRefusedAndCountedWhileGoodOnesCount) {
  WriteHelper("not json\n" + std::string(20'000, 'x') + "\n" +
              Counters(kGpu1, kNow, 0.4) +              // a GPU it was not asked for
              Counters(kGpu0, kNow - 3'600'000, 0.4) +  // an hour old
              R"({"kind":"counters","t_ms":1,"device":0,"uuid":")" + kGpu0 +
              R"(","set":"light","samples":1,"values":{"job.cpu_used_cores":5}})"
              "\n" +
              Counters(kGpu0, kNow, 0.7));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return buffer_.samples() == 1; }));
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["refused"] == 5; }))
      << helper.Stats().dump();
  EXPECT_EQ(helper.Stats()["records"], 3);  // parsed: the two refused for their content, the good
  const auto series = buffer_.Take();
  ASSERT_EQ(series.size(), 1u);
  EXPECT_DOUBLE_EQ(series[0].v[0], 0.7);
}

TEST_F(CounterHelperTest, UnavailableAndYieldedGpusDegradeTheCapabilityWithTheReason) {
  WriteHelper(Status(kGpu0, "ok") + Status(kGpu1, "unavailable",
                                           "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
                                           "grant CAP_PERFMON"));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(
      TickUntil(helper, {kGpu0, kGpu1}, [&] { return helper.Stats()["gpus"].size() == 2; }));
  Capability capability = helper.Describe();
  EXPECT_EQ(capability.state, "degraded");
  EXPECT_THAT(capability.reason,
              HasSubstr(std::string("CUPTI PM sampling unavailable on ") + kGpu1 +
                        ": CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (grant CAP_PERFMON)"));
}

TEST_F(CounterHelperTest, AHelperThatDiesIsRestartedAfterABackoff) {
  WriteHelper(Status(kGpu0, "ok") +
                  R"({"kind":"fatal","reason":"hung_call in cuptiPmSamplingDecodeData"})"
                  "\n",
              "exit 3\n");
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["restarts"] == 1; }));
  const Capability capability = helper.Describe();
  EXPECT_EQ(capability.state, "degraded");
  EXPECT_THAT(capability.reason,
              HasSubstr("CUPTI PM sampling unavailable: hung_call in cuptiPmSamplingDecodeData ("));
  EXPECT_THAT(capability.reason, HasSubstr("did not return within the deadline"));
  EXPECT_THAT(helper.Stats()["last_exit"].get<std::string>(),
              HasSubstr(": hung_call in cuptiPmSamplingDecodeData"));
  // Not before the backoff has passed...
  for (int i = 0; i < 20; ++i)
    helper.Tick({kGpu0}, buffer_, mu_);
  const std::string first = Slurp(dir_ / "argv");
  EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), 1);
  // ...then again, and the next failure waits twice as long.
  clock_.Advance(5'000);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["restarts"] == 2; }));
  const std::string argv = Slurp(dir_ / "argv");
  EXPECT_EQ(std::count(argv.begin(), argv.end(), '\n'), 2);
  clock_.Advance(5'000);
  for (int i = 0; i < 20; ++i)
    helper.Tick({kGpu0}, buffer_, mu_);
  EXPECT_EQ(helper.Stats()["restarts"], 2);
}

TEST_F(CounterHelperTest, ASilentHelperIsStopped) {
  WriteHelper("", "sleep 600\n");
  CounterHelper helper(Options(), clock_, clock_);
  helper.Tick({kGpu0}, buffer_, mu_);
  EXPECT_TRUE(helper.Stats()["running"].get<bool>());
  clock_.Advance(30'001);
  helper.Tick({kGpu0}, buffer_, mu_);
  EXPECT_FALSE(helper.Stats()["running"].get<bool>());
  EXPECT_THAT(helper.Describe().reason, HasSubstr("silent for 30 s"));
}

TEST_F(CounterHelperTest, EscalationsReachTheHelperUnlessProfilingIsOff) {
  WriteHelper(Status(kGpu0, "ok"));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Describe().state == "ok"; }));
  helper.Escalate(kGpu0, std::chrono::seconds(60));
  helper.Escalate("not-a-uuid; rm -rf /", std::chrono::seconds(60));
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
    return Slurp(dir_ / "commands").find("escalate") != std::string::npos;
  }));
  EXPECT_EQ(Slurp(dir_ / "commands"), std::string("escalate ") + kGpu0 + " 60\n");

  auto options = Options();
  options.escalation = false;
  CounterHelper quiet(options, clock_, clock_);
  ASSERT_TRUE(TickUntil(quiet, {kGpu0}, [&] {
    return Slurp(dir_ / "argv").find("--no-escalation") != std::string::npos;
  }));
  quiet.Escalate(kGpu0, std::chrono::seconds(60));
  EXPECT_EQ(quiet.Stats()["escalations"], 0);
  ASSERT_TRUE(TickUntil(quiet, {kGpu0}, [&] { return quiet.Describe().state == "ok"; }));
  EXPECT_THAT(quiet.Describe().reason, HasSubstr("escalation off (EXPANSE_PROFILING_ENABLE=0)"));
  EXPECT_THAT(helper.Describe().reason, Not(HasSubstr("escalation off")));
}

TEST_F(CounterHelperTest, GpusOfJobsRunningACudaToolAreReleasedThenResumed) {
  WriteHelper(Status(kGpu0, "ok") + Status(kGpu1, "ok"));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0, kGpu1}, [&] { return helper.Describe().state == "ok"; }));
  helper.HoldFor({kGpu1});
  helper.HoldFor({kGpu1});  // still held: not asked again
  helper.HoldFor({});
  ASSERT_TRUE(TickUntil(helper, {kGpu0, kGpu1}, [&] {
    return Slurp(dir_ / "commands").find("resume") != std::string::npos;
  }));
  EXPECT_EQ(Slurp(dir_ / "commands"), std::string("release ") + kGpu1 + "\nresume " + kGpu1 + "\n");
  EXPECT_EQ(helper.Stats()["released_to_job_tools"], 1);
}

TEST_F(CounterHelperTest, ARestartedHelperIsToldWhichGpusAreHeld) {
  WriteHelper(Status(kGpu0, "ok"), "exit 1\n");
  CounterHelper helper(Options(), clock_, clock_);
  helper.HoldFor({kGpu0});
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["restarts"] == 1; }));
  EXPECT_EQ(Slurp(dir_ / "commands"), "");  // exited before reading: the script's loop never ran
  WriteHelper(Status(kGpu0, "ok"));
  clock_.Advance(5'000);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
    return Slurp(dir_ / "commands").find("release") != std::string::npos;
  }));
  EXPECT_EQ(Slurp(dir_ / "commands"), std::string("release ") + kGpu0 + "\n");
}

TEST_F(CounterHelperTest, ANewGpuRestartsTheHelperWithTheNewSet) {
  WriteHelper(Status(kGpu0, "ok"));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Describe().state == "ok"; }));
  ASSERT_TRUE(TickUntil(helper, {kGpu0, kGpu1},
                        [&] { return Slurp(dir_ / "argv").find(kGpu1) != std::string::npos; }));
  EXPECT_EQ(helper.Stats()["restarts"], 0);  // a change of set is not a failure
}

// One good record then death (a hung call on one GPU after the others flushed): that is not a
// working helper, so the restarts keep backing off instead of starting over at 5 s each time.
TEST_F(CounterHelperTest, AHelperThatDiesRightAfterItsFirstCountersKeepsBackingOff) {
  WriteHelper(Counters(kGpu0, kNow, 0.5) +
                  R"({"kind":"fatal","reason":"hung_call in cuptiPmSamplingDecodeData"})"
                  "\n",
              "exit 3\n");
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["restarts"] == 1; }));
  clock_.Advance(5'000);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["restarts"] == 2; }));
  clock_.Advance(5'000);  // the second failure in a row waits 10 s, not 5
  for (int i = 0; i < 50; ++i) {
    helper.Tick({kGpu0}, buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string argv = Slurp(dir_ / "argv");
  EXPECT_EQ(std::count(argv.begin(), argv.end(), '\n'), 2) << helper.Stats().dump();
  clock_.Advance(5'000);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["restarts"] == 3; }));
}

TEST_F(CounterHelperTest, AGpuThatLeftIsForgotten) {
  WriteHelper(Status(kGpu0, "ok") + Status(kGpu1, "ok"));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(
      TickUntil(helper, {kGpu0, kGpu1}, [&] { return helper.Stats()["gpus"].size() == 2; }));
  helper.Tick({kGpu0}, buffer_, mu_);
  EXPECT_EQ(helper.Stats()["gpus"].size(), 1u) << helper.Stats().dump();
  EXPECT_TRUE(helper.Stats()["gpus"].contains(kGpu0));
}

// A helper that does not end (stuck in a driver call, which even SIGKILL does not end; here one
// that leaves the process group the signals go to and ignores SIGTERM) is not joined by a new
// one at each silence and backoff: no new helper until it ends, and the capability says why.
TEST_F(CounterHelperTest, AHelperThatDoesNotEndIsNotJoinedByAnother) {
  WriteHelper("", "echo $$ >> '" + dir_ / "pids" +
                      "'\nexec perl -e '$SIG{TERM}=\"IGNORE\"; setpgrp(0, getpgrp(getppid())); "
                      "sleep 600'\n");
  CounterHelper helper(Options(), clock_, clock_);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 30; ++i) {
      helper.Tick({kGpu0}, buffer_, mu_);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    clock_.Advance(31'000);  // past the silence limit: retired
    helper.Tick({kGpu0}, buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the kill's grace
    helper.Tick({kGpu0}, buffer_, mu_);
    clock_.Advance(400'000);  // past any backoff
    helper.Tick({kGpu0}, buffer_, mu_);
  }
  const std::string argv = Slurp(dir_ / "argv");
  EXPECT_EQ(std::count(argv.begin(), argv.end(), '\n'), 1) << helper.Stats().dump();
  EXPECT_EQ(helper.Stats()["stopping"], 1);
  EXPECT_THAT(helper.Describe().reason, HasSubstr("has not ended"));
  std::ifstream pids(dir_ / "pids");
  for (int pid; pids >> pid;)
    kill(pid, SIGKILL);  // the helpers this test started
}

TEST_F(CounterHelperTest, AMissingHelperIsAbsentWithWhereItWasLookedFor) {
  auto options = Options();
  options.helper = dir_ / "nowhere/expanse-cupti-helper";
  CounterHelper helper(options, clock_, clock_);
  helper.Tick({kGpu0}, buffer_, mu_);
  const Capability capability = helper.Describe();
  EXPECT_EQ(capability.state, "absent");
  EXPECT_EQ(capability.reason, "expanse-cupti-helper not found at " + options.helper);

  // At the installed place, the node's CUPTI note says why there is none.
  const std::filesystem::path node = dir_ / "prefix/lib/cupti-nodes/gpu07";
  std::filesystem::create_directories(node);
  std::ofstream(node / "NOTE") << "CUPTI: no NVIDIA driver found on this node\n";
  options.helper = node / "bin/expanse-cupti-helper";
  CounterHelper installed(options, clock_, clock_);
  installed.Tick({kGpu0}, buffer_, mu_);
  EXPECT_EQ(installed.Describe().reason, "expanse-cupti-helper not found at " + options.helper +
                                             "; CUPTI: no NVIDIA driver found on this node");
}

// A helper record names only the helper's own counter series: never an NVML series (gpu.sm_util,
// gpu.ecc_uncorrected, …), which the idle ledger, verdicts and the live detector read under the
// same key. Nor is one stamped far ahead, which would hide the real samples after it.
TEST_F(CounterHelperTest, CountersNamingNvmlSeriesOrStampedAheadAreRefused) {
  buffer_.Add({"n1", kGpu0, "gpu.sm_util"}, kNow - 1000, 80);
  WriteHelper(R"({"kind":"counters","t_ms":)" + std::to_string(kNow + 59'000) +
              R"(,"device":0,"uuid":")" + kGpu0 +
              R"(","set":"light","samples":1,"values":{"gpu.sm_util":0,"gpu.ecc_uncorrected":1e9}})"
              "\n" +
              Counters(kGpu0, kNow + 59'000, 0.5) + Counters(kGpu0, kNow, 0.25));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["refused"] >= 2; }))
      << helper.Stats().dump();
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return buffer_.samples() == 2; }));
  for (const auto& series : buffer_.Take()) {
    EXPECT_NE(series.metric, "gpu.ecc_uncorrected");
    if (series.metric == "gpu.sm_util") {
      ASSERT_EQ(series.v.size(), 1u);
      EXPECT_DOUBLE_EQ(series.v[0], 80);
      EXPECT_EQ(series.t0, kNow - 1000);
    } else {
      EXPECT_EQ(series.metric, "gpu.sm_active");
      EXPECT_EQ(series.t0, kNow);  // the one stamped 59 s ahead was refused
    }
  }
}

// About one record per GPU per sampling period (a burst of two for a late tick): a helper that
// writes more, to crowd out or skew a GPU's series, has the excess refused and counted, as has
// a record not newer than the last one accepted for that GPU.
TEST_F(CounterHelperTest, MoreThanAboutOneRecordPerGpuPerPeriodIsRefused) {
  WriteHelper(Counters(kGpu0, kNow - 3000, 0.1) + Counters(kGpu0, kNow - 2999, 0.2) +
              Counters(kGpu0, kNow - 2998, 0.9) + Counters(kGpu0, kNow - 2997, 0.9) +
              Counters(kGpu1, kNow - 2997, 0.3) + Counters(kGpu0, kNow - 1000, 0.4) +
              Counters(kGpu0, kNow - 1500, 0.9));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0, kGpu1}, [&] { return helper.Stats()["refused"] == 3; }))
      << helper.Stats().dump();
  ASSERT_TRUE(TickUntil(helper, {kGpu0, kGpu1}, [&] { return buffer_.samples() == 4; }));
  const auto series = buffer_.Take();
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].device, kGpu0);
  ASSERT_EQ(series[0].v.size(), 3u);
  EXPECT_DOUBLE_EQ(series[0].v[0], 0.1);
  EXPECT_DOUBLE_EQ(series[0].v[1], 0.2);
  EXPECT_DOUBLE_EQ(series[0].v[2], 0.4);
  EXPECT_THAT(helper.Stats()["last_refusal"].get<std::string>(), HasSubstr("not after"));
}

// A GPU held for a job's own CUDA tool is that tool's, and DCGM must leave its profiling
// counters alone even while no helper runs (here: one that exits at once, in its backoff).
TEST_F(CounterHelperTest, AGpuHeldForAJobToolHoldsTheCountersWithoutARunningHelper) {
  WriteHelper("", "exit 1\n");
  CounterHelper helper(Options(), clock_, clock_);
  helper.HoldFor({kGpu0});
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
    return helper.Stats()["restarts"] >= 1 && !helper.Stats()["running"].get<bool>();
  }));
  EXPECT_TRUE(helper.HoldsCounters());
  helper.HoldFor({});
  EXPECT_FALSE(helper.HoldsCounters());  // that helper never sampled anything
}

// A helper that sampled and died is restarted after its backoff: DCGM must not take the
// counters in between, only to be refused them (or take them from the helper) a moment later.
TEST_F(CounterHelperTest, AHelperThatSampledHoldsTheCountersThroughItsBackoff) {
  WriteHelper(Status(kGpu0, "ok"), "exit 1\n");
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
    return helper.Stats()["restarts"] >= 1 && !helper.Stats()["running"].get<bool>();
  }));
  EXPECT_TRUE(helper.HoldsCounters());
  // One that can sample nothing (no driver) leaves them to DCGM.
  WriteHelper(R"({"kind":"fatal","reason":"CUDA_ERROR_NO_DEVICE in cuInit"})"
              "\n",
              "exit 1\n");
  CounterHelper fatal(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(fatal, {kGpu0}, [&] {
    return fatal.Stats()["restarts"] >= 1 && !fatal.Stats()["running"].get<bool>();
  }));
  EXPECT_FALSE(fatal.HoldsCounters());
}

// A GPU that comes and goes (XID 79: fallen off the bus and back) must not restart the helper
// each tick: restarts for a changed set back off as failures do, and are counted.
TEST_F(CounterHelperTest, AFlappingGpuSetDoesNotRestartTheHelperEachTick) {
  WriteHelper(Status(kGpu0, "ok"));
  CounterHelper helper(Options(), clock_, clock_);
  for (int i = 0; i < 200; ++i) {
    helper.Tick(
        i % 2 == 0 ? std::vector<std::string>{kGpu0} : std::vector<std::string>{kGpu0, kGpu1},
        buffer_, mu_);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last start's argv line
  const std::string argv = Slurp(dir_ / "argv");
  EXPECT_LE(std::count(argv.begin(), argv.end(), '\n'), 2) << helper.Stats().dump();
  EXPECT_GE(helper.Stats()["set_changes"], 1) << helper.Stats().dump();
  EXPECT_EQ(helper.Stats()["restarts"], 0);
  // Once the backoff has passed, the set it is given now is taken.
  clock_.Advance(5'000);
  ASSERT_TRUE(TickUntil(helper, {kGpu1}, [&] {
    return Slurp(dir_ / "argv").find(std::string("--devices=") + kGpu1 + " ") != std::string::npos;
  })) << Slurp(dir_ / "argv");
}

// EXPANSE_CUPTI_HELPER naming a directory: nothing is run, and the capability says why.
TEST_F(CounterHelperTest, AHelperPathThatIsNotARegularFileIsNotRun) {
  auto options = Options();
  options.helper = dir_.path();
  CounterHelper helper(options, clock_, clock_);
  helper.Tick({kGpu0}, buffer_, mu_);
  const Capability capability = helper.Describe();
  EXPECT_EQ(capability.state, "absent");
  EXPECT_EQ(capability.reason,
            "expanse-cupti-helper at " + options.helper + " is not a regular file");
  EXPECT_FALSE(helper.Stats()["running"].get<bool>());
}

// EXPANSE_CUPTI_HELPER as a relative path (the settings keep it, so that a typo does not stop
// the daemon): it would resolve against the daemon's working directory, or PATH, so it is not
// run, and the capability says why.
TEST_F(CounterHelperTest, ARelativeHelperPathIsNotRunAndTheCapabilitySaysWhy) {
  WriteHelper(Status(kGpu0, "ok"));
  for (const std::string relative : {"expanse-cupti-helper", "bin/expanse-cupti-helper", "sh"}) {
    auto options = Options();
    options.helper = relative;
    CounterHelper helper(options, clock_, clock_);
    for (int i = 0; i < 3; ++i) {
      helper.Tick({kGpu0}, buffer_, mu_);
      clock_.Advance(600'000);
    }
    const Capability capability = helper.Describe();
    EXPECT_EQ(capability.state, "absent");
    EXPECT_EQ(capability.reason,
              "EXPANSE_CUPTI_HELPER=" + relative + " is not an absolute path; not run");
    EXPECT_FALSE(helper.Stats()["running"].get<bool>());
    EXPECT_FALSE(helper.HoldsCounters());
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "argv"));
}

// The hold through a backoff (above) lasts only for the backoff after a helper that sampled:
// a helper that then ends without saying anything of its GPUs (a crash loop, a failed start, a
// binary removed or replaced by a directory) gives the counters back to DCGM.
TEST_F(CounterHelperTest, TheHoldThroughABackoffEndsWithAHelperThatReportsNothing) {
  WriteHelper(Status(kGpu0, "ok"), "exit 1\n");
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
    return helper.Stats()["restarts"] >= 1 && !helper.Stats()["running"].get<bool>();
  }));
  EXPECT_TRUE(helper.HoldsCounters());
  std::filesystem::remove(helper_);
  for (int restarts = 2; restarts <= 4; ++restarts) {
    clock_.Advance(600'000);
    ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
      return helper.Stats()["restarts"] >= restarts && !helper.Stats()["running"].get<bool>();
    })) << helper.Stats().dump();
    EXPECT_FALSE(helper.HoldsCounters()) << restarts;
  }
  // A helper that samples again holds them again through its backoff.
  WriteHelper(Status(kGpu0, "ok"), "exit 1\n");
  clock_.Advance(600'000);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
    return helper.Stats()["restarts"] >= 5 && !helper.Stats()["running"].get<bool>();
  })) << helper.Stats().dump();
  EXPECT_TRUE(helper.HoldsCounters());
  // One that starts and dies saying nothing (a crash loop) ends the hold as well.
  WriteHelper("", "exit 1\n");
  clock_.Advance(600'000);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] {
    return helper.Stats()["restarts"] >= 6 && !helper.Stats()["running"].get<bool>();
  })) << helper.Stats().dump();
  EXPECT_FALSE(helper.HoldsCounters());
}

// A value beyond its series' range (DRAM throughput bursting above its sustained peak) drops
// that value only: the record's other series are kept, and the drop is counted.
TEST_F(CounterHelperTest, AValueOutOfRangeIsDroppedAndCountedAndTheOthersKept) {
  WriteHelper(
      R"({"kind":"counters","t_ms":)" + std::to_string(kNow) + R"(,"device":0,"uuid":")" + kGpu0 +
      R"(","set":"light","samples":10,"values":{"gpu.dram_throughput":1.2,"gpu.sm_active":0.5}})"
      "\n");
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return buffer_.samples() == 1; }));
  const auto series = buffer_.Take();
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].metric, "gpu.sm_active");
  EXPECT_DOUBLE_EQ(series[0].v[0], 0.5);
  const auto stats = helper.Stats();
  EXPECT_EQ(stats["records"], 1);
  EXPECT_EQ(stats["refused"], 0);
  ASSERT_TRUE(stats.contains("dropped_values")) << stats.dump();
  EXPECT_EQ(stats["dropped_values"], 1);
  ASSERT_TRUE(stats.contains("last_dropped_value")) << stats.dump();
  EXPECT_THAT(stats["last_dropped_value"].get<std::string>(),
              HasSubstr(std::string("gpu.dram_throughput of ") + kGpu0));
}

// A helper whose every value is out of range (a unit bug: 57 for 0.57) stores nothing: it is
// not "ok", and it does not count as working (which would reset its backoff).
TEST_F(CounterHelperTest, AHelperSendingOnlyValuesOutOfRangeIsNotOk) {
  WriteHelper(Status(kGpu0, "ok") + Counters(kGpu0, kNow, 57.0));
  CounterHelper helper(Options(), clock_, clock_);
  ASSERT_TRUE(TickUntil(helper, {kGpu0}, [&] { return helper.Stats()["dropped_values"] == 1; }))
      << helper.Stats().dump();
  EXPECT_EQ(buffer_.samples(), 0u);
  const Capability capability = helper.Describe();
  EXPECT_EQ(capability.state, "degraded");
  EXPECT_THAT(capability.reason, HasSubstr("sends only values out of their range"));
  EXPECT_THAT(capability.reason, HasSubstr("gpu.sm_active of"));
}

TEST(FindCuptiHelperTest, SettingFirstThenThePerNodeInstall) {
  RuntimeSettings settings;
  EXPECT_EQ(FindCuptiHelper(settings, "/srv/expanse", "gpu01"),
            "/srv/expanse/lib/cupti-nodes/gpu01/bin/expanse-cupti-helper");
  EXPECT_EQ(FindCuptiHelper(settings, "", "gpu01"), "");
  settings.cupti_helper = "/opt/helper";
  EXPECT_EQ(FindCuptiHelper(settings, "/srv/expanse", "gpu01"), "/opt/helper");
  // A relative setting is kept as it is: the helper refuses it and says why.
  settings.cupti_helper = "bin/helper";
  EXPECT_EQ(FindCuptiHelper(settings, "/srv/expanse", "gpu01"), "bin/helper");
}

}  // namespace
}  // namespace counter_helper_test
}  // namespace expanse::agent
