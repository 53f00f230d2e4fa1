// Small helpers shared by the HTTP route files: JSON bodies, bearer tokens, cookies.
#ifndef EXPANSE_SERVER_ROUTE_UTIL_H_
#define EXPANSE_SERVER_ROUTE_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "http/message.h"
#include "store/store.h"
#include "wire/json_parse.h"

namespace expanse::server {

inline constexpr char kSessionCookie[] = "expanse_session";

// What the server reads from outside, per route family (docs/api.md, "Limits"). Body limits
// count bytes after Content-Encoding is undone and are enforced by the listener while it reads;
// JSON limits by wire::ParseJson while it parses, before the document is built any further.
//
// Sign-in, install tokens and every console API body: small flat objects. Also the listener's
// default, so a route that says nothing gets this.
inline constexpr size_t kSmallBodyBytes = 64u << 10;
inline constexpr wire::JsonLimits kSmallBodyJson{
    .max_depth = 8, .max_values = 4096, .max_string_bytes = 16u << 10};
// Heartbeats: about 260 bytes and 45 values per GPU, so 8 MiB is some 30,000 GPUs. Depth 32
// leaves room for `diagnostics` and unknown fields (the deepest known path has 8 levels).
inline constexpr size_t kHeartbeatBodyBytes = 8u << 20;
inline constexpr wire::JsonLimits kHeartbeatJson{
    .max_depth = 32, .max_values = 2'000'000, .max_string_bytes = 64u << 10};
// Ingest batches as sent (zstd or JSON); decoded, they may reach kMaxIngestJsonBytes
// (ingest_batch.h). The format's caps (200,000 series, 2,000,000 samples) make at most about
// 6.6 million values of series; 8 million leaves room for records. Its deepest path has 4
// levels.
inline constexpr size_t kIngestBodyBytes = 16u << 20;
inline constexpr wire::JsonLimits kIngestJson{
    .max_depth = 16, .max_values = 8'000'000, .max_string_bytes = 64u << 10};

// A versioned document sent by a daemon (heartbeat, ingest batch): valid UTF-8 JSON within
// `limits`, an object, with "version": 1. Refusals (kInvalidArgument), each message starting
// with `what`: reason "invalid_json", "json_too_deep" or "json_too_large" (wire/json_parse.h,
// naming the limit), or `bad_reason` naming `<what>.version`.
Result<nlohmann::json> ParseVersionOneDocument(std::string_view text, std::string_view what,
                                               std::string_view bad_reason,
                                               const wire::JsonLimits& limits);

// The request body as a JSON object within `limits`; kInvalidArgument "invalid_json",
// "json_too_deep" or "json_too_large" otherwise.
Result<nlohmann::json> JsonObjectBody(const http::Request& request,
                                      const wire::JsonLimits& limits = kSmallBodyJson);

// JSON the server stored and now serves back (a heartbeat, an audit detail), parsed within
// kHeartbeatJson; null when it does not parse. It was checked on the way in, but it came from
// outside, and rows older than the limits were not.
nlohmann::json ParseStoredJson(std::string_view text);

// ErrorResponse(status), except that reason "body_too_large" answers 413 like the listener's
// own refusal of a body over its limit (a body that only grows too large once decoded).
http::Response RefusalResponse(const Status& status);
// A string member of a JSON object; kInvalidArgument naming the field when missing or not a
// string (an absent optional member gives "").
Result<std::string> StringField(const nlohmann::json& body, const char* name, bool required);
// Query parameter `name` as an integer in [min, max], `fallback` when absent; kInvalidArgument
// "invalid_argument" naming it otherwise.
Result<int64_t> IntQueryParam(const http::Request& request, std::string_view name, int64_t fallback,
                              int64_t min, int64_t max);
// The token after "Bearer " in Authorization, or "".
std::string_view BearerToken(const http::Request& request);
// The value of cookie `name` in the Cookie header, or "".
std::string CookieValue(const http::Request& request, std::string_view name);

http::Response Json(int status, const nlohmann::json& body);

nlohmann::json ComputeJson(const store::Compute& compute, int64_t now_ms);
nlohmann::json OrganizationJson(const store::Organization& org);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_ROUTE_UTIL_H_
