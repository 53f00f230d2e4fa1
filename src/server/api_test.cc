// The HTTP API of expanse-server, end to end: a real ServerApp on loopback, a real SQLite file,
// a real HTTP client. Every refusal must be a JSON error with a stable code.
#include <httplib.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"

namespace expanse::server {
namespace api_test {
namespace {

using nlohmann::json;

using api_testing::ApiTest;
using api_testing::kHeartbeat;
using api_testing::kStart;

TEST_F(ApiTest, InstallFlowFromTokenToEnrolment) {
  std::string compute = NewCompute(token_);
  std::string install = IssueToken(compute);
  ASSERT_EQ(install.rfind("exp_it_", 0), 0u);

  Reply intro = Call("POST", "/cp/v1/install-tokens/introspect", json{{"token", install}}.dump());
  ASSERT_EQ(intro.status, 200) << intro.body;
  EXPECT_EQ(intro.body["organization"]["slug"], "acme");
  EXPECT_EQ(intro.body["compute"]["id"], compute);

  Reply ex = Exchange(install);
  ASSERT_EQ(ex.status, 200) << ex.body;
  std::string credential = ex.body["credential"];
  EXPECT_EQ(ex.body["data_plane_url"], "http://127.0.0.1:2");
  EXPECT_EQ(Code(Exchange(install)), "install_token_used");

  Reply waiting = Call("GET", "/cp/v1/enrolment?wait_ms=0", "", Bearer(credential));
  EXPECT_EQ(waiting.body["enrolled"], false);
  Reply hb = Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer(credential));
  ASSERT_EQ(hb.status, 200) << hb.body;
  EXPECT_EQ(Call("GET", "/cp/v1/enrolment?wait_ms=10", "", Bearer(credential)).body["enrolled"],
            true);
  Reply c = Call("GET", "/api/v1/computes/" + compute, "", Bearer(token_));
  EXPECT_EQ(c.body["state"], "active");
  EXPECT_EQ(c.body["heartbeat"]["controller_host"], "ctl");

  // A reinstall waits for a heartbeat after the one it last saw: its new daemon's.
  Reply seen = Call("GET", "/cp/v1/enrolment?wait_ms=0", "", Bearer(credential));
  const int64_t last = seen.body.value("last_heartbeat_ms", int64_t{0});
  EXPECT_EQ(last, kStart);
  const std::string after = "/cp/v1/enrolment?wait_ms=0&after_ms=" + std::to_string(last);
  EXPECT_EQ(Call("GET", after, "", Bearer(credential)).body["enrolled"], false);
  clock_.Advance(5000);
  ASSERT_EQ(Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer(credential)).status, 200);
  Reply fresh = Call("GET", after, "", Bearer(credential));
  EXPECT_EQ(fresh.body["enrolled"], true);
  EXPECT_EQ(fresh.body.value("last_heartbeat_ms", int64_t{0}), kStart + 5000);
  for (const char* bad : {"after_ms=-1", "after_ms=1x", "after_ms=", "wait_ms=60001"}) {
    Reply refused = Call("GET", std::string("/cp/v1/enrolment?") + bad, "", Bearer(credential));
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_EQ(Code(refused), "invalid_argument") << bad;
  }
}

// Long-polls hold no thread (issue 16): five times as many installers waiting for their
// enrolment as the server has workers, and the server still answers; one heartbeat answers
// them all; a wait that runs out answers "not enrolled".
TEST_F(ApiTest, EnrolmentLongPollsHoldNoWorker) {
  std::string compute = NewCompute(token_);
  Reply ex = Exchange(IssueToken(compute));
  ASSERT_EQ(ex.status, 200) << ex.body;
  const std::string credential = ex.body["credential"];
  const int port = app_->control_port();
  auto wait_for_enrolment = [port, credential](int wait_ms) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(std::chrono::seconds(60));
    httplib::Result r = client.Get("/cp/v1/enrolment?wait_ms=" + std::to_string(wait_ms),
                                   {{"Authorization", "Bearer " + credential}});
    return r ? std::to_string(r->status) + " " + r->body : "no answer";
  };

  constexpr int kWaiters = 40;  // the server has 8 workers
  std::vector<std::future<std::string>> waiters;
  for (int i = 0; i < kWaiters; ++i)
    waiters.push_back(std::async(std::launch::async, wait_for_enrolment, 60000));
  for (int i = 0; i < 2000 && app_->control().heartbeat_waiters() < kWaiters; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(app_->control().heartbeat_waiters(), static_cast<size_t>(kWaiters));
  Reply health = Call("GET", "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/me", "", Bearer(token_)).status, 200);

  // A short wait that runs out answers "not enrolled yet" while the others keep waiting.
  EXPECT_EQ(json::parse(wait_for_enrolment(50).substr(4))["enrolled"], false);

  ASSERT_EQ(Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer(credential)).status, 200);
  for (auto& waiter : waiters) {
    const std::string answer = waiter.get();
    ASSERT_EQ(answer.substr(0, 4), "200 ") << answer;
    EXPECT_EQ(json::parse(answer.substr(4))["enrolled"], true) << answer;
  }
  EXPECT_EQ(app_->control().heartbeat_waiters(), 0u);
}

TEST_F(ApiTest, TokensWrongExpiredReplayedOrReplaced) {
  std::string compute = NewCompute(token_);
  EXPECT_EQ(Code(Exchange("exp_it_wrong")), "install_token_invalid");
  EXPECT_EQ(Exchange("exp_it_wrong").status, 401);
  std::string old_token = IssueToken(compute);
  std::string new_token = IssueToken(compute);
  Reply replaced = Exchange(old_token);
  EXPECT_EQ(replaced.status, 409);
  EXPECT_EQ(Code(replaced), "install_token_replaced");
  clock_.Advance(60 * 60 * 1000);
  EXPECT_EQ(Code(Exchange(new_token)), "install_token_expired");
}

TEST_F(ApiTest, ReissuedTokenRevokesTheOldCredential) {
  std::string compute = NewCompute(token_);
  std::string first = Exchange(IssueToken(compute)).body["credential"];
  std::string second = Exchange(IssueToken(compute)).body["credential"];
  Reply old = Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer(first));
  EXPECT_EQ(old.status, 401);
  EXPECT_EQ(Code(old), "credential_revoked");
  EXPECT_EQ(Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer(second)).status, 200);
  EXPECT_EQ(Code(Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer("exp_cc_x"))),
            "credential_invalid");
  EXPECT_EQ(Code(Call("POST", "/cp/v1/heartbeat", kHeartbeat)), "credential_invalid");
}

TEST_F(ApiTest, UninstallDeprovisionsWithTheCredential) {
  std::string compute = NewCompute(token_);
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  EXPECT_EQ(Call("POST", "/cp/v1/deprovision", "", Bearer(credential)).status, 200);
  EXPECT_EQ(Code(Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer(credential))),
            "credential_revoked");
  Reply again = Call("POST", "/api/v1/computes/" + compute + "/install-tokens", "", Bearer(token_));
  EXPECT_EQ(Code(again), "compute_deprovisioned");
  EXPECT_EQ(Call("GET", "/api/v1/computes/" + compute, "", Bearer(token_)).body["state"],
            "deprovisioned");
}

TEST_F(ApiTest, OtherOrganisationsCannotReadOrWrite) {
  auto other = app_->control().Bootstrap("other", "Other", "o@other.example", "pw-o", "t");
  ASSERT_TRUE(other.ok());
  std::string compute = NewCompute(token_);
  std::string outsider = other->api_token;
  EXPECT_EQ(Call("GET", "/api/v1/computes/" + compute, "", Bearer(outsider)).status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/computes", "", Bearer(outsider)).status, 404);
  EXPECT_EQ(
      Call("POST", "/api/v1/orgs/acme/computes", R"({"name":"x","type":"slurm"})", Bearer(outsider))
          .status,
      404);
  EXPECT_EQ(
      Call("POST", "/api/v1/computes/" + compute + "/install-tokens", "", Bearer(outsider)).status,
      404);
  EXPECT_EQ(
      Call("POST", "/api/v1/computes/" + compute + "/deprovision", "", Bearer(outsider)).status,
      404);
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/audit", "", Bearer(outsider)).status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/computes/" + compute, "", Bearer(token_)).body["state"],
            "registered");
}

TEST_F(ApiTest, MalformedBodiesGetPreciseErrors) {
  std::string compute = NewCompute(token_);
  for (const char* body : {"", "{", "[1]", "\"x\"", "{\"name\":\"\xff\",\"type\":\"slurm\"}"}) {
    Reply r = Call("POST", "/api/v1/orgs/acme/computes", body, Bearer(token_));
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(Code(r), "invalid_json") << body;
  }
  Reply missing = Call("POST", "/api/v1/orgs/acme/computes", R"({"type":"slurm"})", Bearer(token_));
  EXPECT_EQ(Code(missing), "invalid_argument");
  EXPECT_NE(missing.body["error"]["message"].get<std::string>().find("name"), std::string::npos);
  Reply wrong_type =
      Call("POST", "/api/v1/orgs/acme/computes", R"({"name":5,"type":"slurm"})", Bearer(token_));
  EXPECT_EQ(Code(wrong_type), "invalid_argument");
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  Reply bad_hb = Call("POST", "/cp/v1/heartbeat", R"({"version":1})", Bearer(credential));
  EXPECT_EQ(bad_hb.status, 400);
  EXPECT_EQ(Code(bad_hb), "invalid_heartbeat");
}

TEST_F(ApiTest, OversizeBodyIsRefused) {
  std::string huge(17 << 20, 'x');
  Reply r = Call("POST", "/api/v1/orgs/acme/computes", huge, Bearer(token_));
  EXPECT_EQ(r.status, 413);
}

TEST_F(ApiTest, SqlMetacharactersAreStoredVerbatim) {
  const std::string name = "x'); DROP TABLE computes; -- \"quoted\" \\ ünïcødé 😀";
  Reply r = Call("POST", "/api/v1/orgs/acme/computes",
                 json{{"name", name}, {"type", "slurm"}}.dump(), Bearer(token_));
  ASSERT_EQ(r.status, 201) << r.body;
  Reply got =
      Call("GET", "/api/v1/computes/" + r.body["id"].get<std::string>(), "", Bearer(token_));
  EXPECT_EQ(got.body["name"], name);
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/computes", "", Bearer(token_)).body["computes"].size(),
            1u);
  EXPECT_EQ(Call("GET", "/api/v1/orgs/x'%20OR%201=1--/computes", "", Bearer(token_)).status, 404);
}

TEST_F(ApiTest, ConsoleSessionNeedsCsrfForChanges) {
  Reply login =
      Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"pw-owner"})");
  ASSERT_EQ(login.status, 200) << login.body;
  std::string set_cookie;
  for (const auto& [k, v] : login.headers) {
    if (k == "Set-Cookie")
      set_cookie = v;
  }
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos) << set_cookie;
  std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
  std::string csrf = login.body["csrf_token"];

  Reply me = Call("GET", "/api/v1/me", "", {{"Cookie", cookie}});
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.body["organizations"][0]["slug"], "acme");
  EXPECT_EQ(me.body["organizations"][0]["role"], "owner");

  const std::string body = R"({"name":"c","type":"slurm"})";
  Reply no_csrf = Call("POST", "/api/v1/orgs/acme/computes", body, {{"Cookie", cookie}});
  EXPECT_EQ(no_csrf.status, 403);
  EXPECT_EQ(Code(no_csrf), "csrf_failed");
  EXPECT_EQ(
      Call("POST", "/api/v1/orgs/acme/computes", body, {{"Cookie", cookie}, {"X-CSRF-Token", csrf}})
          .status,
      201);
  EXPECT_EQ(
      Call("DELETE", "/api/v1/session", "", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}).status,
      200);
  EXPECT_EQ(Call("GET", "/api/v1/me", "", {{"Cookie", cookie}}).status, 401);
}

TEST_F(ApiTest, BruteForceLoginIsRateLimited) {
  int refused = 0;
  int limited = 0;
  for (int i = 0; i < 15; ++i) {
    Reply r =
        Call("POST", "/api/v1/session",
             R"({"email":"owner@acme.example","password":"guess)" + std::to_string(i) + "\"}");
    if (r.status == 401)
      ++refused;
    if (r.status == 429) {
      ++limited;
      EXPECT_EQ(Code(r), "rate_limited");
    }
  }
  EXPECT_EQ(refused, 5);  // the per-account burst
  EXPECT_EQ(limited, 10);
  // Even the right password waits until the bucket refills.
  EXPECT_EQ(
      Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"pw-owner"})")
          .status,
      429);
  clock_.Advance(60 * 1000);
  EXPECT_EQ(
      Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"pw-owner"})")
          .status,
      200);
}

TEST_F(ApiTest, AuditLogRecordsSecurityEvents) {
  std::string compute = NewCompute(token_);
  std::string t = IssueToken(compute);
  Exchange(t);
  Exchange(t);
  Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"nope"})");
  Reply audit = Call("GET", "/api/v1/orgs/acme/audit?limit=50", "", Bearer(token_));
  ASSERT_EQ(audit.status, 200) << audit.body;
  std::string actions;
  for (const auto& e : audit.body["events"])
    actions += e["action"].get<std::string>() + " ";
  for (const char* want : {"compute.created", "install_token.issued", "install_token.exchanged",
                           "install_token.refused"}) {
    EXPECT_NE(actions.find(want), std::string::npos) << want << " in " << actions;
  }
  // A limit that is no integer from 1 to 1,000 (one past int's range among them) is named.
  for (const char* bad : {"0", "1001", "abc", "99999999999", "-1", "5x"}) {
    Reply r = Call("GET", std::string("/api/v1/orgs/acme/audit?limit=") + bad, "", Bearer(token_));
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.dump().find("limit must be an integer from 1 to 1000"), std::string::npos)
        << bad << ": " << r.body;
  }
  EXPECT_EQ(
      Call("GET", "/api/v1/orgs/acme/audit?limit=1", "", Bearer(token_)).body["events"].size(), 1u);
}

TEST_F(ApiTest, UnknownRoutesAndMethodsAreJson) {
  Reply r = Call("GET", "/api/v1/nothing-here");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Code(r), "not_found");
  EXPECT_EQ(Call("DELETE", "/cp/v1/heartbeat").status, 405);
  EXPECT_EQ(Call("GET", "/api/v1/me").status, 401);
  EXPECT_EQ(Code(Call("GET", "/api/v1/me", "", Bearer("exp_at_forged"))), "api_token_invalid");
}

// A job on two GPUs of one host: one busy, one idle for the whole job.
std::string TelemetryBatch(int sequence, const std::string& job_state, int64_t end_ms) {
  json series = json::array();
  for (const auto& [gpu, busy] : {std::pair{"GPU-busy", 80.0}, std::pair{"GPU-idle", 0.0}}) {
    json dt = json::array();
    json v = json::array();
    json mem = json::array();
    for (int i = 0; i < 60; ++i) {
      dt.push_back(i == 0 ? 0 : 1000);
      v.push_back(busy == 0 ? 0.0 : busy + (i % 3));
      mem.push_back(busy == 0 ? 0 : 40000 + i);
    }
    series.push_back({{"host", "worker2"},
                      {"device", gpu},
                      {"metric", "gpu.sm_util"},
                      {"t0", kStart},
                      {"dt", dt},
                      {"v", v}});
    series.push_back({{"host", "worker2"},
                      {"device", gpu},
                      {"metric", "gpu.mem_used_mib"},
                      {"t0", kStart},
                      {"dt", dt},
                      {"v", mem}});
  }
  json allocations = json::array();
  int index = 0;
  for (const char* gpu : {"GPU-busy", "GPU-idle"}) {
    allocations.push_back({{"job_id", "77"},
                           {"host", "worker2"},
                           {"gpu_uuid", gpu},
                           {"gpu_index", index},
                           {"gpu_minor", index + 2},
                           {"from_ms", kStart},
                           {"to_ms", end_ms}});
    ++index;
  }
  json doc = {{"version", 1},
              {"stream", "telemetry"},
              {"sequence", sequence},
              {"series", series},
              {"jobs",
               {{{"job_id", "77"},
                 {"state", job_state},
                 {"user", "ana"},
                 {"account", "ml"},
                 {"partition", "gpu"},
                 {"req_gpus", 2},
                 {"req_cpus", 4},
                 {"start_ms", kStart},
                 {"end_ms", end_ms},
                 {"observed_ms", kStart + sequence}}}},
              {"job_events",
               {{{"job_id", "77"}, {"host", "worker2"}, {"kind", "start"}, {"at_ms", kStart}}}},
              {"gpu_allocations", allocations}};
  return doc.dump();
}

TEST_F(ApiTest, IngestedJobShowsRequestedVersusUsed) {
  std::string compute = NewCompute(token_);
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  Reply first = Call("POST", "/dp/v1/ingest", TelemetryBatch(1, "COMPLETED", kStart + 60'000),
                     Bearer(credential));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body["duplicate"], false);
  EXPECT_EQ(first.body["samples"], 240);
  Reply again = Call("POST", "/dp/v1/ingest", TelemetryBatch(1, "COMPLETED", kStart + 60'000),
                     Bearer(credential));
  EXPECT_EQ(again.body["duplicate"], true);

  Reply jobs = Call("GET", "/api/v1/orgs/acme/jobs", "", Bearer(token_));
  ASSERT_EQ(jobs.status, 200) << jobs.body;
  ASSERT_EQ(jobs.body["jobs"].size(), 1u) << jobs.body;
  const json& job = jobs.body["jobs"][0];
  EXPECT_EQ(job["requested"]["gpus"], 2);
  EXPECT_EQ(job["used"]["gpus_allocated"], 2);
  EXPECT_EQ(job["used"]["gpus_active"], 1);
  EXPECT_NEAR(job["used"]["sm_peak"].get<double>(), 82.0, 1e-9);
  EXPECT_NEAR(job["used"]["sm_mean"].get<double>(), 40.5, 0.5);
  EXPECT_NEAR(job["used"]["idle_gpu_hours"].get<double>(), 60.0 / 3600, 1e-3);
  EXPECT_NEAR(job["used"]["gpu_mem_peak_mib"].get<double>(), 40059, 1e-9);
  // The busy GPU worked to its last sample: no idle tail beyond one bucket (0.5 s).
  EXPECT_LE(job["used"]["idle_tail_ms"].get<int64_t>(), 500);

  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/jobs?user=bob", "", Bearer(token_)).body["jobs"].size(),
            0u);
  EXPECT_EQ(
      Call("GET", "/api/v1/orgs/acme/jobs?state=RUNNING", "", Bearer(token_)).body["jobs"].size(),
      0u);

  Reply timeline = Call("GET", "/api/v1/computes/" + compute + "/jobs/77/timeline?points=10", "",
                        Bearer(token_));
  ASSERT_EQ(timeline.status, 200) << timeline.body;
  ASSERT_EQ(timeline.body["series"].size(), 2u);
  for (const auto& s : timeline.body["series"]) {
    EXPECT_LE(s["points"].size(), 10u);
    EXPECT_GE(s["points"].size(), 9u);
  }
  Reply detail = Call("GET", "/api/v1/computes/" + compute + "/jobs/77", "", Bearer(token_));
  EXPECT_EQ(detail.body["gpus"].size(), 2u);
  EXPECT_EQ(detail.body["events"][0]["kind"], "start");
}

// A job's own series (device "job/<id>") are read per host the job ran on.
TEST_F(ApiTest, TimelineOfAJobMetricIsPerHost) {
  std::string compute = NewCompute(token_);
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  ASSERT_EQ(Call("POST", "/dp/v1/ingest", TelemetryBatch(1, "COMPLETED", kStart + 60'000),
                 Bearer(credential))
                .status,
            200);
  json dt = json::array();
  json v = json::array();
  for (int i = 0; i < 60; ++i) {
    dt.push_back(i == 0 ? 0 : 1000);
    v.push_back(1000 + i);
  }
  json doc = {{"version", 1},
              {"stream", "telemetry"},
              {"sequence", 2},
              {"series",
               {{{"host", "worker2"},
                 {"device", "job/77"},
                 {"metric", "job.gpu_memory_mib"},
                 {"t0", kStart},
                 {"dt", dt},
                 {"v", v}},
                {{"host", "worker2"},
                 {"device", "job/78"},
                 {"metric", "job.gpu_memory_mib"},
                 {"t0", kStart},
                 {"dt", dt},
                 {"v", v}}}}};
  ASSERT_EQ(Call("POST", "/dp/v1/ingest", doc.dump(), Bearer(credential)).status, 200);
  Reply timeline = Call(
      "GET", "/api/v1/computes/" + compute + "/jobs/77/timeline?metric=job.gpu_memory_mib&points=6",
      "", Bearer(token_));
  ASSERT_EQ(timeline.status, 200) << timeline.body;
  ASSERT_EQ(timeline.body["series"].size(), 1u) << timeline.body;
  const json& s = timeline.body["series"][0];
  EXPECT_EQ(s["host"], "worker2");
  EXPECT_EQ(s["device"], "job/77");
  ASSERT_GE(s["points"].size(), 5u);
  EXPECT_EQ(s["points"][0][1], 1000);                       // min of the first bucket
  EXPECT_EQ(s["points"][s["points"].size() - 1][2], 1059);  // max of the last
}

// A job that stops using its GPU halfway and holds it to the end has an idle tail.
TEST_F(ApiTest, JobThatHoldsItsIdleGpuToTheEndHasAnIdleTail) {
  std::string compute = NewCompute(token_);
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  json dt = json::array();
  json v = json::array();
  for (int i = 0; i < 120; ++i) {
    dt.push_back(i == 0 ? 0 : 1000);
    v.push_back(i < 60 ? 90.0 : 0.0);  // busy for a minute, then idle for a minute
  }
  const int64_t end_ms = kStart + 120'000;
  json doc = {{"version", 1},
              {"stream", "telemetry"},
              {"sequence", 1},
              {"series",
               {{{"host", "w1"},
                 {"device", "GPU-a"},
                 {"metric", "gpu.sm_util"},
                 {"t0", kStart},
                 {"dt", dt},
                 {"v", v}}}},
              {"jobs",
               {{{"job_id", "9"},
                 {"state", "COMPLETED"},
                 {"req_gpus", 1},
                 {"start_ms", kStart},
                 {"end_ms", end_ms},
                 {"observed_ms", kStart}}}},
              {"gpu_allocations",
               {{{"job_id", "9"},
                 {"host", "w1"},
                 {"gpu_uuid", "GPU-a"},
                 {"gpu_index", 0},
                 {"gpu_minor", 0},
                 {"from_ms", kStart},
                 {"to_ms", end_ms}}}}};
  ASSERT_EQ(Call("POST", "/dp/v1/ingest", doc.dump(), Bearer(credential)).status, 200);
  Reply job = Call("GET", "/api/v1/computes/" + compute + "/jobs/9", "", Bearer(token_));
  ASSERT_EQ(job.status, 200) << job.body;
  EXPECT_EQ(job.body["used"]["gpus_active"], 1);
  // 120 buckets of 1 s: the last active one ends at 60 s, the last sampled one at 120 s.
  EXPECT_EQ(job.body["used"]["idle_tail_ms"], 60'000);
  EXPECT_NEAR(job.body["used"]["idle_gpu_hours"].get<double>(), 60.0 / 3600, 1e-3);
}

TEST_F(ApiTest, IngestRefusesBadBatchesAndRevokedCredentials) {
  std::string compute = NewCompute(token_);
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  Reply bad = Call("POST", "/dp/v1/ingest",
                   R"({"version":1,"stream":"telemetry","sequence":1,"series":[{"host":"h",)"
                   R"("metric":"m","t0":1,"dt":[0],"v":["x"]}]})",
                   Bearer(credential));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Code(bad), "invalid_batch");
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/jobs", "", Bearer(token_)).body["jobs"].size(), 0u);
  std::string replacement = Exchange(IssueToken(compute)).body["credential"];
  Reply revoked =
      Call("POST", "/dp/v1/ingest", TelemetryBatch(2, "RUNNING", 0), Bearer(credential));
  EXPECT_EQ(revoked.status, 401);
  EXPECT_EQ(Code(revoked), "credential_revoked");
  EXPECT_EQ(
      Call("POST", "/dp/v1/ingest", TelemetryBatch(2, "RUNNING", 0), Bearer(replacement)).status,
      200);
}

httplib::Headers WithAck(const std::string& credential, const std::string& ack) {
  return {{"Authorization", "Bearer " + credential}, {"Expanse-Ack", ack}};
}

// Expanse-Ack: received answers before the batch's sync; the answer's mark and the store's
// durable mark tell the sender when it may let the batch go, and /dp/v1/sync waits for it.
TEST_F(ApiTest, IngestOnReceiptReportsMarksThatSyncCovers) {
  std::string compute = NewCompute(token_);
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  const httplib::Headers on_receipt = WithAck(credential, "received");
  Reply first = Call("POST", "/dp/v1/ingest", TelemetryBatch(1, "RUNNING", 0), on_receipt);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body["duplicate"], false);
  EXPECT_EQ(first.body["samples"], 240);
  const uint64_t mark = first.body["mark"].get<uint64_t>();
  EXPECT_GE(mark, 1u);
  EXPECT_EQ(first.body["durable"].get<bool>(), mark <= first.body["durable_mark"].get<uint64_t>());
  const std::string epoch = first.body["store_epoch"];
  EXPECT_EQ(epoch.size(), 16u);

  Reply synced = Call("POST", "/dp/v1/sync", "", Bearer(credential));
  ASSERT_EQ(synced.status, 200) << synced.body;
  EXPECT_EQ(synced.body["store_epoch"], epoch);
  EXPECT_GE(synced.body["durable_mark"].get<uint64_t>(), mark);

  // The default stays one answer per durable batch.
  Reply durable =
      Call("POST", "/dp/v1/ingest", TelemetryBatch(2, "RUNNING", 0), Bearer(credential));
  ASSERT_EQ(durable.status, 200) << durable.body;
  EXPECT_EQ(durable.body["durable"], true);
  EXPECT_GT(durable.body["mark"].get<uint64_t>(), mark);
  EXPECT_GE(durable.body["durable_mark"], durable.body["mark"]);
  Reply retry = Call("POST", "/dp/v1/ingest", TelemetryBatch(1, "RUNNING", 0), on_receipt);
  EXPECT_EQ(retry.body["duplicate"], true);
  EXPECT_EQ(retry.body["durable"], true);
}

TEST_F(ApiTest, IngestAckModeAndSyncAreChecked) {
  std::string compute = NewCompute(token_);
  std::string credential = Exchange(IssueToken(compute)).body["credential"];
  const httplib::Headers odd = WithAck(credential, "whenever");
  Reply refused = Call("POST", "/dp/v1/ingest", TelemetryBatch(1, "RUNNING", 0), odd);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(Code(refused), "invalid_header");
  EXPECT_NE(refused.body["error"].value("message", "").find("Expanse-Ack"), std::string::npos);
  // Nothing was stored: the same batch is new afterwards.
  Reply stored = Call("POST", "/dp/v1/ingest", TelemetryBatch(1, "RUNNING", 0), Bearer(credential));
  EXPECT_EQ(stored.body["duplicate"], false);

  EXPECT_EQ(Call("POST", "/dp/v1/sync", "", Bearer("exp_cc_not-a-credential")).status, 401);
  EXPECT_EQ(Call("POST", "/dp/v1/sync", "").status, 401);
  Exchange(IssueToken(compute));  // revokes `credential`
  Reply revoked = Call("POST", "/dp/v1/sync", "", Bearer(credential));
  EXPECT_EQ(revoked.status, 401);
  EXPECT_EQ(Code(revoked), "credential_revoked");
}

}  // namespace
}  // namespace api_test
}  // namespace expanse::server
