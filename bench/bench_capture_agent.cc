// The capture agent's own CPU cost per CUDA activity (docs/performance.md, "Capture agent"):
// what libexpanse-agent.so spends in the job's process on each record CUPTI hands it, in
// always-on mode (folded into the window's totals) and during a Phase B window (kept for the
// trace as well), and what writing a full trace segment costs. The GPU-side overhead is CUPTI's
// and is measured on the H200 (scripts/gpu-check section 6); this is the part the agent adds,
// measured here with the same CaptureAgent the library runs, on a realistic mix of records
// (40 distinct kernel names, a copy, a synchronisation and an NVTX range per 8 kernels).
//
// A plain program that prints figures and never asserts timings:
//   bench_capture_agent [--records N]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "capture/capture_agent.h"
#include "capture/capture_trigger.h"

namespace {

using expanse::capture::Activity;
using expanse::capture::ActivityKind;
using expanse::capture::AgentOptions;
using expanse::capture::CaptureAgent;
using expanse::capture::CaptureTrigger;
using expanse::capture::ProcessIdentity;
using expanse::capture::TraceSegment;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::vector<Activity> Mix(const std::vector<std::string>& names, size_t count) {
  std::vector<Activity> out;
  out.reserve(count);
  uint64_t t = 1'796'000'000'000'000'000ULL;
  for (size_t i = 0; i < count; ++i) {
    Activity a;
    a.start_ns = t;
    a.end_ns = t + 20'000;
    t += 25'000;
    switch (i % 11) {
      case 8:
        a.kind = ActivityKind::kMemcpy;
        a.detail = "htod";
        a.bytes = 1 << 20;
        break;
      case 9:
        a.kind = ActivityKind::kSync;
        a.detail = "device";
        break;
      case 10:
        a.kind = ActivityKind::kNvtxRange;
        a.name = "train_step";
        break;
      default:
        a.kind = ActivityKind::kKernel;
        a.name = names[i % names.size()];
        a.stream = 7;
        a.grid = {132, 1, 1};
        a.block = {256, 1, 1};
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  size_t records = 2'000'000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--records") == 0 && i + 1 < argc)
      records = std::strtoull(argv[++i], nullptr, 10);
  }
  const std::string dir =
      std::filesystem::temp_directory_path() / ("bench-capture-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir + "/capture");
  std::filesystem::create_directories(dir + "/phase-b");
  // Mangled template kernels, as PyTorch's are: long names.
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) {
    names.push_back("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_" + std::to_string(i) +
                    "_GLOBAL__N__unary_opIfEEESt5arrayIPcLm2EEEEviT0_T1_");
  }
  const std::vector<Activity> mix = Mix(names, records);
  ProcessIdentity process;
  process.job_id = "1";
  process.host = "bench";
  process.pid = getpid();
  AgentOptions options;
  options.control_dir = dir;
  options.spool_dir = dir + "/capture";
  options.min_free_bytes = 0;
  uint64_t now = 1'796'000'000'000;

  // Always on: every record folded into the window.
  CaptureAgent agent(options, process, [&] { return now; });
  auto start = std::chrono::steady_clock::now();
  for (const Activity& a : mix)
    agent.OnActivity(a);
  const double always_on = Seconds(std::chrono::steady_clock::now() - start);
  now += options.window_ms;
  // The same with names of 1.5 KB (CUTLASS 3, FlashAttention-3 and CUB kernels take 0.6-3 KB),
  // kept to kMaxNameBytes: each record finds its kernel by its first bytes, uncleaned.
  std::vector<std::string> long_names;
  for (const std::string& name : names)
    long_names.push_back(name + std::string(1500 - name.size(), 'L'));
  const std::vector<Activity> long_mix = Mix(long_names, records);
  double always_on_long = 0;
  {
    uint64_t long_now = now;
    CaptureAgent long_agent(options, process, [&] { return long_now; });
    start = std::chrono::steady_clock::now();
    for (const Activity& a : long_mix)
      long_agent.OnActivity(a);
    always_on_long = Seconds(std::chrono::steady_clock::now() - start);
  }
  start = std::chrono::steady_clock::now();
  agent.Tick();  // closes and spools the window
  const double close_window = Seconds(std::chrono::steady_clock::now() - start);

  // Phase B: the same records while a trace window is open (the segment keeps the first
  // 50,000; the rest are counted).
  std::FILE* trigger = std::fopen((dir + "/phase-b/1").c_str(), "w");
  const std::string text =
      expanse::capture::TriggerJson(CaptureTrigger{"bench", now + 60'000, "gpu_idle", {}});
  std::fwrite(text.data(), 1, text.size(), trigger);
  std::fclose(trigger);
  agent.Tick();  // opens the trace window
  start = std::chrono::steady_clock::now();
  for (const Activity& a : mix)
    agent.OnActivity(a);
  const double phase_b = Seconds(std::chrono::steady_clock::now() - start);
  now += options.trace_window_ms;
  start = std::chrono::steady_clock::now();
  agent.Tick();  // writes the segment and the window
  const double write_segment = Seconds(std::chrono::steady_clock::now() - start);
  uintmax_t segment_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/capture")) {
    if (e.path().filename().string().rfind("seg-", 0) == 0)
      segment_bytes = e.file_size();
  }
  std::filesystem::remove_all(dir);

  const double per_record_on = 1e9 * always_on / static_cast<double>(records);
  const double per_record_b = 1e9 * phase_b / static_cast<double>(records);
  std::printf(
      "capture agent, %zu records (kernels with 40 distinct mangled names, copies, syncs, NVTX)\n",
      records);
  std::printf("  always on : %7.1f ns per record\n", per_record_on);
  std::printf("  always on, 1.5 KB kernel names: %7.1f ns per record\n",
              1e9 * always_on_long / static_cast<double>(records));
  std::printf("  phase B   : %7.1f ns per record (segment keeps 50,000 events)\n", per_record_b);
  std::printf("  window close and spool: %.2f ms; segment write: %.1f ms, %.1f MB\n",
              1e3 * close_window, 1e3 * write_segment, static_cast<double>(segment_bytes) / 1e6);
  // What that is for a launch-bound loop: PyTorch on an H100/H200 launches at most ~100-200 k
  // kernels per second from one Python thread.
  for (const double rate : {10'000.0, 100'000.0, 200'000.0}) {
    std::printf("  at %6.0f records/s: always on %.2f %% of a core, phase B %.2f %%\n", rate,
                100 * rate * per_record_on / 1e9, 100 * rate * per_record_b / 1e9);
  }
  return 0;
}
