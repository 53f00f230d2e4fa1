#include "doctor/doctor_command.h"

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string_view>

#include "core/env_file.h"
#include "doctor/checks.h"
#include "doctor/findings.h"
#include "net/http_client.h"
#include "wire/error_answer.h"

namespace expanse::doctor {

PlaneProbe HttpPlaneProbe(const std::string& ca_file, const std::string& https_proxy,
                          const std::string& no_proxy) {
  return [=](const std::string& method, const std::string& url, const std::string& credential) {
    ProbeFacts probe;
    probe.url = url.substr(0, url.find('?'));
    net::HttpClientOptions options;
    options.connect_timeout = std::chrono::seconds(5);
    options.total_timeout = std::chrono::seconds(15);
    options.max_response_bytes = 64 << 10;
    options.ca_file = ca_file;
    options.https_proxy = https_proxy;
    options.no_proxy = no_proxy;
    options.user_agent = "expanse-doctor";
    Result<std::unique_ptr<net::HttpClient>> client = net::HttpClient::Create(options);
    if (!client.ok()) {
      probe.error = client.status().message();
      return probe;
    }
    net::HttpRequest request;
    request.method = method;
    request.url = url;
    request.headers = {{"Authorization", "Bearer " + credential}};
    Result<net::HttpResponse> response = (*client)->Send(request);
    if (!response.ok()) {
      probe.error = response.status().message();
      return probe;
    }
    probe.reached = true;
    probe.status = response->status;
    if (response->status >= 400)
      probe.code = wire::DecodeErrorAnswer(response->body).code;
    return probe;
  };
}

namespace {

// What the controller's HTTP client is given from daemon.env: the CA bundle and the proxy. The
// doctor's own environment wins, so `SSL_CERT_FILE=... expanse doctor` tries another bundle.
struct PlaneClientSettings {
  std::string ca_file, https_proxy, no_proxy;
};

Result<PlaneClientSettings> ReadPlaneClientSettings(Host& host, const std::string& env_file) {
  if (const std::optional<FileInfo> info = host.Stat(env_file);
      info && info->type != FileInfo::Type::kFile)
    return InvalidArgumentError(env_file + " is not a regular file");
  Result<std::optional<std::string>> text = host.ReadFile(env_file, 1 << 20);
  if (!text.ok())
    return text.status();
  EnvFile file;
  if (*text) {
    Result<EnvFile> parsed = ParseEnvFile(**text);
    if (!parsed.ok())
      return InvalidArgumentError(env_file + ": " + parsed.status().message());
    file = std::move(*parsed);
  }
  const auto value = [&](std::initializer_list<const char*> keys) {
    std::string found;
    for (const char* key : keys) {
      if (std::optional<std::string_view> v = file.Get(key); v && found.empty())
        found = std::string(*v);
    }
    for (const char* key : keys) {
      if (std::optional<std::string> v = host.GetEnv(key); v && !v->empty())
        return *v;
    }
    return found;
  };
  return PlaneClientSettings{value({"SSL_CERT_FILE"}), value({"https_proxy", "HTTPS_PROXY"}),
                             value({"no_proxy", "NO_PROXY"})};
}

}  // namespace

int RunDoctorCommand(const DoctorCommandOptions& options, Host& host, std::ostream& out,
                     std::ostream& err) {
  GatherOptions gather = options.gather;
  if (options.probe_planes && !gather.probe) {
    Result<PlaneClientSettings> settings = ReadPlaneClientSettings(host, options.env_file);
    if (!settings.ok()) {
      err << "expanse doctor: " << settings.status().message() << "\n";
      return 2;
    }
    gather.probe = HttpPlaneProbe(settings->ca_file, settings->https_proxy, settings->no_proxy);
  }
  const DeploymentFacts facts = GatherFacts(host, gather);
  if (!gather.target.empty() && facts.nodes.empty()) {
    err << "expanse doctor: no shared prefix known (pass --shared-prefix) to find " << gather.target
        << "'s report\n";
    return 2;
  }
  const std::vector<Finding> findings = RunChecks(facts);
  if (options.json) {
    out << FindingsJsonText(findings, gather.target, facts.now_ms);
  } else {
    out << FindingsText(findings);
  }
  return ExitStatusFor(findings);
}

}  // namespace expanse::doctor
