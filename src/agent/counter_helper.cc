#include "agent/counter_helper.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "cupti/helper_records.h"
#include "cupti/pm_reasons.h"
#include "release/cupti_node.h"

namespace expanse::agent {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : ",") + item;
  return out;
}

// EXPANSE_CUPTI_HELPER as a relative path: the settings keep it (a typo must not stop the
// daemon), but it would resolve against the daemon's working directory (or PATH, for a bare
// name), so it is not run. The per-node install is always absolute.
bool IsRelative(const std::string& path) { return !path.empty() && !path.starts_with('/'); }

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// How far ahead of our clock a record may be stamped: the helper's clock is this machine's, so
// only the moment between its read and ours. A record stamped later would hide the samples
// before its stamp (a series takes only samples newer than its last).
constexpr int64_t kMaxAheadMs = 5'000;
// Records per GPU a helper may send at once beyond one per period: a tick that ran late is
// followed closely by the next (sample_loop skips rather than bursts, so one more at most).
constexpr double kRecordBurst = 2.0;

}  // namespace

std::string FindCuptiHelper(const RuntimeSettings& settings, const std::string& shared_prefix,
                            const std::string& hostname) {
  if (!settings.cupti_helper.empty())
    return settings.cupti_helper;
  if (shared_prefix.empty())
    return "";
  return shared_prefix + "/lib/cupti-nodes/" + hostname + "/bin/expanse-cupti-helper";
}

CounterHelper::CounterHelper(CounterHelperOptions options, Clock& wall, Clock& monotonic)
    : options_(std::move(options)), wall_(wall), monotonic_(monotonic) {
  options_.period = std::clamp(options_.period, std::chrono::milliseconds(100),
                               std::chrono::milliseconds(60'000));
  options_.silence_limit = std::max(options_.silence_limit, 3 * options_.period);
}

CounterHelper::~CounterHelper() = default;  // ChildProcess ends and reaps the helper

void CounterHelper::Start(int64_t now_ms) {
  // Never run, and never counted as a restart: the setting cannot change while the daemon
  // runs. Describe() says why.
  if (IsRelative(options_.helper))
    return;
  // A directory or device named by EXPANSE_CUPTI_HELPER is not run (exec of a directory only
  // fails; of a device, who knows). Describe() says why.
  if (access(options_.helper.c_str(), F_OK) == 0 && !IsRegularFile(options_.helper)) {
    Stopped(now_ms, "at " + options_.helper + " is not a regular file");
    return;
  }
  std::vector<std::string> argv = {options_.helper};
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  argv.push_back("sample");
  argv.push_back("--devices=" + Join(uuids_));
  argv.push_back("--period-ms=" + std::to_string(options_.period.count()));
  if (!options_.escalation)
    argv.push_back("--no-escalation");
  auto child = ChildProcess::Start({argv, options_.env, std::chrono::milliseconds(2000)});
  if (!child.ok()) {
    Stopped(now_ms, child.status().message());
    return;
  }
  child_ = std::move(*child);
  last_line_ms_ = now_ms;
  started_ms_ = now_ms;
  counters_seen_ = false;
  fatal_.clear();
  // A new helper knows nothing of the GPUs left to a job's tool: tell it before it samples them.
  for (const std::string& uuid : held_)
    child_->WriteLine(cupti::RenderCommand({cupti::HelperCommand::Kind::kRelease, uuid, {}}));
}

void CounterHelper::Retire() {
  if (!child_)
    return;
  child_->Terminate();
  stopping_.push_back(std::move(child_));
}

void CounterHelper::Stopped(int64_t now_ms, const std::string& why) {
  Retire();
  last_exit_ = why;
  backoff_ = backoff_.count() == 0 ? options_.restart_initial
                                   : std::min(backoff_ * 2, options_.restart_max);
  restart_at_ms_ = now_ms + backoff_.count();
  ++restarts_;
  // Whether the counters stay the helper's through the backoff (HoldsCounters): yes if this
  // helper sampled (or yielded to a job's tool) some GPU; no if it said every GPU is
  // unavailable, and no if it said nothing of any GPU (it crashed at start, could not be
  // started, its binary is gone or not a regular file). So the hold lasts only for the one
  // backoff after a helper that sampled: a crash loop that follows gives DCGM its profiling
  // fields back rather than holding them for good.
  bool held = false;
  for (const auto& [uuid, gpu] : gpus_)
    held = held || gpu.pm_sampling == "ok" || gpu.pm_sampling == "yielded";
  held_in_backoff_ = held;
  for (auto& [uuid, gpu] : gpus_)
    gpu = GpuState{};  // unknown until the next helper says
}

void CounterHelper::Tick(const std::vector<std::string>& uuids, telemetry::SeriesBuffer& buffer,
                         std::mutex& buffer_mu) {
  const int64_t now = monotonic_.NowMs();
  std::erase_if(stopping_, [](const auto& child) { return child->Poll().has_value(); });
  std::vector<std::string> wanted = uuids;
  std::sort(wanted.begin(), wanted.end());
  if (wanted != uuids_ && child_) {
    // A GPU came or went: the helper samples a fixed set, so a new one takes the new set. A
    // GPU that flaps (XID 79, off the bus and back) must not restart it every tick: a change
    // within the backoff of the last waits for it (the running helper carries on with its set
    // until then), and the backoff doubles as a failure's does, starting over once the set
    // has held still for a while.
    if (now - set_changed_ms_ >= kWorkingAfterMs)
      set_change_backoff_ = std::chrono::milliseconds(0);
    if (set_changes_ == 0 || now >= set_changed_ms_ + set_change_backoff_.count()) {
      Retire();
      ++set_changes_;
      set_changed_ms_ = now;
      set_change_backoff_ = set_change_backoff_.count() == 0
                                ? options_.restart_initial
                                : std::min(set_change_backoff_ * 2, options_.restart_max);
    }
  }
  if (wanted != uuids_ && !child_) {
    std::erase_if(gpus_, [&](const auto& gpu) {
      return !std::binary_search(wanted.begin(), wanted.end(), gpu.first);
    });
    std::erase_if(last_counters_, [&](const auto& gpu) {
      return !std::binary_search(wanted.begin(), wanted.end(), gpu.first);
    });
    uuids_ = wanted;
  }
  // Not beside a helper that has not ended yet: one stuck in a driver call outlives even
  // SIGKILL, and a new one each backoff would pile up holding /dev/nvidia* and a pipe each.
  waiting_for_stuck_ = !child_ && !uuids_.empty() && now >= restart_at_ms_ && !stopping_.empty();
  if (!child_ && !uuids_.empty() && now >= restart_at_ms_ && stopping_.empty())
    Start(now);
  if (!child_)
    return;
  const auto lines = child_->ReadLines(std::chrono::milliseconds(0), cupti::kMaxRecordBytes);
  refused_ += lines.oversized;
  if (lines.oversized > 0)
    last_refusal_ = "line longer than " + std::to_string(cupti::kMaxRecordBytes) + " bytes";
  for (const auto& line : lines.lines)
    Handle(line, wall_.NowMs(), buffer, buffer_mu);
  if (!lines.lines.empty()) {
    last_line_ms_ = now;
  }
  // A fresh backoff only for a helper that has worked for a while, not one that gave a record
  // and then died (a hung call on one GPU after the others flushed): that one keeps doubling.
  if (counters_seen_ && now - started_ms_ >= kWorkingAfterMs)
    backoff_ = std::chrono::milliseconds(0);
  if (lines.closed) {
    // It closed its output: it has exited or is about to. Its status, when already known.
    const std::optional<int> status = child_->TryWait();
    Stopped(now,
            (status ? "exited with status " + std::to_string(*status) : std::string("exited")) +
                (fatal_.empty() ? "" : ": " + fatal_));
  } else if (now - last_line_ms_ > options_.silence_limit.count()) {
    Stopped(now,
            "silent for " + std::to_string(options_.silence_limit.count() / 1000) + " s; stopped");
  }
}

void CounterHelper::Handle(const std::string& line, int64_t now_ms, telemetry::SeriesBuffer& buffer,
                           std::mutex& buffer_mu) {
  std::vector<std::pair<std::string, double>> dropped;
  auto record = cupti::ParseRecord(line, &dropped);
  if (!record.ok()) {
    ++refused_;
    last_refusal_ = record.status().message();
    return;
  }
  ++records_;
  if (const auto* fatal = std::get_if<cupti::FatalRecord>(&*record)) {
    fatal_ = fatal->reason.substr(0, 256);
    return;
  }
  if (const auto* counters = std::get_if<cupti::CounterRecord>(&*record)) {
    if (std::find(uuids_.begin(), uuids_.end(), counters->uuid) == uuids_.end()) {
      ++refused_;
      last_refusal_ = "counters for " + counters->uuid + ", which it was not asked to sample";
      return;
    }
    // The helper's clock is this machine's; a time far from ours is refused all the same.
    if (counters->unix_ms < now_ms - 600'000 || counters->unix_ms > now_ms + kMaxAheadMs) {
      ++refused_;
      last_refusal_ = "counters stamped " + std::to_string(counters->unix_ms) + " ms";
      return;
    }
    // About one record per GPU per period, by the records' own stamps (the daemon may read
    // several periods' records at once): a token bucket of kRecordBurst records, refilled one
    // per period. A record not after the last one accepted would be dropped by the series
    // anyway; it is refused here so that it is counted.
    auto last = last_counters_.find(counters->uuid);
    if (last != last_counters_.end()) {
      if (counters->unix_ms <= last->second.unix_ms) {
        ++refused_;
        last_refusal_ = "counters for " + counters->uuid + " stamped " +
                        std::to_string(counters->unix_ms) + " ms, not after the last";
        return;
      }
      const double tokens =
          std::min(kRecordBurst, last->second.tokens +
                                     static_cast<double>(counters->unix_ms - last->second.unix_ms) /
                                         static_cast<double>(options_.period.count()));
      if (tokens < 1.0) {
        ++refused_;
        last_refusal_ = "more than one record for " + counters->uuid + " in a period";
        return;
      }
      last->second = {counters->unix_ms, tokens - 1.0};
    } else {
      last_counters_[counters->uuid] = {counters->unix_ms, kRecordBurst - 1.0};
    }
    // A record whose every value was out of range stored nothing: it does not show the helper
    // working (a unit bug would otherwise look healthy and keep DCGM's profiling fields off).
    only_dropped_ = counters->values.empty() && !dropped.empty();
    if (!only_dropped_)
      counters_seen_ = true;
    // Values beyond their series' range were left out of the record (its others are kept):
    // counted, with the last one, as refusals are.
    dropped_values_ += dropped.size();
    if (!dropped.empty()) {
      std::ostringstream value;
      value << dropped.back().second;
      last_dropped_value_ = dropped.back().first + " of " + counters->uuid + ": " + value.str() +
                            " is out of its range";
    }
    std::lock_guard lock(buffer_mu);
    for (const auto& [series, value] : counters->values) {
      buffer.Add({options_.hostname, counters->uuid, series}, counters->unix_ms, value);
      ++samples_;
    }
  } else if (const auto* status = std::get_if<cupti::StatusRecord>(&*record)) {
    if (status->uuid.empty() ||
        std::find(uuids_.begin(), uuids_.end(), status->uuid) == uuids_.end())
      return;
    gpus_[status->uuid] = {status->pm_sampling, status->reason, status->fix, status->series.size()};
  }
}

void CounterHelper::Escalate(const std::string& uuid, std::chrono::seconds window) {
  if (!options_.escalation || !child_ || !cupti::IsGpuUuid(uuid))
    return;
  if (child_->WriteLine(
          cupti::RenderCommand({cupti::HelperCommand::Kind::kEscalate, uuid, window})))
    ++escalations_;
}

void CounterHelper::HoldFor(const std::set<std::string>& uuids) {
  for (const std::string& uuid : uuids) {
    if (held_.count(uuid) != 0 || !cupti::IsGpuUuid(uuid))
      continue;
    if (child_)
      child_->WriteLine(cupti::RenderCommand({cupti::HelperCommand::Kind::kRelease, uuid, {}}));
    ++releases_;
  }
  for (const std::string& uuid : held_) {
    if (uuids.count(uuid) == 0 && child_)
      child_->WriteLine(cupti::RenderCommand({cupti::HelperCommand::Kind::kResume, uuid, {}}));
  }
  held_.clear();
  for (const std::string& uuid : uuids) {
    if (cupti::IsGpuUuid(uuid))
      held_.insert(uuid);
  }
}

bool CounterHelper::HoldsCounters() const {
  // A GPU left to a job's own CUDA tool (Nsight, a CUPTI profiler) is that tool's, whether or
  // not a helper runs: DCGM's profiling fields would take the counters from it as much.
  if (!held_.empty())
    return true;
  // Between a helper that sampled and the next (its backoff, or one that has not ended yet):
  // the counters are about to be the helper's again, and DCGM taking them in between would
  // only make the next helper yield.
  if (!child_)
    return !uuids_.empty() && held_in_backoff_;
  for (const std::string& uuid : uuids_) {
    auto it = gpus_.find(uuid);
    // Not reported yet: it is starting on that GPU. "yielded": a job's own profiler has them,
    // which DCGM must leave alone as much as the helper does. "unavailable" holds nothing.
    if (it == gpus_.end() || it->second.pm_sampling.empty() || it->second.pm_sampling == "ok" ||
        it->second.pm_sampling == "yielded")
      return true;
  }
  return false;
}

Capability CounterHelper::Describe() const {
  if (IsRelative(options_.helper))
    return {"absent",
            "EXPANSE_CUPTI_HELPER=" + options_.helper + " is not an absolute path; not run"};
  if (!options_.helper.empty() && access(options_.helper.c_str(), F_OK) == 0 &&
      !IsRegularFile(options_.helper))
    return {"absent", "expanse-cupti-helper at " + options_.helper + " is not a regular file"};
  if (options_.helper.empty() || access(options_.helper.c_str(), X_OK) != 0) {
    // Why the node has no build, as its install or last Prolog found (no driver, no variant
    // for it, archives that did not verify).
    const std::string note = release::NodeCuptiNoteFor(options_.helper);
    return {"absent", "expanse-cupti-helper not found" +
                          (options_.helper.empty() ? std::string(" (no shared prefix)")
                                                   : " at " + options_.helper) +
                          (note.empty() ? "" : "; " + note)};
  }
  if (uuids_.empty())
    return {"absent", "no GPU to sample (NVML lists none)"};
  if (!child_ && !fatal_.empty()) {
    // It could sample nothing at all (no driver, cuInit failed, a hung call): say why, as the
    // operator guide's "CUPTI PM sampling unavailable" does.
    const std::string code = fatal_.substr(0, fatal_.find_first_of(" :"));
    const std::string fix = cupti::FixFor(code);
    return {"degraded", "CUPTI PM sampling unavailable: " + fatal_ +
                            (fix.empty() ? "" : " (" + fix + ")") + "; restarting"};
  }
  if (!child_ && waiting_for_stuck_ && !stopping_.empty())
    return {"degraded", "expanse-cupti-helper " + (last_exit_.empty() ? "retired" : last_exit_) +
                            "; pid " + std::to_string(stopping_.front()->pid()) +
                            " has not ended (a driver call that does not return?): no new helper "
                            "until it does"};
  if (!child_ && !last_exit_.empty())
    return {"degraded", "expanse-cupti-helper " + last_exit_ + "; restarting"};
  size_t ok = 0, noted = 0;
  std::string first_problem, first_note;  // a note: an "ok" GPU's reason (sampled, with a caveat)
  for (const auto& uuid : uuids_) {
    auto it = gpus_.find(uuid);
    if (it != gpus_.end() && it->second.pm_sampling == "ok") {
      ++ok;
      if (!it->second.reason.empty() && noted++ == 0)
        first_note = it->second.reason;
      continue;
    }
    if (!first_problem.empty() || it == gpus_.end() || it->second.pm_sampling.empty())
      continue;
    const GpuState& gpu = it->second;
    first_problem = gpu.pm_sampling == "yielded"
                        ? uuid + " yielded to another profiler (" + gpu.reason + "); retrying"
                        : "CUPTI PM sampling unavailable on " + uuid + ": " + gpu.reason +
                              (gpu.fix.empty() ? "" : " (" + gpu.fix + ")");
  }
  if (ok == uuids_.size() && only_dropped_) {
    return {"degraded", "expanse-cupti-helper sends only values out of their range (" +
                            last_dropped_value_ + "): nothing is stored"};
  }
  if (ok == uuids_.size()) {
    // Said, so that an operator who sees no richer counters on an idle GPU knows why.
    return {"ok", "PM sampling on " + std::to_string(ok) + " GPUs (" + options_.helper + ")" +
                      (noted == 0 ? "" : "; " + std::to_string(noted) + " of them: " + first_note) +
                      (options_.escalation ? "" : "; escalation off (EXPANSE_PROFILING_ENABLE=0)")};
  }
  if (first_problem.empty())
    return {"degraded", "expanse-cupti-helper starting"};
  return {"degraded", first_problem};
}

nlohmann::json CounterHelper::Stats() const {
  nlohmann::json gpus = nlohmann::json::object();
  for (const auto& [uuid, gpu] : gpus_) {
    gpus[uuid] = {{"pm_sampling", gpu.pm_sampling}, {"series", gpu.series}};
    if (!gpu.reason.empty())
      gpus[uuid]["reason"] = gpu.reason;
  }
  nlohmann::json stats = {{"helper", options_.helper},
                          {"running", child_ != nullptr},
                          {"stopping", stopping_.size()},
                          {"records", records_},
                          {"refused", refused_},
                          {"dropped_values", dropped_values_},
                          {"samples", samples_},
                          {"restarts", restarts_},
                          {"set_changes", set_changes_},
                          {"escalations", escalations_},
                          {"released_to_job_tools", releases_},
                          {"held", held_},
                          {"gpus", gpus}};
  if (!last_exit_.empty())
    stats["last_exit"] = last_exit_;
  if (!last_refusal_.empty())
    stats["last_refusal"] = last_refusal_;
  if (!last_dropped_value_.empty())
    stats["last_dropped_value"] = last_dropped_value_;
  return stats;
}

}  // namespace expanse::agent
