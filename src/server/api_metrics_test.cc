// GET /metrics against a real ServerApp on loopback: absent without its token, and with it the
// replica's counters and its computes' latest heartbeats in Prometheus' text format.
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"
#include "server/server_metrics.h"

namespace expanse::server {
namespace api_metrics_test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMetricsToken[] = "scrape-token-0123456789";

class ApiMetricsTest : public api_testing::ApiTest {
 protected:
  void Customize(ServerOptions& options) override { options.metrics_token = kMetricsToken; }

  httplib::Result Scrape(const std::string& token) {
    return client_->Get("/metrics", {{"Authorization", "Bearer " + token}});
  }
};

TEST_F(ApiMetricsTest, WithoutItsTokenTheRouteIsAbsent) {
  // The listener's answer to a route it does not have, with this route's name in it.
  auto unknown = client_->Get("/metricz");
  ASSERT_TRUE(unknown);
  std::string expected = unknown->body;
  expected.replace(expected.find("metricz"), 7, "metrics");
  for (const std::string& token : {std::string("wrong-token-0123456789"), token_, std::string()}) {
    auto r = Scrape(token);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(r->body, expected);
  }
}

// A site with more computes than the page carries: the first kMaxMetricComputes by id have
// their series, the rest none, and a gauge says some were left out.
TEST_F(ApiMetricsTest, ComputesBeyondTheCapAreLeftOutAndSaidToBe) {
  Result<Principal> owner = app_->control().AuthenticateApiToken(token_);
  ASSERT_TRUE(owner.ok()) << owner.status();
  auto compute_series = [&](const std::string& text) {
    std::set<std::string> ids;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const size_t at = line.find("compute=\"");
      if (line.rfind("expanse_compute_", 0) == 0 && at != std::string::npos)
        ids.insert(line.substr(at + 9, line.find('"', at + 9) - at - 9));
    }
    return ids;
  };
  for (size_t i = 0; i < kMaxMetricComputes; ++i)
    ASSERT_TRUE(
        app_->control().CreateCompute(*owner, "acme", "c" + std::to_string(i), "slurm").ok());
  httplib::Result at_cap = Scrape(kMetricsToken);
  ASSERT_TRUE(at_cap);
  EXPECT_EQ(compute_series(at_cap->body).size(), kMaxMetricComputes);
  EXPECT_THAT(at_cap->body, HasSubstr("expanse_metrics_computes_left_out 0\n"));

  // In another organisation: one holds at most as many computes as the page carries.
  auto beta = app_->control().Bootstrap("beta", "Beta", "owner@beta.example", "pw-beta-1", "t");
  ASSERT_TRUE(beta.ok()) << beta.status();
  Result<Principal> beta_owner = app_->control().AuthenticateApiToken(beta->api_token);
  ASSERT_TRUE(beta_owner.ok()) << beta_owner.status();
  ASSERT_TRUE(app_->control().CreateCompute(*beta_owner, "beta", "one-more", "slurm").ok());
  httplib::Result over = Scrape(kMetricsToken);
  ASSERT_TRUE(over);
  EXPECT_EQ(compute_series(over->body).size(), kMaxMetricComputes);
  EXPECT_THAT(over->body, HasSubstr("expanse_metrics_computes_left_out 1\n"));
}

TEST_F(ApiMetricsTest, CountsWhatTheReplicaTookInAndWhatEachComputeHolds) {
  const std::string compute = NewCompute(token_);
  const std::string credential = Exchange(IssueToken(compute)).body.value("credential", "");
  // A heartbeat whose node holds GPUs in several use states, and one without a use view
  // (an older daemon). The heartbeat's own check refuses states no daemon sends.
  json gpus = json::array();
  for (const char* state : {"busy", "busy", "allocated_idle", "free"}) {
    gpus.push_back({{"uuid", std::string("GPU-") + std::to_string(gpus.size())},
                    {"use", {{"state", state}, {"jobs", json::array({"77"})}}}});
  }
  gpus.push_back({{"uuid", "GPU-4"}});
  json heartbeat = {{"version", 1},
                    {"daemon_version", "0.1.0"},
                    {"controller_host", "ctl"},
                    {"nodes", {{{"name", "w1"}, {"gpus", gpus}}}}};
  ASSERT_EQ(Call("POST", "/cp/v1/heartbeat", heartbeat.dump(), Bearer(credential)).status, 200);
  const std::string batch =
      R"({"version":1,"stream":"telemetry","sequence":1,"series":[{"host":"w1","device":"GPU-0",)"
      R"("metric":"gpu.sm_util","t0":)" +
      std::to_string(api_testing::kStart) + R"(,"dt":[0,1000],"v":[1,2]}]})";
  ASSERT_EQ(Call("POST", "/dp/v1/ingest", batch, Bearer(credential)).status, 200);
  ASSERT_EQ(Call("POST", "/dp/v1/ingest", batch, Bearer(credential)).status, 200);  // a retry
  EXPECT_EQ(Call("POST", "/dp/v1/ingest", R"({"version":2})", Bearer(credential)).status, 400);
  clock_.Advance(30'000);

  auto r = Scrape(kMetricsToken);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = r->body;
  EXPECT_THAT(text, HasSubstr("# TYPE expanse_ingest_batches_total counter\n"));
  EXPECT_THAT(text, HasSubstr("expanse_ingest_batches_total{outcome=\"stored\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_ingest_batches_total{outcome=\"duplicate\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_ingest_batches_total{outcome=\"refused\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_ingest_samples_total 2\n"));
  EXPECT_THAT(text, HasSubstr("expanse_heartbeats_total 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_store_up 1\n"));
  const std::string c = "compute=\"" + compute + "\"";
  EXPECT_THAT(text, HasSubstr("expanse_compute_up{" + c + ",state=\"active\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_compute_heartbeat_age_seconds{" + c + "} 30\n"));
  EXPECT_THAT(text, HasSubstr("expanse_compute_gpus{" + c + ",state=\"busy\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("expanse_compute_gpus{" + c + ",state=\"allocated_idle\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_compute_gpus{" + c + ",state=\"free\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_compute_gpus{" + c + ",state=\"unknown\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_compute_gpu_jobs{" + c + "} 1\n"));
}

TEST(ServerMetricsTest, LabelValuesAreEscapedAndEveryFamilyIsTyped) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsSnapshot s;
  s.version = "1.2.3";
  s.computes.push_back({"cmp_\"x", "stale", -1, {}, 0});
  const std::string text = RenderMetrics(s);
  EXPECT_THAT(text, HasSubstr("expanse_build_info{version=\"1.2.3\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_compute_up{compute=\"cmp_\\\"x\",state=\"stale\"} 0\n"));
  // Never heard from: no age rather than a made-up one.
  EXPECT_THAT(text, Not(HasSubstr("expanse_compute_heartbeat_age_seconds{")));
  // Every sample line's family has a TYPE line before it.
  std::istringstream lines(text);
  std::string line, typed;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      typed = line.substr(7, line.find(' ', 7) - 7);
    } else if (line.rfind("#", 0) != 0) {
      EXPECT_EQ(line.rfind(typed, 0), 0u) << line << " after TYPE " << typed;
    }
  }
}

TEST(ServerMetricsTest, ForwardingFamiliesOnlyWhenForwarding) {
  MetricsSnapshot s;
  EXPECT_THAT(RenderMetrics(s), Not(HasSubstr("expanse_forward_")));
  s.forwarding = true;
  s.forward_sent = 7;
  s.forward_dropped = 2;
  s.forward_sent_samples = 700;
  s.forward_failed_attempts = 3;
  s.forward_queued = 1;
  const std::string text = RenderMetrics(s);
  EXPECT_THAT(text, HasSubstr("expanse_forward_batches_total{outcome=\"sent\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("expanse_forward_batches_total{outcome=\"dropped\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("expanse_forward_samples_total 700\n"));
  EXPECT_THAT(text, HasSubstr("expanse_forward_failed_attempts_total 3\n"));
  EXPECT_THAT(text, HasSubstr("expanse_forward_queue_batches 1\n"));
}

TEST(ServerMetricsTest, RemoteWriteFamiliesOnlyWithTheRemoteStore) {
  MetricsSnapshot s;
  EXPECT_THAT(RenderMetrics(s), Not(HasSubstr("expanse_remote_write_")));
  s.remote_telemetry = true;
  s.remote_groups = 12;
  s.remote_group_batches = 40;
  s.remote_failed_writes = 1;
  s.remote_write_seconds = 0.25;
  s.remote_waiting = 3;
  s.remote_unmarked = 5;
  const std::string text = RenderMetrics(s);
  EXPECT_THAT(text, HasSubstr("# TYPE expanse_remote_write_duration_seconds summary\n"));
  EXPECT_THAT(text, HasSubstr("expanse_remote_write_duration_seconds_sum 0.25\n"));
  EXPECT_THAT(text, HasSubstr("expanse_remote_write_duration_seconds_count 12\n"));
  EXPECT_THAT(text, HasSubstr("expanse_remote_write_failures_total 1\n"));
  EXPECT_THAT(text, HasSubstr("expanse_remote_write_batches_total 40\n"));
  EXPECT_THAT(text, HasSubstr("expanse_remote_write_waiting_batches 3\n"));
  EXPECT_THAT(text, HasSubstr("expanse_remote_write_unmarked_batches 5\n"));
}

}  // namespace
}  // namespace api_metrics_test
}  // namespace expanse::server
