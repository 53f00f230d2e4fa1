#include "agent/batch_builder.h"

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
bool HasRoom(const nlohmann::json& section, size_t limit, BatchBuilder::Intake& intake) {
  if (section.size() < limit)
    return true;
  Refuse(intake, InvalidArgumentError("the batch already holds " + std::to_string(limit) +
                                      " entries of this kind")
                     .WithReason("batch_full"));
  return false;
}

// Decodes each element of an array payload; keeps what `decode` accepts, re-encoded.
template <typename Decode>
void TakeEach(const nlohmann::json& list, std::string_view kind, const Decode& decode, size_t limit,
              nlohmann::json& into, BatchBuilder::Intake& intake) {
  if (!list.is_array()) {
    Refuse(intake,
           InvalidArgumentError(std::string(kind) + " must be an array").WithReason(kBadRecord));
    return;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (!HasRoom(into, limit, intake))
      continue;
    auto record = decode(list[i], std::string(kind) + "[" + std::to_string(i) + "]", kBadRecord);
    if (!record.ok()) {
      Refuse(intake, record.status());
      continue;
    }
    into.push_back(wire::Encode(*record));
    ++intake.accepted;
  }
}

}  // namespace

void BatchBuilder::AddSeries(const nlohmann::json& series) {
  for (const auto& s : series) {
    if (s.is_object() && s.contains("v") && s["v"].is_array())
      samples_ += s["v"].size();
    series_.push_back(s);
  }
}

void BatchBuilder::AddJobEvent(const JobEvent& e) {
  job_events_.push_back(
      {{"job_id", e.job_id}, {"host", e.host}, {"kind", e.kind}, {"at_ms", e.at_ms}});
}

void BatchBuilder::AddAllocation(const nlohmann::json& allocation) {
  allocations_.push_back(allocation);
}

void BatchBuilder::AddJob(const nlohmann::json& job) { jobs_.push_back(job); }

void BatchBuilder::AddStacks(const nlohmann::json& stacks) {
  for (const auto& entry : stacks)
    stacks_.push_back(entry);
}

BatchBuilder::Intake BatchBuilder::AddSpoolRecord(std::string_view kind, std::string_view payload) {
  Intake intake;
  if (kind != "gpu_series" && kind != "job_event" && kind != "gpu_allocation" &&
      kind != "py_stacks") {
    return intake;  // from a newer sampler
  }
  Result<nlohmann::json> json = wire::ParseJson(payload, SpoolRecordLimits());
  if (!json.ok()) {
    Refuse(intake, InvalidArgumentError(std::string(kind) + ": " + json.status().message())
                       .WithReason(json.status().reason()));
    return intake;
  }
  if (kind == "gpu_series") {
    const auto decode = [this](const nlohmann::json& value, const std::string& path,
                               std::string_view reason) -> Result<wire::SeriesRecord> {
      EXPANSE_ASSIGN_OR_RETURN(wire::SeriesRecord series, wire::DecodeSeries(value, path, reason));
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
    allocations_.push_back(wire::Encode(*allocation));
    ++intake.accepted;
  } else {
    TakeEach(*json, kind, wire::DecodeStack, wire::kMaxBatchRecords, stacks_, intake);
  }
  return intake;
}

void BatchBuilder::RenameJobs(
    const std::function<std::optional<std::string>(const std::string&)>& rename) {
  for (nlohmann::json* section : {&job_events_, &allocations_, &stacks_}) {
    for (auto& item : *section) {
      if (!item.is_object())
        continue;
      auto id = item.find("job_id");
      if (id == item.end() || !id->is_string())
        continue;
      if (auto renamed = rename(id->get<std::string>()))
        *id = *renamed;
    }
  }
  for (auto& series : series_) {
    if (!series.is_object())
      continue;
    auto device = series.find("device");
    if (device == series.end() || !device->is_string())
      continue;
    const std::string& name = device->get_ref<const std::string&>();
    if (!name.starts_with("job/"))
      continue;
    if (auto renamed = rename(name.substr(4)))
      *device = "job/" + *renamed;
  }
}
bool BatchBuilder::empty() const {
  return series_.empty() && jobs_.empty() && job_events_.empty() && allocations_.empty() &&
         stacks_.empty();
}

nlohmann::json BatchBuilder::Render(uint64_t sequence, const std::string& stream) const {
  nlohmann::json doc = wire::EncodeBatchHeader({.stream = stream, .sequence = sequence});
  doc["series"] = series_;
  if (!jobs_.empty())
    doc["jobs"] = jobs_;
  if (!job_events_.empty())
    doc["job_events"] = job_events_;
  if (!allocations_.empty())
    doc["gpu_allocations"] = allocations_;
  if (!stacks_.empty())
    doc["stacks"] = stacks_;
  return doc;
}

}  // namespace expanse::agent
