// DcgmEnricher: the sampler's side of DCGM (docs/formats/dcgmi.md). Through the operator's own
// `dcgmi` it keeps one long-lived `dcgmi dmon` child streaming the catalogue's fields for every
// GPU, maps DCGM's GPU ids to NVML UUIDs with `dcgmi discovery -l`, and checks the host engine's
// health watches every minute. Values become `gpu.dcgm.*` series keyed by UUID like every
// other GPU series; health becomes `gpu.dcgm.health` (0 pass, 1 warn, 2 fail) with the findings
// kept for the health file and the `dcgm` capability.
//
// DCP (profiling) fields are asked for only while CUPTI does not hold the counters: on GPUs
// before Hopper the two compete for the same performance monitor, and the CUPTI helper measures
// the same things. A host engine that refuses the DCP watches gets a dmon without them.
//
// Everything dcgmi prints is hostile input (refused and counted by the parsers); a GPU that this
// node's NVML does not list is never written (an EXPANSE_DCGM_HOST naming another machine's
// engine must not label its GPUs as ours). The sampler never waits on dcgmi: each Tick reads
// only what is there, every command has a deadline, a dmon that falls silent is stopped, and
// restarts back off up to `restart_max`. Without DCGM nothing else changes.
#ifndef EXPANSE_AGENT_DCGM_ENRICHER_H_
#define EXPANSE_AGENT_DCGM_ENRICHER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/capabilities.h"
#include "agent/dcgmi_run.h"
#include "core/child_process.h"
#include "core/clock.h"
#include "dcgm/dcgmi_commands.h"
#include "dcgm/dmon_parser.h"
#include "dcgm/health_parser.h"
#include "telemetry/series_buffer.h"

namespace expanse::agent {

struct DcgmEnricherOptions {
  dcgm::DcgmiOptions dcgmi;  // dcgmi must be a path here (see FindDcgmi)
  std::string hostname;
  std::chrono::milliseconds health_every{60'000};
  std::chrono::milliseconds command_deadline{20'000};  // discovery, health: dcgmi retries 5 s
  std::chrono::milliseconds silence_limit{30'000};     // dmon: at least three intervals
  std::chrono::milliseconds restart_initial{5'000};
  std::chrono::milliseconds restart_max{300'000};
  // After a host engine refused the DCP watches, how long before asking for them again (the
  // profiler that held them may be gone).
  std::chrono::milliseconds dcp_retry{600'000};
  // Before DCP fields come back after CUPTI let the counters go: a helper restarting must not
  // make dmon restart twice.
  std::chrono::milliseconds dcp_settle{60'000};
  // dcgmi's whole environment; unset: DcgmiEnvironment of the daemon's PATH (never the
  // daemon's own environment, which may hold credentials).
  std::optional<std::vector<std::string>> env;
  // Why FindDcgmi refused EXPANSE_DCGMI for good (a relative path): nothing is run, and the
  // capability says this. A file refused for its type, mode or owner is named in `dcgmi`
  // instead: it is checked again every tick (DcgmiFileProblem), so fixing it needs no restart.
  std::string refused;
};

// EXPANSE_DCGMI when set (an absolute path, or a name looked up on `path_env`), else `dcgmi` on
// `path_env`; "" when there is none, or when the one found is refused (`*refused` says why): a
// relative path, or a file that is not a regular one, is writable by group or others, or is
// owned by someone other than root and the daemon's own uid (it runs as the service account).
// `*found`: the file found, refused or not ("" for a relative path or none).
std::string FindDcgmi(const std::string& setting, const std::string& path_env,
                      std::string* refused = nullptr, std::string* found = nullptr);
// Why `path` must not be run as dcgmi (see FindDcgmi); "" when it may, or does not exist.
std::string DcgmiFileProblem(const std::string& path);
// The environment dcgmi gets: PATH, the C locale and LD_LIBRARY_PATH when set (a DCGM
// installed outside the standard library paths, environment modules), nothing else of the
// daemon's.
std::vector<std::string> DcgmiEnvironment(const std::string& path_env,
                                          const std::string& ld_library_path = "");
// The enrichment's options for EXPANSE_DCGMI `setting` (see FindDcgmi), the host engine at
// `host`; nullopt when no dcgmi is found. A file found but refused for its mode or owner is
// kept as the dcgmi (checked again every tick); a relative EXPANSE_DCGMI is refused for good.
std::optional<DcgmEnricherOptions> FindDcgmEnrichment(const std::string& setting,
                                                      const std::string& host,
                                                      std::chrono::milliseconds interval,
                                                      const std::string& path_env,
                                                      const std::string& ld_library_path = "");

class DcgmEnricher {
 public:
  DcgmEnricher(DcgmEnricherOptions options, Clock& wall, Clock& monotonic);
  ~DcgmEnricher();

  // `uuids`: the GPUs NVML lists. `cupti_holds_counters`: the CUPTI helper samples (or is
  // starting to sample) this node's GPUs, so DCP fields stay out of dmon.
  void Tick(const std::vector<std::string>& uuids, bool cupti_holds_counters,
            telemetry::SeriesBuffer& buffer, std::mutex& buffer_mu);

  Capability Describe() const;
  // Counts, the GPU map, unsupported fields, the last health findings: for the health file.
  nlohmann::json Stats() const;

 private:
  void TickDiscovery(int64_t now);
  void TickDmon(int64_t now, bool want_dcp, telemetry::SeriesBuffer& buffer, std::mutex& buffer_mu);
  void TickHealth(int64_t now, telemetry::SeriesBuffer& buffer, std::mutex& buffer_mu);
  void StartDmon(int64_t now, bool with_dcp);
  void StopDmon();
  // Ends `child` without waiting: polled from stopping_ until reaped, which is bounded.
  void Stopping(std::unique_ptr<ChildProcess> child);
  // A command run that is over or no longer wanted: its child, unless reaped, to Stopping.
  void Abandon(std::unique_ptr<DcgmiRun> run);
  // A failure of the engine or of dmon: forget the GPU map, back off.
  void Failed(int64_t now, const std::string& why);
  void HealthDone(const DcgmiRunResult& run, int64_t now, telemetry::SeriesBuffer& buffer,
                  std::mutex& buffer_mu);
  void Write(const dcgm::DmonSample& sample, int64_t at_ms, telemetry::SeriesBuffer& buffer);
  std::string DcpOffReason() const;
  // "dmon header names other columns: ..." while the running dmon's rows are refused for that.
  std::string DmonHeaderProblem() const;
  std::string Engine() const { return options_.dcgmi.host; }

  DcgmEnricherOptions options_;
  Clock& wall_;
  Clock& monotonic_;
  std::set<std::string> nvml_uuids_;
  std::string refused_;  // why dcgmi is not run at all ("" while it may be)

  // GPU ids to UUIDs of the GPUs NVML lists; empty until a discovery succeeded.
  std::map<uint32_t, std::string> gpus_;
  std::vector<std::string> foreign_uuids_;  // discovered, not listed by NVML
  std::unique_ptr<DcgmiRun> discovery_;
  int64_t retry_at_ms_ = 0;
  std::chrono::milliseconds backoff_{0};
  std::string problem_;  // why DCGM is not streaming now ("" while it is)

  std::unique_ptr<ChildProcess> dmon_;
  std::vector<std::unique_ptr<ChildProcess>> stopping_;
  std::optional<dcgm::DmonParser> parser_;
  bool dmon_has_dcp_ = false;
  int64_t last_line_ms_ = 0;
  int64_t dmon_closed_ms_ = -1;     // when its output closed, while it is not reaped yet
  std::string dmon_error_;          // the last error line it printed
  bool dmon_rows_ = false;          // it has given a usable row since it started
  int64_t cupti_released_ms_ = -1;  // when CUPTI last stopped holding the counters
  bool cupti_holds_ = false;
  int64_t dcp_refused_until_ms_ = 0;
  std::chrono::milliseconds dcp_backoff_{0};  // dcp_retry, doubled per refusal in a row
  static constexpr std::chrono::milliseconds kMaxDcpRetry{6 * 3600 * 1000};
  // A dmon that has given rows this long counts as working: the restart backoff starts over.
  static constexpr int64_t kWorkingAfterMs = 60'000;
  int64_t dmon_started_ms_ = 0;
  std::string dcp_refusal_;  // what the host engine said when it last refused the DCP watches
  std::vector<std::string> unsupported_;  // fields N/A on every row of the running dmon
  // GPU ids the running dmon has given rows for (bounded): a field is unsupported once it was
  // N/A on kUnsupportedAfterRows rows of each.
  std::set<uint32_t> dmon_gpu_ids_;

  std::unique_ptr<DcgmiRun> health_;
  bool health_setting_ = false;  // health_ is `health -s a`, not a check
  int64_t next_health_ms_ = 0;
  int64_t watches_set_ms_ = -1;  // when Expanse last enabled the watches itself
  std::string health_problem_;
  dcgm::HealthReport last_health_;
  bool have_health_ = false;

  uint64_t dmon_starts_ = 0, dmon_samples_ = 0, series_points_ = 0, unmapped_rows_ = 0;
  uint64_t health_checks_ = 0, discoveries_ = 0, timeouts_ = 0;
  uint64_t unreaped_ = 0;  // children given up on while stuck (stopping_ was full)
  // dmon lines longer than its bound, cut by ChildProcess before the parser saw them.
  uint64_t dmon_oversized_lines_ = 0;
  dcgm::DmonCounters dmon_totals_;  // of dmon children that have ended
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_DCGM_ENRICHER_H_
