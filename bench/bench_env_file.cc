// Cost of reading and updating /etc/expanse/daemon.env. The daemon parses it once
// at start and the installer merges it once per install, so these figures matter
// only as a guard against accidental quadratic behaviour; Parse, Render and Merge
// run side by side on the same 40-line file so their ratios can be compared.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <benchmark/benchmark.h>

#include "core/env_file.h"

namespace {

// A plausible operator-edited file: installer-seeded network settings, site
// overrides, comments, quoting and a duplicate key. 40 lines.
constexpr std::string_view kDaemonEnv = R"(# /etc/expanse/daemon.env
# Seeded by `expanse compute install`; operator settings are preserved on upgrade.
HTTPS_PROXY=http://proxy.internal.example:3128
HTTP_PROXY=http://proxy.internal.example:3128
NO_PROXY=localhost,127.0.0.1,::1,.cluster.internal.example,10.0.0.0/8
SSL_CERT_FILE=/etc/ssl/certs/site-root-ca.pem

# --- Site overrides (HPC team, ticket OPS-1432) ---
EXPANSE_DCGM_HOST=127.0.0.1:5555
EXPANSE_DCGMI=/usr/bin/dcgmi
EXPANSE_CUPTI_ENABLE=1
EXPANSE_PROFILING_ENABLE=1
EXPANSE_PROFILING_AGENT_ENABLE=0
EXPANSE_PYSPY=/srv/expanse/bin/py-spy
EXPANSE_SEGMENT_UPLOAD_MODE=relay

; Partitions whose jobs are never profiled
EXPANSE_PROFILING_EXCLUDE_PARTITIONS="debug interactive"
EXPANSE_LOG_LEVEL=info
EXPANSE_LOG_FORMAT='json'

# Quoted values with spaces and escapes
EXPANSE_SITE_NAME="Research Computing \"North\" Cluster"
EXPANSE_CONTACT='hpc-ops@example.org'
EXPANSE_NOTE=maintenance\ window\ Sunday
EXPANSE_MOTD="GPU jobs are monitored; see https://wiki.example.org/expanse#faq"

# Tuning
EXPANSE_SAMPLE_INTERVAL_MS=1000
EXPANSE_FLUSH_INTERVAL_S=15
EXPANSE_OUTBOX_MAX_MB=512
EXPANSE_UPLOAD_RETRY_MAX_S=300
EXPANSE_HEARTBEAT_INTERVAL_S = 30

# Older setting kept for the rollback procedure; the later line wins.
EXPANSE_LOG_LEVEL=debug
EXPANSE_CONTROL_DIR=/var/lib/expanse/control
EXPANSE_SPOOL_DIR=/srv/expanse/spool
TZ=UTC
EXPANSE_DAEMON_CONFIG=/var/lib/slurm/.expanse/config.json
LANG=C.UTF-8
)";

void ParseDaemonEnv(benchmark::State& state) {
  for (auto _ : state) {
    auto parsed = expanse::ParseEnvFile(kDaemonEnv);
    benchmark::DoNotOptimize(parsed);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kDaemonEnv.size()));
}
BENCHMARK(ParseDaemonEnv);

void RenderDaemonEnv(benchmark::State& state) {
  const auto parsed = expanse::ParseEnvFile(kDaemonEnv);
  if (!parsed.ok()) {
    state.SkipWithError(parsed.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    std::string rendered = expanse::RenderEnvFile(*parsed);
    benchmark::DoNotOptimize(rendered);
  }
}
BENCHMARK(RenderDaemonEnv);

// What the installer does: re-seed the network settings, one of them changed.
void MergeProxySettingsIntoDaemonEnv(benchmark::State& state) {
  expanse::EnvFile updates;
  for (const auto& [key, value] : {
           std::pair{"HTTPS_PROXY", "http://new-proxy.internal.example:3128"},
           std::pair{"NO_PROXY", "localhost,127.0.0.1,::1,.cluster.internal.example,10.0.0.0/8"},
           std::pair{"SSL_CERT_FILE", "/etc/ssl/certs/site-root-ca.pem"},
       }) {
    if (!updates.Set(key, value).ok()) {
      state.SkipWithError("invalid update");
      return;
    }
  }
  for (auto _ : state) {
    auto merged = expanse::MergeEnvFile(kDaemonEnv, updates);
    benchmark::DoNotOptimize(merged);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kDaemonEnv.size()));
}
BENCHMARK(MergeProxySettingsIntoDaemonEnv);

}  // namespace
