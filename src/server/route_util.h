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

namespace expanse::server {

inline constexpr char kSessionCookie[] = "expanse_session";

// A versioned document sent by a daemon (heartbeat, ingest batch): valid UTF-8 JSON, an object,
// with "version": 1. Refusals: reason "invalid_json", or `bad_reason` naming `<what>.version`.
Result<nlohmann::json> ParseVersionOneDocument(std::string_view text, std::string_view what,
                                               std::string_view bad_reason);

// The request body as a JSON object; kInvalidArgument "invalid_json" otherwise.
Result<nlohmann::json> JsonObjectBody(const http::Request& request);
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
