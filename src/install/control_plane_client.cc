#include "install/control_plane_client.h"

#include <algorithm>
#include <cstdint>
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
    return StatusFromControlPlaneAnswer(response.status, response.body, method + " " + path);
  return std::move(response.body);
}

Result<ComputeSummary> ControlPlaneClient::Introspect(std::string_view token) {
  EXPANSE_ASSIGN_OR_RETURN(std::string body, Call("POST", "/cp/v1/install-tokens/introspect",
                                                  json{{"token", token}}.dump(), ""));
  return DecodeIntrospection(body);
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
  return DecodeExchange(body);
}

Result<int64_t> ControlPlaneClient::LastHeartbeatMs(std::string_view credential) {
  EXPANSE_ASSIGN_OR_RETURN(std::string body,
                           Call("GET", "/cp/v1/enrolment?wait_ms=0", "", credential));
  EXPANSE_ASSIGN_OR_RETURN(const Enrolment enrolment, DecodeEnrolment(body));
  return enrolment.last_heartbeat_ms;
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
      if (Result<Enrolment> enrolment = DecodeEnrolment(*body);
          enrolment.ok() && enrolment->enrolled)
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
