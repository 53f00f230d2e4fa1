#include "agent/batch_builder.h"

#include <utility>

#include "core/quote.h"
#include "wire/json_parse.h"
#include "wire/records.h"

namespace expanse::agent {
namespace {

constexpr char kBadRecord[] = "bad_record";

// A spool record is at most 8 MiB (spool_format.h); its JSON is an array of flat objects whose
// deepest member is a series' dt/v array (depth 3).
wire::JsonLimits SpoolRecordLimits() {
  wire::JsonLimits limits;
  limits.max_depth = 8;
  limits.max_values = 8u << 20;
  limits.max_string_bytes = 64u << 10;
  return limits;
}

void Refuse(BatchBuilder::Intake& intake, Status why) {
  ++intake.refused;
  if (intake.first_refusal.ok())
    intake.first_refusal = std::move(why);
}

// Whether `section` may take another entry: past the server's limits for one batch
// (wire/records.h) the entry is refused here rather than the whole batch there. A worker's
// file becomes a batch of its own, so only a file far beyond what a sampler writes meets it.
template <typename Record>
bool HasRoom(const std::vector<Record>& section, size_t limit, BatchBuilder::Intake& intake) {
  if (section.size() < limit)
    return true;
  Refuse(intake, InvalidArgumentError("the batch already holds " + std::to_string(limit) +
                                      " entries of this kind")
                     .WithReason("batch_full"));
  return false;
}

// Refuses a record of another host than the spool directory's (see AddSpoolRecord).
Status CheckHost(std::string_view only_host, const std::string& host, const std::string& path) {
  if (only_host.empty() || host == only_host)
    return OkStatus();
  return InvalidArgumentError(path + " names host " + QuoteForMessage(host) + ", not " +
                              std::string(only_host) + " whose spool it came from")
      .WithReason("wrong_host");
}

// Decodes each element of an array payload; keeps what `decode` accepts.
template <typename Decode, typename Record>
void TakeEach(const nlohmann::json& list, std::string_view kind, const Decode& decode, size_t limit,
              std::vector<Record>& into, BatchBuilder::Intake& intake) {
  if (!list.is_array()) {
    Refuse(intake,
           InvalidArgumentError(std::string(kind) + " must be an array").WithReason(kBadRecord));
    return;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (!HasRoom(into, limit, intake))
      continue;
    Result<Record> record =
        decode(list[i], std::string(kind) + "[" + std::to_string(i) + "]", kBadRecord);
    if (!record.ok()) {
      Refuse(intake, record.status());
      continue;
    }
    into.push_back(*std::move(record));
    ++intake.accepted;
  }
}

template <typename Record>
nlohmann::json EncodeAll(const std::vector<Record>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const Record& r : records)
    out.push_back(wire::Encode(r));
  return out;
}

}  // namespace

void BatchBuilder::AddSeries(std::vector<wire::SeriesRecord> series) {
  for (wire::SeriesRecord& s : series) {
    samples_ += s.v.size();
    series_.push_back(std::move(s));
  }
}

void BatchBuilder::AddJobEvent(const JobEvent& e) {
  job_events_.push_back({.job_id = e.job_id, .host = e.host, .kind = e.kind, .at_ms = e.at_ms});
}

void BatchBuilder::AddAllocation(wire::GpuAllocationRecord allocation) {
  allocations_.push_back(std::move(allocation));
}

void BatchBuilder::AddJob(wire::JobRecord job) { jobs_.push_back(std::move(job)); }

void BatchBuilder::AddStacks(std::vector<wire::StackRecord> stacks) {
  for (wire::StackRecord& entry : stacks)
    stacks_.push_back(std::move(entry));
}

void BatchBuilder::AddCaptureAggregates(std::vector<wire::CaptureAggregateRecord> aggregates) {
  for (wire::CaptureAggregateRecord& entry : aggregates)
    captures_.push_back(std::move(entry));
}

BatchBuilder::Intake BatchBuilder::AddSpoolRecord(std::string_view kind, std::string_view payload,
                                                  std::string_view only_host) {
  Intake intake;
  if (kind != "gpu_series" && kind != "job_event" && kind != "gpu_allocation" &&
      kind != "py_stacks" && kind != "capture_aggregates") {
    return intake;  // from a newer sampler
  }
  Result<nlohmann::json> json = wire::ParseJson(payload, SpoolRecordLimits());
  if (!json.ok()) {
    Refuse(intake, InvalidArgumentError(std::string(kind) + ": " + json.status().message())
                       .WithReason(json.status().reason()));
    return intake;
  }
  if (kind == "gpu_series") {
    const auto decode = [this, only_host](const nlohmann::json& value, const std::string& path,
                                          std::string_view reason) -> Result<wire::SeriesRecord> {
      EXPANSE_ASSIGN_OR_RETURN(wire::SeriesRecord series, wire::DecodeSeries(value, path, reason));
      EXPANSE_RETURN_IF_ERROR(CheckHost(only_host, series.host, path));
      if (samples_ + series.v.size() > wire::kMaxSeriesSamples) {
        return InvalidArgumentError("the batch already holds " + std::to_string(samples_) +
                                    " samples")
            .WithReason("batch_full");
      }
      samples_ += series.v.size();
      return series;
    };
    TakeEach(*json, kind, decode, wire::kMaxBatchSeries, series_, intake);
  } else if (kind == "job_event") {
    Result<JobEvent> event = JobEventFromJson(*json);
    if (!event.ok()) {
      Refuse(intake, InvalidArgumentError(event.status().message()).WithReason(kBadRecord));
      return intake;
    }

    if (!HasRoom(job_events_, wire::kMaxBatchRecords, intake))
      return intake;
    AddJobEvent(*event);
    ++intake.accepted;
  } else if (kind == "gpu_allocation") {
    Result<wire::GpuAllocationRecord> allocation =
        wire::DecodeGpuAllocation(*json, std::string(kind), kBadRecord);
    if (!allocation.ok()) {
      Refuse(intake, allocation.status());
      return intake;
    }

    if (!HasRoom(allocations_, wire::kMaxBatchRecords, intake))
      return intake;
    allocations_.push_back(*std::move(allocation));
    ++intake.accepted;
  } else if (kind == "capture_aggregates") {
    const auto decode = [only_host](
                            const nlohmann::json& value, const std::string& path,
                            std::string_view reason) -> Result<wire::CaptureAggregateRecord> {
      EXPANSE_ASSIGN_OR_RETURN(wire::CaptureAggregateRecord r,
                               wire::DecodeCaptureAggregate(value, path, reason));
      EXPANSE_RETURN_IF_ERROR(CheckHost(only_host, r.host, path));
      return r;
    };
    TakeEach(*json, kind, decode, wire::kMaxBatchRecords, captures_, intake);
  } else {
    const auto decode = [only_host](const nlohmann::json& value, const std::string& path,
                                    std::string_view reason) -> Result<wire::StackRecord> {
      EXPANSE_ASSIGN_OR_RETURN(wire::StackRecord stack, wire::DecodeStack(value, path, reason));
      EXPANSE_RETURN_IF_ERROR(CheckHost(only_host, stack.host, path));
      return stack;
    };
    TakeEach(*json, kind, decode, wire::kMaxBatchRecords, stacks_, intake);
  }
  return intake;
}

void BatchBuilder::RenameJobs(
    const std::function<std::optional<std::string>(const std::string&)>& rename) {
  auto apply = [&](std::string& job_id) {
    if (auto renamed = rename(job_id))
      job_id = *std::move(renamed);
  };
  for (wire::JobEventRecord& e : job_events_)
    apply(e.job_id);
  for (wire::GpuAllocationRecord& a : allocations_)
    apply(a.job_id);
  for (wire::StackRecord& s : stacks_)
    apply(s.job_id);
  for (wire::CaptureAggregateRecord& c : captures_)
    apply(c.job_id);
  for (wire::SeriesRecord& s : series_) {
    if (!s.device.starts_with("job/"))
      continue;
    if (auto renamed = rename(s.device.substr(4)))
      s.device = "job/" + *renamed;
  }
}

bool BatchBuilder::empty() const {
  return series_.empty() && jobs_.empty() && job_events_.empty() && allocations_.empty() &&
         stacks_.empty() && captures_.empty();
}

nlohmann::json BatchBuilder::Render(uint64_t sequence, const std::string& stream) const {
  nlohmann::json doc = wire::EncodeBatchHeader({.stream = stream, .sequence = sequence});
  doc["series"] = EncodeAll(series_);
  if (!jobs_.empty())
    doc["jobs"] = EncodeAll(jobs_);
  if (!job_events_.empty())
    doc["job_events"] = EncodeAll(job_events_);
  if (!allocations_.empty())
    doc["gpu_allocations"] = EncodeAll(allocations_);
  if (!stacks_.empty())
    doc["stacks"] = EncodeAll(stacks_);
  if (!captures_.empty())
    doc["capture_aggregates"] = EncodeAll(captures_);
  return doc;
}

}  // namespace expanse::agent
