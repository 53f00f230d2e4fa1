// API tokens with the scope jobs:own: a member reads their own jobs (those of the SLURM user the
// operator mapped them to) and nothing else, against a real ServerApp on loopback.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"

namespace expanse::server {
namespace api_own_jobs_test {
namespace {

using api_testing::kStart;
using nlohmann::json;

constexpr int64_t kEnd = kStart + 120'000;

// Jobs 77 (SLURM user ana) and 78 (bob), each on one GPU of worker2 for two minutes.
std::string TwoUsersBatch() {
  json series = json::array();
  json jobs = json::array();
  json allocations = json::array();
  int index = 0;
  for (const auto& [job, user, gpu] : {std::tuple{"77", "ana", "GPU-a"}, {"78", "bob", "GPU-b"}}) {
    series.push_back({{"host", "worker2"},
                      {"device", gpu},
                      {"metric", "gpu.sm_util"},
                      {"t0", kStart},
                      {"dt", {0, 60'000}},
                      {"v", {50.0, 50.0}}});
    jobs.push_back({{"job_id", job},
                    {"state", "COMPLETED"},
                    {"user", user},
                    {"account", "ml"},
                    {"partition", "gpu"},
                    {"req_gpus", 1},
                    {"start_ms", kStart},
                    {"end_ms", kEnd},
                    {"observed_ms", kStart}});
    allocations.push_back({{"job_id", job},
                           {"host", "worker2"},
                           {"gpu_uuid", gpu},
                           {"gpu_index", index++},
                           {"from_ms", kStart},
                           {"to_ms", kEnd}});
  }
  return json{{"version", 1},     {"stream", "telemetry"}, {"sequence", 1},
              {"series", series}, {"jobs", jobs},          {"gpu_allocations", allocations}}
      .dump();
}

class ApiOwnJobsTest : public api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
    Reply ingested = Call("POST", "/dp/v1/ingest", TwoUsersBatch(), Bearer(credential_));
    ASSERT_EQ(ingested.status, 200) << ingested.body;
    clock_.Set(kEnd + 60'000);
    ASSERT_TRUE(app_->control()
                    .AddUser("acme", "ana@acme.example", "pw-ana-1", store::Role::kMember, false)
                    .ok());
    Reply login = Call("POST", "/api/v1/session",
                       json{{"email", "ana@acme.example"}, {"password", "pw-ana-1"}}.dump());
    ASSERT_EQ(login.status, 200) << login.body;
    for (const auto& [k, v] : login.headers) {
      if (k == "Set-Cookie")
        ana_ = {{"Cookie", v.substr(0, v.find(';'))}};
    }
    ana_.emplace("X-CSRF-Token", login.body.value("csrf_token", ""));
  }

  Reply MakeToken(const json& scopes) {
    return Call("POST", "/api/v1/orgs/acme/api-tokens",
                json{{"name", "report"}, {"scopes", scopes}}.dump(), ana_);
  }
  int Status(const std::string& path, const std::string& token) {
    return Call("GET", path, "", Bearer(token)).status;
  }
  std::string Job(const std::string& id) { return "/api/v1/computes/" + compute_ + "/jobs/" + id; }
  std::string ListedJobs(const std::string& token, const std::string& query = "") {
    Reply r = Call("GET", "/api/v1/orgs/acme/jobs" + query, "", Bearer(token));
    EXPECT_EQ(r.status, 200) << r.body;
    std::string ids;
    for (const json& j : r.body["jobs"])
      ids += (ids.empty() ? "" : ",") + j.value("job_id", "");
    return ids;
  }

  std::string compute_;
  std::string credential_;
  httplib::Headers ana_;
};

TEST_F(ApiOwnJobsTest, AJobsOwnTokenReadsOnlyTheJobsOfItsMembersSlurmUser) {
  // No SLURM user set yet: such a token would read nothing, and is refused with the reason.
  Reply refused = MakeToken({"jobs:own"});
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(Code(refused), "no_slurm_user");

  ASSERT_TRUE(app_->control().SetSlurmUser("acme", "ana@acme.example", "ana").ok());
  Reply me = Call("GET", "/api/v1/me", "", ana_);
  EXPECT_EQ(me.body["organizations"][0]["slurm_user"], "ana") << me.body;
  Reply made = MakeToken({"jobs:own"});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string own = made.body.value("token", "");

  // Every job route for her job; another user's job is as unknown as a job that never ran.
  for (const std::string suffix :
       {"", "/timeline", "/verdicts", "/ledger", "/stacks", "/segments"}) {
    EXPECT_EQ(Status(Job("77") + suffix, own), 200) << suffix;
    Reply other = Call("GET", Job("78") + suffix, "", Bearer(own));
    EXPECT_EQ(other.status, 404) << suffix << " " << other.body;
    EXPECT_EQ(Code(other), Code(Call("GET", Job("99") + suffix, "", Bearer(own)))) << suffix;
  }
  // Trace segments: hers are listed and downloaded, bob's are not found through his job.
  for (const std::string job : {"77", "78"}) {
    Reply sent =
        Call("POST", "/dp/v1/segments",
             api_testing::TraceSegment(job, "worker2", 100, kStart).dump(), Bearer(credential_));
    ASSERT_EQ(sent.status, 200) << sent.body;
  }
  Reply hers = Call("GET", Job("77") + "/segments", "", Bearer(own));
  ASSERT_EQ(hers.body["segments"].size(), 1u) << hers.body;
  EXPECT_EQ(Status(hers.body["segments"][0]["download"], own), 200);
  Reply his = Call("GET", Job("78") + "/segments", "", Bearer(token_));
  ASSERT_EQ(his.body["segments"].size(), 1u) << his.body;
  const std::string his_download = his.body["segments"][0]["download"];
  EXPECT_EQ(Status(his_download, token_), 200);
  EXPECT_EQ(Status(his_download, own), 404);
  // Stacks of a job the server has no record of (they may come first) are not hers either.
  EXPECT_EQ(Status(Job("99") + "/stacks", token_), 200);
  EXPECT_EQ(Status(Job("99") + "/stacks", own), 404);
  EXPECT_EQ(ListedJobs(own), "77");
  EXPECT_EQ(ListedJobs(own, "?user=ana"), "77");
  Reply bob = Call("GET", "/api/v1/orgs/acme/jobs?user=bob", "", Bearer(own));
  EXPECT_EQ(bob.status, 403) << bob.body;
  EXPECT_NE(bob.body.dump().find("only the jobs of SLURM user ana"), std::string::npos);
  // Nothing beyond her jobs: computes, nodes, the organisation's efficiency rollup.
  EXPECT_EQ(Status("/api/v1/orgs/acme/computes", own), 403);
  EXPECT_EQ(Status("/api/v1/computes/" + compute_ + "/nodes", own), 403);
  EXPECT_EQ(Status("/api/v1/orgs/acme/efficiency", own), 403);

  // Her read token (and the owner's) still read every job of the organisation.
  Reply read = MakeToken({"read"});
  ASSERT_EQ(read.status, 201) << read.body;
  EXPECT_EQ(ListedJobs(read.body.value("token", "")), "77,78");
  EXPECT_EQ(Status(Job("78"), read.body.value("token", "")), 200);

  // The mapping is read at each request: the operator's change applies at once, and without
  // one the token reads nothing.
  ASSERT_TRUE(app_->control().SetSlurmUser("acme", "ana@acme.example", "bob").ok());
  EXPECT_EQ(ListedJobs(own), "78");
  EXPECT_EQ(Status(Job("77"), own), 404);
  ASSERT_TRUE(app_->control().SetSlurmUser("acme", "ana@acme.example", "").ok());
  Reply none = Call("GET", "/api/v1/orgs/acme/jobs", "", Bearer(own));
  EXPECT_EQ(none.status, 403) << none.body;
  EXPECT_EQ(Status(Job("78"), own), 403);

  // Operators set it; the audit log says so.
  Reply audit = Call("GET", "/api/v1/orgs/acme/audit", "", Bearer(token_));
  EXPECT_NE(audit.body.dump().find("membership.slurm_user_set"), std::string::npos) << audit.body;
}

// A GPU's series are the node's: a job's timeline shows a GPU only while the job held it, not
// while another user's job had it (job 77 held GPU-c for its first minute, bob's 79 next).
TEST_F(ApiOwnJobsTest, TheTimelineShowsAGpuOnlyWhileTheJobHeldIt) {
  const json batch = {{"version", 1},
                      {"stream", "telemetry"},
                      {"sequence", 2},
                      {"series",
                       {{{"host", "worker2"},
                         {"device", "GPU-c"},
                         {"metric", "gpu.sm_util"},
                         {"t0", kStart},
                         {"dt", {0, 60'000, 30'000}},
                         {"v", {10.0, 99.0, 99.0}}}}},
                      {"jobs",
                       {{{"job_id", "79"},
                         {"state", "COMPLETED"},
                         {"user", "bob"},
                         {"req_gpus", 1},
                         {"start_ms", kStart + 60'000},
                         {"end_ms", kEnd},
                         {"observed_ms", kStart}}}},
                      {"gpu_allocations",
                       {{{"job_id", "77"},
                         {"host", "worker2"},
                         {"gpu_uuid", "GPU-c"},
                         {"gpu_index", 2},
                         {"from_ms", kStart},
                         {"to_ms", kStart + 60'000}},
                        {{"job_id", "79"},
                         {"host", "worker2"},
                         {"gpu_uuid", "GPU-c"},
                         {"gpu_index", 2},
                         {"from_ms", kStart + 60'000},
                         {"to_ms", kEnd}}}}};
  Reply ingested = Call("POST", "/dp/v1/ingest", batch.dump(), Bearer(credential_));
  ASSERT_EQ(ingested.status, 200) << ingested.body;
  ASSERT_TRUE(app_->control().SetSlurmUser("acme", "ana@acme.example", "ana").ok());
  const std::string own = MakeToken({"jobs:own"}).body.value("token", "");
  Reply r = Call("GET", Job("77") + "/timeline?points=10000", "", Bearer(own));
  ASSERT_EQ(r.status, 200) << r.body;
  int gpu_c_points = 0;
  for (const json& series : r.body["series"]) {
    if (series["gpu_uuid"] != "GPU-c")
      continue;
    EXPECT_EQ(series["from_ms"], kStart);
    EXPECT_EQ(series["to_ms"], kStart + 60'000);
    for (const json& point : series["points"]) {
      ++gpu_c_points;
      EXPECT_LT(point[0].get<int64_t>(), kStart + 60'000) << "bob's use of GPU-c: " << series;
      EXPECT_EQ(point[3], 10.0) << series;
    }
  }
  EXPECT_EQ(gpu_c_points, 1) << r.body;
}

TEST_F(ApiOwnJobsTest, SlurmUserNamesAreCheckedAndKeptWhenTheMemberIsAddedAgain) {
  ControlPlane& control = app_->control();
  for (const std::string& bad :
       std::vector<std::string>{"-rf", "a b", "ana;rm", std::string(65, 'a'), "é"}) {
    const expanse::Status s = control.SetSlurmUser("acme", "ana@acme.example", bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(control.SetSlurmUser("acme", "nobody@acme.example", "x").code(), StatusCode::kNotFound);
  ASSERT_TRUE(control.SetSlurmUser("acme", "ana@acme.example", "ana.b-1@lab").ok());
  // Re-running add-user (a role change) keeps the mapping.
  ASSERT_TRUE(
      control.AddUser("acme", "ana@acme.example", "pw-ana-1", store::Role::kViewer, false).ok());
  Reply me = Call("GET", "/api/v1/me", "", ana_);
  EXPECT_EQ(me.body["organizations"][0]["slurm_user"], "ana.b-1@lab") << me.body;
  EXPECT_EQ(me.body["organizations"][0]["role"], "viewer");
}

}  // namespace
}  // namespace api_own_jobs_test
}  // namespace expanse::server
