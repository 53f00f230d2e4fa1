// The idle ledger end to end: a job ingested from the compute's daemon, its ledger and the
// organisation's efficiency rollup read back through the console API, as JSON and as CSV.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"

namespace expanse::server {
namespace api_ledger_test {
namespace {

using api_testing::kStart;
using nlohmann::json;

constexpr char kUser[] = "ana \"x\", y";
constexpr int64_t kEnd = kStart + 120'000;

// Job 77 on two GPUs of worker2 for two minutes: GPU-busy at 80 % for the first minute and 0
// for the second, GPU-idle at 0 throughout; one sample a second.
std::string JobBatch() {
  json series = json::array();
  for (const char* gpu : {"GPU-busy", "GPU-idle"}) {
    json dt = json::array();
    json v = json::array();
    for (int i = 0; i < 120; ++i) {
      dt.push_back(i == 0 ? 0 : 1000);
      v.push_back(std::string(gpu) == "GPU-busy" && i < 60 ? 80.0 : 0.0);
    }
    series.push_back({{"host", "worker2"},
                      {"device", gpu},
                      {"metric", "gpu.sm_util"},
                      {"t0", kStart},
                      {"dt", dt},
                      {"v", v}});
  }
  json allocations = json::array();
  int index = 0;
  for (const char* gpu : {"GPU-busy", "GPU-idle"}) {
    allocations.push_back({{"job_id", "77"},
                           {"host", "worker2"},
                           {"gpu_uuid", gpu},
                           {"gpu_index", index++},
                           {"from_ms", kStart},
                           {"to_ms", kEnd}});
  }
  return json{{"version", 1},
              {"stream", "telemetry"},
              {"sequence", 1},
              {"series", series},
              {"jobs",
               {{{"job_id", "77"},
                 {"state", "COMPLETED"},
                 {"user", kUser},
                 {"account", "ml"},
                 {"partition", "gpu"},
                 {"req_gpus", 2},
                 {"start_ms", kStart},
                 {"end_ms", kEnd},
                 {"observed_ms", kStart}}}},
              {"gpu_allocations", allocations}}
      .dump();
}

class ApiLedgerTest : public api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
    Reply ingested = Call("POST", "/dp/v1/ingest", JobBatch(), Bearer(credential_));
    ASSERT_EQ(ingested.status, 200) << ingested.body;
    clock_.Set(kStart + 3'600'000);
  }

  Reply Efficiency(const std::string& query, const std::string& token = "") {
    return Call("GET", "/api/v1/orgs/acme/efficiency" + query, "",
                Bearer(token.empty() ? token_ : token));
  }

  std::string compute_;
  std::string credential_;
};

TEST_F(ApiLedgerTest, JobLedgerCountsEachGpuFromItsAllocation) {
  Reply r = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/ledger", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["requested_gpus"], 2);
  EXPECT_EQ(r.body["bucket_ms"], 60'000);
  EXPECT_EQ(r.body["as_of_ms"], kStart + 3'600'000);
  EXPECT_EQ(r.body["user"], kUser);
  EXPECT_EQ(r.body["totals"], (json{{"gpus", 2},
                                    {"never_used_gpus", 1},
                                    {"requested_gpu_s", 240.0},
                                    {"allocated_gpu_s", 240.0},
                                    {"sampled_gpu_s", 240.0},
                                    {"active_gpu_s", 60.0},
                                    {"idle_gpu_s", 180.0},
                                    {"idle_share", 0.75}}));
  ASSERT_EQ(r.body["gpus"].size(), 2u);
  EXPECT_EQ(r.body["gpus"][0], (json{{"host", "worker2"},
                                     {"gpu_uuid", "GPU-busy"},
                                     {"gpu_index", 0},
                                     {"from_ms", kStart},
                                     {"to_ms", kEnd},
                                     {"counted_from_ms", kStart},
                                     {"counted_to_ms", kEnd},
                                     {"allocated_gpu_s", 120.0},
                                     {"sampled_gpu_s", 120.0},
                                     {"active_gpu_s", 60.0},
                                     {"idle_gpu_s", 60.0},
                                     {"never_used", false}}));
  EXPECT_EQ(r.body["gpus"][1]["gpu_uuid"], "GPU-idle");
  EXPECT_EQ(r.body["gpus"][1]["idle_gpu_s"], 120.0);
  EXPECT_EQ(r.body["gpus"][1]["never_used"], true);

  Reply unknown =
      Call("GET", "/api/v1/computes/" + compute_ + "/jobs/78/ledger", "", Bearer(token_));
  EXPECT_EQ(unknown.status, 404);
}

TEST_F(ApiLedgerTest, EfficiencyRollsUpTheWindow) {
  const std::string first_minute =
      "&from=" + std::to_string(kStart) + "&to=" + std::to_string(kStart + 60'000);
  Reply r = Efficiency("?group_by=user" + first_minute);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["group_by"], "user");
  EXPECT_EQ(r.body["jobs_scanned"], 1);
  EXPECT_EQ(r.body["truncated"], false);
  EXPECT_FALSE(r.body.contains("truncated_reason"));
  ASSERT_EQ(r.body["groups"].size(), 1u);
  EXPECT_EQ(r.body["groups"][0], (json{{"key", kUser},
                                       {"jobs", 1},
                                       {"gpus", 2},
                                       {"never_used_gpus", 1},
                                       {"requested_gpu_s", 120.0},
                                       {"allocated_gpu_s", 120.0},
                                       {"sampled_gpu_s", 120.0},
                                       {"active_gpu_s", 60.0},
                                       {"idle_gpu_s", 60.0},
                                       {"idle_share", 0.5}}));
  EXPECT_EQ(r.body["totals"]["jobs"], 1);

  // Without bounds: the last seven days up to now, so the whole job.
  Reply week = Efficiency("?group_by=account");
  ASSERT_EQ(week.status, 200) << week.body;
  EXPECT_EQ(week.body["to_ms"], kStart + 3'600'000);
  EXPECT_EQ(week.body["groups"][0]["key"], "ml");
  EXPECT_EQ(week.body["groups"][0]["idle_gpu_s"], 180.0);

  // Another compute than the organisation's: nothing to count.
  Reply none = Efficiency("?compute=cmp_elsewhere");
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_EQ(none.body["groups"], json::array());
  EXPECT_EQ(none.body["jobs_scanned"], 0);
}

TEST_F(ApiLedgerTest, EfficiencySaysWhenItReadTooManyJobs) {
  // A later job that requested a GPU and never had one allocated.
  const json later = {{"version", 1},
                      {"stream", "telemetry"},
                      {"sequence", 2},
                      {"jobs",
                       {{{"job_id", "78"},
                         {"state", "COMPLETED"},
                         {"user", "bo"},
                         {"req_gpus", 1},
                         {"start_ms", kStart + 30'000},
                         {"end_ms", kStart + 90'000},
                         {"observed_ms", kStart}}}}};
  ASSERT_EQ(Call("POST", "/dp/v1/ingest", later.dump(), Bearer(credential_)).status, 200);
  Reply cut = Efficiency("?limit=1");
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(cut.body["truncated"], true);
  EXPECT_EQ(cut.body["job_limit"], 1);
  EXPECT_EQ(cut.body["jobs_scanned"], 1);
  EXPECT_EQ(cut.body["truncated_reason"],
            "more than 1 jobs overlap the window; only the most recently started 1 were counted. "
            "Narrow the window, name a compute, or raise limit (at most 10000)");
  ASSERT_EQ(cut.body["groups"].size(), 1u);
  EXPECT_EQ(cut.body["groups"][0]["key"], "bo");
  EXPECT_EQ(cut.body["groups"][0]["requested_gpu_s"], 60.0);
  EXPECT_EQ(cut.body["groups"][0]["allocated_gpu_s"], 0.0);
  EXPECT_EQ(cut.body["groups"][0]["idle_share"], nullptr);
  Reply both = Efficiency("?limit=2");
  EXPECT_EQ(both.body["truncated"], false);
  EXPECT_EQ(both.body["totals"]["jobs"], 2);
}

TEST_F(ApiLedgerTest, EfficiencyAsCsvQuotesNames) {
  const std::string path =
      "/api/v1/orgs/acme/efficiency?group_by=user&from=" + std::to_string(kStart) +
      "&to=" + std::to_string(kStart + 60'000);
  const std::string want =
      "user,jobs,gpus,never_used_gpus,requested_gpu_s,allocated_gpu_s,sampled_gpu_s,"
      "active_gpu_s,idle_gpu_s,idle_share\r\n"
      "\"ana \"\"x\"\", y\",1,2,1,120.000,120.000,120.000,60.000,60.000,0.500000\r\n";
  httplib::Result by_format = client_->Get(path + "&format=csv", Bearer(token_));
  ASSERT_TRUE(by_format);
  EXPECT_EQ(by_format->status, 200);
  EXPECT_EQ(by_format->get_header_value("Content-Type"), "text/csv; charset=utf-8");
  EXPECT_EQ(by_format->get_header_value("Expanse-Jobs-Scanned"), "1");
  EXPECT_EQ(by_format->get_header_value("Expanse-Truncated"), "false");
  EXPECT_EQ(by_format->body, want);

  httplib::Headers accept = Bearer(token_);
  accept.emplace("Accept", "text/csv");
  httplib::Result by_accept = client_->Get(path, accept);
  ASSERT_TRUE(by_accept);
  EXPECT_EQ(by_accept->body, want);
  // format= wins over Accept.
  httplib::Result json_anyway = client_->Get(path + "&format=json", accept);
  ASSERT_TRUE(json_anyway);
  EXPECT_EQ(json_anyway->get_header_value("Content-Type"), "application/json");
}

TEST_F(ApiLedgerTest, BadParametersAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"?group_by=node", "group_by must be user, account or partition"},
      {"?group_by=", "group_by must be user, account or partition"},
      {"?from=5&to=5", "from must be before to"},
      {"?from=9&to=5", "from must be before to"},
      {"?from=x", "from must be an integer from 0 to 253402300799999"},
      {"?to=1e9", "to must be an integer from 1 to 253402300799999"},
      {"?from=-1", "from must be an integer from 0 to 253402300799999"},
      {"?limit=0", "limit must be an integer from 1 to 10000"},
      {"?limit=10001", "limit must be an integer from 1 to 10000"},
      {"?format=xml", "format must be json or csv"},
  };
  for (const auto& [query, message] : cases) {
    Reply r = Efficiency(query);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_EQ(Code(r), "invalid_argument") << query;
    EXPECT_EQ(r.body["error"]["message"], message) << query;
  }
}

TEST_F(ApiLedgerTest, OtherOrganisationsGetNotFound) {
  auto other = app_->control().Bootstrap("other", "Other", "o@other.example", "pw-o", "t");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(Efficiency("", other->api_token).status, 404);
  Reply ledger =
      Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/ledger", "", Bearer(other->api_token));
  EXPECT_EQ(ledger.status, 404);
  EXPECT_EQ(Code(ledger), "not_found");
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/efficiency").status, 401);
  EXPECT_EQ(Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/ledger").status, 401);
}

}  // namespace
}  // namespace api_ledger_test
}  // namespace expanse::server
