#include "wire/records.h"

#include <cmath>
#include <limits>
#include <utility>

#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::wire {

using nlohmann::json;

namespace {

constexpr int64_t kMaxGpuNumber = 1 << 20;

}  // namespace

Result<SeriesRecord> DecodeSeries(const json& value, const std::string& path,
                                  std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Object(value, path, std::string(reason)));
  SeriesRecord s;
  EXPANSE_ASSIGN_OR_RETURN(s.host, r.Name("host", 253, kHostChars, true, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(s.device, r.Name("device", 96, "._:/+-", true, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(s.metric, r.Name("metric", 64, "._", false, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(s.t0, r.Int("t0", 0, kMaxTimeMs, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const json* dt, r.Array("dt", kMaxSeriesSamples, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(const json* v, r.Array("v", kMaxSeriesSamples, Need::kRequired));
  if (dt->size() != v->size())
    return BadField(r.PathOf("v"), "must have as many entries as dt", reason);
  s.dt.reserve(dt->size());
  s.v.reserve(v->size());
  for (size_t i = 0; i < dt->size(); ++i) {
    int64_t gap = 0;
    if (!IntegerIn((*dt)[i], 0, kMaxSampleGapMs, &gap)) {
      return BadField(r.PathOf("dt[" + std::to_string(i) + "]"),
                      "must be an integer 0.." + std::to_string(kMaxSampleGapMs), reason);
    }
    const json& x = (*v)[i];
    if (!x.is_number() || !std::isfinite(x.get<double>())) {
      return BadField(r.PathOf("v[" + std::to_string(i) + "]"), "must be a finite number", reason);
    }
    s.dt.push_back(gap);
    s.v.push_back(x.get<double>());
  }
  return s;
}

Result<JobEventRecord> DecodeJobEvent(const json& value, const std::string& path,
                                      std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Object(value, path, std::string(reason)));
  JobEventRecord e;
  EXPANSE_ASSIGN_OR_RETURN(e.job_id, r.Text("job_id", 64, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(e.host, r.Text("host", 253, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(e.kind, r.Text("kind", 8, Need::kRequired));
  if (e.kind != "start" && e.kind != "end")
    return BadField(r.PathOf("kind"), "must be start or end", reason);
  EXPANSE_ASSIGN_OR_RETURN(e.at_ms, r.Int("at_ms", 1, kMaxTimeMs, Need::kRequired));
  return e;
}

Result<GpuAllocationRecord> DecodeGpuAllocation(const json& value, const std::string& path,
                                                std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Object(value, path, std::string(reason)));
  GpuAllocationRecord a;
  EXPANSE_ASSIGN_OR_RETURN(a.job_id, r.Text("job_id", 64, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.host, r.Text("host", 253, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.gpu_uuid, r.Text("gpu_uuid", 96, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.gpu_index, r.Int("gpu_index", -1, kMaxGpuNumber, Need::kOptional, -1));
  EXPANSE_ASSIGN_OR_RETURN(a.gpu_minor, r.Int("gpu_minor", -1, kMaxGpuNumber, Need::kOptional, -1));
  EXPANSE_ASSIGN_OR_RETURN(a.from_ms, r.Int("from_ms", 1, kMaxTimeMs, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(a.to_ms, r.Int("to_ms", 0, kMaxTimeMs, Need::kOptional));
  if (a.to_ms != 0 && a.to_ms < a.from_ms)
    return BadField(r.PathOf("to_ms"), "is before from_ms", reason);
  EXPANSE_ASSIGN_OR_RETURN(
      a.slurm_job_id,
      r.Int("slurm_job_id", 0, std::numeric_limits<uint32_t>::max(), Need::kOptional));
  return a;
}

Result<StackRecord> DecodeStack(const json& value, const std::string& path,
                                std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Object(value, path, std::string(reason)));
  StackRecord s;
  EXPANSE_ASSIGN_OR_RETURN(s.job_id, r.Text("job_id", 64, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(s.host, r.Name("host", 253, kHostChars, true, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(s.window_start_ms,
                           r.Int("window_start_ms", 1, kMaxTimeMs - 1, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(
      s.window_end_ms, r.Int("window_end_ms", s.window_start_ms + 1, kMaxTimeMs, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(s.folded, r.Text("folded", kMaxFoldedStackBytes, Need::kRequired));
  if (s.folded.front() == ';' || s.folded.back() == ';' ||
      s.folded.find(";;") != std::string::npos) {
    return BadField(r.PathOf("folded"), "has an empty frame (frames are separated by one ';')",
                    reason);
  }
  EXPANSE_ASSIGN_OR_RETURN(s.thread_state, r.Text("thread_state", 16, Need::kOptional));
  if (s.thread_state != "" && s.thread_state != "gil" && s.thread_state != "running" &&
      s.thread_state != "idle") {
    return BadField(r.PathOf("thread_state"), "must be gil, running, idle or empty (unknown)",
                    reason);
  }
  EXPANSE_ASSIGN_OR_RETURN(s.count, r.Int("count", 1, kMaxStackSampleCount, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(s.gpu_idle, r.Bool("gpu_idle", false));
  return s;
}

Result<JobRecord> DecodeJob(const json& value, const std::string& path, std::string_view reason) {
  EXPANSE_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Object(value, path, std::string(reason)));
  JobRecord j;
  EXPANSE_ASSIGN_OR_RETURN(j.job_id, r.Text("job_id", kMaxJobIdBytes, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(j.name, r.Text("name", kMaxJobNameBytes, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.user, r.Text("user", kMaxJobWordBytes, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.account, r.Text("account", kMaxJobWordBytes, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.partition, r.Text("partition", kMaxJobWordBytes, Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.state, r.Text("state", kMaxJobStateBytes, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(j.nodes, r.Text("nodes", kMaxJobNodesBytes, Need::kOptional));
  for (auto [key, field] :
       {std::pair{"submit_ms", &j.submit_ms}, std::pair{"start_ms", &j.start_ms},
        std::pair{"end_ms", &j.end_ms}, std::pair{"observed_ms", &j.observed_ms}}) {
    EXPANSE_ASSIGN_OR_RETURN(*field, r.Int(key, 0, kMaxTimeMs, Need::kOptional));
  }
  constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();
  for (auto [key, field] :
       {std::pair{"req_nodes", &j.req_nodes}, std::pair{"req_cpus", &j.req_cpus},
        std::pair{"req_gpus", &j.req_gpus}, std::pair{"req_mem_mib", &j.req_mem_mib},
        std::pair{"time_limit_s", &j.time_limit_s}}) {
    EXPANSE_ASSIGN_OR_RETURN(*field, r.Int(key, 0, kMaxCount, Need::kOptional));
  }
  return j;
}

Result<BatchHeader> DecodeBatchHeader(const FieldReader& batch) {
  EXPANSE_RETURN_IF_ERROR(batch.Expect("version", kIngestBatchVersion));
  BatchHeader h;
  EXPANSE_ASSIGN_OR_RETURN(h.stream, batch.Name("stream", 32, "-_", false, Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(
      h.sequence, batch.Uint("sequence", std::numeric_limits<uint64_t>::max(), Need::kRequired));
  return h;
}

json Encode(const SeriesRecord& r) {
  json out = {{"host", r.host}, {"metric", r.metric}, {"t0", r.t0}, {"dt", r.dt}, {"v", r.v}};
  if (!r.device.empty())
    out["device"] = r.device;
  return out;
}

json Encode(const JobEventRecord& r) {
  return {{"job_id", r.job_id}, {"host", r.host}, {"kind", r.kind}, {"at_ms", r.at_ms}};
}

json Encode(const GpuAllocationRecord& r) {
  json out = {{"job_id", r.job_id},       {"host", r.host},           {"gpu_uuid", r.gpu_uuid},
              {"gpu_index", r.gpu_index}, {"gpu_minor", r.gpu_minor}, {"from_ms", r.from_ms},
              {"to_ms", r.to_ms}};
  if (r.slurm_job_id != 0)
    out["slurm_job_id"] = r.slurm_job_id;
  return out;
}

json Encode(const StackRecord& r) {
  return {{"job_id", r.job_id},
          {"host", r.host},
          {"window_start_ms", r.window_start_ms},
          {"window_end_ms", r.window_end_ms},
          {"folded", r.folded},
          {"thread_state", r.thread_state},
          {"count", r.count},
          {"gpu_idle", r.gpu_idle}};
}

json Encode(const JobRecord& r) {
  return {{"job_id", r.job_id},
          {"name", r.name},
          {"user", r.user},
          {"account", r.account},
          {"partition", r.partition},
          {"state", r.state},
          {"nodes", r.nodes},
          {"submit_ms", r.submit_ms},
          {"start_ms", r.start_ms},
          {"end_ms", r.end_ms},
          {"req_nodes", r.req_nodes},
          {"req_cpus", r.req_cpus},
          {"req_gpus", r.req_gpus},
          {"req_mem_mib", r.req_mem_mib},
          {"time_limit_s", r.time_limit_s},
          {"observed_ms", r.observed_ms}};
}

json EncodeBatchHeader(const BatchHeader& h) {
  return {{"version", kIngestBatchVersion}, {"stream", h.stream}, {"sequence", h.sequence}};
}

json Encode(const IngestAnswer& a) {
  return {{"batch_id", a.batch_id}, {"duplicate", a.duplicate},      {"samples", a.samples},
          {"jobs", a.jobs},         {"durable", a.durable},          {"store_epoch", a.store_epoch},
          {"mark", a.mark},         {"durable_mark", a.durable_mark}};
}

json EncodeSyncAnswer(const IngestAnswer& a) {
  return {{"store_epoch", a.store_epoch}, {"durable_mark", a.durable_mark}};
}

IngestAnswer DecodeIngestAnswer(std::string_view body) {
  IngestAnswer out;
  Result<json> doc = ParseJson(body, JsonLimits{.max_depth = 8, .max_values = 10'000});
  if (!doc.ok() || !doc->is_object())
    return out;
  Result<FieldReader> r = FieldReader::Object(*doc, "answer", "invalid_answer");
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  // value_or: each member on its own; one of the wrong type costs only itself.
  out.batch_id = r->Text("batch_id", 512, Need::kOptional).value_or("");
  out.duplicate = r->Bool("duplicate", false).value_or(false);
  out.samples = r->Uint("samples", kMax, Need::kOptional).value_or(0);
  out.jobs = r->Uint("jobs", kMax, Need::kOptional).value_or(0);
  out.durable = r->Bool("durable", false).value_or(false);
  out.store_epoch = r->Text("store_epoch", 256, Need::kOptional).value_or("");
  out.mark = r->Uint("mark", kMax, Need::kOptional).value_or(0);
  out.durable_mark = r->Uint("durable_mark", kMax, Need::kOptional).value_or(0);
  return out;
}

}  // namespace expanse::wire
