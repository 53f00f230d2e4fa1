#include "server/s3_segment_store.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "crypto/hash.h"

namespace expanse::server {
namespace s3_segment_store_test {
namespace {

TEST(S3ErrorCodeTest, TheCodeOfAnS3ErrorBody) {
  EXPECT_EQ(S3ErrorCode("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
                        "<Message>Please reduce your request rate.</Message></Error>"),
            "SlowDown");
  EXPECT_EQ(S3ErrorCode("<Error><Code>XAmzContentSHA256Mismatch</Code></Error>"),
            "XAmzContentSHA256Mismatch");
  EXPECT_EQ(S3ErrorCode("<html>502 Bad Gateway</html>"), "");
  EXPECT_EQ(S3ErrorCode("<Code>" + std::string(kMaxS3ErrorCodeBytes + 1, 'A') + "</Code>"), "");
  EXPECT_EQ(S3ErrorCode("<Code>NoSuchKey"), "");
}

// The code goes into the store's error messages and the server's log: it used to be whatever
// bytes the answer held between the tags, a terminal escape or a line break included.
TEST(S3ErrorCodeTest, ACodeOfOtherBytesIsNotRepeated) {
  EXPECT_EQ(S3ErrorCode("<Error><Code>\x1b]0;owned\x07</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code>Slow\nlevel=error msg=forged</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code>Slow Down</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code>\xc3\xa9</Code></Error>"), "");
}

// A bucket whose PUTs wait until the test lets them go, counting how many wait at once.
class SlowBucket {
 public:
  SlowBucket() {
    // httplib answers a HEAD with the GET route.
    server_.Get("/bucket",
                [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    server_.Put(R"(/bucket/.*)", [this](const httplib::Request&, httplib::Response& res) {
      std::unique_lock lock(mu_);
      ++waiting_;
      most_waiting_ = std::max(most_waiting_, waiting_);
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
      --waiting_;
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~SlowBucket() {
    Release();
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/bucket"; }
  // Waits (up to 10 s) until `n` PUTs wait at once.
  bool AwaitWaiting(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ >= n; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int most_waiting() {
    std::lock_guard lock(mu_);
    return most_waiting_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  int most_waiting_ = 0;
  bool released_ = false;
};

// Slow PUTs go on side by side, up to the store's connections; one more finds them all busy and
// is unavailable after a bounded wait, not queued behind them for as long as they take.
TEST(S3SegmentStoreTest, SlowRequestsUseSeveralConnectionsAndOneMoreIsRefusedSoon) {
  SlowBucket bucket;
  Result<std::unique_ptr<S3SegmentStore>> store =
      S3SegmentStore::Open({.url = bucket.url(), .access_key = "ak", .secret_key = "sk"});
  ASSERT_TRUE(store.ok()) << store.status();
  const auto put = [&](int i) {
    const std::string bytes = "segment " + std::to_string(i);
    return (*store)->Put("cmp_1", crypto::Sha256Hex(bytes), bytes);
  };
  const int connections = static_cast<int>(S3SegmentStore::kBucketConnections);
  std::vector<std::thread> slow;
  std::atomic<int> stored{0};
  for (int i = 0; i < connections; ++i)
    slow.emplace_back([&, i] { stored += put(i).ok() ? 1 : 0; });
  // Not ASSERT: the threads must be joined however this goes.
  const bool all_waiting = bucket.AwaitWaiting(connections);
  EXPECT_TRUE(all_waiting) << "the PUTs went one at a time";
  if (all_waiting) {
    const Status busy = put(connections);
    EXPECT_EQ(busy.code(), StatusCode::kUnavailable) << busy;
    EXPECT_EQ(busy.reason(), "segment_store_unavailable");
    EXPECT_NE(busy.message().find("busy"), std::string::npos) << busy;
  }
  bucket.Release();
  for (std::thread& t : slow)
    t.join();
  EXPECT_EQ(stored.load(), connections);
  EXPECT_EQ(bucket.most_waiting(), connections);
  EXPECT_TRUE(put(connections).ok()) << "a connection is free again";
}

}  // namespace
}  // namespace s3_segment_store_test
}  // namespace expanse::server
