// The uploader against a real expanse-server in this process: a credential from the
// install-token exchange, batches through the data plane into the telemetry store, a crash
// between send and acknowledgement, and an outage of the planes that is backfilled.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "net/http_client.h"
#include "outbox/outbox.h"
#include "outbox/outbox_test_util.h"
#include "outbox/uploader.h"
#include "server/server_app.h"

namespace expanse::outbox {
namespace uploader_server_test {
namespace {

using nlohmann::json;

constexpr int64_t kStart = 1'800'000'000'000;
constexpr int kSamplesPerBatch = 10;

// Batch `index` holds kSamplesPerBatch samples of one GPU, one second apart, after those of
// every earlier batch, and the job record.
std::string BatchJson(uint64_t sequence, int index) {
  std::vector<int64_t> dt(kSamplesPerBatch, 1000);
  dt[0] = 0;
  std::vector<double> v;
  for (int i = 0; i < kSamplesPerBatch; ++i)
    v.push_back(index + i / 10.0);
  json doc = {{"version", 1},
              {"stream", "telemetry"},
              {"sequence", sequence},
              {"series",
               {{{"host", "gpu07"},
                 {"device", "GPU-0"},
                 {"metric", "gpu.sm_util"},
                 {"t0", kStart + int64_t{index} * kSamplesPerBatch * 1000},
                 {"dt", dt},
                 {"v", v}}}},
              {"jobs",
               {{{"job_id", "42"},
                 {"state", "RUNNING"},
                 {"user", "ana"},
                 {"req_gpus", 1},
                 {"start_ms", kStart},
                 {"observed_ms", kStart + index}}}}};
  return doc.dump();
}

class UploaderServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = net::HttpClient::Create({});
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    StartServer("127.0.0.1:0");
    auto boot = app_->control().Bootstrap("acme", "Acme", "owner@acme.example", "pw-owner", "t");
    ASSERT_TRUE(boot.ok()) << boot.status();
    api_token_ = boot->api_token;

    json compute = Call("POST", "/api/v1/orgs/acme/computes", R"({"name":"c1","type":"slurm"})",
                        api_token_, 201);
    compute_id_ = compute.value("id", "");
    json token =
        Call("POST", "/api/v1/computes/" + compute_id_ + "/install-tokens", "", api_token_, 201);
    json exchanged = Call("POST", "/cp/v1/install-tokens/exchange",
                          json{{"token", token.value("token", "")},
                               {"hostname", "ctl01"},
                               {"daemon_version", "0.1.0"},
                               {"role", "controller"}}
                              .dump(),
                          "", 200);
    credential_ = exchanged.value("credential", "");
    ASSERT_EQ(credential_.rfind("exp_cc_", 0), 0u);
    OpenOutbox();
  }

  void TearDown() override {
    uploader_.reset();
    outbox_.reset();
    if (app_)
      app_->Stop();
  }

  void StartServer(const std::string& listen) {
    server::ServerOptions options;
    options.db_path = dir_.path() + "/db.sqlite";
    options.control_listen = listen;
    options.credential_requests_per_second = 10'000;
    options.control.password_cost = crypto::MinimumCost();
    options.control.control_plane_url = "http://127.0.0.1:1";
    options.control.data_plane_url = "http://127.0.0.1:2";
    options.control.daemon_version = "0.1.0";
    auto app = server::ServerApp::Create(options, server_clock_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = *std::move(app);
    ASSERT_TRUE(app_->Start().ok());
    base_url_ = "http://127.0.0.1:" + std::to_string(app_->data_port());
  }

  void StopServer() {
    app_->Stop();
    app_.reset();  // closes the database and the telemetry store, as a dead process would
  }

  json Call(const std::string& method, const std::string& path, const std::string& body,
            const std::string& bearer, int expected_status) {
    net::HttpRequest request{.method = method,
                             .url = base_url_ + path,
                             .headers = {{"Content-Type", "application/json"}},
                             .body = body};
    if (!bearer.empty())
      request.headers.emplace_back("Authorization", "Bearer " + bearer);
    Result<net::HttpResponse> response = client_->Send(request);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok())
      return json();
    EXPECT_EQ(response->status, expected_status) << path << ": " << response->body;
    return json::parse(response->body, nullptr, false);
  }

  void OpenOutbox(uint64_t max_entries_per_run = 100) {
    OutboxOptions options;
    options.directory = dir_.path() + "/outbox";
    options.log = log_.sink();
    auto outbox = Outbox::Open(options, clock_);
    ASSERT_TRUE(outbox.ok()) << outbox.status();
    outbox_ = *std::move(outbox);
    UploaderOptions uploader_options;
    uploader_options.data_plane_url = base_url_;
    uploader_options.log = log_.sink();
    uploader_options.max_entries_per_run = max_entries_per_run;
    auto uploader = Uploader::Create(
        uploader_options, *outbox_, *client_, [this] { return credential_; }, clock_,
        [] { return 0.5; });
    ASSERT_TRUE(uploader.ok()) << uploader.status();
    uploader_ = *std::move(uploader);
  }

  void EnqueueBatches(int from, int to) {
    for (int index = from; index < to; ++index) {
      auto sequence = outbox_->Enqueue(
          "telemetry", [index](uint64_t seq) { return ZstdJsonPayload(BatchJson(seq, index)); });
      ASSERT_TRUE(sequence.ok()) << sequence.status();
    }
  }

  // Samples of the one series, counted one by one (buckets are narrower than the spacing).
  uint64_t StoredSamples() {
    tsdb::SeriesKey key{compute_id_, "gpu07", "GPU-0", "gpu.sm_util"};
    auto buckets = app_->telemetry().Query(key, kStart, kStart + 10'000'000, 100'000);
    EXPECT_TRUE(buckets.ok()) << buckets.status();
    uint64_t count = 0;
    for (const auto& bucket : buckets.ok() ? *buckets : std::vector<tsdb::Bucket>()) {
      EXPECT_EQ(bucket.count, 1u) << "a sample stored twice at " << bucket.start_ms;
      count += bucket.count;
    }
    return count;
  }

  RunSummary Run() {
    Result<RunSummary> summary = uploader_->RunOnce();
    EXPECT_TRUE(summary.ok()) << summary.status();
    return summary.ok() ? *summary : RunSummary();
  }

  testing::TempDir dir_;
  testing::LogLines log_;
  ManualClock server_clock_{kStart};
  ManualClock clock_{kStart};
  std::unique_ptr<server::ServerApp> app_;
  std::unique_ptr<net::HttpClient> client_;
  std::string base_url_, api_token_, compute_id_, credential_;
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<Uploader> uploader_;
};

TEST_F(UploaderServerTest, BatchesArriveExactlyOnce) {
  EnqueueBatches(0, 5);
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 5u);
  UploaderStats stats = uploader_->stats();
  EXPECT_EQ(stats.acked, 5u);
  EXPECT_EQ(stats.duplicates, 0u);
  EXPECT_EQ(StoredSamples(), 5u * kSamplesPerBatch);
  json jobs = Call("GET", "/api/v1/orgs/acme/jobs", "", api_token_, 200);
  ASSERT_EQ(jobs["jobs"].size(), 1u) << jobs;
  EXPECT_EQ(jobs["jobs"][0]["job_id"], "42");
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
}

TEST_F(UploaderServerTest, CrashBetweenSendAndAckIsAnsweredAsDuplicate) {
  EnqueueBatches(0, 1);
  // The daemon sends the batch, the server stores it, and the daemon dies before Ack.
  auto entry = outbox_->Peek();
  ASSERT_TRUE(entry.ok() && entry->has_value());
  Result<net::HttpResponse> sent =
      client_->Send({.method = "POST",
                     .url = base_url_ + kIngestPath,
                     .headers = {{"Content-Type", (*entry)->content_type},
                                 {"Authorization", "Bearer " + credential_}},
                     .body = (*entry)->payload});
  ASSERT_TRUE(sent.ok()) << sent.status();
  ASSERT_EQ(sent->status, 200) << sent->body;
  uploader_.reset();
  outbox_.reset();

  OpenOutbox();
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 1u);
  EXPECT_EQ(uploader_->stats().duplicates, 1u);
  EXPECT_EQ(StoredSamples(), 1u * kSamplesPerBatch);
}

TEST_F(UploaderServerTest, OutageIsBackfilledWithoutLossOrDuplicates) {
  EnqueueBatches(0, 3);
  ASSERT_TRUE(Run().drained);
  const int port = app_->data_port();
  StopServer();

  // Planes down: batches pile up, tries back off, nothing is dropped.
  EnqueueBatches(3, 23);
  int64_t previous_delay = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    RunSummary summary = Run();
    ASSERT_GT(summary.retry_at_ms, 0) << attempt;
    const int64_t delay = summary.retry_at_ms - clock_.NowMs();
    EXPECT_GE(delay, previous_delay);  // random 0.5: half of 1, 2, 4, ... s
    previous_delay = delay;
    clock_.Advance(delay);
    EnqueueBatches(23 + attempt, 24 + attempt);  // the daemon keeps sampling meanwhile
  }
  UploaderStats down = uploader_->stats();
  EXPECT_EQ(down.retries, 8u);
  EXPECT_EQ(down.acked, 3u);
  EXPECT_NE(down.last_error.find("network_error"), std::string::npos) << down.last_error;
  EXPECT_EQ(outbox_->stats().depth_entries, 28u);
  EXPECT_EQ(outbox_->stats().dropped_entries, 0u);

  // The daemon restarts too while the planes are down; the queue is on disk.
  uploader_.reset();
  outbox_.reset();
  OpenOutbox();
  EXPECT_EQ(outbox_->stats().depth_entries, 28u);

  StartServer("127.0.0.1:" + std::to_string(port));  // same database, same address
  RunSummary back = Run();
  EXPECT_TRUE(back.drained);
  EXPECT_EQ(back.acked, 28u);
  EXPECT_EQ(uploader_->stats().duplicates, 0u);
  EXPECT_EQ(StoredSamples(), 31u * kSamplesPerBatch);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
}

// Answers on receipt: an entry leaves the outbox only once the store reports it durable.
TEST_F(UploaderServerTest, EntriesAnsweredOnReceiptLeaveTheOutboxOnceDurable) {
  uploader_.reset();
  outbox_.reset();
  OpenOutbox(/*max_entries_per_run=*/3);
  EnqueueBatches(0, 5);
  RunSummary first = Run();
  EXPECT_FALSE(first.drained);
  UploaderStats mid = uploader_->stats();
  EXPECT_EQ(mid.sent, 1u);  // the run's three entries in one request
  EXPECT_EQ(mid.envelopes, 1u);
  // The last answer always comes before its own sync, so it is still waiting.
  EXPECT_GE(mid.unconfirmed, 1u);
  EXPECT_EQ(mid.acked + mid.unconfirmed, 3u);
  EXPECT_EQ(outbox_->stats().depth_entries, 5u - mid.acked);

  RunSummary rest = Run();
  EXPECT_TRUE(rest.drained);
  UploaderStats done = uploader_->stats();
  EXPECT_EQ(done.acked, 5u);
  EXPECT_EQ(done.unconfirmed, 0u);
  // The first three in one request, the other two in another, and the sync that settled the
  // last ones.
  EXPECT_EQ(done.sent, 3u);
  EXPECT_EQ(done.envelopes, 2u);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
  EXPECT_EQ(StoredSamples(), 5u * kSamplesPerBatch);
}

// The server dies after answering on receipt and loses what it had not synced (here: its
// whole telemetry store). Every entry the uploader had not seen reported durable is still in
// the outbox, and the answer from the new store epoch sends it again.
TEST_F(UploaderServerTest, EntriesLostBeforeTheirSyncAreSentAgain) {
  uploader_.reset();
  outbox_.reset();
  OpenOutbox(/*max_entries_per_run=*/4);
  EnqueueBatches(0, 6);
  ASSERT_FALSE(Run().drained);
  const uint64_t confirmed = uploader_->stats().acked;
  ASSERT_LT(confirmed, 4u);
  const int port = app_->data_port();
  StopServer();
  std::filesystem::remove_all(dir_.path() + "/db.sqlite.tsdb");
  StartServer("127.0.0.1:" + std::to_string(port));

  for (int run = 0; run < 10; ++run) {
    RunSummary summary = Run();
    if (summary.drained)
      break;
    clock_.Advance(std::max<int64_t>(summary.retry_at_ms - clock_.NowMs(), 0));
  }
  UploaderStats stats = uploader_->stats();
  EXPECT_GE(stats.resent, 4u - confirmed);
  EXPECT_EQ(stats.acked, 6u);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
  // All but the batches confirmed before the loss (which the test itself destroyed).
  EXPECT_EQ(StoredSamples(), (6u - confirmed) * kSamplesPerBatch);
}

TEST_F(UploaderServerTest, ReplacedCredentialStopsUploads) {
  EnqueueBatches(0, 1);
  // Re-credentialing the compute revokes this daemon's credential at once.
  json token =
      Call("POST", "/api/v1/computes/" + compute_id_ + "/install-tokens", "", api_token_, 201);
  Call("POST", "/cp/v1/install-tokens/exchange",
       json{{"token", token.value("token", "")},
            {"hostname", "ctl02"},
            {"daemon_version", "0.1.0"},
            {"role", "controller"}}
           .dump(),
       "", 200);
  Result<RunSummary> stopped = uploader_->RunOnce();
  EXPECT_EQ(stopped.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(stopped.status().reason(), "credential_revoked");
  EXPECT_EQ(outbox_->stats().depth_entries, 1u);
  EXPECT_EQ(log_.joined().find("exp_cc_"), std::string::npos) << log_.joined();
}

}  // namespace
}  // namespace uploader_server_test
}  // namespace expanse::outbox
