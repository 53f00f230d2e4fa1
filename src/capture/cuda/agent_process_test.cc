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
    options.argv = {EXPANSE_CUDA_JOB};
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
  // No trigger, no trace; nothing went wrong.
  EXPECT_TRUE(Spooled("seg-").empty());
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

TEST_F(AgentProcessTest, TheJobsOutputIsTheSameWithAndWithoutTheAgent) {
  const SubprocessResult plain = RunJob({"--ms", "600", "--threads", "4", "--fork"}, false);
  const SubprocessResult injected = RunJob({"--ms", "600", "--threads", "4", "--fork"}, true);
  ASSERT_TRUE(plain.Succeeded()) << plain.stderr_text;
  ASSERT_TRUE(injected.Succeeded()) << injected.stderr_text;
  EXPECT_EQ(injected.stdout_text, plain.stdout_text);
  EXPECT_EQ(injected.stderr_text, plain.stderr_text);
  // Injected once for four threads; the forked child wrote nothing of its own.
  const std::string trace = Text(dir_ / "trace.txt");
  size_t injections = 0;
  for (size_t at = trace.find("cuInit.injection"); at != std::string::npos;
       at = trace.find("cuInit.injection", at + 1))
    ++injections;
  EXPECT_EQ(injections, 1u) << trace;
  std::set<std::string> pids;
  for (const auto& name : Spooled("agg-"))
    pids.insert(std::to_string(Json(name).at("pid").get<int>()));
  EXPECT_EQ(pids.size(), 1u);
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

TEST_F(AgentProcessTest, TheDisableMarkerStopsCaptureInNewProcesses) {
  std::ofstream(control_ / "disabled") << "";
  const SubprocessResult job = RunJob({"--ms", "800"}, true);
  ASSERT_TRUE(job.Succeeded()) << job.stderr_text;
  EXPECT_TRUE(std::filesystem::is_empty(control_ / "capture"));
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
