// Fuzzes the server's own route handlers, which the other targets stop short of: a real
// ServerApp (SQLite in a temporary directory, every route registered as expanse-server serve
// registers it) answers requests over a loopback connection, each built from the input:
//   byte 0: the route (a table below: sign-in, install-token introspection and exchange,
//           heartbeat, ingest (one batch, or an envelope of several), segment grants and segments,
//           API tokens, alert rules, computes, and the GET and DELETE routes whose path and query
//           come from the input);
//   byte 1: who asks (nobody, the organisation's owner, the compute's daemon, a made-up token);
//   the rest: the body of a POST or PATCH, or what follows the route's path for GET and DELETE
//           (bytes outside printable ASCII are percent-encoded, so the request line stays one).
// Left out: revoking API tokens and deprovisioning with the daemon's credential, which would
// leave every later input facing a revoked token (results would depend on earlier inputs).
// Properties: the server answers every request (a crash or a cut connection traps); no answer
// is 500 (an internal error on outside input is a bug; 503 for a busy store is allowed); an
// error answer (>= 400) with a JSON body has the API's shape, {"error":{"code":...}}.
#include <httplib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "crypto/password.h"
#include "server/server_app.h"

namespace {

using expanse::server::ServerApp;
using nlohmann::json;

void Require(bool condition, const std::string& what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_api_routes: property violated: %s\n", what.c_str());
    __builtin_trap();
  }
}

enum class Who { kNobody, kOwner, kDaemon, kMadeUp };

struct Route {
  const char* method;
  const char* path;  // "{c}": the compute's id
  const char* content_type = "application/json";
};

constexpr Route kRoutes[] = {
    {"POST", "/api/v1/session"},
    {"POST", "/cp/v1/install-tokens/introspect"},
    {"POST", "/cp/v1/install-tokens/exchange"},
    {"POST", "/cp/v1/heartbeat"},
    {"POST", "/cp/v1/deprovision"},
    {"POST", "/dp/v1/ingest"},
    {"POST", "/dp/v1/ingest", "application/x-expanse-batches"},  // several batches
    {"POST", "/dp/v1/sync"},
    {"POST", "/dp/v1/segment-grants"},
    {"POST", "/dp/v1/segments"},
    {"POST", "/api/v1/orgs/acme/api-tokens"},
    {"POST", "/api/v1/orgs/acme/alert-rules"},
    {"PATCH", "/api/v1/orgs/acme/alert-rules/1"},
    {"POST", "/api/v1/orgs/acme/computes"},
    {"PATCH", "/api/v1/computes/{c}"},
    {"POST", "/api/v1/computes/{c}/install-tokens"},
    {"GET", "/api/v1/orgs/acme/"},
    {"GET", "/api/v1/orgs/acme/audit?"},
    {"GET", "/api/v1/orgs/acme/jobs?"},
    {"GET", "/api/v1/orgs/acme/efficiency?"},
    {"GET", "/api/v1/computes/{c}/"},
    {"GET", "/api/v1/computes/{c}/jobs/"},
    {"GET", "/api/v1/computes/{c}/jobs/77/timeline?"},
    {"GET", "/api/v1/computes/{c}/jobs/77/capture?"},
    {"GET", "/api/v1/computes/{c}/jobs/77/stacks?"},
    {"GET", "/api/v1/computes/{c}/jobs/77/segments?"},
    {"GET", "/cp/v1/enrolment?"},
    {"GET", "/releases/"},
    {"GET", "/"},
    {"DELETE", "/api/v1/orgs/acme/alert-rules/"},
};

struct Fixture {
  std::filesystem::path dir;
  expanse::SystemClock clock;
  std::unique_ptr<ServerApp> app;
  std::unique_ptr<httplib::Client> client;
  std::string owner_token;
  std::string compute;
  std::string credential;
};

std::string Escaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (c > 0x20 && c < 0x7f && c != '#' && c != '%') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Fixture* Start() {
  auto* f = new Fixture;
  // On tmpfs where there is one: each stored request's fsync would otherwise set the pace.
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                         ? std::filesystem::path("/dev/shm")
                                         : std::filesystem::temp_directory_path();
  f->dir = base / ("expanse-fuzz-api-routes-" + std::to_string(getpid()));
  std::filesystem::remove_all(f->dir);
  std::filesystem::create_directories(f->dir);
  expanse::server::ServerOptions o;
  o.db_path = (f->dir / "db.sqlite").string();
  o.control_listen = "127.0.0.1:0";
  o.control.password_cost = expanse::crypto::MinimumCost();
  o.control.control_plane_url = "http://127.0.0.1:1";
  o.control.data_plane_url = "http://127.0.0.1:2";
  o.control.daemon_version = "0.1.0";
  o.credential_requests_per_second = 1e9;  // the fuzzer's pace is not what is tested
  auto app = ServerApp::Create(o, f->clock);
  Require(app.ok(), "the server starts: " + app.status().ToString());
  f->app = std::move(*app);
  Require(f->app->Start().ok(), "the listeners start");
  f->client = std::make_unique<httplib::Client>("127.0.0.1", f->app->control_port());
  f->client->set_read_timeout(90, 0);  // an enrolment long poll may rightly wait 60 s
  f->client->set_keep_alive(true);
  f->client->set_tcp_nodelay(true);  // else a delayed ACK holds each request back ~40 ms
  auto boot = f->app->control().Bootstrap("acme", "Acme", "owner@acme.example", "pw-owner", "t");
  Require(boot.ok(), "bootstrap");
  f->owner_token = boot->api_token;
  const httplib::Headers owner = {{"Authorization", "Bearer " + f->owner_token}};
  auto compute = f->client->Post("/api/v1/orgs/acme/computes", owner,
                                 R"({"name":"c1","type":"slurm"})", "application/json");
  Require(compute && compute->status == 201, "a compute");
  f->compute = json::parse(compute->body).value("id", "");
  auto token = f->client->Post("/api/v1/computes/" + f->compute + "/install-tokens", owner, "",
                               "application/json");
  Require(token && token->status == 201, "an install token");
  const json exchange = {{"token", json::parse(token->body).value("token", "")},
                         {"hostname", "ctl"},
                         {"daemon_version", "0.1.0"},
                         {"role", "controller"}};
  auto exchanged =
      f->client->Post("/cp/v1/install-tokens/exchange", exchange.dump(), "application/json");
  Require(exchanged && exchanged->status == 200, "a credential");
  f->credential = json::parse(exchanged->body).value("credential", "");
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* f = Start();
  if (size < 2)
    return 0;
  const Route& route = kRoutes[data[0] % std::size(kRoutes)];
  const Who who = static_cast<Who>(data[1] % 4);
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::string path = route.path;
  if (const size_t at = path.find("{c}"); at != std::string::npos)
    path.replace(at, 3, f->compute);
  const std::string method = route.method;
  const bool has_body = method == "POST" || method == "PATCH";
  if (!has_body)
    path += Escaped(rest);

  httplib::Headers headers;
  if (who == Who::kOwner)
    headers.emplace("Authorization", "Bearer " + f->owner_token);
  else if (who == Who::kDaemon && path != "/cp/v1/deprovision")   // else every later input meets
    headers.emplace("Authorization", "Bearer " + f->credential);  // a revoked credential
  else if (who == Who::kMadeUp)
    headers.emplace("Authorization", "Bearer exp_cc_0000000000000000");

  httplib::Result r =
      method == "GET"     ? f->client->Get(path, headers)
      : method == "POST"  ? f->client->Post(path, headers, std::string(rest), route.content_type)
      : method == "PATCH" ? f->client->Patch(path, headers, std::string(rest), route.content_type)
                          : f->client->Delete(path, headers);
  Require(static_cast<bool>(r), method + " " + path.substr(0, 200) + ": no answer (" +
                                    httplib::to_string(r.error()) + ")");
  Require(r->status != 500,
          method + " " + path.substr(0, 200) + " answered 500: " + r->body.substr(0, 300));
  if (r->status >= 400 && r->get_header_value("Content-Type").starts_with("application/json")) {
    const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    Require(body.is_object() && body.contains("error") && body["error"].is_object() &&
                body["error"].contains("code"),
            method + " " + path.substr(0, 200) +
                ": an error answer not in the API's shape: " + r->body.substr(0, 300));
  }
  // An envelope's answers are each a batch's own answer: held to the same properties.
  if (r->status == 200 && r->body.starts_with("{\"answers\"")) {
    const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    Require(body.is_object() && body["answers"].is_array(), "an envelope answer not in shape");
    for (const json& answer : body["answers"]) {
      Require(answer.value("status", 0) != 500,
              "a batch of an envelope answered 500: " + answer.dump().substr(0, 300));
      if (answer.value("status", 0) >= 400) {
        Require(answer.contains("body") && answer["body"].is_object() &&
                    answer["body"].contains("error"),
                "a batch's refusal not in the API's shape: " + answer.dump().substr(0, 300));
      }
    }
  }
  return 0;
}
