#include "agent/py_stacks.h"

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "pystack/python_process_for_test.h"

namespace expanse::agent {
namespace py_stacks_test {
namespace {

using ::testing::HasSubstr;

constexpr char kScript[] = R"(import os, time
def waiting_for_the_gpu():
    os.write(3, b"ready\n")
    while True:
        time.sleep(0.05)
waiting_for_the_gpu()
)";
// The frame of kScript's sleep, as folded stacks name it.
constexpr char kSleepingFrame[] = "job.py:waiting_for_the_gpu:5";

PyStacksOptions Options() {
  PyStacksOptions o;
  o.hostname = "w1";
  o.settings.pystacks_backend = "native";
  o.settings.pystacks_window_seconds = 10;
  return o;
}

// A real Python process of job 7: sampled by the policy, folded into the job's window, and
// handed out as ingest stacks entries once asked for all windows.
TEST(PyStacksCollectorTest, SamplesAJobsPythonProcessIntoItsWindow) {
  expanse::testing::TempDir dir("expanse_pystacks");
  const std::string script = dir.Write("job.py", kScript);
  pystack::test_util::ChildProcess python;
  ASSERT_TRUE(python.Start({pystack::test_util::kDebianPython, script}));
  ASSERT_EQ(python.ReadLine(), "ready");

  ManualClock clock(1'800'000'000'000);
  PyStacksCollector collector(Options(), clock);
  collector.SetJobs({{"7", {python.pid()}, true, true}});
  // The process may still be between "ready" and the sleep (line 3 or 4 of the script):
  // sample until the sleeping line shows.
  nlohmann::json stacks = nlohmann::json::array();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string seen;
  while (std::chrono::steady_clock::now() < deadline) {
    collector.TickOnce();
    clock.Advance(1000);  // the base rate is 1 Hz: one sample per tick
    for (const wire::StackRecord& e : collector.TakeStacks(/*all=*/true))
      stacks.push_back(wire::Encode(e));
    seen = stacks.dump();
    if (seen.find(kSleepingFrame) != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_THAT(seen, HasSubstr(kSleepingFrame)) << seen;
  const auto& entry = stacks.back();
  EXPECT_EQ(entry["job_id"], "7");
  EXPECT_EQ(entry["host"], "w1");
  EXPECT_EQ(entry["gpu_idle"], true);
  EXPECT_GT(entry["window_end_ms"].get<int64_t>(), entry["window_start_ms"].get<int64_t>());
  EXPECT_EQ(entry["window_end_ms"].get<int64_t>() - entry["window_start_ms"].get<int64_t>(),
            10'000);
  EXPECT_EQ(collector.Describe().state, "ok");
  EXPECT_GE(collector.Stats()["samples_ok"].get<uint64_t>(), 1u);
}

// A launcher (here sh; in practice a pyenv shim or a wrapper script) that exec's into Python
// under the same pid: found not to be Python first, sampled once it is.
TEST(PyStacksCollectorTest, AWrapperThatExecsIntoPythonIsSampledAfterTheExec) {
  expanse::testing::TempDir dir("expanse_pystacks");
  const std::string script = dir.Write("job.py", kScript);
  // The launcher waits on a FIFO the test writes once it has seen the launcher, not on a timer.
  const std::string go = dir / "go";
  ASSERT_EQ(::mkfifo(go.c_str(), 0600), 0);
  pystack::test_util::ChildProcess wrapper;
  ASSERT_TRUE(wrapper.Start({"/bin/sh", "-c",
                             "echo launcher >&3; read line < " + go + "; exec " +
                                 pystack::test_util::kDebianPython + " " + script}));
  ASSERT_EQ(wrapper.ReadLine(), "launcher");
  ManualClock clock(1'800'000'000'000);
  PyStacksCollector collector(Options(), clock);
  collector.SetJobs({{"9", {wrapper.pid()}, false, false}});
  collector.TickOnce();
  ASSERT_EQ(collector.Stats()["failures_by_reason"]["not_python"], 1u) << collector.Stats();
  std::ofstream(go) << "go\n";             // the launcher may exec now
  ASSERT_EQ(wrapper.ReadLine(), "ready");  // now Python, same pid
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         seen.find(kSleepingFrame) == std::string::npos) {
    for (int i = 0; i < 10; ++i) {  // the executable is looked at about once a second
      collector.TickOnce();
      clock.Advance(100);
    }
    for (const wire::StackRecord& e : collector.TakeStacks(/*all=*/true))
      seen += wire::Encode(e).dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(seen, HasSubstr(kSleepingFrame));
}

// A live burst the controller asked for: the job's stacks go into one window starting at the
// controller's trigger time, apart from the regular windows, even while its GPUs are busy (a
// hung collective), and come out once the burst is over. Refusals say why.
TEST(PyStacksCollectorTest, ALiveBurstFoldsIntoTheTriggersWindow) {
  expanse::testing::TempDir dir("expanse_pystacks");
  const std::string script = dir.Write("job.py", kScript);
  pystack::test_util::ChildProcess python;
  ASSERT_TRUE(python.Start({pystack::test_util::kDebianPython, script}));
  ASSERT_EQ(python.ReadLine(), "ready");

  ManualClock clock(1'800'000'000'000);
  PyStacksOptions options = Options();
  options.settings.pystacks_burst_seconds = 5;
  options.settings.pystacks_cpu_percent = 10;  // sanitizer builds read slowly: keep 10 Hz
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  PyStacksCollector collector(options, clock);
  EXPECT_EQ(collector.RequestBurst("7", 1'799'999'998'123).reason(), "job_not_here");
  collector.SetJobs({{"7", {python.pid()}, true, /*gpus_idle=*/false}});
  const int64_t trigger_ms = 1'799'999'998'123;  // the controller's clock, 2 s behind ours
  ASSERT_TRUE(collector.RequestBurst("7", trigger_ms).ok());
  EXPECT_EQ(collector.RequestBurst("7", trigger_ms).reason(), "in_burst");
  // Ten ticks at the burst rate (10 Hz) within the burst's 5 s: every one samples.
  for (int i = 0; i < 10; ++i) {
    collector.TickOnce();
    clock.Advance(100);
  }
  EXPECT_TRUE(collector.TakeStacks(/*all=*/false).empty());  // the burst runs for 5 s
  clock.Advance(4100);
  std::vector<wire::StackRecord> stacks = collector.TakeStacks(/*all=*/false);
  ASSERT_FALSE(stacks.empty());
  int64_t counted = 0;
  for (const wire::StackRecord& e : stacks) {
    EXPECT_EQ(e.job_id, "7");
    EXPECT_EQ(e.window_start_ms, trigger_ms);
    EXPECT_EQ(e.window_end_ms, trigger_ms + 5000);
    counted += e.count;
  }
  EXPECT_GE(counted, 5);  // the burst rate, not the base rate's one sample a second
  EXPECT_EQ(collector.Stats()["live_bursts"], 1u);
  EXPECT_EQ(collector.Stats()["live_bursts_empty"], 0u);
  EXPECT_THAT(lines, ::testing::Contains("stack burst for job 7 ended: " + std::to_string(counted) +
                                         " sample(s)"));

  options.settings.pystacks_burst_seconds = 0;
  PyStacksCollector no_bursts(options, clock);
  no_bursts.SetJobs({{"7", {python.pid()}, true, false}});
  EXPECT_EQ(no_bursts.RequestBurst("7", trigger_ms).reason(), "bursts_off");
}

// A burst that read nothing says so, with the failure that left it empty.
TEST(PyStacksCollectorTest, AnEmptyLiveBurstIsLoggedWithWhy) {
  pystack::test_util::ChildProcess sleeper;
  ASSERT_TRUE(sleeper.Start({"/bin/sleep", "60"}));
  ManualClock clock(1'800'000'000'000);
  PyStacksOptions options = Options();
  options.settings.pystacks_burst_seconds = 5;
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  PyStacksCollector collector(options, clock);
  collector.SetJobs({{"7", {sleeper.pid()}, true, false}});
  ASSERT_TRUE(collector.RequestBurst("7", 1'799'999'999'123).ok());
  for (int i = 0; i < 50; ++i) {
    collector.TickOnce();
    clock.Advance(100);
  }
  EXPECT_TRUE(collector.TakeStacks(/*all=*/false).empty());
  EXPECT_EQ(collector.Stats()["live_bursts_empty"], 1u);
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back(), HasSubstr("stack burst for job 7 ended: 0 sample(s), 1 failed read(s), "
                                      "the last: py_stacks: "));
  EXPECT_THAT(lines.back(), HasSubstr(std::to_string(sleeper.pid())));
}

// A process that is not Python is not a capability problem; a bad EXPANSE_PYSPY is named.
TEST(PyStacksCollectorTest, DescribesWhatItCannotDo) {
  ManualClock clock(1'800'000'000'000);
  PyStacksOptions options = Options();
  options.settings.pystacks_backend = "py-spy";
  options.settings.pyspy = "/nonexistent/py-spy";
  PyStacksCollector no_pyspy(options, clock);
  EXPECT_EQ(no_pyspy.Describe().state, "absent");
  EXPECT_THAT(no_pyspy.Describe().reason, HasSubstr("EXPANSE_PYSPY"));

  options = Options();
  options.settings.pystacks_enable = false;
  EXPECT_EQ(PyStacksCollector(options, clock).Describe().state, "disabled");

  PyStacksCollector native(Options(), clock);
  native.SetJobs({{"8", {getpid()}, false, false}});  // this test binary: not Python
  native.TickOnce();
  EXPECT_EQ(native.Describe().state, "ok") << native.Describe().reason;
  EXPECT_EQ(native.Stats()["samples_failed"], 1u);
  EXPECT_TRUE(native.TakeStacks(true).empty());
}

}  // namespace
}  // namespace py_stacks_test
}  // namespace expanse::agent
