// RemoteWriteForwarder against a real VictoriaMetrics (vm_test_server.h) and against receivers
// that are down or refuse: sent batches arrive, a down receiver is retried with the batch kept,
// a refusal drops it, a full queue drops the oldest, and every drop is counted.
#include "promstore/forwarder.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "promstore/remote_telemetry_store.h"
#include "promstore/vm_test_server.h"
#include "store/sqlite_store.h"

namespace expanse::promstore {
namespace {

using testing::VictoriaMetricsTestServer;
using namespace std::chrono_literals;

int64_t RecentMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
                 .count() /
             1000 * 1000 -
         3'600'000;
}

std::unique_ptr<RemoteWriteForwarder> Start(const std::string& url,
                                            size_t max_queue_bytes = 1 << 20) {
  ForwarderOptions options;
  options.url = url;
  options.max_queue_bytes = max_queue_bytes;
  options.timeout = 2s;
  options.first_backoff = 20ms;
  options.max_backoff = 100ms;
  auto forwarder = RemoteWriteForwarder::Start(options);
  EXPECT_TRUE(forwarder.ok()) << forwarder.status();
  return forwarder.ok() ? std::move(*forwarder) : nullptr;
}

// Waits (up to 10 s) until `done` holds for the forwarder's stats.
template <typename Done>
RemoteWriteForwarder::Stats WaitFor(RemoteWriteForwarder& f, Done done) {
  for (int i = 0; i < 1000; ++i) {
    const RemoteWriteForwarder::Stats s = f.stats();
    if (done(s))
      return s;
    std::this_thread::sleep_for(10ms);
  }
  return f.stats();
}

tsdb::Batch OneSeries(const std::string& host, int64_t t0, int n) {
  std::vector<tsdb::Sample> samples;
  for (int i = 0; i < n; ++i)
    samples.push_back({t0 + i * 1000, static_cast<double>(i)});
  return {{{"cmp_f", host, "GPU-f", "gpu.power_w"}, samples}};
}

TEST(RemoteWriteForwarder, SentBatchesArriveInTheReceiver) {
  VictoriaMetricsTestServer& vm = VictoriaMetricsTestServer::Shared();
  auto forwarder = Start(vm.url() + "/api/v1/write");
  const int64_t t0 = RecentMs();
  forwarder->Enqueue(OneSeries("fwd01", t0, 5));
  forwarder->Enqueue(OneSeries("fwd01", t0 + 5000, 5));
  const auto stats = WaitFor(*forwarder, [](const auto& s) { return s.sent_batches == 2; });
  EXPECT_EQ(stats.sent_batches, 2u);
  EXPECT_EQ(stats.sent_samples, 10u);
  EXPECT_EQ(stats.dropped_batches, 0u);
  EXPECT_EQ(stats.queued_batches, 0u);
  vm.ForceFlush();
  // Read back as the server would: the ten samples in one bucket.
  auto jobs = store::OpenSqliteStore({.path = ":memory:"});
  ASSERT_TRUE(jobs.ok());
  ManualClock clock(t0);
  auto remote = RemoteTelemetryStore::Open(
      {.write_url = vm.url() + "/api/v1/write", .query_url = vm.url()}, (*jobs)->Jobs(), clock);
  ASSERT_TRUE(remote.ok()) << remote.status();
  const auto buckets =
      (*remote)->Query({"cmp_f", "fwd01", "GPU-f", "gpu.power_w"}, t0, t0 + 60'000, 1);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  ASSERT_EQ(buckets->size(), 1u);
  EXPECT_EQ(buckets->front().count, 10u);
}

TEST(RemoteWriteForwarder, ADownReceiverIsRetriedWithTheBatchKept) {
  auto forwarder = Start("http://127.0.0.1:9/api/v1/write");
  forwarder->Enqueue(OneSeries("fwd02", RecentMs(), 3));
  const auto stats = WaitFor(*forwarder, [](const auto& s) { return s.failed_attempts >= 3; });
  EXPECT_GE(stats.failed_attempts, 3u);
  EXPECT_EQ(stats.queued_batches, 1u);
  EXPECT_EQ(stats.sent_batches, 0u);
  EXPECT_EQ(stats.dropped_batches, 0u);
}

TEST(RemoteWriteForwarder, ARefusalDropsTheBatchAndCountsIt) {
  // VictoriaMetrics answers 400 to a path it does not serve.
  auto forwarder = Start(VictoriaMetricsTestServer::Shared().url() + "/api/v1/no-such-endpoint");
  forwarder->Enqueue(OneSeries("fwd03", RecentMs(), 3));
  const auto stats = WaitFor(*forwarder, [](const auto& s) { return s.dropped_batches == 1; });
  EXPECT_EQ(stats.dropped_batches, 1u);
  EXPECT_EQ(stats.queued_batches, 0u);
}

TEST(RemoteWriteForwarder, AFullQueueDropsTheOldestWaiting) {
  // Room for about one batch; the receiver is down, so nothing leaves.
  auto forwarder = Start("http://127.0.0.1:9/api/v1/write", 200);
  for (int i = 0; i < 5; ++i)
    forwarder->Enqueue(OneSeries("fwd04", RecentMs() + i * 10'000, 10));
  const auto stats = forwarder->stats();
  EXPECT_EQ(stats.queued_batches + stats.dropped_batches, 5u);
  EXPECT_GE(stats.dropped_batches, 3u);
}

TEST(RemoteWriteForwarder, RefusesPlainHttpBeyondLoopback) {
  EXPECT_EQ(RemoteWriteForwarder::Start({.url = "http://prometheus.example:9090/api/v1/write"})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoteWriteForwarder::Start({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace expanse::promstore
