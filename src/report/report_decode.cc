#include "report/report_decode.h"

#include <string>
#include <utility>

#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::report {
namespace {

using nlohmann::json;
using wire::FieldReader;

constexpr wire::Need kOptional = wire::Need::kOptional;
constexpr wire::Need kRequired = wire::Need::kRequired;

// A 1000-job page with hosts and usage is about 1.5 MB; a verdict's evidence holds stacks. The
// value count bounds memory whatever the shape.
constexpr wire::JsonLimits kAnswerLimits{
    .max_depth = 16, .max_values = 4'000'000, .max_string_bytes = 256 * 1024};
constexpr size_t kMaxName = 4096;
constexpr size_t kMaxNodeList = 64 * 1024;
constexpr size_t kMaxSuggestion = 16 * 1024;
constexpr int64_t kMaxCount = 1'000'000'000;
// Percentages, hours and MiB: generous bounds that still refuse absurd or non-finite figures.
constexpr double kMaxFigure = 1e15;

Status Malformed(std::string_view what, const Status& error) {
  return DataLossError("the server's " + std::string(what) +
                       " answer is malformed: " + error.message())
      .WithReason("invalid_answer");
}

Result<json> ParseObject(std::string_view body, std::string_view what) {
  Result<json> doc = wire::ParseJson(body, kAnswerLimits);
  if (!doc.ok())
    return Malformed(what, doc.status());
  if (!doc->is_object())
    return Malformed(what, InvalidArgumentError("it is not a JSON object"));
  return doc;
}

Result<std::optional<double>> NullableDouble(const FieldReader& r, const char* key) {
  if (r.Find(key) == nullptr)
    return std::optional<double>();
  EXPANSE_ASSIGN_OR_RETURN(double v, r.Double(key, 0, kMaxFigure, kRequired));
  return std::optional<double>(v);
}

Result<Requested> ReadRequested(const FieldReader& job) {
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader r, job.Member("requested", kRequired));
  Requested out;
  EXPANSE_ASSIGN_OR_RETURN(out.nodes, r.Int("nodes", 0, kMaxCount, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.cpus, r.Int("cpus", 0, kMaxCount, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.gpus, r.Int("gpus", 0, kMaxCount, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.mem_mib, r.Int("mem_mib", 0, INT64_MAX / 2, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.time_limit_s, r.Int("time_limit_s", 0, INT64_MAX / 2, kOptional));
  return out;
}

Result<Used> ReadUsed(const FieldReader& job) {
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader r, job.Member("used", kRequired));
  Used u;
  EXPANSE_ASSIGN_OR_RETURN(u.gpus_allocated, r.Int("gpus_allocated", 0, kMaxCount, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(u.gpus_active, r.Int("gpus_active", 0, kMaxCount, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(u.has_gpu_samples, r.Bool("has_gpu_samples", false));
  EXPANSE_ASSIGN_OR_RETURN(u.sm_mean, r.Double("sm_mean", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(u.sm_peak, r.Double("sm_peak", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(u.sm_active_mean, NullableDouble(r, "sm_active_mean"));
  EXPANSE_ASSIGN_OR_RETURN(u.tensor_active_mean, NullableDouble(r, "tensor_active_mean"));
  EXPANSE_ASSIGN_OR_RETURN(u.counters_source, r.Text("counters_source", 64, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(u.gpu_mem_peak_mib,
                           r.Double("gpu_mem_peak_mib", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(u.allocated_gpu_hours,
                           r.Double("allocated_gpu_hours", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(u.idle_gpu_hours, r.Double("idle_gpu_hours", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(u.idle_tail_ms, r.Int("idle_tail_ms", 0, wire::kMaxTimeMs, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(u.cpu_efficiency, NullableDouble(r, "cpu_efficiency"));
  EXPANSE_ASSIGN_OR_RETURN(u.mem_efficiency, NullableDouble(r, "mem_efficiency"));
  return u;
}

// The members the job list and the one-job answer share.
Result<Job> ReadJob(const FieldReader& r) {
  Job j;
  EXPANSE_ASSIGN_OR_RETURN(j.compute_id, r.Text("compute_id", kMaxName, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(j.job_id, r.Text("job_id", 64, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(j.name, r.Text("name", kMaxName, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.user, r.Text("user", kMaxName, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.account, r.Text("account", kMaxName, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.partition, r.Text("partition", kMaxName, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.state, r.Text("state", kMaxName, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.nodes, r.Text("nodes", kMaxNodeList, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.submit_ms, r.Int("submit_ms", 0, wire::kMaxTimeMs, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.start_ms, r.Int("start_ms", 0, wire::kMaxTimeMs, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(j.end_ms, r.Int("end_ms", 0, wire::kMaxTimeMs, kOptional));
  if (j.end_ms != 0 && j.start_ms != 0 && j.end_ms < j.start_ms)
    return r.Bad("end_ms", "is before start_ms");
  EXPANSE_ASSIGN_OR_RETURN(j.requested, ReadRequested(r));
  EXPANSE_ASSIGN_OR_RETURN(j.used, ReadUsed(r));
  EXPANSE_ASSIGN_OR_RETURN(j.used.omitted, r.Bool("used_omitted", false));
  EXPANSE_ASSIGN_OR_RETURN(j.hosts, r.Texts("hosts", kMaxGpus, kMaxName, kOptional));
  return j;
}

Result<Job> ReadJobWithGpus(const FieldReader& r) {
  EXPANSE_ASSIGN_OR_RETURN(Job j, ReadJob(r));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<FieldReader> gpus,
                           r.Objects("gpus", kMaxGpus, kOptional));
  for (const FieldReader& g : gpus) {
    JobGpu gpu;
    EXPANSE_ASSIGN_OR_RETURN(gpu.host, g.Text("host", kMaxName, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(gpu.gpu_uuid, g.Text("gpu_uuid", kMaxName, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(gpu.gpu_index, g.Int("gpu_index", -1, kMaxCount, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(gpu.from_ms, g.Int("from_ms", 0, wire::kMaxTimeMs, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(gpu.to_ms, g.Int("to_ms", 0, wire::kMaxTimeMs, kOptional));
    j.gpus.push_back(std::move(gpu));
  }
  return j;
}

// One timeline bucket [t_ms, min, max, mean]; nullopt for a bucket whose figures are null (the
// server writes a NaN mean as null), which then reads as unsampled.
Result<std::optional<TimelinePoint>> ReadPoint(const json& value, const std::string& path) {
  const auto bad = [&](const std::string& suffix, std::string_view what) {
    return wire::BadField(path + suffix, what, "invalid_answer");
  };
  if (!value.is_array() || value.size() != 4)
    return bad("", "must be an array [t_ms, min, max, mean]");
  TimelinePoint p;
  if (!wire::IntegerIn(value[0], 0, wire::kMaxTimeMs, &p.t_ms))
    return bad("[0]", "must be a time in Unix ms");
  double* figures[] = {&p.min, &p.max, &p.mean};
  for (size_t i = 1; i < 4; ++i) {
    if (value[i].is_null())
      return std::optional<TimelinePoint>();
    const double v = value[i].is_number() ? value[i].get<double>() : -1;
    if (!value[i].is_number() || !(v >= -kMaxFigure && v <= kMaxFigure))
      return bad("[" + std::to_string(i) + "]", "must be a number");
    *figures[i - 1] = v;
  }
  return std::optional<TimelinePoint>(p);
}

Result<Verdict> ReadVerdict(const FieldReader& r) {
  Verdict v;
  EXPANSE_ASSIGN_OR_RETURN(v.code, r.Name("code", 64, "_", false, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(v.from_ms, r.Int("from_ms", 0, wire::kMaxTimeMs, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(v.to_ms, r.Int("to_ms", 0, wire::kMaxTimeMs, kRequired));
  if (v.to_ms < v.from_ms)
    return r.Bad("to_ms", "is before from_ms");
  EXPANSE_ASSIGN_OR_RETURN(v.confidence, r.Double("confidence", 0, 1, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(v.gpus, r.Texts("gpus", kMaxGpus, kMaxName, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(v.hosts, r.Texts("hosts", kMaxGpus, kMaxName, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(v.suggestion, r.Text("suggestion", kMaxSuggestion, kOptional));
  if (const json* evidence = r.Find("evidence"); evidence != nullptr) {
    if (!evidence->is_object())
      return r.Bad("evidence", "must be an object");
    v.evidence = *evidence;
  }
  return v;
}

Result<LedgerTotals> ReadTotals(const FieldReader& ledger) {
  EXPANSE_ASSIGN_OR_RETURN(const FieldReader t, ledger.Member("totals", kRequired));
  LedgerTotals out;
  EXPANSE_ASSIGN_OR_RETURN(out.gpus, t.Int("gpus", 0, kMaxCount, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.never_used_gpus, t.Int("never_used_gpus", 0, kMaxCount, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.requested_gpu_s,
                           t.Double("requested_gpu_s", 0, kMaxFigure, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.allocated_gpu_s,
                           t.Double("allocated_gpu_s", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.sampled_gpu_s, t.Double("sampled_gpu_s", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.active_gpu_s, t.Double("active_gpu_s", 0, kMaxFigure, kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.idle_gpu_s, t.Double("idle_gpu_s", 0, kMaxFigure, kRequired));
  if (t.Find("idle_share") != nullptr) {
    EXPANSE_ASSIGN_OR_RETURN(double share, t.Double("idle_share", 0, 1, kRequired));
    out.idle_share = share;
  }
  return out;
}

// Runs `read` on the body's object and names any refusal after `what`.
template <typename T, typename Read>
Result<T> Decode(std::string_view body, std::string_view what, Read read) {
  EXPANSE_ASSIGN_OR_RETURN(const json doc, ParseObject(body, what));
  Result<FieldReader> r = FieldReader::Object(doc, std::string(what), "invalid_answer");
  if (!r.ok())
    return Malformed(what, r.status());
  Result<T> out = read(*r);
  if (!out.ok())
    return Malformed(what, out.status());
  return out;
}

}  // namespace

Result<Job> DecodeJob(std::string_view body) { return Decode<Job>(body, "job", ReadJobWithGpus); }

Result<std::vector<Job>> DecodeJobPage(std::string_view body) {
  return Decode<std::vector<Job>>(
      body, "jobs", [](const FieldReader& r) -> Result<std::vector<Job>> {
        EXPANSE_ASSIGN_OR_RETURN(const std::vector<FieldReader> jobs,
                                 r.Objects("jobs", kMaxJobsPerPage, kRequired));
        std::vector<Job> out;
        out.reserve(jobs.size());
        for (const FieldReader& j : jobs) {
          EXPANSE_ASSIGN_OR_RETURN(Job job, ReadJob(j));
          out.push_back(std::move(job));
        }
        return out;
      });
}

Result<Timeline> DecodeTimeline(std::string_view body) {
  return Decode<Timeline>(body, "timeline", [](const FieldReader& r) -> Result<Timeline> {
    Timeline t;
    EXPANSE_ASSIGN_OR_RETURN(t.metric, r.Name("metric", 128, "._", false, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(t.from_ms, r.Int("from_ms", 0, wire::kMaxTimeMs, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(t.to_ms, r.Int("to_ms", 0, wire::kMaxTimeMs, kRequired));
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<FieldReader> series,
                             r.Objects("series", kMaxGpus, kRequired));
    for (const FieldReader& s : series) {
      GpuSeries out;
      EXPANSE_ASSIGN_OR_RETURN(out.host, s.Text("host", kMaxName, kRequired));
      EXPANSE_ASSIGN_OR_RETURN(out.gpu_uuid, s.Text("gpu_uuid", kMaxName, kOptional));
      EXPANSE_ASSIGN_OR_RETURN(const json* points,
                               s.Array("points", kMaxPointsPerSeries, kRequired));
      for (size_t i = 0; i < points->size(); ++i) {
        EXPANSE_ASSIGN_OR_RETURN(std::optional<TimelinePoint> p,
                                 ReadPoint((*points)[i], s.ElementPath("points", i)));
        if (p)
          out.points.push_back(*p);
      }
      t.series.push_back(std::move(out));
    }
    return t;
  });
}

Result<Verdicts> DecodeVerdicts(std::string_view body) {
  return Decode<Verdicts>(body, "verdicts", [](const FieldReader& r) -> Result<Verdicts> {
    Verdicts out;
    EXPANSE_ASSIGN_OR_RETURN(out.as_of_ms, r.Int("as_of_ms", 0, wire::kMaxTimeMs, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(out.running, r.Bool("running", false));
    EXPANSE_ASSIGN_OR_RETURN(out.cell_ms, r.Int("cell_ms", 0, wire::kMaxTimeMs, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(out.from_ms, r.Int("from_ms", 0, wire::kMaxTimeMs, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(out.to_ms, r.Int("to_ms", 0, wire::kMaxTimeMs, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<FieldReader> verdicts,
                             r.Objects("verdicts", kMaxVerdicts, kRequired));
    for (const FieldReader& v : verdicts) {
      EXPANSE_ASSIGN_OR_RETURN(Verdict verdict, ReadVerdict(v));
      out.verdicts.push_back(std::move(verdict));
    }
    return out;
  });
}

Result<Ledger> DecodeLedger(std::string_view body) {
  return Decode<Ledger>(body, "ledger", [](const FieldReader& r) -> Result<Ledger> {
    Ledger out;
    EXPANSE_ASSIGN_OR_RETURN(out.as_of_ms, r.Int("as_of_ms", 0, wire::kMaxTimeMs, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(out.requested_gpus, r.Int("requested_gpus", 0, kMaxCount, kOptional));
    EXPANSE_ASSIGN_OR_RETURN(out.totals, ReadTotals(r));
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<FieldReader> gpus,
                             r.Objects("gpus", kMaxGpus, kRequired));
    for (const FieldReader& g : gpus) {
      LedgerGpu gpu;
      EXPANSE_ASSIGN_OR_RETURN(gpu.host, g.Text("host", kMaxName, kRequired));
      EXPANSE_ASSIGN_OR_RETURN(gpu.gpu_uuid, g.Text("gpu_uuid", kMaxName, kRequired));
      EXPANSE_ASSIGN_OR_RETURN(gpu.gpu_index, g.Int("gpu_index", -1, kMaxCount, kOptional));
      EXPANSE_ASSIGN_OR_RETURN(gpu.allocated_gpu_s,
                               g.Double("allocated_gpu_s", 0, kMaxFigure, kRequired));
      EXPANSE_ASSIGN_OR_RETURN(gpu.sampled_gpu_s,
                               g.Double("sampled_gpu_s", 0, kMaxFigure, kRequired));
      EXPANSE_ASSIGN_OR_RETURN(gpu.active_gpu_s,
                               g.Double("active_gpu_s", 0, kMaxFigure, kRequired));
      EXPANSE_ASSIGN_OR_RETURN(gpu.idle_gpu_s, g.Double("idle_gpu_s", 0, kMaxFigure, kRequired));
      EXPANSE_ASSIGN_OR_RETURN(gpu.never_used, g.Bool("never_used", false));
      out.gpus.push_back(std::move(gpu));
    }
    return out;
  });
}

}  // namespace expanse::report
