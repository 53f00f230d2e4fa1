// Test helpers shared by the trace segment transports' tests: segment documents, files in a
// scratch spool, and a real expanse-server in the test process with a registered compute and its
// controller credential.
#ifndef EXPANSE_AGENT_SEGMENT_TEST_SERVER_H_
#define EXPANSE_AGENT_SEGMENT_TEST_SERVER_H_

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/test_temp_dir.h"
#include "crypto/password.h"
#include "net/http_client.h"
#include "server/server_app.h"

namespace expanse::agent::segment_testing {

inline constexpr int64_t kStart = 1'800'000'000'000;

inline std::string Segment(const std::string& host, int pid, const std::string& kernel = "gemm") {
  return nlohmann::json{
      {"traceEvents", {{{"ph", "X"}, {"name", kernel}, {"pid", pid}, {"ts", 1.0}, {"dur", 2.0}}}},
      {"otherData",
       {{"format", "expanse-trace-segment/1"},
        {"job_id", "42"},
        {"host", host},
        {"pid", pid},
        {"uid", 1001},
        {"window_start_ms", kStart},
        {"window_end_ms", kStart + 10'000},
        {"trigger", {{"id", "42-1-GPU-a"}, {"reason", "gpu_idle"}}},
        {"events", 1}}}}
      .dump();
}

inline void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

inline std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::exists(dir))
    return names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A real server (its data plane on the control listener, no public data-plane URL) with compute
// `compute_` and its controller's credential `credential_`.
class SegmentServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions options;
    options.db_path = dir_.path() + "/db.sqlite";
    options.control_listen = "127.0.0.1:0";
    options.control.password_cost = crypto::MinimumCost();
    options.control.control_plane_url = "http://127.0.0.1:1";
    options.control.data_plane_url = "";
    options.control.daemon_version = "0.1.0";
    auto app = server::ServerApp::Create(options, server_clock_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = *std::move(app);
    ASSERT_TRUE(app_->Start().ok());
    base_url_ = "http://127.0.0.1:" + std::to_string(app_->control_port());
    auto client = net::HttpClient::Create({});
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    auto boot = app_->control().Bootstrap("acme", "Acme", "owner@acme.example", "pw", "t");
    ASSERT_TRUE(boot.ok()) << boot.status();
    const std::string api = boot->api_token;
    compute_ = Call("/api/v1/orgs/acme/computes", R"({"name":"c1","type":"slurm"})", api)["id"];
    const nlohmann::json token = Call("/api/v1/computes/" + compute_ + "/install-tokens", "", api);
    credential_ = Call("/cp/v1/install-tokens/exchange",
                       nlohmann::json{{"token", token["token"]},
                                      {"hostname", "ctl01"},
                                      {"daemon_version", "0.1.0"},
                                      {"role", "controller"}}
                           .dump(),
                       "")["credential"];
  }
  void TearDown() override {
    if (app_)
      app_->Stop();
  }
  nlohmann::json Call(const std::string& path, const std::string& body, const std::string& bearer) {
    net::HttpRequest request{.method = "POST", .url = base_url_ + path, .body = body};
    request.headers = {{"Content-Type", "application/json"}};
    if (!bearer.empty())
      request.headers.emplace_back("Authorization", "Bearer " + bearer);
    Result<net::HttpResponse> r = client_->Send(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }
  // Job 42's segments as the server stored them.
  std::vector<store::TraceSegmentRecord> Stored() {
    auto listed = app_->store().Jobs().JobTraceSegments(compute_, "42", 0, 0, 100);
    EXPECT_TRUE(listed.ok()) << listed.status();
    return listed.ok() ? *listed : std::vector<store::TraceSegmentRecord>{};
  }

  testing::TempDir dir_;
  ManualClock server_clock_{kStart};
  ManualClock clock_{kStart};
  std::unique_ptr<server::ServerApp> app_;
  std::unique_ptr<net::HttpClient> client_;
  std::string base_url_, compute_, credential_;
};

}  // namespace expanse::agent::segment_testing

#endif  // EXPANSE_AGENT_SEGMENT_TEST_SERVER_H_
