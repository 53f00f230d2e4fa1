// RemoteTelemetryStore against a real VictoriaMetrics (vm_test_server.h): the same samples
// written to it and to the embedded store give the same buckets, query for query; a batch is
// stored once however often it comes and whichever replica it reaches; a store that is down or
// answers wrongly is said so, and a failed write leaves the batch free for its retry.
#include "promstore/remote_telemetry_store.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_loopback.h"
#include "core/test_temp_dir.h"
#include "promstore/vm_test_server.h"
#include "store/pg_store.h"
#include "store/pg_test_server.h"
#include "store/sqlite_store.h"
#include "tsdb/tsdb.h"

namespace expanse::promstore {
namespace {

using testing::VictoriaMetricsTestServer;

// Two hours ago on a whole second: inside the store's retention, never in its future.
int64_t Base() {
  static const int64_t base = [] {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    return (now - 2 * 3'600'000) / 1000 * 1000;
  }();
  return base;
}

const tsdb::SeriesKey kBusy{"cmp_a", "node01.example", "GPU-1", "gpu.sm_util"};
const tsdb::SeriesKey kSparse{"cmp_a", "node01.example", "GPU-2", "gpu.sm_util"};
const tsdb::SeriesKey kHost{"cmp_a", "node01.example", "", "host.cpu_used_cores"};
const tsdb::SeriesKey kOther{"cmp_b", "node01.example", "GPU-1", "gpu.sm_util"};

// Ten minutes of each series: one a second, one every ten seconds with a hole, one every five;
// and the other compute's series with the same host and GPU names.
tsdb::Batch TenMinutes() {
  tsdb::Batch batch;
  std::vector<tsdb::Sample> busy, sparse, host, other;
  for (int i = 0; i < 600; ++i) {
    const int64_t t = Base() + i * 1000;
    busy.push_back({t, (i % 7) * 10.5 + (i % 3) * 0.25});
    if (i % 10 == 3 && (i < 200 || i > 400))
      sparse.push_back({t, i * 1.0});
    if (i % 5 == 0)
      host.push_back({t + 17, 2.0 + (i % 11)});
    other.push_back({t, 1000.0 + i});
  }
  batch.Add(kBusy, busy);
  batch.Add(kSparse, sparse);
  batch.Add(kHost, host);
  batch.Add(kOther, other);
  return batch;
}

class RemoteTelemetryStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto jobs = store::OpenSqliteStore({.path = ":memory:"});
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    db_ = std::move(*jobs);
    remote_ = Open(vm().url() + "/api/v1/write", vm().url());
  }

  static VictoriaMetricsTestServer& vm() { return VictoriaMetricsTestServer::Shared(); }

  std::unique_ptr<RemoteTelemetryStore> Open(const std::string& write_url,
                                             const std::string& query_url) {
    RemoteTelemetryOptions options;
    options.write_url = write_url;
    options.query_url = query_url;
    options.timeout = std::chrono::seconds(5);
    auto store = RemoteTelemetryStore::Open(options, db_->Jobs(), clock_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  ManualClock clock_{Base() + 3'600'000};
  std::unique_ptr<store::Store> db_;
  std::unique_ptr<RemoteTelemetryStore> remote_;
};

// The ten minutes, written once per test binary (VictoriaMetrics keeps them across tests).
void WriteTenMinutesOnce(RemoteTelemetryStore& remote) {
  static bool written = false;
  if (written)
    return;
  const auto appended = remote.Append("cmp_a/main/ten-minutes", TenMinutes());
  ASSERT_TRUE(appended.ok()) << appended.status();
  VictoriaMetricsTestServer::Shared().ForceFlush();
  written = true;
}

void ExpectSameBuckets(const std::vector<tsdb::Bucket>& want, const std::vector<tsdb::Bucket>& got,
                       const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(what + ", bucket " + std::to_string(i));
    EXPECT_EQ(want[i].start_ms, got[i].start_ms);
    EXPECT_EQ(want[i].end_ms, got[i].end_ms);
    EXPECT_EQ(want[i].count, got[i].count);
    EXPECT_EQ(want[i].min, got[i].min);
    EXPECT_EQ(want[i].max, got[i].max);
    EXPECT_EQ(want[i].last, got[i].last);
    EXPECT_NEAR(want[i].mean, got[i].mean, 1e-9 * std::max(1.0, std::fabs(want[i].mean)));
  }
}

TEST_F(RemoteTelemetryStoreTest, AnswersAsTheEmbeddedStoreDoesForTheSameSamples) {
  ASSERT_NO_FATAL_FAILURE(WriteTenMinutesOnce(*remote_));
  expanse::testing::TempDir dir("remote_vs_embedded");
  auto embedded = tsdb::Tsdb::Open(tsdb::TsdbOptions{.directory = dir.path()}, clock_);
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  ASSERT_TRUE((*embedded)->Append("b", TenMinutes()).ok());

  const int64_t b = Base();
  const std::vector<tsdb::SeriesQuery> queries = {
      {kBusy, b, b + 600'000, 60},          // whole buckets of 10 s
      {kSparse, b, b + 600'000, 60},        // the same range: asked together
      {kHost, b, b + 600'000, 60},          // a host-level series among them
      {kBusy, b + 123, b + 599'999, 7},     // an odd start, the last bucket cut short
      {kSparse, b, b + 600'000, 600},       // 1 s buckets, most empty
      {kHost, b - 60'000, b + 900'000, 1},  // one bucket round everything
      {kOther, b, b + 600'000, 60},         // another compute's series of the same names
      {{"cmp_a", "node01.example", "GPU-9", "gpu.sm_util"}, b, b + 600'000, 60},  // none
      {kBusy, b + 599'000, b + 700'000, 5},  // past the data's end
  };
  const auto want = (*embedded)->QueryMany(queries);
  ASSERT_TRUE(want.ok()) << want.status();
  const auto got = remote_->QueryMany(queries);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), queries.size());
  for (size_t i = 0; i < queries.size(); ++i)
    ExpectSameBuckets((*want)[i], (*got)[i], "query " + std::to_string(i));
  // Not a vacuous match: the busy series has its ten-second buckets of ten samples.
  ASSERT_EQ((*got)[0].size(), 60u);
  EXPECT_EQ((*got)[0][0].count, 10u);
  EXPECT_TRUE((*got)[7].empty());
  EXPECT_EQ((*got)[6][0].min, 1000.0);

  const auto one = remote_->Query(kBusy, b + 123, b + 599'999, 7);
  ASSERT_TRUE(one.ok()) << one.status();
  ExpectSameBuckets((*want)[3], *one, "Query");
}

TEST_F(RemoteTelemetryStoreTest, RefusesWhatTheEmbeddedStoreRefuses) {
  EXPECT_EQ(remote_->Query(kBusy, Base(), Base(), 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(remote_->Query(kBusy, Base(), Base() + 1000, 0).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RemoteTelemetryStoreTest, ABatchIsStoredOnceHoweverOftenItComes) {
  const tsdb::SeriesKey key{"cmp_a", "node02", "GPU-3", "gpu.sm_util"};
  const tsdb::Batch batch = {{key, {{Base() + 1000, 1}, {Base() + 2000, 2}, {Base() + 3000, 3}}}};
  const auto first = remote_->Append("cmp_a/main/1", batch);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(first->durable);
  EXPECT_EQ(first->samples, 3u);
  // A second replica on the same database, as the sender's retry would reach.
  auto replica = Open(vm().url() + "/api/v1/write", vm().url());
  const auto again = replica->Append("cmp_a/main/1", batch);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->samples, 0u);
  vm().ForceFlush();
  const auto buckets = remote_->Query(key, Base(), Base() + 10'000, 1);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  ASSERT_EQ(buckets->size(), 1u);
  EXPECT_EQ(buckets->front().count, 3u);
  EXPECT_EQ(buckets->front().mean, 2.0);
}

TEST_F(RemoteTelemetryStoreTest, ConcurrentBatchesAreWrittenTogetherAndEachIsStoredOnce) {
  // Twelve senders at once, each with its own batch, and four more racing with the same batch
  // (a sender's retries reaching the replica while its first attempt is in a group): every
  // batch is stored once, every sender gets its own answer.
  constexpr int kSenders = 12;
  constexpr int kRacers = 4;
  std::vector<tsdb::Batch> batches;
  for (int i = 0; i < kSenders; ++i) {
    const tsdb::SeriesKey key{"cmp_a", "node-group", "GPU-" + std::to_string(i), "gpu.sm_util"};
    batches.push_back({{key, {{Base() + 1000, 1.0 * i}, {Base() + 2000, 2.0 * i}}}});
  }
  const tsdb::SeriesKey raced_key{"cmp_a", "node-group", "GPU-raced", "gpu.sm_util"};
  const tsdb::Batch raced = {{raced_key, {{Base() + 1000, 7}}}};
  std::vector<Result<tsdb::TelemetryStore::AppendResult>> answers(
      kSenders + kRacers, tsdb::TelemetryStore::AppendResult{});
  std::vector<std::thread> threads;
  for (int i = 0; i < kSenders + kRacers; ++i) {
    threads.emplace_back([&, i] {
      answers[i] = i < kSenders ? remote_->Append("cmp_a/group/" + std::to_string(i), batches[i])
                                : remote_->Append("cmp_a/group/raced", raced);
    });
  }
  for (std::thread& t : threads)
    t.join();
  for (int i = 0; i < kSenders; ++i) {
    ASSERT_TRUE(answers[i].ok()) << i << ": " << answers[i].status();
    EXPECT_FALSE(answers[i]->duplicate) << i;
    EXPECT_EQ(answers[i]->samples, 2u) << i;
  }
  int stored = 0;
  for (int i = kSenders; i < kSenders + kRacers; ++i) {
    if (answers[i].ok() && !answers[i]->duplicate) {
      ++stored;
      EXPECT_EQ(answers[i]->samples, 1u);
    } else if (!answers[i].ok()) {
      EXPECT_EQ(answers[i].status().reason(), "batch_in_flight") << answers[i].status();
    }
  }
  EXPECT_EQ(stored, 1);
  vm().ForceFlush();
  for (int i = 0; i < kSenders; ++i) {
    const auto buckets =
        remote_->Query(tsdb::OwnedKey(batches[i].front().key), Base(), Base() + 10'000, 1);
    ASSERT_TRUE(buckets.ok()) << buckets.status();
    ASSERT_EQ(buckets->size(), 1u);
    EXPECT_EQ(buckets->front().count, 2u) << i;
    EXPECT_EQ(buckets->front().max, 2.0 * i) << i;
  }
  // Each batch's record says stored: a later copy of any is a repeat.
  for (int i = 0; i < kSenders; ++i) {
    EXPECT_EQ(*db_->Jobs().ClaimIngestBatch("cmp_a", "cmp_a/group/" + std::to_string(i),
                                            clock_.NowMs(), 60'000),
              store::JobStore::BatchClaim::kStored);
  }
}

// A remote-write receiver that accepts every write without keeping it and holds the first one
// until released: a test lines batches up behind a group being written. Plain sockets (the
// http module's listener refuses snappy bodies); keep-alive, one thread per connection.
// Bounded waits, so that a broken test fails rather than hangs.
class HeldReceiver {
 public:
  HeldReceiver() {
    fd_ = expanse::testing::ListenOnLoopback(16, &port_);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~HeldReceiver() {
    Release();
    ::shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      for (const int connection : connections_)
        ::shutdown(connection, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (std::thread& t : threads)
      t.join();
    for (const int connection : connections_)
      ::close(connection);
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool WaitForWrites(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kBound, [&] { return writes_ >= n; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int writes() {
    std::lock_guard lock(mu_);
    return writes_;
  }

 private:
  static constexpr std::chrono::seconds kBound{30};

  void Accept() {
    while (true) {
      const int connection = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection < 0)
        return;
      std::lock_guard lock(mu_);
      connections_.push_back(connection);
      threads_.emplace_back([this, connection] { Serve(connection); });
    }
  }
  // Requests on one connection: the head, then Content-Length bytes of body; 204 to each.
  void Serve(int connection) {
    std::string pending;
    char buffer[1 << 16];
    while (true) {
      size_t head_end = pending.find("\r\n\r\n");
      while (head_end == std::string::npos) {
        const ssize_t n = ::recv(connection, buffer, sizeof buffer, 0);
        if (n <= 0)
          return;
        pending.append(buffer, static_cast<size_t>(n));
        head_end = pending.find("\r\n\r\n");
      }
      std::string head = pending.substr(0, head_end);
      std::transform(head.begin(), head.end(), head.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      const size_t at = head.find("content-length:");
      const size_t body_bytes = at == std::string::npos ? 0 : std::stoul(head.substr(at + 15));
      while (pending.size() < head_end + 4 + body_bytes) {
        const ssize_t n = ::recv(connection, buffer, sizeof buffer, 0);
        if (n <= 0)
          return;
        pending.append(buffer, static_cast<size_t>(n));
      }
      pending.erase(0, head_end + 4 + body_bytes);
      {
        std::unique_lock lock(mu_);
        const int n = ++writes_;
        cv_.notify_all();
        if (n == 1)
          cv_.wait_for(lock, kBound, [this] { return released_; });
      }
      constexpr char kAccepted[] = "HTTP/1.1 204 No Content\r\n\r\n";
      if (::send(connection, kAccepted, sizeof kAccepted - 1, MSG_NOSIGNAL) < 0)
        return;
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> connections_;
  std::vector<std::thread> threads_;
  int writes_ = 0;
  bool released_ = false;
};

// Unblocks the receiver when a test ends, before its senders (declared earlier) are joined.
struct ReleasedFirst {
  explicit ReleasedFirst(HeldReceiver& r) : receiver(r) {}
  ~ReleasedFirst() { receiver.Release(); }
  HeldReceiver& receiver;
};

// Marks carried by the next group's claim, with the batch records in SQLite and in a real
// PostgreSQL (a data-modifying WITH there).
class HeldWriteTest : public RemoteTelemetryStoreTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    RemoteTelemetryStoreTest::SetUp();
    if (GetParam()) {
      auto postgres =
          store::OpenPostgresStore(::expanse::testing::PgTestServer::Shared().NewDatabase());
      ASSERT_TRUE(postgres.ok()) << postgres.status();
      remote_.reset();
      db_ = std::move(*postgres);
    }
  }
  // One group at a time, so that the next batches wait while the first is written; a timeout
  // far past the test's own waits.
  std::unique_ptr<RemoteTelemetryStore> OpenHeld(HeldReceiver& receiver,
                                                 size_t max_waiting_samples = 16'000'000,
                                                 int write_groups = 1) {
    RemoteTelemetryOptions options;
    options.max_waiting_samples = max_waiting_samples;
    options.write_url = receiver.url() + "/api/v1/write";
    options.query_url = vm().url();
    options.write_groups = write_groups;
    options.timeout = std::chrono::seconds(60);
    auto store = RemoteTelemetryStore::Open(options, db_->Jobs(), clock_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
};

INSTANTIATE_TEST_SUITE_P(Backings, HeldWriteTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return std::string(param_info.param ? "Postgres" : "Sqlite");
                         });

TEST_P(HeldWriteTest, BatchesWaitingBehindAGroupMarkItInTheirClaim) {
  HeldReceiver receiver;
  auto held = OpenHeld(receiver);
  ASSERT_NE(held, nullptr);
  const tsdb::Batch first = {{kBusy, {{Base() + 1000, 1}}}};
  const tsdb::Batch second = {{kBusy, {{Base() + 2000, 2}}}};
  Result<tsdb::TelemetryStore::AppendResult> first_answer = tsdb::TelemetryStore::AppendResult{};
  Result<tsdb::TelemetryStore::AppendResult> second_answer = first_answer;
  Result<tsdb::TelemetryStore::AppendResult> retry_answer = first_answer;
  std::jthread first_sender, second_sender, retry_sender;
  const ReleasedFirst released(receiver);  // before the senders are joined, however this ends
  first_sender = std::jthread([&] { first_answer = held->Append("cmp_a/held/1", first); });
  if (!receiver.WaitForWrites(1)) {
    first_sender.join();
    FAIL() << "the first batch was never written: " << first_answer.status();
  }
  // While the first group is being written: a new batch, and a retry of the first (its
  // sender gave up waiting), line up for the next group.
  second_sender = std::jthread([&] { second_answer = held->Append("cmp_a/held/2", second); });
  retry_sender = std::jthread([&] { retry_answer = held->Append("cmp_a/held/1", first); });
  for (int i = 0; i < 3000 && held->stats().waiting_batches < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(held->stats().waiting_batches, 2u);
  receiver.Release();
  first_sender.join();
  second_sender.join();
  retry_sender.join();
  ASSERT_TRUE(first_answer.ok()) << first_answer.status();
  EXPECT_FALSE(first_answer->duplicate);
  EXPECT_TRUE(first_answer->durable);
  ASSERT_TRUE(second_answer.ok()) << second_answer.status();
  EXPECT_FALSE(second_answer->duplicate);
  // The retry met the first batch answered and its mark on the way: a repeat, not sent again.
  ASSERT_TRUE(retry_answer.ok()) << retry_answer.status();
  EXPECT_TRUE(retry_answer->duplicate);
  EXPECT_EQ(receiver.writes(), 2);
  const RemoteTelemetryStore::Stats stats = held->stats();
  EXPECT_EQ(stats.groups, 2u);
  EXPECT_EQ(stats.group_batches, 2u);  // the retry was answered without being sent
  EXPECT_EQ(stats.failed_writes, 0u);
  EXPECT_EQ(stats.waiting_batches, 0u);
  EXPECT_EQ(stats.unmarked_batches, 0u);
  // Both marked, with nothing left to flush: the first by the second group's claim.
  for (const char* id : {"cmp_a/held/1", "cmp_a/held/2"}) {
    EXPECT_EQ(*db_->Jobs().ClaimIngestBatch("cmp_a", id, clock_.NowMs() + 120'000, 60'000),
              store::JobStore::BatchClaim::kStored)
        << id;
  }
}

// AppendLater never waits for other batches' writes: with the one slot taken it returns at
// once, and the thread writing the group in the slot answers it, having taken its group next.
TEST_P(HeldWriteTest, AppendLaterReturnsAtOnceAndTheGroupsWriterAnswers) {
  HeldReceiver receiver;
  auto held = OpenHeld(receiver);
  ASSERT_NE(held, nullptr);
  const tsdb::Batch first = {{kBusy, {{Base() + 5000, 5}}}};
  const tsdb::Batch second = {{kBusy, {{Base() + 6000, 6}}}};
  Result<tsdb::TelemetryStore::AppendResult> first_answer = tsdb::TelemetryStore::AppendResult{};
  std::promise<std::thread::id> leader;
  // Before the sender, which may still answer it when the test ends early.
  std::promise<std::pair<std::thread::id, Result<tsdb::TelemetryStore::AppendResult>>> answer;
  std::jthread first_sender;
  const ReleasedFirst released(receiver);  // before the sender is joined, however this ends
  first_sender = std::jthread([&] {
    leader.set_value(std::this_thread::get_id());
    first_answer = held->Append("cmp_a/held/5", first);
  });
  const std::thread::id leader_id = leader.get_future().get();
  if (!receiver.WaitForWrites(1)) {
    first_sender.join();
    FAIL() << "the first batch was never written: " << first_answer.status();
  }
  auto answered = answer.get_future();
  held->AppendLater("cmp_a/held/6", second, tsdb::TelemetryStore::Ack::kDurable, "",
                    [&answer](Result<tsdb::TelemetryStore::AppendResult> result) {
                      answer.set_value({std::this_thread::get_id(), std::move(result)});
                    });
  // Returned with the first group still held: not answered, waiting for the slot.
  EXPECT_EQ(answered.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(held->stats().waiting_batches, 1u);
  receiver.Release();
  first_sender.join();
  ASSERT_EQ(answered.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  auto [answerer, result] = answered.get();
  EXPECT_EQ(answerer, leader_id);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->duplicate);
  EXPECT_TRUE(result->durable);
  ASSERT_TRUE(first_answer.ok()) << first_answer.status();
  EXPECT_EQ(receiver.writes(), 2);
  EXPECT_EQ(held->stats().groups, 2u);
}

// One request of more batches than a group holds (a controller's envelope of 32) is two
// groups: with a second slot, a helper writes the second while the request's own thread still
// waits on the first, rather than after it.
TEST_P(HeldWriteTest, ARequestsSecondGroupIsWrittenBesideItsFirst) {
  HeldReceiver receiver;
  auto held = OpenHeld(receiver, 16'000'000, /*write_groups=*/2);
  ASSERT_NE(held, nullptr);
  constexpr int kBatches = 20;  // a group holds 16
  std::vector<tsdb::Batch> batches;
  std::vector<std::string> ids;
  for (int i = 0; i < kBatches; ++i) {
    batches.push_back({{kBusy, {{Base() + 10'000 + i * 1000, 1.0 + i}}}});
    ids.push_back("cmp_a/two-groups/" + std::to_string(i));
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<Result<tsdb::TelemetryStore::AppendResult>>> answers(kBatches);
  int answered = 0;
  std::jthread sender;
  const ReleasedFirst released(receiver);  // before the sender is joined, however this ends
  sender = std::jthread([&] {
    std::vector<tsdb::TelemetryStore::PendingAppend> appends;
    for (int i = 0; i < kBatches; ++i) {
      appends.push_back({.batch_id = ids[i],
                         .batch = &batches[i],
                         .credential_hash = "",
                         .done = [&, i](Result<tsdb::TelemetryStore::AppendResult> r) {
                           std::lock_guard lock(mu);
                           answers[i] = std::move(r);
                           ++answered;
                           cv.notify_all();
                         }});
    }
    held->AppendAllLater(std::move(appends), tsdb::TelemetryStore::Ack::kDurable);
  });
  // The first group's write is held by the receiver; the second arrives all the same.
  EXPECT_TRUE(receiver.WaitForWrites(2)) << "the second group waited for the first";
  {
    // One group answered while the other is still held (whichever reached the receiver
    // first: the request's own 16 batches or the helper's 4).
    std::unique_lock lock(mu);
    EXPECT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered >= kBatches - 16; }));
    EXPECT_LT(answered, kBatches);
  }
  receiver.Release();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == kBatches; }));
  }
  sender.join();
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_TRUE(answers[i].has_value() && answers[i]->ok()) << i;
    EXPECT_FALSE((*answers[i])->duplicate) << i;
  }
  EXPECT_EQ(receiver.writes(), 2);
  const RemoteTelemetryStore::Stats stats = held->stats();
  EXPECT_EQ(stats.groups, 2u);
  EXPECT_EQ(stats.group_batches, static_cast<uint64_t>(kBatches));
  EXPECT_EQ(stats.waiting_batches, 0u);
}

// The samples waiting for a group are bounded: past the bound a batch is refused at once, to
// be sent again; one batch alone always waits, however large.
TEST_P(HeldWriteTest, WaitingSamplesAreBoundedAndABatchPastTheBoundIsToComeBack) {
  HeldReceiver receiver;
  auto held = OpenHeld(receiver, /*max_waiting_samples=*/2);
  ASSERT_NE(held, nullptr);
  const tsdb::Batch first = {{kBusy, {{Base() + 7000, 7}}}};
  const tsdb::Batch three = {{kBusy, {{Base() + 8000, 8}, {Base() + 8001, 8}, {Base() + 8002, 8}}}};
  const tsdb::Batch one = {{kBusy, {{Base() + 9000, 9}}}};
  using Answer = Result<tsdb::TelemetryStore::AppendResult>;
  std::promise<Answer> three_answer, one_answer;
  Answer first_answer = tsdb::TelemetryStore::AppendResult{};
  std::jthread first_sender;
  const ReleasedFirst released(receiver);  // before the sender is joined, however this ends
  first_sender = std::jthread([&] { first_answer = held->Append("cmp_a/held/7", first); });
  if (!receiver.WaitForWrites(1)) {
    first_sender.join();
    FAIL() << "the first batch was never written: " << first_answer.status();
  }
  // Three samples, over the bound but alone: it waits. One more does not fit beside it.
  held->AppendLater("cmp_a/held/8", three, tsdb::TelemetryStore::Ack::kDurable, "",
                    [&](Answer a) { three_answer.set_value(std::move(a)); });
  held->AppendLater("cmp_a/held/9", one, tsdb::TelemetryStore::Ack::kDurable, "",
                    [&](Answer a) { one_answer.set_value(std::move(a)); });
  auto refused = one_answer.get_future();
  ASSERT_EQ(refused.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  const Answer busy = refused.get();
  EXPECT_EQ(busy.status().code(), StatusCode::kUnavailable) << busy.status();
  EXPECT_EQ(busy.status().reason(), "store_busy");
  EXPECT_EQ(held->stats().waiting_batches, 1u);
  receiver.Release();
  first_sender.join();
  auto waited = three_answer.get_future();
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const Answer stored = waited.get();
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->samples, 3u);
  // The refused batch was never claimed: sent again, it is stored.
  const Result<tsdb::TelemetryStore::AppendResult> again = held->Append("cmp_a/held/9", one);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->duplicate);
}

TEST_P(HeldWriteTest, AMarkLeftForAGroupWhoseClaimFailedIsWrittenByFlush) {
  HeldReceiver receiver;
  auto held = OpenHeld(receiver);
  ASSERT_NE(held, nullptr);
  const int64_t start = clock_.NowMs();
  Result<tsdb::TelemetryStore::AppendResult> first_answer = tsdb::TelemetryStore::AppendResult{};
  Result<tsdb::TelemetryStore::AppendResult> next_answer = first_answer;
  std::jthread first_sender, next_sender;
  const ReleasedFirst released(receiver);  // before the senders are joined, however this ends
  first_sender = std::jthread([&] {
    first_answer = held->Append("cmp_a/held/3", {{kBusy, {{Base() + 3000, 3}}}});
  });
  if (!receiver.WaitForWrites(1)) {
    first_sender.join();
    FAIL() << "the first batch was never written: " << first_answer.status();
  }
  // The group waiting behind it fails its claim (the store refuses a time before the epoch),
  // with the first batch's mark and again without it: the mark is kept.
  clock_.Set(-1);
  next_sender = std::jthread([&] {
    next_answer = held->Append("cmp_a/held/4", {{kBusy, {{Base() + 4000, 4}}}});
  });
  for (int i = 0; i < 3000 && held->stats().waiting_batches < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(held->stats().waiting_batches, 1u);
  receiver.Release();
  first_sender.join();
  next_sender.join();
  ASSERT_TRUE(first_answer.ok()) << first_answer.status();
  EXPECT_EQ(next_answer.status().code(), StatusCode::kInvalidArgument) << next_answer.status();
  // Written and answered, not yet marked: a retry now would be told to wait.
  EXPECT_EQ(*db_->Jobs().ClaimIngestBatch("cmp_a", "cmp_a/held/3", start + 1000, 60'000),
            store::JobStore::BatchClaim::kInFlight);
  EXPECT_EQ(held->stats().unmarked_batches, 1u);
  clock_.Set(start + 2000);
  ASSERT_TRUE(held->Flush().ok());
  EXPECT_EQ(held->stats().unmarked_batches, 0u);
  EXPECT_EQ(*db_->Jobs().ClaimIngestBatch("cmp_a", "cmp_a/held/3", start + 120'000, 60'000),
            store::JobStore::BatchClaim::kStored);
}

// The batches of one request (an ingest envelope) go to the store in one group: one claim
// statement and one remote write for all, each answered on its own, a bad one alone.
TEST_F(RemoteTelemetryStoreTest, OneRequestsBatchesAreWrittenInOneGroup) {
  constexpr int kBatches = 5;
  std::vector<tsdb::Batch> batches;
  for (int i = 0; i < kBatches; ++i) {
    const tsdb::SeriesKey key{"cmp_a", "node-envelope", "GPU-" + std::to_string(i), "gpu.sm_util"};
    batches.push_back({{key, {{Base() + 1000, 1.0 + i}, {Base() + 2000, 2.0 + i}}}});
  }
  std::vector<std::string> ids;
  for (int i = 0; i < kBatches; ++i)
    ids.push_back("cmp_a/envelope/" + std::to_string(i));
  ids[3] = std::string(store::JobStore::kMaxBatchIdBytes + 1, 'x');  // refused alone
  const RemoteTelemetryStore::Stats before = remote_->stats();
  std::vector<std::optional<Result<tsdb::TelemetryStore::AppendResult>>> answers(kBatches);
  auto append_all = [&] {
    std::vector<tsdb::TelemetryStore::PendingAppend> appends;
    for (int i = 0; i < kBatches; ++i) {
      appends.push_back({.batch_id = ids[i],
                         .batch = &batches[i],
                         .credential_hash = "",
                         .done = [&answers, i](Result<tsdb::TelemetryStore::AppendResult> r) {
                           answers[i] = std::move(r);
                         }});
    }
    remote_->AppendAllLater(std::move(appends), tsdb::TelemetryStore::Ack::kDurable);
  };
  append_all();  // no other writer: this thread leads the group and answers before returning
  const RemoteTelemetryStore::Stats after = remote_->stats();
  EXPECT_EQ(after.groups - before.groups, 1u);
  EXPECT_EQ(after.group_batches - before.group_batches, kBatches - 1u);
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_TRUE(answers[i].has_value()) << i;
    if (i == 3) {
      EXPECT_EQ(answers[i]->status().code(), StatusCode::kInvalidArgument) << i;
      continue;
    }
    ASSERT_TRUE(answers[i]->ok()) << i << ": " << answers[i]->status();
    EXPECT_FALSE((*answers[i])->duplicate) << i;
    EXPECT_EQ((*answers[i])->samples, 2u) << i;
  }
  append_all();  // the same request again: repeats, nothing written twice
  for (int i = 0; i < kBatches; ++i) {
    if (i != 3) {
      ASSERT_TRUE(answers[i]->ok()) << i;
      EXPECT_TRUE((*answers[i])->duplicate) << i;
    }
  }
  vm().ForceFlush();
  for (int i = 0; i < kBatches; ++i) {
    if (i == 3)
      continue;
    const auto buckets =
        remote_->Query(tsdb::OwnedKey(batches[i].front().key), Base(), Base() + 10'000, 1);
    ASSERT_TRUE(buckets.ok()) << buckets.status();
    ASSERT_EQ(buckets->size(), 1u);
    EXPECT_EQ(buckets->front().count, 2u) << i;
  }
}

TEST_F(RemoteTelemetryStoreTest, ABatchIdTheTableCannotTakeIsRefusedAlone) {
  const tsdb::Batch batch = {{kBusy, {{Base() + 1000, 1}}}};
  EXPECT_EQ(remote_->Append(std::string(257, 'x'), batch).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(remote_->Append("", batch).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RemoteTelemetryStoreTest, ABatchAnotherReplicaIsWritingIsToBeSentAgain) {
  ASSERT_EQ(*db_->Jobs().ClaimIngestBatch("cmp_a", "cmp_a/main/2", clock_.NowMs(), 60'000),
            store::JobStore::BatchClaim::kClaimed);
  const tsdb::Batch batch = {{kBusy, {{Base() + 1000, 1}}}};
  const auto appended = remote_->Append("cmp_a/main/2", batch);
  EXPECT_EQ(appended.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(appended.status().reason(), "batch_in_flight");
  // Once the other replica's claim lapses, this one stores it.
  clock_.Advance(60'000);
  const auto later = remote_->Append("cmp_a/main/2", batch);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_FALSE(later->duplicate);
}

TEST_F(RemoteTelemetryStoreTest, AStoreThatIsDownIsUnavailableAndTheBatchStaysFree) {
  // Nothing listens on port 9 of loopback.
  auto down = Open("http://127.0.0.1:9/api/v1/write", "http://127.0.0.1:9");
  const tsdb::Batch batch = {{kBusy, {{Base() + 1000, 1}}}};
  const auto appended = down->Append("cmp_a/main/3", batch);
  EXPECT_EQ(appended.status().code(), StatusCode::kUnavailable) << appended.status();
  EXPECT_NE(appended.status().message().find("cannot be reached"), std::string::npos)
      << appended.status();
  EXPECT_EQ(*db_->Jobs().ClaimIngestBatch("cmp_a", "cmp_a/main/3", clock_.NowMs(), 60'000),
            store::JobStore::BatchClaim::kClaimed);
  EXPECT_EQ(down->stats().failed_writes, 1u);
  EXPECT_EQ(down->Query(kBusy, Base(), Base() + 1000, 1).status().code(), StatusCode::kUnavailable);
}

TEST_F(RemoteTelemetryStoreTest, AStoreThatRefusesTheProtocolIsAnInternalError) {
  auto wrong = Open(vm().url() + "/api/v1/no-such-endpoint", vm().url());
  const auto appended = wrong->Append("cmp_a/main/4", {{kBusy, {{Base() + 1000, 1}}}});
  EXPECT_EQ(appended.status().code(), StatusCode::kInternal) << appended.status();
  EXPECT_NE(appended.status().message().find("answered 4"), std::string::npos) << appended.status();
}

TEST_F(RemoteTelemetryStoreTest, AQueryTheStoreRefusesIsAnInternalErrorWithItsMessage) {
  const auto answer = remote_->Get("/api/v1/query", {{"query", "sum(("}, {"time", "1"}});
  EXPECT_EQ(answer.status().code(), StatusCode::kInternal) << answer.status();
  EXPECT_NE(answer.status().message().find("refused the query"), std::string::npos)
      << answer.status();
}

TEST_F(RemoteTelemetryStoreTest, OpenRefusesPlainHttpBeyondLoopbackAndMissingUrls) {
  RemoteTelemetryOptions options;
  options.write_url = "http://vm.example:8428/api/v1/write";
  options.query_url = "http://vm.example:8428";
  EXPECT_EQ(RemoteTelemetryStore::Open(options, db_->Jobs(), clock_).status().code(),
            StatusCode::kInvalidArgument);
  options.write_url.clear();
  EXPECT_EQ(RemoteTelemetryStore::Open(options, db_->Jobs(), clock_).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RemoteTelemetryStoreTest, RetentionForgetsOldBatchRecords) {
  const tsdb::Batch batch = {{kBusy, {{Base() + 5000, 5}}}};
  ASSERT_TRUE(remote_->Append("cmp_a/main/5", batch).ok());
  clock_.Advance(8LL * 24 * 3'600'000);
  ASSERT_TRUE(remote_->ApplyRetention().ok());
  EXPECT_EQ(*db_->Jobs().ClaimIngestBatch("cmp_a", "cmp_a/main/5", clock_.NowMs(), 60'000),
            store::JobStore::BatchClaim::kClaimed);
}

TEST(FormEncode, KeepsUnreservedAndEscapesTheRest) {
  EXPECT_EQ(FormEncode({{"query", "a{b=\"c\"} or d"}, {"step", "10ms"}}),
            "query=a%7Bb%3D%22c%22%7D%20or%20d&step=10ms");
}

}  // namespace
}  // namespace expanse::promstore
