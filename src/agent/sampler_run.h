// `expanse-daemon sample`: runs the GPU sampler loop in the foreground for a while and reports
// what it cost (CPU time, peak RSS) and what it produced. This is the sampler's overhead
// benchmark (bench/sampler_overhead.sh, scripts/gpu-check) and an operator's quick check.
//
// The loop is the one the daemon runs: a fast tick every `interval`, a slow tick every
// `slow_interval`, and every `flush_interval` the buffered series rendered as an ingest-batch
// JSON document (written to `output` when set, else dropped), so serialisation is measured too.
#ifndef EXPANSE_AGENT_SAMPLER_RUN_H_
#define EXPANSE_AGENT_SAMPLER_RUN_H_

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "gpu/backend_select.h"

namespace expanse::agent {

struct SamplerRunOptions {
  gpu::BackendChoice backend;
  std::chrono::milliseconds duration{std::chrono::seconds(30)};
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  std::chrono::milliseconds slow_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds flush_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds call_timeout{std::chrono::seconds(5)};
  std::string host = "localhost";
  std::string output;  // file for the rendered batches (one JSON document per line)
};

// Runs the loop and returns the report: backend, ticks, samples, batches, bytes, cpu_seconds,
// cpu_percent_of_core, max_rss_kib, health.
nlohmann::json RunSampler(const SamplerRunOptions& options);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SAMPLER_RUN_H_
