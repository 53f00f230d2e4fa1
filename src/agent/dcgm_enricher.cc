#include "agent/dcgm_enricher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "dcgm/dcgm_fields.h"
#include "dcgm/dcgmi_errors.h"
#include "dcgm/discovery_parser.h"

namespace expanse::agent {
namespace {

constexpr size_t kMaxCommandOutputBytes = 1 << 20;  // the parsers' own limit
// A field is called unsupported on this node once this many rows showed it N/A and none a value.
constexpr uint64_t kUnsupportedAfterRows = 3;
// Health findings kept for the health file and shown in the capability: an NVSwitch fabric in
// trouble lists hundreds, and the health file has a byte budget.
constexpr size_t kMaxFindingsKept = 32;
constexpr size_t kMaxFindingsShown = 4;
constexpr size_t kMaxFindingBytes = 240;

bool IsPath(const std::string& name) { return name.find('/') != std::string::npos; }

// Children the enrichment ended but could not reap (stuck in the kernel): kept to be reaped
// should the kernel let them go, this many at most.
constexpr size_t kMaxStopping = 16;

// "exited with status 223 (DCGM_ST_MODULE_NOT_LOADED)".
std::string ExitText(std::optional<int> status) {
  if (!status)
    return "exited";
  std::string text = "exited with status " + std::to_string(*status);
  if (auto code = dcgm::DcgmReturnOfExitStatus(*status)) {
    const std::string_view name = dcgm::DcgmReturnName(*code);
    if (!name.empty())
      text += " (" + std::string(name) + ")";
  }
  return text;
}

std::string ErrorText(const dcgm::DcgmiError& error) {
  std::string text = std::string(dcgm::FailureReason(error.failure));
  if (error.dcgm_return) {
    const std::string_view name = dcgm::DcgmReturnName(*error.dcgm_return);
    text += " (" + (name.empty() ? std::to_string(*error.dcgm_return) : std::string(name)) + ")";
  }
  return text + ": " + error.message;
}

// "engine_unreachable: dcgmi discovery: Error: ...": the stable reason first, for operators'
// searches, then what dcgmi said.
std::string StatusText(const Status& status) {
  return status.reason().empty() ? status.message() : status.reason() + ": " + status.message();
}

int HealthValue(dcgm::Health health) {
  switch (health) {
    case dcgm::Health::kPass:
      return 0;
    case dcgm::Health::kWarn:
      return 1;
    case dcgm::Health::kFail:
      return 2;
    case dcgm::Health::kUnknown:
      break;
  }
  return -1;
}

}  // namespace

std::string DcgmiFileProblem(const std::string& path) {
  // The file itself, links followed (a packaged /usr/bin/dcgmi may be one); the directories
  // above it are the operator's to keep.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return "";  // missing: said as "not executable", and it may be installed later
  if (!S_ISREG(st.st_mode))
    return path + " is not a regular file";
  if ((st.st_mode & 022) != 0)
    return path + " is writable by group or others (mode " + std::to_string((st.st_mode >> 6) & 7) +
           std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) + ")";
  if (st.st_uid != 0 && st.st_uid != geteuid())
    return path + " is owned by uid " + std::to_string(st.st_uid) +
           ", not root or the daemon's uid " + std::to_string(geteuid());
  return "";
}

std::string FindDcgmi(const std::string& setting, const std::string& path_env, std::string* refused,
                      std::string* found_path) {
  std::string why;
  std::string found;
  if (!setting.empty() && IsPath(setting)) {
    // Relative, it would name whatever lies under the daemon's working directory.
    if (setting.front() != '/')
      why = "EXPANSE_DCGMI=" + setting + " is not an absolute path";
    else
      found = setting;
  } else {
    found = FindOnPath(setting.empty() ? "dcgmi" : setting, path_env);
  }
  // dcgmi runs as the service account: whoever can write the file can run code as that account.
  if (!found.empty())
    why = DcgmiFileProblem(found);
  if (refused != nullptr)
    *refused = why;
  if (found_path != nullptr)
    *found_path = found;
  return why.empty() ? found : "";
}

std::vector<std::string> DcgmiEnvironment(const std::string& path_env,
                                          const std::string& ld_library_path) {
  // The DCGM client needs nothing from the environment (the engine's address is an argument);
  // PATH for a wrapper script's own commands, C locale for output in the recorded formats.
  // Nothing else: the daemon's environment may hold credentials (a proxy URL with a password).
  // LD_LIBRARY_PATH is no secret, and a DCGM installed outside the standard library paths
  // (environment modules set it) needs it to load libdcgm.
  std::vector<std::string> env{
      "PATH=" + (path_env.empty() ? std::string("/usr/bin:/bin") : path_env), "LANG=C", "LC_ALL=C"};
  // Absolute directories only: an empty or relative entry means a directory relative to the
  // daemon's working directory, from where anyone who can write there would be loaded.
  std::string kept;
  size_t start = 0;
  while (start <= ld_library_path.size()) {
    const size_t end = std::min(ld_library_path.find(':', start), ld_library_path.size());
    const std::string dir = ld_library_path.substr(start, end - start);
    if (!dir.empty() && dir.front() == '/')
      kept += (kept.empty() ? "" : ":") + dir;
    start = end + 1;
  }
  if (!kept.empty())
    env.push_back("LD_LIBRARY_PATH=" + kept);
  return env;
}

std::optional<DcgmEnricherOptions> FindDcgmEnrichment(const std::string& setting,
                                                      const std::string& host,
                                                      std::chrono::milliseconds interval,
                                                      const std::string& path_env,
                                                      const std::string& ld_library_path) {
  std::string refused;
  std::string found;
  FindDcgmi(setting, path_env, &refused, &found);
  if (found.empty() && refused.empty())
    return std::nullopt;
  // A refused dcgmi still gets an enrichment: it runs nothing, and its capability says why.
  DcgmEnricherOptions options;
  options.dcgmi = {found, host, interval};
  options.env = DcgmiEnvironment(path_env, ld_library_path);  // none of the daemon's credentials
  // A file refused for its mode or owner is checked again every tick, so fixing it takes effect
  // without a restart; only a relative path, which names no file, is refused for good.
  if (found.empty())
    options.refused = refused;
  return options;
}

DcgmEnricher::DcgmEnricher(DcgmEnricherOptions options, Clock& wall, Clock& monotonic)
    : options_(std::move(options)), wall_(wall), monotonic_(monotonic) {
  options_.dcgmi.interval = std::clamp(options_.dcgmi.interval, std::chrono::milliseconds(100),
                                       std::chrono::milliseconds(60'000));
  options_.silence_limit = std::max(options_.silence_limit, 3 * options_.dcgmi.interval);
  refused_ = options_.refused.empty() ? DcgmiFileProblem(options_.dcgmi.dcgmi) : options_.refused;
  if (!options_.env) {
    const char* path = std::getenv("PATH");
    const char* libraries = std::getenv("LD_LIBRARY_PATH");
    options_.env =
        DcgmiEnvironment(path != nullptr ? path : "", libraries != nullptr ? libraries : "");
  }
}

DcgmEnricher::~DcgmEnricher() = default;  // ChildProcess ends and reaps what is left

void DcgmEnricher::Tick(const std::vector<std::string>& uuids, bool cupti_holds_counters,
                        telemetry::SeriesBuffer& buffer, std::mutex& buffer_mu) {
  const int64_t now = monotonic_.NowMs();
  std::erase_if(stopping_, [](const auto& child) { return child->Poll().has_value(); });
  // Checked again before anything starts: a file made writable since the daemon started is
  // refused as one found so at the start.
  refused_ = options_.refused.empty() ? DcgmiFileProblem(options_.dcgmi.dcgmi) : options_.refused;
  if (!refused_.empty()) {
    StopDmon();
    Abandon(std::move(discovery_));
    Abandon(std::move(health_));
    return;
  }
  const std::set<std::string> listed(uuids.begin(), uuids.end());
  if (listed != nvml_uuids_) {
    nvml_uuids_ = listed;
    gpus_.clear();  // map again against the new list; dmon streams every GPU regardless
  }
  if (nvml_uuids_.empty()) {
    StopDmon();
    Abandon(std::move(discovery_));
    Abandon(std::move(health_));
    return;
  }
  cupti_holds_ = cupti_holds_counters;
  if (cupti_holds_counters)
    cupti_released_ms_ = -1;
  else if (cupti_released_ms_ < 0)
    cupti_released_ms_ = now;
  bool want_dcp = !cupti_holds_counters && now >= dcp_refused_until_ms_;
  if (want_dcp && dmon_ && !dmon_has_dcp_ && now - cupti_released_ms_ < options_.dcp_settle.count())
    want_dcp = false;  // CUPTI only just let go: do not restart dmon for a helper's restart
  TickDiscovery(now);
  TickDmon(now, want_dcp, buffer, buffer_mu);
  TickHealth(now, buffer, buffer_mu);
}

void DcgmEnricher::TickDiscovery(int64_t now) {
  if (!gpus_.empty())
    return;
  if (!discovery_) {
    if (now < retry_at_ms_)
      return;
    auto run = DcgmiRun::Start(dcgm::DiscoveryArgv(options_.dcgmi), options_.env, now,
                               options_.command_deadline, kMaxCommandOutputBytes);
    if (!run.ok()) {
      Failed(now, run.status().message());
      return;
    }
    discovery_ = std::move(*run);
    ++discoveries_;
  }
  std::optional<DcgmiRunResult> done = discovery_->Poll(now);
  if (!done)
    return;
  Abandon(std::move(discovery_));
  if (done->timed_out) {
    ++timeouts_;
    Failed(now, "dcgmi discovery -l gave no answer within " +
                    std::to_string(options_.command_deadline.count() / 1000) + " s");
    return;
  }
  auto listed = dcgm::ParseDiscoveryList(done->output);
  if (!listed.ok()) {
    Failed(now, StatusText(listed.status()) + (done->exit_status && *done->exit_status != 0
                                                   ? " (" + ExitText(done->exit_status) + ")"
                                                   : ""));
    return;
  }
  foreign_uuids_.clear();
  for (const dcgm::DiscoveredGpu& gpu : *listed) {
    if (gpu.uuid.empty())
      continue;
    if (nvml_uuids_.count(gpu.uuid) != 0)
      gpus_[gpu.gpu_id] = gpu.uuid;
    else
      foreign_uuids_.push_back(gpu.uuid);
  }
  if (gpus_.empty()) {
    Failed(now, "the DCGM host engine at " + Engine() + " lists " + std::to_string(listed->size()) +
                    " GPUs, none of them one this node's NVML lists");
    return;
  }
  next_health_ms_ = std::min(next_health_ms_, now);  // a first check as soon as GPUs are known
}

void DcgmEnricher::StartDmon(int64_t now, bool with_dcp) {
  std::vector<uint16_t> ids = dcgm::DmonFieldIds(with_dcp);
  auto parser = dcgm::DmonParser::Create(ids);
  if (!parser.ok()) {
    Failed(now, parser.status().message());
    return;
  }
  // stderr merged: dmon's watch and field errors go there.
  ChildProcessOptions child_options{dcgm::DmonArgv(options_.dcgmi, ids), options_.env,
                                    std::chrono::milliseconds(2000), true};
  auto child = ChildProcess::Start(child_options);
  if (!child.ok()) {
    Failed(now, child.status().message());
    return;
  }
  dmon_ = std::move(*child);
  dmon_->CloseStdin();
  parser_ = std::move(*parser);
  dmon_has_dcp_ = with_dcp;
  last_line_ms_ = now;
  dmon_started_ms_ = now;
  dmon_closed_ms_ = -1;
  dmon_error_.clear();
  dmon_rows_ = false;
  unsupported_.clear();
  dmon_gpu_ids_.clear();
  ++dmon_starts_;
}

void DcgmEnricher::StopDmon() {
  if (!dmon_)
    return;
  if (parser_) {
    const dcgm::DmonCounters& c = parser_->counters();
    dmon_totals_.lines += c.lines;
    dmon_totals_.samples += c.samples;
    dmon_totals_.errors += c.errors;
    dmon_totals_.refused += c.refused;
    dmon_totals_.oversized += c.oversized;
    dmon_totals_.values_na += c.values_na;
    dmon_totals_.values_refused += c.values_refused + c.values_truncated;
    dmon_totals_.header_mismatches += c.header_mismatches;
    dmon_totals_.headers_reordered += c.headers_reordered;
    dmon_totals_.other_entities += c.other_entities;
  }
  dmon_->Terminate();
  Stopping(std::move(dmon_));
}

void DcgmEnricher::Stopping(std::unique_ptr<ChildProcess> child) {
  if (!child)
    return;
  if (stopping_.size() >= kMaxStopping) {
    // The oldest has resisted SIGKILL for this many restarts: stuck in the kernel. Its
    // destructor kills it once more and leaves it to init; counted, so the health file shows it.
    ++unreaped_;
    stopping_.erase(stopping_.begin());
  }
  stopping_.push_back(std::move(child));
}

void DcgmEnricher::Abandon(std::unique_ptr<DcgmiRun> run) {
  if (!run)
    return;
  // A run still going is ended the way dmon is (terminated, then polled from stopping_), not by
  // its destructor, which would wait for it; one given up on is kept to be reaped.
  if (std::unique_ptr<ChildProcess> child = run->TakeUnreaped()) {
    child->Terminate();
    Stopping(std::move(child));
  }
}

void DcgmEnricher::Failed(int64_t now, const std::string& why) {
  StopDmon();
  gpus_.clear();  // the engine may come back with other ids: discover again first
  problem_ = why;
  // What the old engine said is not news from the next one (its ids may map differently).
  have_health_ = false;
  last_health_ = {};
  unsupported_.clear();
  backoff_ = backoff_.count() == 0 ? options_.restart_initial
                                   : std::min(backoff_ * 2, options_.restart_max);
  retry_at_ms_ = now + backoff_.count();
}

void DcgmEnricher::TickDmon(int64_t now, bool want_dcp, telemetry::SeriesBuffer& buffer,
                            std::mutex& buffer_mu) {
  if (dmon_ && dmon_has_dcp_ != want_dcp)
    StopDmon();  // the field set changes only with a new dmon
  if (!dmon_) {
    if (gpus_.empty() || now < retry_at_ms_)
      return;
    StartDmon(now, want_dcp);
    if (!dmon_)
      return;
  }
  const auto lines = dmon_->ReadLines(std::chrono::milliseconds(0), dcgm::kMaxDmonLineBytes);
  // Cut before the parser could see them: refused all the same, and counted.
  dmon_oversized_lines_ += lines.oversized;
  // Rows read in one tick are dated now and only each GPU's newest is kept: dmon prints no
  // time, and after a stall the backlog would otherwise stack up points at one instant.
  std::map<uint32_t, dcgm::DmonSample> newest;
  std::optional<dcgm::DcgmiError> error;
  for (const std::string& line : lines.lines) {
    dcgm::DmonEvent event = parser_->Feed(line);
    if (auto* sample = std::get_if<dcgm::DmonSample>(&event)) {
      ++dmon_samples_;
      const uint32_t id = sample->gpu_id;
      if (dmon_gpu_ids_.size() < dcgm::kMaxDiscoveredGpus)
        dmon_gpu_ids_.insert(id);
      newest[id] = std::move(*sample);
    } else if (auto* failure = std::get_if<dcgm::DcgmiError>(&event)) {
      error = *failure;
    }
  }
  // Only rows count as signs of life: a dmon whose every line is refused is as good as silent.
  if (!newest.empty()) {
    last_line_ms_ = now;
    dmon_rows_ = true;
    const int64_t at = wall_.NowMs();
    std::lock_guard lock(buffer_mu);
    for (const auto& [id, sample] : newest)
      Write(sample, at, buffer);
    // Values flow: a working engine, once it has kept them flowing for a while (a dmon that
    // gives its first rows and dies keeps backing off, with its discovery and health check).
    if (now - dmon_started_ms_ >= kWorkingAfterMs)
      backoff_ = std::chrono::milliseconds(0);
    if (dmon_has_dcp_)
      dcp_backoff_ = std::chrono::milliseconds(0);  // the engine watches the DCP fields now
    problem_.clear();
  }
  unsupported_.clear();
  // N/A cells are counted over all GPUs: a field is called unsupported only once each GPU had
  // rows enough (one that needs two samples for a first value is not missing after two).
  const uint64_t na_needed =
      kUnsupportedAfterRows * std::max<uint64_t>(1, static_cast<uint64_t>(dmon_gpu_ids_.size()));
  for (const dcgm::DmonFieldStats& field : parser_->field_stats()) {
    if (field.present == 0 && field.na >= na_needed) {
      const dcgm::FieldSpec* spec = dcgm::FindField(field.field_id);
      // The last XID is N/A until a GPU has had one: that is news, not a missing field.
      if (spec != nullptr && spec->kind != dcgm::FieldKind::kLastXid)
        unsupported_.push_back(std::string(spec->series));
    }
  }

  if (error && error->failure == dcgm::DcgmiFailure::kWatchFailed && dmon_has_dcp_) {
    // The engine will not watch the profiling fields (module not loaded, unsupported GPU,
    // another profiler holds them): the rest is still wanted, at once, without them.
    // Asked again later, less often each time it refuses in a row (a module that is not
    // loaded stays so): dmon restarts twice for each question.
    dcp_refusal_ = ErrorText(*error);
    dcp_backoff_ =
        dcp_backoff_.count() == 0 ? options_.dcp_retry : std::min(dcp_backoff_ * 2, kMaxDcpRetry);
    dcp_refused_until_ms_ = now + dcp_backoff_.count();
    StopDmon();
    return;
  }
  if (error && error->failure != dcgm::DcgmiFailure::kStopped)
    dmon_error_ = ErrorText(*error);  // dmon exits after its errors; said with its status
  if (lines.closed || dmon_closed_ms_ >= 0) {
    // Its output closed: it has exited or is about to. Its status says why (a DCGM return
    // code); give it a moment to be reapable, never a wait.
    if (dmon_closed_ms_ < 0)
      dmon_closed_ms_ = now;
    const std::optional<int> status = dmon_->TryWait();
    if (!status && now - dmon_closed_ms_ < 2'000)
      return;
    Failed(now, "dcgmi dmon " + ExitText(status) +
                    (dmon_error_.empty() ? std::string() : ": " + dmon_error_));
  } else if (now - last_line_ms_ > options_.silence_limit.count()) {
    ++timeouts_;
    const std::string header = DmonHeaderProblem();
    Failed(now, "dcgmi dmon gave no usable row for " +
                    std::to_string(options_.silence_limit.count() / 1000) + " s" +
                    (header.empty() ? std::string() : " (" + header + ")") + "; restarting");
  }
}

void DcgmEnricher::Write(const dcgm::DmonSample& sample, int64_t at_ms,
                         telemetry::SeriesBuffer& buffer) {
  auto gpu = gpus_.find(sample.gpu_id);
  if (gpu == gpus_.end()) {
    ++unmapped_rows_;  // a GPU NVML does not list, or one that came after discovery
    return;
  }
  for (const dcgm::DmonValue& value : sample.values) {
    if (!value.value)
      continue;
    const dcgm::FieldSpec* spec = dcgm::FindField(value.field_id);
    if (spec == nullptr)
      continue;
    buffer.Add({options_.hostname, gpu->second, std::string(spec->series)}, at_ms, *value.value);
    ++series_points_;
  }
}

void DcgmEnricher::TickHealth(int64_t now, telemetry::SeriesBuffer& buffer, std::mutex& buffer_mu) {
  if (!health_) {
    if (gpus_.empty() || now < next_health_ms_)
      return;
    health_setting_ = false;
    auto run = DcgmiRun::Start(dcgm::HealthCheckArgv(options_.dcgmi), options_.env, now,
                               options_.command_deadline, kMaxCommandOutputBytes);
    next_health_ms_ = now + options_.health_every.count();
    if (!run.ok()) {
      health_problem_ = run.status().message();
      return;
    }
    health_ = std::move(*run);
    ++health_checks_;
  }
  std::optional<DcgmiRunResult> done = health_->Poll(now);
  if (!done)
    return;
  Abandon(std::move(health_));
  HealthDone(*done, now, buffer, buffer_mu);
}

void DcgmEnricher::HealthDone(const DcgmiRunResult& run, int64_t now,
                              telemetry::SeriesBuffer& buffer, std::mutex& buffer_mu) {
  const std::string command = health_setting_ ? "dcgmi health -s a" : "dcgmi health -c -j";
  if (run.timed_out) {
    ++timeouts_;
    health_problem_ = command + " gave no answer within " +
                      std::to_string(options_.command_deadline.count() / 1000) + " s";
    return;
  }
  if (health_setting_) {
    if (run.exit_status != 0)
      health_problem_ = command + " " + ExitText(run.exit_status);
    return;
  }
  auto report = dcgm::ParseHealthCheck(run.output);
  if (!report.ok()) {
    health_problem_ = command + ": " + StatusText(report.status());
    // No watches on the group yet: set them (all systems), once in a while, and check at the
    // next minute. They stay in the host engine after dcgmi exits.
    if (report.status().reason() == "health_watches_not_enabled" &&
        (watches_set_ms_ < 0 || now - watches_set_ms_ >= 10 * options_.health_every.count())) {
      auto set = DcgmiRun::Start(dcgm::HealthSetArgv(options_.dcgmi), options_.env, now,
                                 options_.command_deadline, kMaxCommandOutputBytes);
      if (set.ok()) {
        health_ = std::move(*set);
        health_setting_ = true;
        watches_set_ms_ = now;
      }
    }
    return;
  }
  health_problem_.clear();
  last_health_ = std::move(*report);
  have_health_ = true;
  // Every mapped GPU gets a point: a healthy one is absent from the report, and a chart must
  // tell "healthy" from "not checked".
  std::map<std::string, int> worst;
  for (const auto& [id, uuid] : gpus_)
    worst[uuid] = 0;
  for (const dcgm::EntityHealth& entity : last_health_.entities) {
    auto gpu = gpus_.find(entity.entity_id);
    if (entity.entity_group != "GPU" || gpu == gpus_.end())
      continue;
    worst[gpu->second] = std::max(worst[gpu->second], HealthValue(entity.health));
  }
  const int64_t at = wall_.NowMs();
  std::lock_guard lock(buffer_mu);
  for (const auto& [uuid, value] : worst) {
    if (value >= 0)
      buffer.Add({options_.hostname, uuid, "gpu.dcgm.health"}, at, value);
  }
}

std::string DcgmEnricher::DmonHeaderProblem() const {
  if (!dmon_ || !parser_ || parser_->other_header().empty())
    return "";
  return "dmon header names other columns: " + parser_->other_header();
}

std::string DcgmEnricher::DcpOffReason() const {
  if (cupti_holds_)
    return "expanse-cupti-helper holds the counters";
  if (!dcp_refusal_.empty() && monotonic_.NowMs() < dcp_refused_until_ms_)
    return "the host engine refused them: " + dcp_refusal_;
  return "expanse-cupti-helper released the counters moments ago";
}

Capability DcgmEnricher::Describe() const {
  if (!refused_.empty())
    return {"degraded", "dcgmi refused, not run: " + refused_};
  if (access(options_.dcgmi.dcgmi.c_str(), X_OK) != 0)
    return {"absent", options_.dcgmi.dcgmi + " is not executable"};
  if (nvml_uuids_.empty())
    return {"absent", "no GPU to watch (NVML lists none)"};
  // Rows are being refused while the last header names columns other than the fields asked
  // for (another DCGM version's tag for one of them, say): said until a header naming them
  // returns, and in the restart's reason should dmon give no usable row for that long.
  const std::string header = DmonHeaderProblem();
  if (!dmon_ || !problem_.empty() || !dmon_rows_) {
    if (problem_.empty() && !header.empty())
      return {"degraded", "dcgmi dmon rows refused (engine " + Engine() + "): " + header};
    if (problem_.empty())
      return {"degraded", "dcgmi starting (engine " + Engine() + ")"};
    return {"degraded", "DCGM unavailable (engine " + Engine() + "): " + problem_ + "; retrying"};
  }
  std::string reason =
      "dcgmi dmon on " + std::to_string(gpus_.size()) + " GPUs (engine " + Engine() + ")";
  if (!dmon_has_dcp_)
    reason += "; profiling fields off: " + DcpOffReason();
  if (!unsupported_.empty()) {
    reason += "; unsupported here:";
    for (const std::string& series : unsupported_)
      reason += " " + series;
  }
  if (!header.empty())
    reason += "; rows refused: " + header;
  if (!health_problem_.empty()) {
    reason += "; health: " + health_problem_;
  } else if (have_health_) {
    // Only what concerns this node: a host engine shared with another machine reports that
    // machine's GPUs too, and GPU ids this node's discovery did not map are not ours. The
    // health said is the worst of what is shown, not the engine's overall.
    auto ours = [&](const dcgm::EntityHealth& entity) {
      return entity.entity_group != "GPU" || gpus_.count(entity.entity_id) != 0;
    };
    std::optional<dcgm::Health> worst;
    for (const dcgm::EntityHealth& entity : last_health_.entities) {
      if (ours(entity) && entity.health != dcgm::Health::kPass &&
          (!worst || HealthValue(entity.health) > HealthValue(*worst)))
        worst = entity.health;
    }
    if (worst)
      reason += "; health " + std::string(dcgm::HealthName(*worst));
    size_t shown = 0;
    for (const dcgm::EntityHealth& entity : last_health_.entities) {
      if (!worst || !ours(entity))
        continue;
      for (const dcgm::HealthIncident& incident : entity.incidents) {
        if (++shown > kMaxFindingsShown)
          break;
        reason += ", " + entity.entity_group + " " + std::to_string(entity.entity_id) + " " +
                  incident.system + ": " + incident.message.substr(0, kMaxFindingBytes);
      }
    }
  }
  return {"ok", reason};
}

nlohmann::json DcgmEnricher::Stats() const {
  nlohmann::json gpus = nlohmann::json::object();
  for (const auto& [id, uuid] : gpus_)
    gpus[std::to_string(id)] = uuid;
  dcgm::DmonCounters c = dmon_totals_;
  if (dmon_ && parser_) {
    const dcgm::DmonCounters& now = parser_->counters();
    c.refused += now.refused;
    c.oversized += now.oversized;
    c.errors += now.errors;
    c.values_na += now.values_na;
    c.values_refused += now.values_refused + now.values_truncated;
    c.header_mismatches += now.header_mismatches;
    c.headers_reordered += now.headers_reordered;
    c.other_entities += now.other_entities;
  }
  // Lines cut by the reader never reached a parser: refused and oversized all the same.
  c.refused += dmon_oversized_lines_;
  c.oversized += dmon_oversized_lines_;
  nlohmann::json stats = {{"dcgmi", options_.dcgmi.dcgmi},
                          {"engine", Engine()},
                          {"dmon_running", dmon_ != nullptr},
                          {"profiling_fields", dmon_ != nullptr && dmon_has_dcp_},
                          {"dmon_starts", dmon_starts_},
                          {"rows", dmon_samples_},
                          {"points", series_points_},
                          {"unmapped_rows", unmapped_rows_},
                          {"lines_refused", c.refused},
                          {"error_lines", c.errors},
                          {"values_na", c.values_na},
                          {"oversized_lines", c.oversized},
                          {"header_mismatches", c.header_mismatches},
                          {"headers_reordered", c.headers_reordered},
                          {"other_entities", c.other_entities},
                          {"values_refused", c.values_refused},
                          {"discoveries", discoveries_},
                          {"health_checks", health_checks_},
                          {"timeouts", timeouts_},
                          {"stopping", stopping_.size()},
                          {"unreaped", unreaped_},
                          {"gpus", gpus},
                          {"unsupported", unsupported_}};
  if (!foreign_uuids_.empty())
    stats["not_listed_by_nvml"] = foreign_uuids_;
  if (!refused_.empty())
    stats["refused"] = refused_;
  if (!problem_.empty())
    stats["problem"] = problem_;
  if (const std::string header = DmonHeaderProblem(); !header.empty())
    stats["dmon_header"] = header;
  if (dmon_ && !dmon_has_dcp_)
    stats["profiling_fields_off"] = DcpOffReason();
  if (!health_problem_.empty())
    stats["health_problem"] = health_problem_;
  if (have_health_) {
    nlohmann::json findings = nlohmann::json::array();
    size_t total = 0;
    for (const dcgm::EntityHealth& entity : last_health_.entities) {
      for (const dcgm::HealthIncident& incident : entity.incidents) {
        if (++total > kMaxFindingsKept)
          continue;
        auto gpu = gpus_.find(entity.entity_id);
        findings.push_back(
            {{"entity", entity.entity_group + " " + std::to_string(entity.entity_id)},
             {"uuid",
              entity.entity_group == "GPU" && gpu != gpus_.end() ? gpu->second : std::string()},
             {"system", incident.system},
             {"health", dcgm::HealthName(incident.health)},
             {"message", incident.message}});
      }
    }
    stats["health"] = {{"overall", dcgm::HealthName(last_health_.overall)}, {"findings", findings}};
  }
  return stats;
}

}  // namespace expanse::agent
