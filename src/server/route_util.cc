#include "server/route_util.h"

#include <cctype>
#include <charconv>
#include <string>

#include "http/error.h"

namespace expanse::server {

using nlohmann::json;

namespace {

// The parse error with `what` in front: "heartbeat: the document nests arrays and objects
// deeper than 32 levels".
Status Named(std::string_view what, const Status& error) {
  return Status(error.code(), std::string(what) + ": " + error.message())
      .WithReason(error.reason());
}

}  // namespace

Result<json> ParseVersionOneDocument(std::string_view text, std::string_view what,
                                     std::string_view bad_reason, const wire::JsonLimits& limits) {
  Result<json> parsed = wire::ParseJson(text, limits);
  if (!parsed.ok())
    return Named(what, parsed.status());
  json doc = *std::move(parsed);
  auto bad = [&](const char* field, const char* problem) {
    return InvalidArgumentError(std::string(what) + field + " " + problem)
        .WithReason(std::string(bad_reason));
  };
  if (!doc.is_object())
    return bad("", "must be a JSON object");
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return bad(".version", "must be 1");
  }
  return doc;
}

Result<json> JsonObjectBody(const http::Request& request, const wire::JsonLimits& limits) {
  Result<json> parsed = wire::ParseJson(request.body, limits);
  if (!parsed.ok())
    return Named("the request body", parsed.status());
  json body = *std::move(parsed);
  if (!body.is_object()) {
    return InvalidArgumentError("the request body must be a JSON object")
        .WithReason("invalid_json");
  }
  return body;
}

Result<std::string> StringField(const json& body, const char* name, bool required) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) {
    if (!required)
      return std::string();
    return InvalidArgumentError(std::string(name) + " is required").WithReason("invalid_argument");
  }
  if (!it->is_string()) {
    return InvalidArgumentError(std::string(name) + " must be a string")
        .WithReason("invalid_argument");
  }
  return it->get<std::string>();
}

Result<int64_t> IntQueryParam(const http::Request& request, std::string_view name, int64_t fallback,
                              int64_t min, int64_t max) {
  std::optional<std::string_view> text = request.QueryParam(name);
  if (!text)
    return fallback;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < min || value > max) {
    return InvalidArgumentError(std::string(name) + " must be an integer from " +
                                std::to_string(min) + " to " + std::to_string(max))
        .WithReason("invalid_argument");
  }
  return value;
}

std::string_view BearerToken(const http::Request& request) {
  std::optional<std::string_view> auth = request.Header("Authorization");
  if (!auth)
    return {};
  constexpr std::string_view kPrefix = "Bearer ";
  if (auth->size() <= kPrefix.size())
    return {};
  for (size_t i = 0; i < kPrefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>((*auth)[i])) !=
        std::tolower(static_cast<unsigned char>(kPrefix[i]))) {
      return {};
    }
  }
  return auth->substr(kPrefix.size());
}

std::string CookieValue(const http::Request& request, std::string_view name) {
  std::optional<std::string_view> header = request.Header("Cookie");
  if (!header)
    return {};
  std::string_view rest = *header;
  while (!rest.empty()) {
    size_t end = rest.find(';');
    std::string_view part = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    while (!part.empty() && part.front() == ' ')
      part.remove_prefix(1);
    size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) {
      return std::string(part.substr(eq + 1));
    }
  }
  return {};
}

json ParseStoredJson(std::string_view text) {
  Result<json> parsed = wire::ParseJson(text, kHeartbeatJson);
  return parsed.ok() ? *std::move(parsed) : json(nullptr);
}

http::Response RefusalResponse(const Status& status) {
  if (status.reason() == "body_too_large")
    return http::ErrorResponse(413, status.reason(), status.message());
  return http::ErrorResponse(status);
}

http::Response Json(int status, const json& body) {
  // Replacement keeps the response valid JSON even if stored text were not UTF-8.
  return http::JsonResponse(status, body.dump(-1, ' ', false, json::error_handler_t::replace));
}

json ComputeJson(const store::Compute& c, int64_t now_ms) {
  json j = {{"id", c.id},
            {"name", c.name},
            {"type", c.type},
            {"state", std::string(store::ComputeStateName(c.state))},
            {"created_at_ms", c.created_at_ms},
            {"pinned_daemon_version", c.pinned_daemon_version},
            {"control_plane_url", c.control_plane_url},
            {"data_plane_url", c.data_plane_url},
            {"controller_host", c.controller_host},
            {"daemon_version", c.daemon_version},
            {"last_heartbeat_ms", c.last_heartbeat_ms}};
  j["heartbeat_age_ms"] =
      c.last_heartbeat_ms == 0 ? json(nullptr) : json(now_ms - c.last_heartbeat_ms);
  return j;
}

json OrganizationJson(const store::Organization& org) {
  return {{"id", org.id}, {"slug", org.slug}, {"name", org.name}};
}

}  // namespace expanse::server
