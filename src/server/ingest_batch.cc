#include "server/ingest_batch.h"

#include <zstd.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "server/ingest_stacks.h"
#include "server/route_util.h"
#include "server/validate.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxSeries = 200'000;
constexpr size_t kMaxRecords = 100'000;

Status Bad(const std::string& path, std::string_view what) {
  return InvalidArgumentError("batch." + path + " " + std::string(what))
      .WithReason("invalid_batch");
}

bool IsNameChar(char c, std::string_view extra) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || extra.find(c) != std::string::npos;
}

Status CheckName(const std::string& path, const std::string& v, size_t max, std::string_view extra,
                 bool upper_ok) {
  if (v.empty() || v.size() > max) {
    return Bad(path, "must be 1 to " + std::to_string(max) + " characters");
  }
  for (char c : v) {
    if (!IsNameChar(c, extra) && !(upper_ok && c >= 'A' && c <= 'Z')) {
      return Bad(path, "contains a character outside [a-z0-9" + std::string(extra) + "]");
    }
  }
  return OkStatus();
}

// Reads a member as a string; absent is "" unless required.
Result<std::string> Str(const json& obj, const std::string& path, const char* key, size_t max,
                        bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required)
      return Bad(path + key, "is required");
    return std::string();
  }
  if (!it->is_string())
    return Bad(path + key, "must be a string");
  std::string v = it->get<std::string>();
  Status s = required ? ValidateText(key, v, max) : ValidateOptionalText(key, v, max);
  if (!s.ok())
    return Bad(path + key, s.message().substr(std::string_view(key).size() + 1));
  return v;
}

Result<int64_t> Int(const json& obj, const std::string& path, const char* key, int64_t min) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (min > 0)
      return Bad(path + key, "is required");
    return min < 0 ? min : 0;
  }
  if (!it->is_number_integer() || it->get<int64_t>() < min) {
    return Bad(path + key, "must be an integer >= " + std::to_string(min));
  }
  return it->get<int64_t>();
}

const json* Array(const json& doc, const char* key, size_t max, Status* error) {
  auto it = doc.find(key);
  if (it == doc.end())
    return nullptr;
  if (!it->is_array()) {
    *error = Bad(key, "must be an array");
  } else if (it->size() > max) {
    *error = Bad(key, "has more than " + std::to_string(max) + " entries");
  }
  return &*it;
}

Status ParseSeries(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const json& s = list[i];
    std::string p = "series[" + std::to_string(i) + "].";
    if (!s.is_object())
      return Bad(p.substr(0, p.size() - 1), "must be an object");
    tsdb::SeriesKey key;
    key.compute_id = std::string(compute_id);
    EXPANSE_ASSIGN_OR_RETURN(key.host, Str(s, p, "host", 253, true));
    EXPANSE_RETURN_IF_ERROR(CheckName(p + "host", key.host, 253, ".-_", true));
    EXPANSE_ASSIGN_OR_RETURN(key.device, Str(s, p, "device", 96, false));
    if (!key.device.empty()) {
      EXPANSE_RETURN_IF_ERROR(CheckName(p + "device", key.device, 96, ".-_:/+", true));
    }
    EXPANSE_ASSIGN_OR_RETURN(key.metric, Str(s, p, "metric", 64, true));
    EXPANSE_RETURN_IF_ERROR(CheckName(p + "metric", key.metric, 64, "._", false));
    EXPANSE_ASSIGN_OR_RETURN(int64_t t, Int(s, p, "t0", 0));
    auto dt = s.find("dt");
    auto v = s.find("v");
    if (dt == s.end() || !dt->is_array())
      return Bad(p + "dt", "must be an array");
    if (v == s.end() || !v->is_array())
      return Bad(p + "v", "must be an array");
    if (dt->size() != v->size())
      return Bad(p + "v", "must have as many entries as dt");
    out->samples += v->size();
    if (out->samples > kMaxIngestSamples)
      return Bad("series", "holds more than 2,000,000 samples");
    std::vector<tsdb::Sample> samples;
    samples.reserve(v->size());
    for (size_t j = 0; j < v->size(); ++j) {
      const json& d = (*dt)[j];
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > 86'400'000) {
        return Bad(p + "dt[" + std::to_string(j) + "]", "must be an integer 0..86400000");
      }
      t += d.get<int64_t>();
      const json& x = (*v)[j];
      if (!x.is_number() || !std::isfinite(x.get<double>())) {
        return Bad(p + "v[" + std::to_string(j) + "]", "must be a finite number");
      }
      samples.push_back({t, x.get<double>()});
    }
    out->series.emplace_back(std::move(key), std::move(samples));
  }
  return OkStatus();
}

Status ParseJobs(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const json& j = list[i];
    std::string p = "jobs[" + std::to_string(i) + "].";
    if (!j.is_object())
      return Bad(p.substr(0, p.size() - 1), "must be an object");
    store::JobRecord r;
    r.compute_id = std::string(compute_id);
    EXPANSE_ASSIGN_OR_RETURN(r.job_id, Str(j, p, "job_id", 64, true));
    EXPANSE_ASSIGN_OR_RETURN(r.name, Str(j, p, "name", 256, false));
    EXPANSE_ASSIGN_OR_RETURN(r.user, Str(j, p, "user", 64, false));
    EXPANSE_ASSIGN_OR_RETURN(r.account, Str(j, p, "account", 64, false));
    EXPANSE_ASSIGN_OR_RETURN(r.partition, Str(j, p, "partition", 64, false));
    EXPANSE_ASSIGN_OR_RETURN(r.state, Str(j, p, "state", 32, true));
    EXPANSE_ASSIGN_OR_RETURN(r.nodes, Str(j, p, "nodes", 4096, false));
    for (auto [field, dst] :
         {std::pair{"submit_ms", &r.submit_ms}, std::pair{"start_ms", &r.start_ms},
          std::pair{"end_ms", &r.end_ms}, std::pair{"req_nodes", &r.req_nodes},
          std::pair{"req_cpus", &r.req_cpus}, std::pair{"req_gpus", &r.req_gpus},
          std::pair{"req_mem_mib", &r.req_mem_mib}, std::pair{"time_limit_s", &r.time_limit_s},
          std::pair{"observed_ms", &r.observed_ms}}) {
      EXPANSE_ASSIGN_OR_RETURN(*dst, Int(j, p, field, 0));
    }
    out->jobs.push_back(std::move(r));
  }
  return OkStatus();
}

Status ParseJobEvents(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    std::string p = "job_events[" + std::to_string(i) + "].";
    if (!e.is_object())
      return Bad(p.substr(0, p.size() - 1), "must be an object");
    store::JobNodeEvent ev;
    ev.compute_id = std::string(compute_id);
    EXPANSE_ASSIGN_OR_RETURN(ev.job_id, Str(e, p, "job_id", 64, true));
    EXPANSE_ASSIGN_OR_RETURN(ev.host, Str(e, p, "host", 253, true));
    EXPANSE_ASSIGN_OR_RETURN(ev.kind, Str(e, p, "kind", 8, true));
    if (ev.kind != "start" && ev.kind != "end")
      return Bad(p + "kind", "must be start or end");
    EXPANSE_ASSIGN_OR_RETURN(ev.at_ms, Int(e, p, "at_ms", 1));
    out->job_events.push_back(std::move(ev));
  }
  return OkStatus();
}

Status ParseAllocations(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const json& a = list[i];
    std::string p = "gpu_allocations[" + std::to_string(i) + "].";
    if (!a.is_object())
      return Bad(p.substr(0, p.size() - 1), "must be an object");
    store::GpuAllocation g;
    g.compute_id = std::string(compute_id);
    EXPANSE_ASSIGN_OR_RETURN(g.job_id, Str(a, p, "job_id", 64, true));
    EXPANSE_ASSIGN_OR_RETURN(g.host, Str(a, p, "host", 253, true));
    EXPANSE_ASSIGN_OR_RETURN(g.gpu_uuid, Str(a, p, "gpu_uuid", 96, true));
    EXPANSE_ASSIGN_OR_RETURN(g.gpu_index, Int(a, p, "gpu_index", -1));
    EXPANSE_ASSIGN_OR_RETURN(g.gpu_minor, Int(a, p, "gpu_minor", -1));
    EXPANSE_ASSIGN_OR_RETURN(g.from_ms, Int(a, p, "from_ms", 1));
    EXPANSE_ASSIGN_OR_RETURN(g.to_ms, Int(a, p, "to_ms", 0));
    if (g.to_ms != 0 && g.to_ms < g.from_ms)
      return Bad(p + "to_ms", "is before from_ms");
    out->gpu_allocations.push_back(std::move(g));
  }
  return OkStatus();
}

// The fast path for the common shape of a telemetry batch: version, stream, sequence,
// series and empty (or absent) record arrays, strings without escapes. One pass over the
// text with no DOM: a batch of 1,600 samples otherwise costs thousands of allocations.
// It gives up (Read returns false) on anything else, valid or not, and the DOM parser
// below then decides, so every error message comes from one place and the two paths
// cannot disagree on what is accepted.
class FastBatchReader {
 public:
  explicit FastBatchReader(std::string_view text)
      : p_(text.data()), end_(text.data() + text.size()) {}

  bool Read(std::string_view compute_id, IngestBatch* out) {
    if (!Eat('{'))
      return false;
    bool version = false, stream = false, sequence = false, series = false;
    bool records[4] = {false, false, false, false};
    static constexpr std::string_view kRecordKeys[4] = {"jobs", "job_events", "gpu_allocations",
                                                        "stacks"};
    if (Peek('}'))
      return false;
    do {
      std::string_view key;
      if (!String(&key) || !Eat(':'))
        return false;
      if (key == "version") {
        std::string_view token;
        bool integer = false;
        if (version || !NumberToken(&token, &integer) || token != "1")
          return false;
        version = true;
      } else if (key == "stream") {
        std::string_view v;
        if (stream || !String(&v))
          return false;
        out->stream = std::string(v);
        stream = true;
      } else if (key == "sequence") {
        if (sequence || !Unsigned(&out->sequence))
          return false;
        sequence = true;
      } else if (key == "series") {
        if (series || !Series(compute_id, out))
          return false;
        series = true;
      } else {
        size_t i = 0;
        while (i < 4 && key != kRecordKeys[i])
          ++i;
        if (i == 4 || records[i] || !Eat('[') || !Eat(']'))
          return false;
        records[i] = true;
      }
    } while (Eat(','));
    if (!Eat('}'))
      return false;
    SkipSpace();
    return p_ == end_ && version && stream && sequence &&
           ValidateText("stream", out->stream, 32).ok() &&
           CheckName("stream", out->stream, 32, "-_", false).ok();
  }

 private:
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t'))
      ++p_;
  }
  bool Peek(char c) {
    SkipSpace();
    return p_ < end_ && *p_ == c;
  }
  bool Eat(char c) {
    if (!Peek(c))
      return false;
    ++p_;
    return true;
  }
  // Printable ASCII without escapes: exactly what the names and the stream may hold.
  bool String(std::string_view* out) {
    if (!Eat('"'))
      return false;
    const char* begin = p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        *out = std::string_view(begin, static_cast<size_t>(p_ - begin));
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x7f)
        return false;
      ++p_;
    }
    return false;
  }
  // A token of the JSON number grammar; `integer` when it has no fraction or exponent.
  bool NumberToken(std::string_view* token, bool* integer) {
    SkipSpace();
    const char* begin = p_;
    if (p_ < end_ && *p_ == '-')
      ++p_;
    if (p_ < end_ && *p_ == '0') {
      ++p_;
    } else if (!Digits()) {
      return false;
    }
    *integer = true;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      *integer = false;
      if (!Digits())
        return false;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      *integer = false;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-'))
        ++p_;
      if (!Digits())
        return false;
    }
    *token = std::string_view(begin, static_cast<size_t>(p_ - begin));
    return true;
  }
  bool Digits() {
    const char* begin = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9')
      ++p_;
    return p_ != begin;
  }
  // A non-negative integer literal that fits in int64 (what nlohmann::json also keeps as
  // an exact integer).
  bool Unsigned(uint64_t* out) {
    std::string_view token;
    bool integer = false;
    if (!NumberToken(&token, &integer) || !integer || token[0] == '-')
      return false;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec != std::errc() || end != token.data() + token.size())
      return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  // Any finite number, converted as nlohmann::json does: integers exactly, then to double
  // (so "-0" is 0), others correctly rounded.
  bool Finite(double* out) {
    std::string_view token;
    bool integer = false;
    if (!NumberToken(&token, &integer))
      return false;
    const char* last = token.data() + token.size();
    if (integer) {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(token.data(), last, v);
      if (ec != std::errc() || end != last)
        return false;
      *out = static_cast<double>(v);
      return true;
    }
    const auto [end, ec] = std::from_chars(token.data(), last, *out);
    return ec == std::errc() && end == last && std::isfinite(*out);
  }

  bool Series(std::string_view compute_id, IngestBatch* out) {
    if (!Eat('['))
      return false;
    if (Eat(']'))
      return true;
    do {
      if (out->series.size() >= kMaxSeries || !OneSeries(compute_id, out))
        return false;
    } while (Eat(','));
    return Eat(']');
  }

  bool OneSeries(std::string_view compute_id, IngestBatch* out) {
    if (!Eat('{') || Peek('}'))
      return false;
    std::string_view host, device, metric;
    uint64_t t0 = 0;
    bool has[6] = {false, false, false, false, false, false};  // host device metric t0 dt v
    dt_.clear();
    v_.clear();
    do {
      std::string_view key;
      if (!String(&key) || !Eat(':'))
        return false;
      int field = -1;
      bool ok = false;
      if (key == "host") {
        field = 0;
        ok = String(&host);
      } else if (key == "device") {
        field = 1;
        ok = String(&device);
      } else if (key == "metric") {
        field = 2;
        ok = String(&metric);
      } else if (key == "t0") {
        field = 3;
        ok = Unsigned(&t0);
      } else if (key == "dt") {
        field = 4;
        ok = DtArray();
      } else if (key == "v") {
        field = 5;
        ok = ValueArray();
      }
      if (field < 0 || !ok || has[field])
        return false;
      has[field] = true;
    } while (Eat(','));
    if (!Eat('}') || !has[0] || !has[2] || !has[4] || !has[5] || dt_.size() != v_.size())
      return false;
    const std::string host_s(host), device_s(device), metric_s(metric);
    if (!ValidateText("host", host_s, 253).ok() || !CheckName("", host_s, 253, ".-_", true).ok() ||
        !ValidateOptionalText("device", device_s, 96).ok() ||
        (!device_s.empty() && !CheckName("", device_s, 96, ".-_:/+", true).ok()) ||
        !ValidateText("metric", metric_s, 64).ok() ||
        !CheckName("", metric_s, 64, "._", false).ok()) {
      return false;
    }
    out->samples += v_.size();
    // The last bound keeps the running timestamp far from overflow.
    if (out->samples > kMaxIngestSamples || t0 > (uint64_t{1} << 62))
      return false;
    tsdb::SeriesKey key{std::string(compute_id), host_s, device_s, metric_s};
    std::vector<tsdb::Sample> samples(v_.size());
    auto t = static_cast<int64_t>(t0);
    for (size_t j = 0; j < v_.size(); ++j) {
      t += dt_[j];
      samples[j] = {t, v_[j]};
    }
    out->series.emplace_back(std::move(key), std::move(samples));
    return true;
  }

  bool DtArray() {
    if (!Eat('['))
      return false;
    if (Eat(']'))
      return true;
    do {
      uint64_t d = 0;
      if (!Unsigned(&d) || d > 86'400'000)
        return false;
      dt_.push_back(static_cast<int64_t>(d));
    } while (Eat(','));
    return Eat(']');
  }

  bool ValueArray() {
    if (!Eat('['))
      return false;
    if (Eat(']'))
      return true;
    do {
      double x = 0;
      if (!Finite(&x))
        return false;
      v_.push_back(x);
    } while (Eat(','));
    return Eat(']');
  }

  const char* p_;
  const char* end_;
  std::vector<int64_t> dt_;  // reused across series
  std::vector<double> v_;
};

}  // namespace

std::string IngestBatch::BatchId(std::string_view compute_id) const {
  return std::string(compute_id) + "/" + stream + "/" + std::to_string(sequence);
}

Result<std::string> DecodeIngestBody(std::string_view content_type, std::string_view body) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  if (type == "application/json") {
    if (body.size() > kMaxIngestJsonBytes) {
      return ResourceExhaustedError("the batch exceeds 64 MiB").WithReason("body_too_large");
    }
    return std::string(body);
  }
  if (type != "application/zstd") {
    return InvalidArgumentError("Content-Type must be application/zstd or application/json")
        .WithReason("unsupported_media_type");
  }
  // One context per worker thread: creating one per batch was a visible cost in profiles.
  thread_local std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(),
                                                                        ZSTD_freeDCtx);
  if (!ctx)
    return InternalError("cannot allocate a zstd context");
  ZSTD_DCtx_reset(ctx.get(), ZSTD_reset_session_only);
  std::string out;
  ZSTD_inBuffer in{body.data(), body.size(), 0};
  size_t last = 1;
  // Streaming with a cap: a small "zip bomb" frame cannot make the server allocate more
  // than kMaxIngestJsonBytes.
  while (in.pos < in.size || last != 0) {
    size_t old = out.size();
    out.resize(old + (1 << 16));
    ZSTD_outBuffer o{out.data() + old, 1 << 16, 0};
    last = ZSTD_decompressStream(ctx.get(), &o, &in);
    out.resize(old + o.pos);
    if (ZSTD_isError(last)) {
      return InvalidArgumentError(std::string("corrupt zstd body: ") + ZSTD_getErrorName(last))
          .WithReason("corrupt_body");
    }
    if (out.size() > kMaxIngestJsonBytes) {
      return ResourceExhaustedError("the decompressed batch exceeds 64 MiB")
          .WithReason("body_too_large");
    }
    if (in.pos == in.size && o.pos == 0 && last != 0) {
      return InvalidArgumentError("the zstd body is truncated").WithReason("truncated_body");
    }
  }
  return out;
}

std::optional<IngestBatch> ParseCommonIngestBatch(std::string_view text,
                                                  std::string_view compute_id) {
  IngestBatch out;
  if (FastBatchReader(text).Read(compute_id, &out))
    return out;
  return std::nullopt;
}

Result<IngestBatch> ParseIngestBatch(std::string_view text, std::string_view compute_id) {
  if (std::optional<IngestBatch> fast = ParseCommonIngestBatch(text, compute_id))
    return *std::move(fast);
  return ParseIngestBatchWithoutFastPath(text, compute_id);
}

Result<IngestBatch> ParseIngestBatchWithoutFastPath(std::string_view text,
                                                    std::string_view compute_id) {
  EXPANSE_ASSIGN_OR_RETURN(json doc, ParseVersionOneDocument(text, "batch", "invalid_batch"));
  IngestBatch out;
  EXPANSE_ASSIGN_OR_RETURN(out.stream, Str(doc, "", "stream", 32, true));
  EXPANSE_RETURN_IF_ERROR(CheckName("stream", out.stream, 32, "-_", false));
  auto seq = doc.find("sequence");
  if (seq == doc.end() || !seq->is_number_unsigned()) {
    return Bad("sequence", "must be a non-negative integer");
  }
  out.sequence = seq->get<uint64_t>();

  Status error;
  if (const json* a = Array(doc, "series", kMaxSeries, &error); error.ok() && a) {
    EXPANSE_RETURN_IF_ERROR(ParseSeries(*a, compute_id, &out));
  }
  if (const json* a = Array(doc, "jobs", kMaxRecords, &error); error.ok() && a) {
    EXPANSE_RETURN_IF_ERROR(ParseJobs(*a, compute_id, &out));
  }
  if (const json* a = Array(doc, "job_events", kMaxRecords, &error); error.ok() && a) {
    EXPANSE_RETURN_IF_ERROR(ParseJobEvents(*a, compute_id, &out));
  }
  if (const json* a = Array(doc, "gpu_allocations", kMaxRecords, &error); error.ok() && a) {
    EXPANSE_RETURN_IF_ERROR(ParseAllocations(*a, compute_id, &out));
  }
  if (const json* a = Array(doc, "stacks", kMaxRecords, &error); error.ok() && a) {
    EXPANSE_RETURN_IF_ERROR(ParseStacks(*a, compute_id, &out.stacks));
  }
  EXPANSE_RETURN_IF_ERROR(error);
  return out;
}

}  // namespace expanse::server
