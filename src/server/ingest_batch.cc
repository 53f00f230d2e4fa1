#include "server/ingest_batch.h"

#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "server/ingest_capture.h"
#include "server/ingest_stacks.h"
#include "server/route_util.h"
#include "wire/field_reader.h"
#include "wire/records.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxSeries = wire::kMaxBatchSeries;
constexpr size_t kMaxRecords = wire::kMaxBatchRecords;
static_assert(kMaxIngestSamples == wire::kMaxSeriesSamples);
// The decoder's window: 8 MiB, what zstd levels up to 19 use at most (the daemon uses 3).
// Its default (128 MiB) would let a crafted frame make each worker thread's context hold
// that much for good.
constexpr int kMaxIngestWindowLog = 23;

Status BadBatchField(const std::string& path, std::string_view what) {
  return wire::BadField("batch." + path, what, "invalid_batch");
}

// The per-entry rules are the wire records' (wire/records.h), which the controller applies to
// what its workers wrote before it uploads: what passes there passes here.
Status ParseSeries(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(
        wire::SeriesRecord r,
        wire::DecodeSeries(list[i], "batch.series[" + std::to_string(i) + "]", "invalid_batch"));
    out->samples += r.v.size();
    if (out->samples > kMaxIngestSamples)
      return BadBatchField("series", "holds more than 2,000,000 samples");
    const std::span<tsdb::Sample> samples =
        out->series.AddToFill({compute_id, r.host, r.device, r.metric}, r.v.size());
    int64_t t = r.t0;  // at most kMaxTimeMs plus 2e6 gaps of a day: far from overflow
    for (size_t j = 0; j < r.v.size(); ++j) {
      t += r.dt[j];
      samples[j] = {t, r.v[j]};
    }
  }
  return OkStatus();
}

Status ParseJobs(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(
        wire::JobRecord j,
        wire::DecodeJob(list[i], "batch.jobs[" + std::to_string(i) + "]", "invalid_batch"));
    store::JobRecord r;
    r.compute_id = std::string(compute_id);
    r.job_id = std::move(j.job_id);
    r.name = std::move(j.name);
    r.user = std::move(j.user);
    r.account = std::move(j.account);
    r.partition = std::move(j.partition);
    r.state = std::move(j.state);
    r.nodes = std::move(j.nodes);
    r.submit_ms = j.submit_ms;
    r.start_ms = j.start_ms;
    r.end_ms = j.end_ms;
    r.req_nodes = j.req_nodes;
    r.req_cpus = j.req_cpus;
    r.req_gpus = j.req_gpus;
    r.req_mem_mib = j.req_mem_mib;
    r.time_limit_s = j.time_limit_s;
    r.observed_ms = j.observed_ms;
    out->jobs.push_back(std::move(r));
  }
  return OkStatus();
}

Status ParseJobEvents(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(
        wire::JobEventRecord r,
        wire::DecodeJobEvent(list[i], "batch.job_events[" + std::to_string(i) + "]",
                             "invalid_batch"));
    store::JobNodeEvent ev;
    ev.compute_id = std::string(compute_id);
    ev.job_id = std::move(r.job_id);
    ev.host = std::move(r.host);
    ev.kind = std::move(r.kind);
    ev.at_ms = r.at_ms;
    out->job_events.push_back(std::move(ev));
  }
  return OkStatus();
}

Status ParseAllocations(const json& list, std::string_view compute_id, IngestBatch* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(
        wire::GpuAllocationRecord r,
        wire::DecodeGpuAllocation(list[i], "batch.gpu_allocations[" + std::to_string(i) + "]",
                                  "invalid_batch"));
    store::GpuAllocation g;
    g.compute_id = std::string(compute_id);
    g.job_id = std::move(r.job_id);
    g.host = std::move(r.host);
    g.gpu_uuid = std::move(r.gpu_uuid);
    g.gpu_index = r.gpu_index;
    g.gpu_minor = r.gpu_minor;
    g.from_ms = r.from_ms;
    g.to_ms = r.to_ms;
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
           wire::IsName(out->stream, 32, "-_", false);
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
  // Up to 18 digits, the value accumulated as they are scanned (the common case: one pass,
  // no second conversion). Stops at the first non-digit; false when there is none or more
  // than 18, which the callers then read the general way.
  bool ShortDigits(uint64_t* value) {
    const char* begin = p_;
    uint64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9' && p_ - begin < 19) {
      v = v * 10 + static_cast<uint64_t>(*p_ - '0');
      ++p_;
    }
    *value = v;
    return p_ != begin && p_ - begin <= 18;
  }
  // True when the number just read goes on: a fraction, an exponent, or another digit (a 19th,
  // or one after a leading zero).
  bool NumberGoesOn() const {
    return p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E');
  }
  // A non-negative integer literal that fits in int64 (what nlohmann::json also keeps as
  // an exact integer).
  bool Unsigned(uint64_t* out) {
    SkipSpace();
    const char* begin = p_;
    // JSON allows no leading zero: "0" is a whole token, and "012" then fails on the "1".
    if (p_ < end_ && *p_ == '0') {
      ++p_;
      *out = 0;
      return !NumberGoesOn();
    }
    if (ShortDigits(out) && !NumberGoesOn())
      return true;
    p_ = begin;
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
    SkipSpace();
    const char* begin = p_;
    const bool negative = p_ < end_ && *p_ == '-';
    if (negative)
      ++p_;
    uint64_t magnitude = 0;
    // A short integer (no leading zero but "0" itself): exact in int64, converted once.
    if ((p_ < end_ && *p_ == '0') ? (++p_, true) : ShortDigits(&magnitude)) {
      if (!NumberGoesOn()) {
        const auto v = static_cast<int64_t>(magnitude);
        *out = static_cast<double>(negative ? -v : v);
        return true;
      }
    }
    p_ = begin;
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

  // A series entry's key: 0 host, 1 device, 2 metric, 3 t0, 4 dt, 5 v, -1 any other. By
  // length first: the keys are read 160 times a batch, and comparing each against every name
  // in turn was a tenth of the parse.
  static int SeriesField(std::string_view key) {
    switch (key.size()) {
      case 1:
        return key[0] == 'v' ? 5 : -1;
      case 2:
        return key == "t0" ? 3 : key == "dt" ? 4 : -1;
      case 4:
        return key == "host" ? 0 : -1;
      case 6:
        return key == "device" ? 1 : key == "metric" ? 2 : -1;
      default:
        return -1;
    }
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
      const int field = SeriesField(key);
      bool ok = false;
      switch (field) {
        case 0:
          ok = String(&host);
          break;
        case 1:
          ok = String(&device);
          break;
        case 2:
          ok = String(&metric);
          break;
        case 3:
          ok = Unsigned(&t0);
          break;
        case 4:
          ok = DtArray();
          break;
        case 5:
          ok = ValueArray();
          break;
        default:
          return false;
      }
      if (!ok || has[field])
        return false;
      has[field] = true;
    } while (Eat(','));
    if (!Eat('}') || !has[0] || !has[2] || !has[4] || !has[5] || dt_.size() != v_.size())
      return false;
    // The rules of wire::DecodeSeries; anything else is left to it. A node's series share its
    // host and each GPU's its device, so a name equal to the last one that passed is not
    // checked again.
    if (((host.empty() || host != valid_host_) && !wire::IsName(host, 253, "._-", true)) ||
        (!device.empty() && device != valid_device_ && !wire::IsName(device, 96, "._:/+-", true)) ||
        !wire::IsName(metric, 64, "._", false)) {
      return false;
    }
    valid_host_ = host;
    if (!device.empty())
      valid_device_ = device;
    out->samples += v_.size();
    // A t0 past the wire bound is left to the full parser, which refuses it by name.
    if (out->samples > kMaxIngestSamples || t0 > static_cast<uint64_t>(wire::kMaxTimeMs))
      return false;
    const std::span<tsdb::Sample> samples =
        out->series.AddToFill({compute_id, host, device, metric}, v_.size());
    auto t = static_cast<int64_t>(t0);
    for (size_t j = 0; j < v_.size(); ++j) {
      t += dt_[j];
      samples[j] = {t, v_[j]};
    }
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
  std::string_view valid_host_, valid_device_;  // the last that passed, in the document
  std::vector<int64_t> dt_;                     // reused across series
  std::vector<double> v_;
};

Status TooLarge(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("body_too_large");
}

// Streams one zstd body through `ctx`, handing each piece of output to `sink`. Stops with
// body_too_large as soon as more than kMaxIngestJsonBytes came out, or when the frame needs
// a window over 2^kMaxIngestWindowLog bytes (the decoder's own buffer).
template <typename Sink>
Status DecompressZstd(ZSTD_DCtx* ctx, std::string_view body, Sink sink) {
  ZSTD_DCtx_reset(ctx, ZSTD_reset_session_only);
  char buffer[1 << 16];
  ZSTD_inBuffer in{body.data(), body.size(), 0};
  size_t total = 0;
  size_t last = 1;
  while (in.pos < in.size || last != 0) {
    ZSTD_outBuffer o{buffer, sizeof(buffer), 0};
    last = ZSTD_decompressStream(ctx, &o, &in);
    if (ZSTD_isError(last)) {
      if (ZSTD_getErrorCode(last) == ZSTD_error_frameParameter_windowTooLarge) {
        return TooLarge("the zstd frame needs a window over " +
                        std::to_string((1u << kMaxIngestWindowLog) >> 20) +
                        " MiB; compress at level 19 or below, without long-distance mode");
      }
      return InvalidArgumentError(std::string("corrupt zstd body: ") + ZSTD_getErrorName(last))
          .WithReason("corrupt_body");
    }
    total += o.pos;
    if (total > kMaxIngestJsonBytes)
      return TooLarge("the decompressed batch exceeds 64 MiB");
    sink(buffer, o.pos);
    if (in.pos == in.size && o.pos == 0 && last != 0)
      return InvalidArgumentError("the zstd body is truncated").WithReason("truncated_body");
  }
  return OkStatus();
}

}  // namespace

std::string IngestBatch::BatchId(std::string_view compute_id) const {
  return std::string(compute_id) + "/" + stream + "/" + std::to_string(sequence);
}

Result<std::string> DecodeIngestBody(std::string_view content_type, std::string_view body) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  if (type == "application/json") {
    if (body.size() > kMaxIngestJsonBytes)
      return TooLarge("the batch exceeds 64 MiB");
    return std::string(body);
  }
  if (type != "application/zstd") {
    return InvalidArgumentError("Content-Type must be application/zstd or application/json")
        .WithReason("unsupported_media_type");
  }
  // One context per worker thread: creating one per batch was a visible cost in profiles. The
  // window limit is a parameter, which a session reset keeps.
  thread_local std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(
      [] {
        ZSTD_DCtx* made = ZSTD_createDCtx();
        if (made != nullptr)
          ZSTD_DCtx_setParameter(made, ZSTD_d_windowLogMax, kMaxIngestWindowLog);
        return made;
      }(),
      ZSTD_freeDCtx);
  if (!ctx)
    return InternalError("cannot allocate a zstd context");
  // The decoded size is known before any output is kept: the frame header declares it (the
  // daemon's one-shot ZSTD_compress always does), or a first pass counts it without keeping
  // anything. So a frame that decodes past the cap is refused having allocated nothing, and
  // an accepted one is decoded into a buffer of exactly its size.
  size_t expected = 0;
  const unsigned long long declared = ZSTD_getFrameContentSize(body.data(), body.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) {
    if (declared > kMaxIngestJsonBytes) {
      return TooLarge("the zstd frame declares " + std::to_string(declared) +
                      " bytes; a decompressed batch may hold at most 64 MiB");
    }
    expected = static_cast<size_t>(declared);
  } else {
    EXPANSE_RETURN_IF_ERROR(
        DecompressZstd(ctx.get(), body, [&](const char*, size_t n) { expected += n; }));
  }
  std::string out;
  out.reserve(expected);
  EXPANSE_RETURN_IF_ERROR(
      DecompressZstd(ctx.get(), body, [&](const char* data, size_t n) { out.append(data, n); }));
  return out;
}

std::optional<IngestBatch> ParseCommonIngestBatch(std::string_view text,
                                                  std::string_view compute_id) {
  IngestBatch out;
  // Room for what a daemon's document holds (about 26 bytes of JSON a sample, 260 a series),
  // so that the batch's buffers are not grown and copied as it fills. The estimate is about
  // the document's size at most, and what it overshot (a document padded with spaces, whose
  // text is let go while the batch waits for the store) is given back once it is read.
  out.series.Reserve(text.size() / 200, std::min(text.size() / 20, kMaxIngestSamples),
                     text.size() / 16);
  if (FastBatchReader(text).Read(compute_id, &out)) {
    out.series.TrimExcess();
    return out;
  }
  return std::nullopt;
}

Result<IngestBatch> ParseIngestBatch(std::string_view text, std::string_view compute_id) {
  if (std::optional<IngestBatch> fast = ParseCommonIngestBatch(text, compute_id))
    return *std::move(fast);
  return ParseIngestBatchWithoutFastPath(text, compute_id);
}

Result<IngestBatch> ParseIngestBatchWithoutFastPath(std::string_view text,
                                                    std::string_view compute_id) {
  Result<json> parsed = wire::ParseJson(text, kIngestJson);
  if (!parsed.ok()) {
    return InvalidArgumentError("batch: " + parsed.status().message())
        .WithReason(parsed.status().reason());
  }
  const json doc = *std::move(parsed);
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader batch,
                           wire::FieldReader::Object(doc, "batch", "invalid_batch"));
  EXPANSE_ASSIGN_OR_RETURN(wire::BatchHeader header, wire::DecodeBatchHeader(batch));
  IngestBatch out;
  out.stream = std::move(header.stream);
  out.sequence = header.sequence;
  // Each section is optional; the limits on entries are the wire's.
  struct Section {
    const char* key;
    size_t max_entries;
    Status (*parse)(const json&, std::string_view, IngestBatch*);
  };
  static constexpr Section kSections[] = {
      {"series", kMaxSeries, ParseSeries},
      {"jobs", kMaxRecords, ParseJobs},
      {"job_events", kMaxRecords, ParseJobEvents},
      {"gpu_allocations", kMaxRecords, ParseAllocations},
      {"stacks", kMaxRecords,
       [](const json& list, std::string_view compute, IngestBatch* batch_out) {
         return ParseStacks(list, compute, &batch_out->stacks);
       }},
      {"capture_aggregates", kMaxRecords,
       [](const json& list, std::string_view compute, IngestBatch* batch_out) {
         return ParseCaptureAggregates(list, compute, &batch_out->capture_windows);
       }},
  };
  for (const Section& section : kSections) {
    EXPANSE_ASSIGN_OR_RETURN(const json* list,
                             batch.Array(section.key, section.max_entries, wire::Need::kOptional));
    if (list != nullptr)
      EXPANSE_RETURN_IF_ERROR(section.parse(*list, compute_id, &out));
  }
  return out;
}

}  // namespace expanse::server
