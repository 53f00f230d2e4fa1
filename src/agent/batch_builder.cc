#include "agent/batch_builder.h"

namespace expanse::agent {

void BatchBuilder::AddSeries(const nlohmann::json& series) {
  for (const auto& s : series) {
    if (s.contains("v") && s["v"].is_array())
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

Status BatchBuilder::AddSpoolRecord(std::string_view kind, std::string_view payload) {
  const nlohmann::json json = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return InvalidArgumentError("spool record " + std::string(kind) + ": payload is not JSON")
        .WithReason("bad_record");
  }
  if (kind == "gpu_series") {
    if (!json.is_array()) {
      return InvalidArgumentError("spool record gpu_series: expected an array")
          .WithReason("bad_record");
    }
    AddSeries(json);
  } else if (kind == "job_event") {
    EXPANSE_ASSIGN_OR_RETURN(JobEvent event, JobEventFromJson(json));
    AddJobEvent(event);
  } else if (kind == "gpu_allocation") {
    if (!json.is_object()) {
      return InvalidArgumentError("spool record gpu_allocation: expected an object")
          .WithReason("bad_record");
    }
    AddAllocation(json);
  } else if (kind == "py_stacks") {
    if (!json.is_array()) {
      return InvalidArgumentError("spool record py_stacks: expected an array")
          .WithReason("bad_record");
    }
    AddStacks(json);
  } else {
    // Kinds from a newer sampler: ignored, not an error, so workers can be upgraded first.
    return OkStatus();
  }
  return OkStatus();
}

void BatchBuilder::RenameJobs(
    const std::function<std::optional<std::string>(const std::string&)>& rename) {
  for (nlohmann::json* section : {&job_events_, &allocations_, &stacks_}) {
    for (auto& item : *section) {
      if (!item.contains("job_id") || !item["job_id"].is_string())
        continue;
      if (auto renamed = rename(item["job_id"].get<std::string>()))
        item["job_id"] = *renamed;
    }
  }
  for (auto& series : series_) {
    const std::string device = series.value("device", "");
    if (!device.starts_with("job/"))
      continue;
    if (auto renamed = rename(device.substr(4)))
      series["device"] = "job/" + *renamed;
  }
}

bool BatchBuilder::empty() const {
  return series_.empty() && jobs_.empty() && job_events_.empty() && allocations_.empty() &&
         stacks_.empty();
}

nlohmann::json BatchBuilder::Render(uint64_t sequence, const std::string& stream) const {
  nlohmann::json doc = {
      {"version", 1}, {"stream", stream}, {"sequence", sequence}, {"series", series_}};
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
