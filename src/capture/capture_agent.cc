#include "capture/capture_agent.h"

#include <algorithm>
#include <optional>
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

void CaptureAgent::OnUnobserved(uint64_t ms) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.AddUnobserved(ms);
  if (segment_)
    segment_->AddUnobserved(ms);
}

bool CaptureAgent::Tracing() {
  std::lock_guard<std::mutex> lock(mu_);
  return segment_.has_value();
}

bool CaptureAgent::TraceEndsBy(uint64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  return segment_.has_value() && now_ms >= segment_until_ms_;
}

bool CaptureAgent::WithTrace(const std::function<void(TraceSegment&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!segment_)
    return false;
  fn(*segment_);
  return true;
}

namespace {

// A window ends after it starts and spans at most an hour (the wire's bound): after the process
// was stopped for longer (a suspended job), it is reported as the last hour before its end.
WindowSummary CloseWindow(ActivityWindow& window, uint64_t now) {
  const uint64_t end = std::max(now, window.start_ms() + 1);
  WindowSummary summary = window.Close(end);
  summary.start_ms = std::max(summary.start_ms, end - std::min<uint64_t>(end - 1, kMaxWindowMs));
  return summary;
}

}  // namespace

void CaptureAgent::Tick() {
  const uint64_t now = now_ms_();
  std::optional<std::pair<std::string, std::string>> aggregate;
  std::optional<TraceSegment> finished;
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
      // Taken out whole: it is serialised below, without the lock CUPTI's thread needs.
      finished.emplace(std::move(*segment_));
      segment_.reset();
    }
    if (now >= window_.start_ms() + options_.window_ms) {
      const bool empty = window_.empty();
      WindowSummary summary = CloseWindow(window_, now);
      if (!empty)
        aggregate.emplace(AggregateFileName(process_, summary), AggregateJson(process_, summary));
    }
  }
  if (!trigger_error.empty())
    Note("trigger", "phase B trigger ignored: " + trigger_error);
  if (finished)
    Spool(finished->FileName(), finished->ToJson(now), "trace segment");
  if (aggregate)
    Spool(aggregate->first, aggregate->second, "aggregate");
}

void CaptureAgent::Finish() {
  const uint64_t now = now_ms_();
  std::optional<std::pair<std::string, std::string>> aggregate;
  std::optional<TraceSegment> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (segment_) {
      finished.emplace(std::move(*segment_));
      segment_.reset();
    }
    if (!window_.empty()) {
      WindowSummary summary = CloseWindow(window_, now);
      aggregate.emplace(AggregateFileName(process_, summary), AggregateJson(process_, summary));
    }
  }
  if (finished)
    Spool(finished->FileName(), finished->ToJson(now), "trace segment");
  if (aggregate)
    Spool(aggregate->first, aggregate->second, "aggregate");
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
