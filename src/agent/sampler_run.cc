#include "agent/sampler_run.h"

#include <sys/resource.h>

#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "gpu/guarded_backend.h"
#include "gpu/sampler.h"
#include "telemetry/gpu_series_sink.h"
#include "telemetry/series_buffer.h"
#include "wire/records.h"

namespace expanse::agent {
namespace {

// `who` is RUSAGE_SELF or RUSAGE_CHILDREN: the nvidia-smi backend's cost is mostly in the
// nvidia-smi processes it runs, so the report counts those too.
double CpuSeconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

long MaxRssKib(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

// Peak and current memory from /proc/self/status. ru_maxrss is not used for the peak: Linux
// carries it across execve, so a sampler started from a big process (a Python benchmark with
// PyTorch loaded) would report its parent's peak.
nlohmann::json MemoryStatus() {
  nlohmann::json out = nlohmann::json::object();
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    for (const char* key : {"VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"}) {
      const std::string prefix = std::string(key) + ":";
      if (line.starts_with(prefix))
        out[key] = std::stol(line.substr(prefix.size()));  // kB
    }
  }
  return out;
}

}  // namespace

nlohmann::json RunSampler(const SamplerRunOptions& options) {
  using SteadyClock = std::chrono::steady_clock;
  SystemClock clock;
  const double cpu_before = CpuSeconds(RUSAGE_SELF);
  const double children_before = CpuSeconds(RUSAGE_CHILDREN);
  const auto wall_start = SteadyClock::now();

  gpu::SelectedBackend selected = gpu::SelectBackend(options.backend);
  const std::string backend_name =
      selected.backend ? std::string(selected.backend->Name()) : std::string();
  std::unique_ptr<gpu::GuardedBackend> guarded;
  if (selected.backend) {
    guarded =
        std::make_unique<gpu::GuardedBackend>(std::move(selected.backend), options.call_timeout);
  }
  std::mutex buffer_mu;
  telemetry::SeriesBuffer buffer;
  telemetry::GpuSeriesSink sink(options.host, buffer, buffer_mu);
  gpu::Sampler sampler(std::move(guarded), selected.NoBackendReason(), clock, sink);

  std::ofstream output;
  if (!options.output.empty())
    output.open(options.output, std::ios::app);
  uint64_t ticks = 0, samples = 0, batches = 0, bytes = 0, sequence = 0;
  auto flush = [&] {
    std::vector<wire::SeriesRecord> series;
    {
      std::lock_guard lock(buffer_mu);
      samples += buffer.samples();
      series = buffer.Take();
    }
    if (series.empty())
      return;
    nlohmann::json batch = wire::EncodeBatchHeader({.stream = "telemetry", .sequence = ++sequence});
    nlohmann::json& entries = batch["series"] = nlohmann::json::array();
    for (const wire::SeriesRecord& s : series)
      entries.push_back(wire::Encode(s));
    const std::string text = batch.dump();
    bytes += text.size();
    ++batches;
    if (output.is_open())
      output << text << '\n';
  };

  // Ticks are scheduled on absolute times so a slow tick does not shift the ones after it.
  const auto end = wall_start + options.duration;
  auto next_fast = SteadyClock::now();
  auto next_slow = next_fast + options.slow_interval;
  auto next_flush = next_fast + options.flush_interval;
  while (next_fast < end) {
    std::this_thread::sleep_until(next_fast);
    sampler.TickFast();
    ++ticks;
    const auto now = SteadyClock::now();
    if (now >= next_slow) {
      sampler.TickSlow();
      next_slow += options.slow_interval;
    }
    if (now >= next_flush) {
      flush();
      next_flush += options.flush_interval;
    }
    next_fast += options.interval;
  }
  flush();

  const double wall = std::chrono::duration<double>(SteadyClock::now() - wall_start).count();
  const double own_cpu = CpuSeconds(RUSAGE_SELF) - cpu_before;
  const double children_cpu = CpuSeconds(RUSAGE_CHILDREN) - children_before;
  const double cpu = own_cpu + children_cpu;
  const gpu::SamplerHealth health = sampler.Health();
  return {
      {"backend", backend_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(backend_name)},
      {"gpus", health.gpus},
      {"state", health.state},
      {"detail", health.detail},
      {"interval_ms", options.interval.count()},
      {"wall_seconds", wall},
      {"ticks", ticks},
      {"samples", samples},
      {"batches", batches},
      {"batch_bytes", bytes},
      {"cpu_seconds", cpu},
      {"own_cpu_seconds", own_cpu},
      {"children_cpu_seconds", children_cpu},
      {"cpu_percent_of_core", wall > 0 ? 100.0 * cpu / wall : 0.0},
      {"max_rss_kib", MemoryStatus().value("VmHWM", MaxRssKib(RUSAGE_SELF))},
      {"memory_kib", MemoryStatus()},
      {"children_max_rss_kib", MaxRssKib(RUSAGE_CHILDREN)}};
}

}  // namespace expanse::agent
