// Test-only: the fixture of the HTTP API tests (api_test.cc, api_stacks_test.cc). A real
// ServerApp on loopback over a real SQLite file in a temporary directory, an injected clock, a
// real HTTP client, and the calls most tests start with.
#ifndef EXPANSE_SERVER_API_TEST_UTIL_H_
#define EXPANSE_SERVER_API_TEST_UTIL_H_

#include <httplib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/server_app.h"

namespace expanse::server::api_testing {

using nlohmann::json;

inline constexpr int64_t kStart = 1'800'000'000'000;
// An ingest batch's series of ten minutes on worker2 from t0, one sample a second at `value`.
inline json TenMinuteSeries(const std::string& device, const std::string& metric, double value,
                            int64_t t0 = kStart) {
  json dt = json::array(), v = json::array();
  for (int i = 0; i < 600; ++i) {
    dt.push_back(i == 0 ? 0 : 1000);
    v.push_back(value);
  }
  return {{"host", "worker2"}, {"device", device}, {"metric", metric},
          {"t0", t0},          {"dt", dt},         {"v", v}};
}

// A trace segment as libexpanse-agent.so writes it (docs/formats/capture-spool.md, "Trace
// segments"): one kernel of job `job` on `host`, a 10 s window from `start_ms`.
inline json TraceSegment(const std::string& job, const std::string& host, int pid, int64_t start_ms,
                         const std::string& kernel = "_Z4gemmv") {
  return {{"displayTimeUnit", "ms"},
          {"traceEvents",
           {{{"ph", "X"},
             {"cat", "kernel"},
             {"name", kernel},
             {"pid", pid},
             {"tid", 1000007},
             {"ts", start_ms * 1000.0 + 100},
             {"dur", 2000.0}}}},
          {"otherData",
           {{"format", "expanse-trace-segment/1"},
            {"job_id", job},
            {"host", host},
            {"pid", pid},
            {"uid", 1001},
            {"window_start_ms", start_ms},
            {"window_end_ms", start_ms + 10'000},
            {"trigger", {{"id", job + "-1-GPU-a"}, {"reason", "gpu_idle"}}},
            {"events", 1},
            {"dropped_events", 0}}}};
}

inline constexpr char kHeartbeat[] =
    R"({"version":1,"daemon_version":"0.1.0","controller_host":"ctl"})";

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("expanse-api-test-" + std::to_string(getpid()) + "-" + info->test_suite_name() + "-" +
            info->name());
    std::filesystem::create_directories(dir_);
    ServerOptions o;
    o.db_path = (dir_ / "db.sqlite").string();
    o.control_listen = "127.0.0.1:0";
    o.control.password_cost = crypto::MinimumCost();
    o.control.control_plane_url = "http://127.0.0.1:1";
    o.control.data_plane_url = "http://127.0.0.1:2";
    o.control.daemon_version = "0.1.0";
    Customize(o);
    auto app = ServerApp::Create(o, clock_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = std::move(*app);
    ASSERT_TRUE(app_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", app_->control_port());
    auto boot = app_->control().Bootstrap("acme", "Acme", "owner@acme.example", "pw-owner", "t");
    ASSERT_TRUE(boot.ok()) << boot.status();
    token_ = boot->api_token;
  }

  // A test suite's own server options, set before the server is made.
  virtual void Customize(ServerOptions& /*options*/) {}

  void TearDown() override {
    app_->Stop();
    std::filesystem::remove_all(dir_);
  }

  struct Reply {
    int status = 0;
    json body;
    httplib::Headers headers;
  };

  Reply Call(const std::string& method, const std::string& path, const std::string& body = "",
             httplib::Headers headers = {}) {
    httplib::Result r = method == "GET"    ? client_->Get(path, headers)
                        : method == "POST" ? client_->Post(path, headers, body, "application/json")
                        : method == "PATCH"
                            ? client_->Patch(path, headers, body, "application/json")
                            : client_->Delete(path, headers, body, "application/json");
    Reply reply;
    if (!r) {
      ADD_FAILURE() << method << " " << path << ": " << httplib::to_string(r.error());
      return reply;
    }
    reply.status = r->status;
    reply.headers = r->headers;
    reply.body = json::parse(r->body, nullptr, false);
    EXPECT_FALSE(reply.body.is_discarded()) << "not JSON: " << r->body;
    return reply;
  }

  httplib::Headers Bearer(const std::string& token) {
    return {{"Authorization", "Bearer " + token}};
  }

  std::string Code(const Reply& r) { return r.body["error"].value("code", ""); }

  std::string NewCompute(const std::string& token, const std::string& org = "acme") {
    Reply r = Call("POST", "/api/v1/orgs/" + org + "/computes", R"({"name":"c1","type":"slurm"})",
                   Bearer(token));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.body.value("id", "");
  }

  std::string IssueToken(const std::string& compute) {
    Reply r = Call("POST", "/api/v1/computes/" + compute + "/install-tokens", "", Bearer(token_));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.body.value("token", "");
  }

  Reply Exchange(const std::string& install_token) {
    json body = {{"token", install_token},
                 {"hostname", "ctl"},
                 {"daemon_version", "0.1.0"},
                 {"slurm_version", "22.05.8"},
                 {"role", "controller"}};
    return Call("POST", "/cp/v1/install-tokens/exchange", body.dump());
  }

  ManualClock clock_{kStart};
  std::filesystem::path dir_;
  std::unique_ptr<ServerApp> app_;
  std::unique_ptr<httplib::Client> client_;
  std::string token_;
};

}  // namespace expanse::server::api_testing

#endif  // EXPANSE_SERVER_API_TEST_UTIL_H_
