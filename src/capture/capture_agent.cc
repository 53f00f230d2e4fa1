#include "capture/capture_agent.h"

#include <algorithm>
#include <utility>

#include "capture/aggregate_json.h"
#include "capture/capture_trigger.h"
#include "capture/spool_files.h"

namespace expanse::capture {

CaptureAgent::CaptureAgent(AgentOptions options, ProcessIdentity process,
                           std::function<uint64_t()> now_ms)
    : options_(std::move(options)),
      now_ms_(std::move(now_ms)),
      process_(std::move(process)),
      window_(now_ms_()) {}

void CaptureAgent::OnActivity(const Activity& activity) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.Add(activity);
  if (segment_)
    segment_->Add(activity);
}

void CaptureAgent::OnDropped(uint64_t records) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.AddDropped(records);
  if (segment_)
    segment_->AddDropped(records);
}

void CaptureAgent::Tick() {
  const uint64_t now = now_ms_();
  std::optional<std::pair<std::string, std::string>> aggregate;
  std::optional<std::pair<std::string, std::string>> finished;
  std::string trigger_error;
  std::optional<CaptureTrigger> trigger;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!segment_)
      trigger = ReadTrigger(options_.control_dir, process_.job_id, &trigger_error);
    if (trigger && trigger->id != last_trigger_id_ && trigger->until_ms > now) {
      last_trigger_id_ = trigger->id;
      segment_until_ms_ = std::min(trigger->until_ms, now + options_.trace_window_ms);
      segment_.emplace(process_, *trigger, now, options_.segment_limits);
    } else if (segment_ && now >= segment_until_ms_) {
      finished.emplace(segment_->FileName(), segment_->ToJson(now));
      segment_.reset();
    }
    if (now >= window_.start_ms() + options_.window_ms) {
      const bool empty = window_.empty();
      WindowSummary summary = window_.Close(now);
      if (!empty)
        aggregate.emplace(AggregateFileName(process_, summary), AggregateJson(process_, summary));
    }
  }
  if (!trigger_error.empty())
    Note("trigger", "phase B trigger ignored: " + trigger_error);
  if (finished)
    Spool(finished->first, finished->second, "trace segment");
  if (aggregate)
    Spool(aggregate->first, aggregate->second, "aggregate");
}

void CaptureAgent::Finish() {
  const uint64_t now = now_ms_();
  std::optional<std::pair<std::string, std::string>> aggregate;
  std::optional<std::pair<std::string, std::string>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (segment_) {
      finished.emplace(segment_->FileName(), segment_->ToJson(now));
      segment_.reset();
    }
    if (!window_.empty()) {
      WindowSummary summary = window_.Close(now);
      aggregate.emplace(AggregateFileName(process_, summary), AggregateJson(process_, summary));
    }
  }
  if (finished)
    Spool(finished->first, finished->second, "trace segment");
  if (aggregate)
    Spool(aggregate->first, aggregate->second, "aggregate");
}

void CaptureAgent::ResetAfterFork(ProcessIdentity process) {
  std::lock_guard<std::mutex> lock(mu_);
  process_ = std::move(process);
  window_ = ActivityWindow(now_ms_());
  segment_.reset();
  noted_.clear();
}

std::string CaptureAgent::LogFileName() const {
  return "agent-" + process_.job_id + "-" + process_.host + "-" + std::to_string(process_.pid) +
         ".log";
}

void CaptureAgent::Note(const std::string& key, const std::string& line) {
  std::string file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (noted_.size() >= 32 || !noted_.insert(key).second)
      return;
    file = LogFileName();
  }
  AppendSpoolLine(options_.spool_dir, file, std::to_string(now_ms_()) + " " + line);
}

void CaptureAgent::Spool(const std::string& name, const std::string& content, const char* what) {
  const std::string error =
      WriteSpoolFile(options_.spool_dir, name, content, options_.min_free_bytes);
  if (!error.empty())
    Note(std::string("spool ") + what, std::string(what) + " not written: " + error);
}

}  // namespace expanse::capture
