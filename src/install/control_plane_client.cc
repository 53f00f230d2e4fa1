#include "install/control_plane_client.h"

#include <algorithm>
#include <ctime>

#include <nlohmann/json.hpp>

namespace expanse::install {
namespace {

using nlohmann::json;

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A member as text whatever its JSON type (ids may be numbers); "" when absent or null.
std::string Text(const json& object, const char* name) {
  if (!object.is_object() || !object.contains(name) || object[name].is_null())
    return "";
  const json& v = object[name];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

ComputeSummary SummaryFrom(const json& doc) {
  ComputeSummary s;
  const json& c = doc.contains("compute") ? doc["compute"] : json::object();
  const json& o = doc.contains("organization") ? doc["organization"] : json::object();
  s.id = Text(c, "id");
  s.name = Text(c, "name");
  s.state = Text(c, "state");
  s.pinned_daemon_version = Text(c, "pinned_daemon_version");
  s.control_plane_url = Text(doc, "control_plane_url");
  if (s.control_plane_url.empty())
    s.control_plane_url = Text(c, "control_plane_url");
  s.data_plane_url = Text(doc, "data_plane_url");
  if (s.data_plane_url.empty())
    s.data_plane_url = Text(c, "data_plane_url");
  s.organization_slug = Text(o, "slug");
  s.organization_name = Text(o, "name");
  return s;
}

// Maps an HTTP error answer to a Status whose reason is the server's code.
Status StatusFromAnswer(int http_status, const std::string& body, const std::string& what) {
  json doc = json::parse(body, nullptr, false);
  std::string code = "http_" + std::to_string(http_status);
  std::string message;
  if (doc.is_object() && doc.contains("error") && doc["error"].is_object()) {
    if (std::string c = Text(doc["error"], "code"); !c.empty())
      code = c;
    message = Text(doc["error"], "message");
  }
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
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object())
    return DataLossError("the token introspection answer is not JSON");
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
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object() || !Text(doc, "credential").starts_with("exp_cc_"))
    return DataLossError("the token exchange answer carries no credential");
  ExchangedCredential out;
  out.credential = Text(doc, "credential");
  out.credential_id = Text(doc, "credential_id");
  out.compute = SummaryFrom(doc);
  return out;
}

Result<bool> ControlPlaneClient::WaitForHeartbeat(std::string_view credential,
                                                  std::chrono::milliseconds timeout) {
  const int64_t deadline = MonotonicMs() + timeout.count();
  Status last = OkStatus();
  while (true) {
    const int64_t left = deadline - MonotonicMs();
    if (left <= 0)
      break;
    const int64_t wait = std::min<int64_t>(left, 10000);
    Result<std::string> body =
        Call("GET", "/cp/v1/enrolment?wait_ms=" + std::to_string(wait), "", credential);
    if (body.ok()) {
      json doc = json::parse(*body, nullptr, false);
      if (doc.is_object() && doc.value("enrolled", false))
        return true;
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
