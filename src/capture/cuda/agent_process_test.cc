// libexpanse-agent.so injected into a job process as the CUDA driver injects it: the fake
// libcuda.so.1 (tests/fakes/cupti) loads CUDA_INJECTION64_PATH at cuInit and calls
// InitializeInjection; the agent subscribes to the fake libcupti's Activity API, whose "GPU"
// repeats the scenario's loop. Real dlopen, a real (unsanitized) job process, real files in a
// control directory laid out as on a node.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "capture/capture_trigger.h"
#include "core/subprocess.h"
#include "core/test_temp_dir.h"

extern char** environ;

namespace expanse::capture {
namespace agent_process_test {
namespace {

using ::expanse::testing::TempDir;
using std::chrono::milliseconds;

const std::string kFakes = std::string(EXPANSE_FAKES_DIR) + "/cupti";

// One iteration every 50 ms: a 2 ms GEMM, a 0.5 ms ReLU, a 1 MiB host-to-device copy, a device
// synchronisation, an NVTX "step" range and a mark.
nlohmann::json TrainingLoop() {
  return {{"devices", {{{"name", "NVIDIA H200"}}}},
          {"activity",
           {{"loop_ms", 50},
            {"loop",
             {{{"kind", "kernel"},
               {"name", "_Z9sgemm_128PfS_"},
               {"duration_us", 2000},
               {"grid", {128, 1, 1}},
               {"block", {256, 1, 1}}},
              {{"kind", "kernel"}, {"name", "relu"}, {"duration_us", 500}},
              {{"kind", "memcpy"}, {"copy", "htod"}, {"bytes", 1048576}, {"duration_us", 100}},
              {{"kind", "sync"}, {"type", "device"}, {"duration_us", 3000}},
              {{"kind", "nvtx_range"}, {"name", "step"}, {"duration_us", 6000}},
              {{"kind", "nvtx_mark"}, {"name", "epoch"}}}}}}};
}

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(control_ / "capture");
    std::filesystem::create_directories(control_ / "phase-b");
    // The node's layout: jobs may create in the spool but not list it.
    std::filesystem::permissions(control_ / "capture", std::filesystem::perms(01733));
    SetScenario(TrainingLoop());
  }

  void SetScenario(const nlohmann::json& scenario) {
    std::ofstream(dir_ / "scenario.tmp") << scenario.dump();
    std::filesystem::rename(dir_ / "scenario.tmp", dir_ / "scenario.json");
  }

  std::vector<std::string> Env(const std::vector<std::string>& extra) const {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      // The sanitizer runtime's options are this test's, not the job's.
      if (entry.rfind("LD_PRELOAD=", 0) != 0 && entry.rfind("SLURM_", 0) != 0)
        env.push_back(entry);
    }
    env.push_back("LD_LIBRARY_PATH=" + kFakes);
    env.push_back("EXPANSE_FAKE_CUPTI_SCENARIO=" + (dir_ / "scenario.json"));
    env.push_back("EXPANSE_FAKE_CUPTI_TRACE=" + (dir_ / "trace.txt"));
    env.push_back("EXPANSE_CONTROL_DIR=" + control_.path());
    env.push_back("EXPANSE_CAPTURE_WINDOW_MS=500");
    env.push_back("EXPANSE_CAPTURE_TRACE_MS=600");
    env.push_back("SLURM_JOB_ID=4242");
    env.push_back("SLURM_PROCID=0");
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  // Runs the fake job; `inject` sets CUDA_INJECTION64_PATH to the agent.
  SubprocessResult RunJob(std::vector<std::string> args, bool inject,
                          std::vector<std::string> extra_env = {}) {
    if (inject) {
      extra_env.push_back("CUDA_INJECTION64_PATH=" + std::string(EXPANSE_AGENT_LIBRARY));
      // The fake libcupti, whatever a staged CUPTI archive put beside the agent in the build.
      if (std::none_of(extra_env.begin(), extra_env.end(), [](const std::string& e) {
            return e.rfind("EXPANSE_AGENT_CUPTI=", 0) == 0;
          }))
        extra_env.push_back("EXPANSE_AGENT_CUPTI=" + kFakes + "/libcupti.so.13");
    }
    SubprocessOptions options;
    options.argv = wrapper_;
    options.argv.push_back(EXPANSE_CUDA_JOB);
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = Env(extra_env);
    options.timeout = milliseconds(60'000);
    auto result = RunSubprocess(options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SubprocessResult{};
  }

  std::vector<std::string> Spooled(const std::string& prefix) const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(control_ / "capture")) {
      const std::string name = e.path().filename();
      if (name.rfind(prefix, 0) == 0)
        names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  nlohmann::json Json(const std::string& name) const {
    std::ifstream in(control_ / ("capture/" + name));
    return nlohmann::json::parse(in);
  }

  std::string Text(const std::string& path) const {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string AgentLogs() const { return Joined("agent-"); }
  std::string Joined(const std::string& prefix) const {
    std::string all;
    for (const auto& name : Spooled(prefix))
      all += Text(control_ / ("capture/" + name));
    return all;
  }

  TempDir dir_;
  TempDir control_;
  std::vector<std::string> wrapper_;  // runs the job (e.g. without capabilities); none: directly
};

TEST_F(AgentProcessTest, AggregatesEveryWindowOfTheJobsActivity) {
  const SubprocessResult job = RunJob({"--ms", "2000"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_NE(Text(dir_ / "trace.txt").find("cuInit.injection dev=- returned=1"), std::string::npos);
  const auto files = Spooled("agg-4242-");
  ASSERT_GE(files.size(), 3u) << AgentLogs();
  uint64_t gemms = 0, relus = 0, copies = 0, copied = 0, syncs = 0, steps = 0, marks = 0;
  uint64_t last_end = 0;
  for (const auto& name : files) {
    const nlohmann::json doc = Json(name);
    EXPECT_EQ(doc.at("format"), "expanse-capture-aggregate/1");
    EXPECT_EQ(doc.at("job_id"), "4242");
    EXPECT_EQ(doc.at("rank"), "0");
    EXPECT_EQ(doc.at("uid"), getuid());
    EXPECT_GE(doc.at("window_start_ms").get<uint64_t>(), last_end);
    last_end = doc.at("window_end_ms").get<uint64_t>();
    for (const auto& k : doc.at("kernels").at("top")) {
      if (k.at("name") == "_Z9sgemm_128PfS_") {
        gemms += k.at("count").get<uint64_t>();
        EXPECT_EQ(k.at("gpu_ns").get<uint64_t>(), k.at("count").get<uint64_t>() * 2'000'000);
      } else if (k.at("name") == "relu") {
        relus += k.at("count").get<uint64_t>();
      } else {
        ADD_FAILURE() << "unexpected kernel " << k.dump();
      }
    }
    if (doc.at("memcpy").contains("htod")) {
      copies += doc.at("memcpy").at("htod").at("count").get<uint64_t>();
      copied += doc.at("memcpy").at("htod").at("bytes").get<uint64_t>();
    }
    if (doc.at("sync").contains("device"))
      syncs += doc.at("sync").at("device").at("count").get<uint64_t>();
    for (const auto& r : doc.at("nvtx").at("ranges")) {
      EXPECT_EQ(r.at("name"), "step");
      EXPECT_EQ(r.at("wall_ns").get<uint64_t>(), r.at("count").get<uint64_t>() * 6'000'000);
      steps += r.at("count").get<uint64_t>();
    }
    marks += doc.at("nvtx").at("marks").get<uint64_t>();
    EXPECT_EQ(doc.at("dropped_records"), 0);
  }
  // Two seconds of 50 ms iterations, every activity of each iteration accounted for once.
  EXPECT_GE(gemms, 30u);
  EXPECT_EQ(relus, gemms);
  EXPECT_EQ(copies, gemms);
  EXPECT_EQ(copied, gemms * 1048576);
  EXPECT_EQ(syncs, gemms);
  EXPECT_EQ(steps, gemms);
  EXPECT_EQ(marks, gemms);
  // Timestamps are Unix time (the fake's CUPTI clock is not), so windows and records agree.
  const auto first = Json(files.front());
  EXPECT_GT(first.at("window_start_ms").get<uint64_t>(), 1'700'000'000'000u);
  // No trigger, no trace, and no PC sampling (a Phase B window's alone); nothing went wrong.
  EXPECT_TRUE(Spooled("seg-").empty());
  EXPECT_EQ(Text(dir_ / "trace.txt").find("cuptiPCSampling"), std::string::npos);
  EXPECT_EQ(AgentLogs(), "");
}

TEST_F(AgentProcessTest, APhaseBTriggerProducesATraceSegmentOnce) {
  const uint64_t now_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  std::ofstream(control_ / "phase-b/4242")
      << TriggerJson({"idle-1", now_ms + 60'000, "gpu_idle", {"GPU-x"}});
  const SubprocessResult job = RunJob({"--ms", "2500"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  const auto segments = Spooled("seg-4242-");
  ASSERT_EQ(segments.size(), 1u) << AgentLogs();
  const nlohmann::json doc = Json(segments[0]);
  const auto& other = doc.at("otherData");
  EXPECT_EQ(other.at("format"), "expanse-trace-segment/1");
  EXPECT_EQ(other.at("trigger").at("id"), "idle-1");
  EXPECT_EQ(other.at("trigger").at("reason"), "gpu_idle");
  const uint64_t start = other.at("window_start_ms"), end = other.at("window_end_ms");
  EXPECT_GE(end - start, 600u);
  EXPECT_LE(end - start, 1700u);  // the trace window, plus at most a tick
  size_t kernels = 0;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("cat") != "kernel")
      continue;
    ++kernels;
    const double ts = e.at("ts");
    EXPECT_GE(ts, static_cast<double>(start) * 1000 - 100'000) << e.dump();
    EXPECT_LE(ts, static_cast<double>(end) * 1000 + 60'000) << e.dump();
  }
  EXPECT_GE(kernels, 10u);
  EXPECT_EQ(kernels % 2, 0u) << "gemm and relu come in pairs";
}

// How many times `needle` stands in `text` (trace lines of one call).
size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

// The training loop's two kernels as CUPTI's PC sampling sees them.
nlohmann::json WithPcSampling(nlohmann::json scenario) {
  scenario["pc_sampling"] = {
      {"stall_reasons",
       {{"2", "smsp__pcsamp_warps_issue_stalled_long_scoreboard"},
        {"9", "smsp__pcsamp_warps_issue_stalled_selected"}}},
      {"pcs",
       {{{"function", "_Z9sgemm_128PfS_"},
         {"pc_offset", 512},
         {"cubin_crc", 41},
         {"stalls", {{"2", 700}, {"9", 100}}}},
        {{"function", "relu"}, {"pc_offset", 64}, {"cubin_crc", 41}, {"stalls", {{"9", 60}}}}}},
      {"pcs_per_get_data", 1}};
  return scenario;
}

// The trigger of a gpu_idle escalation of job 4242, a minute long from now.
void WriteTrigger(const std::filesystem::path& control) {
  const uint64_t now_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  std::ofstream(control / "phase-b/4242")
      << TriggerJson({"idle-1", now_ms + 60'000, "gpu_idle", {"GPU-x"}});
}

TEST_F(AgentProcessTest, APhaseBWindowCarriesWhereTheKernelsWarpsStalled) {
  SetScenario(WithPcSampling(TrainingLoop()));
  WriteTrigger(control_.path());
  const SubprocessResult job = RunJob({"--ms", "2500"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  const auto segments = Spooled("seg-4242-");
  ASSERT_EQ(segments.size(), 1u) << AgentLogs();
  const nlohmann::json pc = Json(segments[0]).at("otherData").at("pc_sampling");
  EXPECT_EQ(pc.at("state"), "sampled") << pc.dump();
  EXPECT_EQ(pc.at("total_samples"), 860u) << pc.dump();
  EXPECT_EQ(pc.at("stall_reasons").at("smsp__pcsamp_warps_issue_stalled_long_scoreboard"), 700u);
  ASSERT_EQ(pc.at("functions").size(), 2u);
  EXPECT_EQ(pc.at("functions").at(0).at("name"), "_Z9sgemm_128PfS_");
  EXPECT_EQ(pc.at("functions").at(0).at("pcs").at(0).at("pc_offset"), 512u);
  EXPECT_EQ(
      pc.at("functions").at(1).at("stall_reasons").at("smsp__pcsamp_warps_issue_stalled_selected"),
      60u);
  // Enabled once for the window, on the job's context made current on the agent's own thread,
  // disabled before the segment closed, and the context released.
  const std::string trace = Text(dir_ / "trace.txt");
  const size_t enables = Occurrences(trace, "cuptiPCSamplingEnable");
  EXPECT_EQ(enables, 1u) << trace;
  EXPECT_NE(trace.find("cuptiPCSamplingDisable"), std::string::npos) << trace;
  EXPECT_NE(trace.find("cuDevicePrimaryCtxRelease_v2 dev=0 retained=0"), std::string::npos);
  EXPECT_EQ(trace.find("current=no"), std::string::npos) << trace;
  EXPECT_EQ(trace.find("pc_enabled_at_finalize"), std::string::npos) << trace;
  EXPECT_EQ(AgentLogs(), "");
}

TEST_F(AgentProcessTest, ANodeThatRestrictsProfilingGetsActivityAndNvtxOnly) {
  SetScenario(WithPcSampling(TrainingLoop()));
  WriteTrigger(control_.path());
  std::ofstream(dir_ / "params") << "RmLogonRC: 1\nRmProfilingAdminOnly: 1\n";
  // A job's process as the node runs it: no capabilities (this test may run as root).
  wrapper_ = {"/usr/bin/setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"};
  const SubprocessResult job =
      RunJob({"--ms", "2500"}, true, {"EXPANSE_NVIDIA_PARAMS_FILE=" + (dir_ / "params")});
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  const auto segments = Spooled("seg-4242-");
  ASSERT_EQ(segments.size(), 1u) << AgentLogs();
  const nlohmann::json doc = Json(segments[0]);
  const nlohmann::json pc = doc.at("otherData").at("pc_sampling");
  EXPECT_EQ(pc.at("state"), "restricted") << pc.dump();
  EXPECT_NE(pc.at("reason").get<std::string>().find("RmProfilingAdminOnly=1"), std::string::npos);
  EXPECT_GE(doc.at("otherData").at("events").get<uint64_t>(), 10u) << "the activity is traced";
  EXPECT_EQ(Text(dir_ / "trace.txt").find("cuptiPCSampling"), std::string::npos)
      << "not even tried";
  EXPECT_NE(AgentLogs().find("PC sampling not allowed here"), std::string::npos) << AgentLogs();
}

TEST_F(AgentProcessTest, CuptiRefusingPcSamplingLeavesTheTraceWhole) {
  nlohmann::json scenario = WithPcSampling(TrainingLoop());
  scenario["pc_sampling"]["enable_error"] = 35;
  SetScenario(scenario);
  WriteTrigger(control_.path());
  const SubprocessResult plain = RunJob({"--ms", "2500"}, false);
  const SubprocessResult job = RunJob({"--ms", "2500"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_EQ(job.stdout_text, plain.stdout_text);
  const auto segments = Spooled("seg-4242-");
  ASSERT_EQ(segments.size(), 1u) << AgentLogs();
  const nlohmann::json doc = Json(segments[0]);
  const nlohmann::json pc = doc.at("otherData").at("pc_sampling");
  EXPECT_EQ(pc.at("state"), "restricted") << pc.dump();
  EXPECT_EQ(pc.at("reason"), "cuptiPCSamplingEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  EXPECT_GE(doc.at("otherData").at("events").get<uint64_t>(), 10u);
  const std::string trace = Text(dir_ / "trace.txt");
  EXPECT_NE(trace.find("cuDevicePrimaryCtxRelease_v2 dev=0 retained=0"), std::string::npos);
  const size_t enables = Occurrences(trace, "cuptiPCSamplingEnable");
  EXPECT_EQ(enables, 1u) << "tried once per window, not every tick: " << trace;
}

TEST_F(AgentProcessTest, TheJobsOutputIsTheSameWithAndWithoutTheAgent) {
  const SubprocessResult plain = RunJob({"--ms", "600", "--threads", "4", "--fork"}, false);
  const SubprocessResult injected = RunJob({"--ms", "600", "--threads", "4", "--fork"}, true);
  ASSERT_TRUE(plain.Succeeded()) << plain.stderr_text;
  ASSERT_TRUE(injected.Succeeded()) << injected.stderr_text;
  EXPECT_EQ(injected.stdout_text, plain.stdout_text);
  EXPECT_EQ(injected.stderr_text, plain.stderr_text);
  // Injected once for four threads; the forked child wrote nothing of its own.
  const std::string trace = Text(dir_ / "trace.txt");
  const size_t injections = Occurrences(trace, "cuInit.injection");
  EXPECT_EQ(injections, 1u) << trace;
  std::set<std::string> pids;
  for (const auto& name : Spooled("agg-"))
    pids.insert(std::to_string(Json(name).at("pid").get<int>()));
  EXPECT_EQ(pids.size(), 1u);
}

// A process that execs a new image (a launcher script, `exec python …`): same pid, the agent
// injected afresh into the new image at its cuInit, the job's output unaltered, and the two
// images' windows both spooled (one pid, so their names must not collide).
TEST_F(AgentProcessTest, AnExecdImageIsInjectedAfreshAndBothAreSpooled) {
  const SubprocessResult plain = RunJob({"--ms", "600", "--exec"}, false);
  const SubprocessResult injected = RunJob({"--ms", "600", "--exec"}, true);
  ASSERT_TRUE(plain.Succeeded()) << plain.stderr_text;
  ASSERT_TRUE(injected.Succeeded()) << injected.stderr_text;
  EXPECT_EQ(injected.stdout_text, plain.stdout_text);
  EXPECT_EQ(Occurrences(plain.stdout_text, "cuInit=0"), 2u) << plain.stdout_text;
  const std::string trace = Text(dir_ / "trace.txt");
  EXPECT_EQ(Occurrences(trace, "cuInit.injection"), 2u) << trace;
  const std::vector<std::string> windows = Spooled("agg-");
  EXPECT_EQ(windows.size(), 2u) << AgentLogs();
  for (const auto& name : windows)
    EXPECT_GT(Json(name).at("kernels").at("count").get<int64_t>(), 0) << name;
}

TEST_F(AgentProcessTest, AJobWhoseAgentHasNoWorkingCuptiRunsUnaltered) {
  const SubprocessResult plain = RunJob({"--ms", "300"}, false);
  // Only libcuda on the library path; the override is not a library. What remains is whatever
  // libcupti the machine has by name: none (the agent notes it) or one without a driver behind
  // it, like the toolkit's on a build machine (CUPTI refuses every kind; the agent notes that).
  TempDir only_cuda;
  std::filesystem::create_symlink(kFakes + "/libcuda.so.1", only_cuda / "libcuda.so.1");
  const std::string not_a_library = only_cuda.Write("libcupti.so", "not an ELF file");
  const SubprocessResult job =
      RunJob({"--ms", "300"}, true,
             {"LD_LIBRARY_PATH=" + only_cuda.path(), "EXPANSE_AGENT_CUPTI=" + not_a_library});
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_EQ(job.stdout_text, plain.stdout_text);
  EXPECT_EQ(job.stderr_text, plain.stderr_text);
  EXPECT_TRUE(Spooled("agg-").empty());
  const std::string logs = AgentLogs();
  EXPECT_TRUE(logs.find("capture off: no usable libcupti (" + not_a_library) != std::string::npos ||
              logs.find("kernels not captured: cuptiActivityEnable") != std::string::npos)
      << logs;
}

TEST_F(AgentProcessTest, CuptiRefusingTheSubscriptionLeavesTheJobAlone) {
  nlohmann::json scenario = TrainingLoop();
  scenario["activity"]["register_error"] = 35;  // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
  SetScenario(scenario);
  const SubprocessResult job = RunJob({"--ms", "300"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_TRUE(Spooled("agg-").empty());
  EXPECT_NE(AgentLogs().find("cuptiActivityRegisterCallbacks: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
            std::string::npos)
      << AgentLogs();
}

TEST_F(AgentProcessTest, AKindCuptiWillNotEnableIsNotedAndTheRestCaptured) {
  nlohmann::json scenario = TrainingLoop();
  scenario["activity"]["enable_errors"] = {{"12", 35}};  // MARKER: NVTX
  SetScenario(scenario);
  const SubprocessResult job = RunJob({"--ms", "1200"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_NE(AgentLogs().find("nvtx not captured"), std::string::npos) << AgentLogs();
  ASSERT_FALSE(Spooled("agg-").empty());
  const std::string all = Joined("agg-");
  EXPECT_NE(all.find("_Z9sgemm_128PfS_"), std::string::npos);
  EXPECT_EQ(all.find("\"step\""), std::string::npos);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// Recording in bursts (a budget far below what recording costs) detaches CUPTI between them at
// the exit of one of the job's CUDA calls, so the job's calls there find no CUPTI at all; each
// burst attaches it again, and its records still reach the aggregates, which say how much of
// each window was observed.
TEST_F(AgentProcessTest, BurstsDetachCuptiBetweenThemAtACudaCallsExit) {
  const std::vector<std::string> args = {"--ms", "3000", "--launches", "20", "--report-cupti"};
  const SubprocessResult plain = RunJob(args, false);
  const SubprocessResult job = RunJob(
      args, true, {"EXPANSE_CAPTURE_BUDGET_PERMILLE=20", "EXPANSE_CAPTURE_RECORD_COST_NS=1000000"});
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_EQ(job.stdout_text, plain.stdout_text);
  const std::string trace = Text(dir_ / "trace.txt");
  EXPECT_GE(Count(trace, "cuptiFinalize dev=- site=api_exit"), 2u) << trace;
  EXPECT_EQ(Count(trace, "site=outside_api_callback"), 0u) << trace;
  EXPECT_EQ(Count(trace, "records_lost="), 0u) << "flushed before each detach:\n" << trace;
  // Attached again for each burst after a detach: the buffers registered anew.
  EXPECT_GT(Count(trace, "cuptiActivityRegisterCallbacks"), 2u);
  uint64_t attached = 0, detached = 0;
  const size_t at = job.stderr_text.find("cupti calls attached=");
  ASSERT_NE(at, std::string::npos) << job.stderr_text;
  ASSERT_EQ(std::sscanf(job.stderr_text.c_str() + at, "cupti calls attached=%lu detached=%lu",
                        &attached, &detached),
            2);
  EXPECT_GT(detached, 0u);
  EXPECT_GT(attached, 0u);
  uint64_t gemms = 0;
  bool sampled = false;
  for (const auto& name : Spooled("agg-4242-")) {
    const nlohmann::json doc = Json(name);
    for (const auto& k : doc.at("kernels").at("top")) {
      if (k.at("name") == "_Z9sgemm_128PfS_")
        gemms += k.at("count").get<uint64_t>();
    }
    if (doc.contains("observed_ms") &&
        doc.at("observed_ms").get<uint64_t>() <
            doc.at("window_end_ms").get<uint64_t>() - doc.at("window_start_ms").get<uint64_t>())
      sampled = true;
  }
  EXPECT_GT(gemms, 0u) << AgentLogs();
  EXPECT_TRUE(sampled) << Joined("agg-");
  EXPECT_EQ(AgentLogs(), "");
}

// The job's own profiler (torch.profiler's Kineto, here the fake job's) subscribes to CUPTI and
// records kernels into buffers of its own: it gets them all, the agent notes that it stepped
// aside, and it takes CUPTI back (its buffers registered again) once the profiler is gone.
TEST_F(AgentProcessTest, TheJobsOwnProfilerGetsCuptiAndTheAgentYieldsToIt) {
  const std::vector<std::string> args = {"--ms", "3500",       "--launches",
                                         "5",    "--profiler", "1250:1200"};
  const SubprocessResult alone = RunJob(args, false);
  ASSERT_TRUE(alone.Succeeded()) << alone.stderr_text;
  const size_t alone_trace = Text(dir_ / "trace.txt").size();  // the profiler's calls alone
  const SubprocessResult job = RunJob(args, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_EQ(job.stdout_text, alone.stdout_text);
  unsigned long kernels = 0;
  int subscribed = -1;
  const size_t at = job.stderr_text.find("profiler subscribe=");
  ASSERT_NE(at, std::string::npos) << job.stderr_text;
  ASSERT_EQ(std::sscanf(job.stderr_text.c_str() + at, "profiler subscribe=%d kernels=%lu",
                        &subscribed, &kernels),
            2);
  EXPECT_EQ(subscribed, 0) << "the agent must never hold CUPTI's subscription for long";
  EXPECT_GE(kernels, 20u) << "1.2 s of 50 ms iterations with two kernels each";
  EXPECT_NE(AgentLogs().find("capture paused while CUPTI for kineto holds CUPTI"),
            std::string::npos)
      << AgentLogs();
  const std::string trace = Text(dir_ / "trace.txt").substr(alone_trace);
  EXPECT_EQ(Count(trace, "cuptiFinalize"), 0u) << "never detach the profiler's CUPTI";
  // While the profiler holds CUPTI the agent neither flushes (its periodic flushes carry no
  // flag; the profiler forces its own) nor registers buffers: only its check, which fails.
  const size_t from = trace.find("cuptiSubscribe_v2 dev=- name=kineto");
  const size_t to = trace.find("cuptiUnsubscribe dev=- name=kineto");
  ASSERT_NE(from, std::string::npos) << trace;
  ASSERT_NE(to, std::string::npos) << trace;
  ASSERT_LT(from, to);
  std::istringstream during(trace.substr(from, to - from));
  size_t registers = 0;
  for (std::string line; std::getline(during, line);) {
    EXPECT_FALSE(line.rfind("cuptiActivityFlushAll", 0) == 0 &&
                 line.find("flag=") == std::string::npos)
        << line;
    registers += line.rfind("cuptiActivityRegisterCallbacks", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(registers, 1u) << "the profiler's own";
  // The agent's at the start, the profiler's, the agent's again after it.
  EXPECT_GE(Count(trace, "cuptiActivityRegisterCallbacks"), 3u) << trace;
  uint64_t last_kernels_ms = 0;
  for (const auto& name : Spooled("agg-4242-")) {
    const nlohmann::json doc = Json(name);
    if (!doc.at("kernels").at("top").empty())
      last_kernels_ms = std::max(last_kernels_ms, doc.at("window_end_ms").get<uint64_t>());
  }
  const auto files = Spooled("agg-4242-");
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(last_kernels_ms, Json(files.back()).at("window_end_ms").get<uint64_t>())
      << "the agent records again after the profiler: " << Joined("agg-");
}

TEST_F(AgentProcessTest, TheDisableMarkerStopsCaptureInNewProcesses) {
  std::ofstream(control_ / "disabled") << "";
  const SubprocessResult job = RunJob({"--ms", "800"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_TRUE(std::filesystem::is_empty(control_ / "capture"));
}

// The marker is read when a process initialises CUDA: a task already running when the operator
// turns the agent off keeps its agent, unaltered, to its end; a task started afterwards has none.
TEST_F(AgentProcessTest, ADisableMarkerWrittenWhileAJobRunsLeavesThatTaskAsItWas) {
  SubprocessResult running;
  std::thread job([&] { running = RunJob({"--ms", "3000"}, true); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Spooled("agg-").empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(20));
  const bool captured_before = !Spooled("agg-").empty();
  std::ofstream(control_ / "disabled") << "";
  const uint64_t disabled_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  job.join();
  ASSERT_TRUE(captured_before) << "no window within 20 s: " << AgentLogs();
  ASSERT_TRUE(running.Succeeded()) << running.stderr_text;
  const SubprocessResult plain = RunJob({"--ms", "3000"}, false);
  EXPECT_EQ(running.stdout_text, plain.stdout_text);
  size_t after_marker = 0;
  for (const auto& name : Spooled("agg-"))
    after_marker += Json(name).at("window_start_ms").get<uint64_t>() >= disabled_ms ? 1 : 0;
  EXPECT_GE(after_marker, 2u) << "the running task's windows after the marker";

  const std::vector<std::string> before_next = Spooled("");
  const SubprocessResult next = RunJob({"--ms", "1500"}, true);
  ASSERT_TRUE(next.Succeeded()) << next.stderr_text;
  EXPECT_EQ(Spooled(""), before_next) << "a task started after the marker";
}

// A process driving two GPUs has a CUDA context on each: both devices' activity is aggregated,
// the trace window keeps a track per device and stream, and PC sampling runs on each context
// (made current on the agent's thread) and releases both.
TEST_F(AgentProcessTest, AProcessWithAContextOnEachOfTwoGpusIsCapturedOnBoth) {
  nlohmann::json scenario = WithPcSampling(TrainingLoop());
  scenario["devices"] = {{{"name", "NVIDIA H200"}}, {{"name", "NVIDIA H200"}}};
  scenario["activity"]["loop"] = {
      {{"kind", "kernel"},
       {"name", "_Z9sgemm_128PfS_"},
       {"duration_us", 2000},
       {"device", 0},
       {"stream", 7}},
      {{"kind", "kernel"}, {"name", "relu"}, {"duration_us", 500}, {"device", 1}, {"stream", 9}},
      {{"kind", "memcpy"},
       {"copy", "dtod"},
       {"bytes", 4096},
       {"duration_us", 10},
       {"device", 1},
       {"stream", 9}}};
  SetScenario(scenario);
  WriteTrigger(control_.path());
  const SubprocessResult job = RunJob({"--ms", "2500"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;

  std::set<uint32_t> devices;
  uint64_t gemms = 0, relus = 0;
  for (const auto& name : Spooled("agg-4242-")) {
    const nlohmann::json doc = Json(name);
    for (uint32_t d : doc.at("devices"))
      devices.insert(d);
    for (const auto& k : doc.at("kernels").at("top"))
      (k.at("name") == "relu" ? relus : gemms) += k.at("count").get<uint64_t>();
  }
  EXPECT_EQ(devices, (std::set<uint32_t>{0, 1})) << AgentLogs();
  EXPECT_GE(gemms, 30u);
  EXPECT_EQ(relus, gemms);

  const auto segments = Spooled("seg-4242-");
  ASSERT_EQ(segments.size(), 1u) << AgentLogs();
  const nlohmann::json doc = Json(segments[0]);
  std::set<std::string> tracks;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      tracks.insert(e.at("args").at("name").get<std::string>());
  }
  EXPECT_TRUE(tracks.count("GPU 0 stream 7")) << doc.at("traceEvents").at(0).dump();
  EXPECT_TRUE(tracks.count("GPU 1 stream 9"));
  const nlohmann::json pc = doc.at("otherData").at("pc_sampling");
  EXPECT_EQ(pc.at("state"), "sampled") << pc.dump();

  const std::string trace = Text(dir_ / "trace.txt");
  EXPECT_EQ(Occurrences(trace, "cuptiPCSamplingEnable"), 2u) << trace;
  EXPECT_EQ(Occurrences(trace, "cuptiPCSamplingDisable"), 2u) << trace;
  EXPECT_NE(trace.find("cuDevicePrimaryCtxRelease_v2 dev=0 retained=0"), std::string::npos);
  EXPECT_NE(trace.find("cuDevicePrimaryCtxRelease_v2 dev=1 retained=0"), std::string::npos);
  EXPECT_EQ(trace.find("current=no"), std::string::npos) << trace;
  EXPECT_EQ(AgentLogs(), "");
}

TEST_F(AgentProcessTest, AnUnwritableSpoolLeavesTheJobAlone) {
  std::filesystem::remove(control_ / "capture");
  std::ofstream(control_ / "capture") << "a file, not a directory";
  const SubprocessResult plain = RunJob({"--ms", "700"}, false);
  const SubprocessResult job = RunJob({"--ms", "700"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_EQ(job.stdout_text, plain.stdout_text);
}

TEST_F(AgentProcessTest, OutsideASlurmTaskTheAgentStaysOut) {
  SubprocessOptions options;
  options.argv = {EXPANSE_CUDA_JOB, "--ms", "700"};
  std::vector<std::string> env;
  for (const auto& e : Env({"CUDA_INJECTION64_PATH=" + std::string(EXPANSE_AGENT_LIBRARY),
                            "EXPANSE_AGENT_CUPTI=" + kFakes + "/libcupti.so.13"})) {
    if (e.rfind("SLURM_", 0) != 0)
      env.push_back(e);
  }
  options.env = env;
  auto job = RunSubprocess(options);
  ASSERT_TRUE(job.ok() && job->Succeeded());
  EXPECT_TRUE(std::filesystem::is_empty(control_ / "capture"));
}

}  // namespace
}  // namespace agent_process_test
}  // namespace expanse::capture
