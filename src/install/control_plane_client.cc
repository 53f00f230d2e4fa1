#include "install/control_plane_client.h"

#include <algorithm>
#include <cstdint>
#include <ctime>

#include <nlohmann/json.hpp>

#include "wire/error_answer.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::install {
namespace {

using nlohmann::json;

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The control plane's answers (docs/api.md) are read like any outside JSON: a member of the
// wrong type is a refusal naming it, never a throw or a silent "".
constexpr wire::JsonLimits kAnswerLimits{
    .max_depth = 8, .max_values = 10'000, .max_string_bytes = 64 * 1024};
constexpr size_t kMaxFieldBytes = 4096;
constexpr wire::Need kOptional = wire::Need::kOptional;

// An id the control plane sends as a string ("cmp_…") or as its record number (a credential's
// id): both read as text, anything else is refused by name.
Result<std::string> IdText(const wire::FieldReader& r, const char* key) {
  if (const json* id = r.Find(key); id != nullptr && id->is_number_unsigned())
    return std::to_string(id->get<uint64_t>());
  return r.Text(key, kMaxFieldBytes, kOptional);
}

Result<json> ParseAnswer(const std::string& body, std::string_view what) {
  Result<json> doc = wire::ParseJson(body, kAnswerLimits);
  if (!doc.ok() || !doc->is_object()) {
    return DataLossError(std::string(what) + " answer is not a JSON object")
        .WithReason("invalid_answer");
  }
  return doc;
}

Result<ComputeSummary> SummaryFrom(const json& doc) {
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader root,
                           wire::FieldReader::Object(doc, "answer", "invalid_answer"));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader c, root.Member("compute", kOptional));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader o, root.Member("organization", kOptional));
  ComputeSummary s;
  EXPANSE_ASSIGN_OR_RETURN(s.id, IdText(c, "id"));
  EXPANSE_ASSIGN_OR_RETURN(s.name, c.Text("name", kMaxFieldBytes, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(s.state, c.Text("state", kMaxFieldBytes, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(s.pinned_daemon_version,
                           c.Text("pinned_daemon_version", kMaxFieldBytes, kOptional));
  // The plane URLs sit at the top in newer answers and in the compute in older ones.
  EXPANSE_ASSIGN_OR_RETURN(s.control_plane_url,
                           root.Text("control_plane_url", kMaxFieldBytes, kOptional));
  if (s.control_plane_url.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(s.control_plane_url,
                             c.Text("control_plane_url", kMaxFieldBytes, kOptional));
  }
  EXPANSE_ASSIGN_OR_RETURN(s.data_plane_url,
                           root.Text("data_plane_url", kMaxFieldBytes, kOptional));
  if (s.data_plane_url.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(s.data_plane_url, c.Text("data_plane_url", kMaxFieldBytes, kOptional));
  }
  EXPANSE_ASSIGN_OR_RETURN(s.organization_slug, o.Text("slug", kMaxFieldBytes, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(s.organization_name, o.Text("name", kMaxFieldBytes, kOptional));
  return s;
}

// Maps an HTTP error answer to a Status whose reason is the server's code.
Status StatusFromAnswer(int http_status, const std::string& body, const std::string& what) {
  const wire::ErrorAnswer answer = wire::DecodeErrorAnswer(body);
  const std::string code =
      answer.code.empty() ? "http_" + std::to_string(http_status) : answer.code;
  const std::string& message = answer.message;
  std::string text = what + ": the control plane answered " + std::to_string(http_status) + " " +
                     code + (message.empty() ? "" : " (" + message + ")");
  Status s = http_status == 401 || http_status == 403   ? UnauthenticatedError(text)
             : http_status == 409                       ? FailedPreconditionError(text)
             : http_status >= 500 || http_status == 429 ? UnavailableError(text)
                                                        : InvalidArgumentError(text);
  return s.WithReason(code);
}

}  // namespace

Result<ControlPlaneClient> ControlPlaneClient::Create(std::string control_plane_url,
                                                      std::string ca_file) {
  while (!control_plane_url.empty() && control_plane_url.back() == '/')
    control_plane_url.pop_back();
  net::HttpClientOptions options;
  options.ca_file = std::move(ca_file);
  options.total_timeout = std::chrono::seconds(30);
  options.user_agent = "expanse-install";
  EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> http, net::HttpClient::Create(options));
  return ControlPlaneClient(std::move(control_plane_url), std::move(http));
}

Result<std::string> ControlPlaneClient::Call(const std::string& method, const std::string& path,
                                             const std::string& body, std::string_view bearer) {
  net::HttpRequest request;
  request.method = method;
  request.url = url_ + path;
  request.body = body;
  if (method == "POST")
    request.headers.emplace_back("Content-Type", "application/json");
  if (!bearer.empty())
    request.headers.emplace_back("Authorization", "Bearer " + std::string(bearer));
  EXPANSE_ASSIGN_OR_RETURN(net::HttpResponse response, http_->Send(request));
  if (response.status != 200)
    return StatusFromAnswer(response.status, response.body, method + " " + path);
  return std::move(response.body);
}

Result<ComputeSummary> ControlPlaneClient::Introspect(std::string_view token) {
  EXPANSE_ASSIGN_OR_RETURN(std::string body, Call("POST", "/cp/v1/install-tokens/introspect",
                                                  json{{"token", token}}.dump(), ""));
  EXPANSE_ASSIGN_OR_RETURN(json doc, ParseAnswer(body, "the token introspection"));
  return SummaryFrom(doc);
}

Result<ExchangedCredential> ControlPlaneClient::Exchange(std::string_view token,
                                                         const ExchangeRequest& r) {
  json request = {{"token", token},
                  {"hostname", r.hostname},
                  {"daemon_version", r.daemon_version},
                  {"role", r.role}};
  if (!r.slurm_version.empty())
    request["slurm_version"] = r.slurm_version;
  EXPANSE_ASSIGN_OR_RETURN(std::string body,
                           Call("POST", "/cp/v1/install-tokens/exchange", request.dump(), ""));
  EXPANSE_ASSIGN_OR_RETURN(json doc, ParseAnswer(body, "the token exchange"));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader answer,
                           wire::FieldReader::Object(doc, "answer", "invalid_answer"));
  ExchangedCredential out;
  EXPANSE_ASSIGN_OR_RETURN(out.credential, answer.Text("credential", kMaxFieldBytes, kOptional));
  if (!out.credential.starts_with("exp_cc_"))
    return DataLossError("the token exchange answer carries no credential");
  EXPANSE_ASSIGN_OR_RETURN(out.credential_id, IdText(answer, "credential_id"));
  EXPANSE_ASSIGN_OR_RETURN(out.compute, SummaryFrom(doc));
  return out;
}

Result<int64_t> ControlPlaneClient::LastHeartbeatMs(std::string_view credential) {
  EXPANSE_ASSIGN_OR_RETURN(std::string body,
                           Call("GET", "/cp/v1/enrolment?wait_ms=0", "", credential));
  EXPANSE_ASSIGN_OR_RETURN(json doc, ParseAnswer(body, "the enrolment"));
  EXPANSE_ASSIGN_OR_RETURN(wire::FieldReader r,
                           wire::FieldReader::Object(doc, "answer", "invalid_answer"));
  return r.Int("last_heartbeat_ms", 0, INT64_MAX, wire::Need::kOptional, 0);
}

Result<bool> ControlPlaneClient::WaitForHeartbeat(std::string_view credential,
                                                  std::chrono::milliseconds timeout,
                                                  int64_t after_ms) {
  const int64_t deadline = MonotonicMs() + timeout.count();
  Status last = OkStatus();
  while (true) {
    const int64_t left = deadline - MonotonicMs();
    if (left <= 0)
      break;
    const int64_t wait = std::min<int64_t>(left, 10000);
    Result<std::string> body =
        Call("GET",
             "/cp/v1/enrolment?wait_ms=" + std::to_string(wait) +
                 (after_ms > 0 ? "&after_ms=" + std::to_string(after_ms) : std::string()),
             "", credential);
    if (body.ok()) {
      // A wrongly typed answer is not an enrolment; the wait goes on until its deadline.
      Result<json> doc = ParseAnswer(*body, "the enrolment");
      if (doc.ok()) {
        Result<wire::FieldReader> r = wire::FieldReader::Object(*doc, "answer", "invalid_answer");
        if (r.ok() && r->Bool("enrolled", false).value_or(false))
          return true;
      }
      continue;
    }
    last = body.status();
    // A refused credential will not start working by waiting.
    if (last.code() == StatusCode::kUnauthenticated || last.code() == StatusCode::kInvalidArgument)
      return last;
    struct timespec ts {
      0, 500'000'000
    };
    nanosleep(&ts, nullptr);
  }
  return false;
}

Status ControlPlaneClient::Deprovision(std::string_view credential) {
  return Call("POST", "/cp/v1/deprovision", "{}", credential).status();
}

}  // namespace expanse::install
