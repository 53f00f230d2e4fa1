// The DCGM enrichment's cost to the sampler (issue 18 budget: "dcgmi path: one process per node,
// <= 0.2 % of a core"), measured on this machine against the fake dcgmi (tests/fakes/dcgm), which
// streams dmon's real format. Figures and the command: docs/performance.md.
//
//  1. Long-lived stream (what the daemon does): agent::DcgmEnricher with 8 GPUs and every
//     catalogue field, dmon at 10 Hz (ten times the daemon's rate, so the run sees enough rows),
//     ticked at 10 Hz. The sampler thread's CPU time inside Tick is what the daemon pays; divided
//     by the intervals it read, it is the cost per 1 Hz interval, i.e. the share of a core at
//     the daemon's 1 Hz.
//  2. One dcgmi process per sample (what the daemon avoids): `dcgmi dmon -c 1` started and read
//     to its end every interval. Its cost is the children's CPU per interval.
//
// The fake is a Python script, so the children's CPU in both phases is Python's, not NVIDIA's
// dcgmi (a C++ client): it is printed to show the ratio between the two designs, not dcgmi's own
// cost, which no machine here can measure. A plain program; it asserts nothing.

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "agent/dcgm_enricher.h"
#include "agent/dcgmi_run.h"
#include "core/clock.h"
#include "dcgm/dcgm_fields.h"
#include "dcgm/dcgmi_commands.h"

namespace {

using namespace expanse;

constexpr int kGpus = 8;
constexpr auto kInterval = std::chrono::milliseconds(100);
constexpr auto kStreamLength = std::chrono::seconds(30);
constexpr int kPerSampleRuns = 30;

double ThreadCpuMicros() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

double ChildrenCpuMicros() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto micros = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return micros(usage.ru_utime) + micros(usage.ru_stime);
}

std::string Uuid(int i) { return fmt::format("GPU-{:08x}-0000-4000-8000-000000000000", i); }

// 8 GPUs, a plausible value for every catalogue field.
nlohmann::json Scenario() {
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < kGpus; ++i) {
    nlohmann::json values = nlohmann::json::object();
    for (const dcgm::FieldSpec& field : dcgm::Fields()) {
      if (field.unit == "ratio")
        values[std::to_string(field.id)] = 0.25 + 0.05 * i;
      else if (field.kind == dcgm::FieldKind::kLastXid || field.max_raw <= 1)
        values[std::to_string(field.id)] = 0;
      else
        values[std::to_string(field.id)] = 1234567 + i;
    }
    gpus.push_back({{"id", i}, {"uuid", Uuid(i)}, {"values", values}});
  }
  return {{"gpus", gpus}};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string source = argc > 1 ? argv[1] : ".";
  const std::string dcgmi = source + "/tests/fakes/dcgm/dcgmi";
  if (access(dcgmi.c_str(), X_OK) != 0) {
    fmt::print(stderr, "usage: bench_dcgm SOURCE_DIR (no executable {})\n", dcgmi);
    return 2;
  }
  const std::string dir = std::filesystem::temp_directory_path() / "bench_dcgm";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/scenario.json") << Scenario().dump();
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                        "EXPANSE_FAKE_DCGM_SCENARIO=" + dir + "/scenario.json"};
  std::vector<std::string> uuids;
  for (int i = 0; i < kGpus; ++i)
    uuids.push_back(Uuid(i));
  const size_t fields = dcgm::DmonFieldIds(true).size();
  fmt::print("bench_dcgm: {} GPUs x {} fields, dmon interval {} ms, fake dcgmi {}\n", kGpus, fields,
             kInterval.count(), dcgmi);

  // 1. The daemon's design: one long-lived dmon.
  SystemClock wall;
  MonotonicClock monotonic;
  telemetry::SeriesBuffer buffer(100'000'000);
  std::mutex mu;
  double tick_cpu = 0;
  uint64_t rows = 0, total_rows = 0;
  double stream_children = 0;
  {
    agent::DcgmEnricherOptions options;
    options.dcgmi = {dcgmi, "localhost:5555", kInterval};
    options.hostname = "bench";
    options.env = env;
    const double children_before = ChildrenCpuMicros();
    agent::DcgmEnricher enricher(options, wall, monotonic);
    // Warm up: discovery, the first health check, dmon's first rows.
    const auto warm_until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < warm_until) {
      enricher.Tick(uuids, false, buffer, mu);
      std::this_thread::sleep_for(kInterval);
    }
    const uint64_t rows_before = enricher.Stats()["rows"].get<uint64_t>();
    const auto until = std::chrono::steady_clock::now() + kStreamLength;
    auto next = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < until) {
      const double before = ThreadCpuMicros();
      enricher.Tick(uuids, false, buffer, mu);
      tick_cpu += ThreadCpuMicros() - before;
      next += kInterval;
      std::this_thread::sleep_until(next);
      std::lock_guard lock(mu);
      buffer.Take();  // the sampler hands series on every flush; keep the buffer small alike
    }
    total_rows = enricher.Stats()["rows"].get<uint64_t>();
    rows = total_rows - rows_before;
    fmt::print("stream: {} ({} points)\n", enricher.Describe().reason,
               enricher.Stats()["points"].get<uint64_t>());
    // The destructor ends and reaps dmon, so its CPU shows in RUSAGE_CHILDREN after it.
    stream_children = -children_before;
  }
  stream_children += ChildrenCpuMicros();
  const double intervals = static_cast<double>(rows) / kGpus;
  const double per_interval_us = tick_cpu / intervals;
  fmt::print("\n1. long-lived dmon, read by DcgmEnricher::Tick\n");
  fmt::print("   {:.0f} intervals of {} rows read in {} s\n", intervals, kGpus,
             kStreamLength.count());
  fmt::print("   sampler thread CPU in Tick: {:.1f} us per interval\n", per_interval_us);
  fmt::print("   => at 1 Hz: {:.4f} % of a core (budget 0.2 %)\n", per_interval_us / 1e6 * 100);
  fmt::print("   fake dcgmi (Python) CPU, discovery + health + dmon: {:.1f} ms in all\n",
             stream_children / 1e3);

  // 2. The design the daemon avoids: a dcgmi process per sample.
  const std::vector<uint16_t> ids = dcgm::DmonFieldIds(true);
  std::vector<std::string> command =
      dcgm::DmonArgv({dcgmi, "localhost:5555", std::chrono::milliseconds(1)}, ids);
  command.push_back("-c");
  command.push_back("1");
  const double children_before = ChildrenCpuMicros();
  double parent_cpu = 0;
  int completed = 0;
  for (int i = 0; i < kPerSampleRuns; ++i) {
    const double before = ThreadCpuMicros();
    auto run =
        agent::DcgmiRun::Start(command, env, monotonic.NowMs(), std::chrono::seconds(20), 1 << 20);
    if (!run.ok()) {
      fmt::print(stderr, "{}\n", run.status().message());
      return 1;
    }
    std::optional<agent::DcgmiRunResult> done;
    while (!(done = (*run)->Poll(monotonic.NowMs())))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    parent_cpu += ThreadCpuMicros() - before;
    if (done->exit_status == 0)
      ++completed;
  }
  const double per_run_children = (ChildrenCpuMicros() - children_before) / kPerSampleRuns;
  fmt::print("\n2. one `dcgmi dmon -c 1` per sample ({} runs, {} exited 0)\n", kPerSampleRuns,
             completed);
  fmt::print("   children CPU per sample: {:.1f} ms; parent {:.1f} us\n", per_run_children / 1e3,
             parent_cpu / kPerSampleRuns);
  fmt::print("   => at 1 Hz: {:.2f} % of a core for the fake's start-ups alone\n",
             per_run_children / 1e6 * 100);
  fmt::print("\nper-sample processes / long-lived stream (fake's CPU per interval): {:.0f}x\n",
             per_run_children /
                 (stream_children / std::max(1.0, static_cast<double>(total_rows) / kGpus)));
  std::filesystem::remove_all(dir);
  return 0;
}
