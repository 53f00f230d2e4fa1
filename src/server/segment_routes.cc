// Trace segments (docs/api.md, "Trace segments"): the data plane takes a segment from a
// compute's daemon, the console API lists a job's segments and hands one out as the Chrome
// trace JSON file that Perfetto opens.
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "core/quote.h"
#include "crypto/hash.h"
#include "server/concurrency_slots.h"
#include "server/ingest_batch.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/segment_grant.h"
#include "server/segment_store.h"
#include "wire/field_reader.h"
#include "wire/trace_segment_header.h"

namespace expanse::server {
namespace {

using nlohmann::json;

// A compressed segment is much smaller; an uncompressed one is at most kMaxTraceSegmentBytes.
constexpr size_t kSegmentBodyBytes = wire::kMaxTraceSegmentBytes + 4096;
constexpr int kListedSegments = 1000;

std::string SegmentPath(const std::string& compute_id, const std::string& job_id,
                        const std::string& sha256) {
  // A job id is a worker's text: "7?x" must not end the path at "7".
  return "/api/v1/computes/" + PercentEncode(compute_id) + "/jobs/" + PercentEncode(job_id) +
         "/segments/" + sha256;
}

// `text` with every byte but [A-Za-z0-9._-] as '_': a download's file name made of a worker's
// text (a relayed segment's host) must not close the header's quotes and name another file.
std::string FileNameText(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      c = '_';
  }
  return out;
}

// The name a download of `s` is saved under: the Content-Disposition's, and the list's
// "file_name", so the console's link says the same.
std::string DownloadFileName(const store::TraceSegmentRecord& s) {
  return FileNameText("seg-" + s.job_id + "-" + s.host + "-" + std::to_string(s.pid) + "-" +
                      std::to_string(s.window_start_ms) + ".json");
}

json SegmentJson(const store::TraceSegmentRecord& s) {
  json out = {{"sha256", s.sha256},
              {"host", s.host},
              {"pid", s.pid},
              {"window_start_ms", s.window_start_ms},
              {"window_end_ms", s.window_end_ms},
              {"trigger_id", s.trigger_id},
              {"trigger_reason", s.trigger_reason},
              {"bytes", s.bytes},
              {"events", s.events},
              {"received_ms", s.received_ms},
              {"download", SegmentPath(s.compute_id, s.job_id, s.sha256)},
              {"file_name", DownloadFileName(s)}};
  // Written by IngestSegment from the segment's own summary (wire::TraceSegmentHeader).
  if (!s.pc_sampling.empty()) {
    json pc = json::parse(s.pc_sampling, nullptr, /*allow_exceptions=*/false);
    if (pc.is_object())
      out["pc_sampling"] = std::move(pc);
  }
  return out;
}

// The answer to a failure of the segment store: its own message names the store's inside (a
// bucket's URL, a file's path), which goes to the server's log, not to the client; the code
// and reason stay, so a sender still knows to come back (503) and a reader what went wrong.
http::Response StoreFailureResponse(const Status& failure, std::string_view doing) {
  std::fprintf(stderr, "expanse-server: trace segment store: %s: %s\n", std::string(doing).c_str(),
               failure.ToString().c_str());
  std::string message = "the trace segment store failed (the server's log says why)";
  if (failure.code() == StatusCode::kUnavailable)
    message = "the trace segment store is unavailable; try again shortly";
  else if (failure.reason() == "segment_bytes_changed")
    message = "the stored trace segment does not hold the bytes its name hashes";
  if (failure.reason() == "segment_store_full") {
    // Retention frees room; the sender keeps the segment and tries again meanwhile.
    http::Response full = http::ErrorResponse(
        507, "segment_store_full",
        "the server's trace segment store is full; send this segment again later");
    full.headers.emplace_back("Retry-After", "300");
    return full;
  }
  return http::ErrorResponse(Status(failure.code(), message).WithReason(failure.reason()));
}

// Who sends a segment: the compute's controller with its credential, or a worker with a
// segment-scoped grant (segment_grant.h), which admits only the segment it names.
struct Sender {
  std::string compute_id;
  std::optional<SegmentGrant> grant;
};

std::optional<Sender> AuthenticateSender(RouteContext& ctx, const http::Request& req,
                                         http::Response* refused) {
  const std::string_view bearer = BearerToken(req);
  if (bearer.substr(0, std::string_view(kSegmentGrantPrefix).size()) != kSegmentGrantPrefix) {
    auto id = AuthenticateCompute(ctx, req, refused);
    if (!id)
      return std::nullopt;
    return Sender{id->compute.id, std::nullopt};
  }
  Result<ControlPlane::GrantedSegment> granted = ctx.control.AuthenticateSegmentGrant(bearer);
  if (!granted.ok()) {
    *refused = http::ErrorResponse(granted.status());
    return std::nullopt;
  }
  // Grants count against the credential that asked for them, in its own bucket: the one its
  // requests are counted in (AuthenticateCompute keys it on the credential's hash).
  const std::string& key = granted->credential_secret_hash;
  if (!ctx.limits.per_credential->Allow(key)) {
    *refused = http::TooManyRequestsResponse(ctx.limits.per_credential->RetryAfter(key));
    return std::nullopt;
  }
  return Sender{granted->compute.id, std::move(granted->grant)};
}

// What the daemon sends: the segment itself, as JSON or one zstd frame of it.
http::Response IngestSegment(RouteContext& ctx, const http::Request& req) {
  http::Response refused;
  std::optional<Sender> sender = AuthenticateSender(ctx, req, &refused);
  if (!sender)
    return refused;
  if (ctx.segments == nullptr)
    return http::ErrorResponse(404, "not_found", "this server keeps no trace segments");
  // Parsing a segment whole takes many times its size in memory (a 22 MiB array of empty
  // objects took 610 MiB): a few at a time, the rest asked to come back (the daemons retry).
  std::optional<ConcurrencySlots::Slot> slot = ctx.segment_parses->TryTake();
  if (!slot && ctx.counters != nullptr)
    ctx.counters->segments_busy.fetch_add(1, std::memory_order_relaxed);
  if (!slot)
    return http::ErrorResponse(UnavailableError("the server is reading other trace "
                                                "segments; send this one again shortly")
                                   .WithReason("segments_busy"));
  Result<std::string> bytes = DecodeIngestBody(req.Header("Content-Type").value_or(""), req.body);
  if (!bytes.ok())
    return RefusalResponse(bytes.status());
  const std::string sha256 = crypto::Sha256Hex(*bytes);
  const auto mismatch = [] {
    return http::ErrorResponse(403, "grant_mismatch",
                               "this segment is not the one the grant names (its SHA-256, length "
                               "or host differ)");
  };
  // The grant's bytes before any parsing: a grant (not a secret) admits only its segment.
  if (sender->grant && (sha256 != sender->grant->sha256 ||
                        static_cast<int64_t>(bytes->size()) != sender->grant->bytes))
    return mismatch();
  Result<wire::TraceSegmentHeader> header =
      wire::ParseTraceSegmentHeader(*bytes, "segment", "bad_segment");
  if (!header.ok())
    return http::ErrorResponse(header.status());
  if (sender->grant && header->host != sender->grant->host)
    return mismatch();
  slot.reset();  // storing it (a bucket's PUT may take seconds) is not reading it
  // The bytes first: a record names only a segment that is there.
  if (Status s = ctx.segments->Put(sender->compute_id, sha256, *bytes); !s.ok())
    return StoreFailureResponse(s, "keeping " + sha256);
  store::TraceSegmentRecord record{
      .compute_id = sender->compute_id,
      .sha256 = sha256,
      .job_id = header->job_id,
      .host = header->host,
      .pid = header->pid,
      .window_start_ms = header->window_start_ms,
      .window_end_ms = header->window_end_ms,
      .trigger_id = header->trigger_id,
      .trigger_reason = header->trigger_reason.empty() ? "unknown" : header->trigger_reason,
      .bytes = static_cast<int64_t>(bytes->size()),
      .events = header->events,
      .received_ms = ctx.clock.NowMs(),
      .pc_sampling = header->pc_sampling};
  // An empty window (the agent closed it at once) is stored as one millisecond long.
  if (record.window_end_ms <= record.window_start_ms)
    record.window_end_ms = record.window_start_ms + 1;
  Result<bool> added = ctx.jobs->PutTraceSegment(record);
  if (!added.ok())
    return http::ErrorResponse(added.status());
  return Json(200, {{"sha256", sha256}, {"duplicate", !*added}, {"bytes", bytes->size()}});
}

http::Response DownloadSegment(RouteContext& ctx, const http::Request& req) {
  Result<Principal> principal = AuthenticateConsoleRequest(ctx, req);
  if (!principal.ok())
    return http::ErrorResponse(principal.status());
  Result<JobEvidenceQuery> q = ReadJobEvidenceQuery(ctx, *principal, req);
  if (!q.ok())
    return http::ErrorResponse(q.status());
  const std::string sha256(req.PathParam("sha256"));
  Result<store::TraceSegmentRecord> record = ctx.jobs->GetTraceSegment(q->compute.id, sha256);
  if (!record.ok())
    return http::ErrorResponse(record.status());
  // Another job's segment is not found through this job's path.
  if (record->job_id != req.PathParam("job"))
    return http::ErrorResponse(NotFoundError("trace segment " + sha256 + " not found"));
  if (ctx.segments == nullptr)
    return http::ErrorResponse(404, "not_found", "this server keeps no trace segments");
  Result<std::optional<std::string>> bytes = ctx.segments->Get(q->compute.id, sha256);
  if (!bytes.ok())
    return StoreFailureResponse(bytes.status(), "reading " + sha256);
  if (!*bytes)
    return http::ErrorResponse(
        NotFoundError("trace segment " + sha256 + " is listed but its bytes are gone")
            .WithReason("segment_bytes_missing"));
  http::Response response;
  response.content_type = "application/json";
  response.body = std::move(**bytes);
  response.headers = {
      {"Content-Disposition", "attachment; filename=\"" + DownloadFileName(*record) + "\""},
      {"X-Content-Type-Options", "nosniff"}};
  return response;
}

// A controller asks for a grant for one of its workers' segments: {"host","sha256","bytes"}.
http::Response GrantSegment(RouteContext& ctx, const http::Request& req) {
  http::Response refused;
  auto id = AuthenticateCompute(ctx, req, &refused);
  if (!id)
    return refused;
  if (ctx.segments == nullptr)
    return http::ErrorResponse(404, "not_found", "this server keeps no trace segments");
  Result<json> body = JsonObjectBody(req);
  if (!body.ok())
    return http::ErrorResponse(body.status());
  Result<wire::FieldReader> r = wire::FieldReader::Object(*body, "", "invalid_argument");
  if (!r.ok())
    return http::ErrorResponse(r.status());
  Result<std::string> host = r->Name("host", 64, ".-_", true, wire::Need::kRequired);
  Result<std::string> sha = r->Name("sha256", 64, "", false, wire::Need::kRequired);
  Result<int64_t> size =
      r->Int("bytes", 1, static_cast<int64_t>(wire::kMaxTraceSegmentBytes), wire::Need::kRequired);
  for (const Status& s : {host.status(), sha.status(), size.status()}) {
    if (!s.ok())
      return http::ErrorResponse(s);
  }
  if (sha->size() != 64 || sha->find_first_not_of("0123456789abcdef") != std::string::npos) {
    return http::ErrorResponse(InvalidArgumentError("sha256 must be 64 lowercase hex digits")
                                   .WithReason("invalid_argument"));
  }
  int64_t expires_ms = 0;
  const std::string grant = ctx.control.IssueSegmentGrant(*id, *host, *sha, *size, &expires_ms);
  return Json(201, {{"grant", grant},
                    {"expires_at_ms", expires_ms},
                    {"upload_url", ctx.control.options().data_plane_url + "/dp/v1/segments"}});
}

}  // namespace

void RegisterSegmentRoutes(http::Listener& data_listener, http::Listener& console_listener,
                           RouteContext& context) {
  RouteContext* ctx = &context;
  data_listener.Post("/dp/v1/segment-grants",
                     [ctx](const http::Request& req) { return GrantSegment(*ctx, req); });
  data_listener.Post("/dp/v1/segments",
                     [ctx](const http::Request& req) { return IngestSegment(*ctx, req); },
                     {.max_body_bytes = kSegmentBodyBytes});
  console_listener.Get("/api/v1/computes/:id/jobs/:job/segments", [ctx](const http::Request& req) {
    return AnswerConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const JobEvidenceQuery q, ReadJobEvidenceQuery(*ctx, p, req));
      EXPANSE_ASSIGN_OR_RETURN(
          auto segments, ctx->jobs->JobTraceSegments(q.compute.id, req.PathParam("job"), q.from_ms,
                                                     q.to_ms, kListedSegments + 1));
      const bool truncated = segments.size() > static_cast<size_t>(kListedSegments);
      if (truncated)
        segments.pop_back();
      json listed = json::array();
      for (const store::TraceSegmentRecord& s : segments)
        listed.push_back(SegmentJson(s));
      return json{{"segments", std::move(listed)}, {"truncated", truncated}};
    });
  });
  console_listener.Get("/api/v1/computes/:id/jobs/:job/segments/:sha256",
                       [ctx](const http::Request& req) { return DownloadSegment(*ctx, req); });
}

}  // namespace expanse::server
