#include "agent/burst_inbox.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace burst_inbox_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kNow = 1'800'000'000'000;

class BurstInboxTest : public ::testing::Test {
 protected:
  BurstInboxTest() {
    std::filesystem::create_directories(tmp_ / "control/w1");
    options_.control_root = tmp_ / "control";
    options_.hostname = "w1";
    options_.expected_uid = geteuid();
    options_.log = [this](const std::string& line) { log_.push_back(line); };
  }

  // A request of job `job` asked `age_ms` ago, written as the controller does.
  std::string Put(const std::string& job, int64_t age_ms, std::string nonce = "") {
    StackBurstRequest r{.job_id = job,
                        .slurm_job_id = 0,
                        .reason = "stuck",
                        .trigger_ms = clock_.NowMs() - age_ms + 7,
                        .since_ms = 1,
                        .nonce = nonce.empty() ? NewStackBurstNonce() : nonce};
    return tmp_.Write("control/w1/" + StackBurstFileName(r), EncodeStackBurstRequest(r));
  }

  std::vector<std::string> Jobs(const std::vector<StackBurstRequest>& requests) {
    std::vector<std::string> out;
    for (const StackBurstRequest& r : requests)
      out.push_back(r.job_id);
    return out;
  }

  size_t Entries() {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(tmp_ / "control/w1")) {
      (void)e;
      ++n;
    }
    return n;
  }

  expanse::testing::TempDir tmp_{"expanse_burst_inbox"};
  ManualClock clock_{kNow};
  BurstInboxOptions options_;
  std::vector<std::string> log_;
};

TEST_F(BurstInboxTest, TakesARequestOnceAndRemovesIt) {
  BurstInbox inbox(options_, clock_);
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  Put("77", 2000);
  const std::vector<StackBurstRequest> got = inbox.Poll();
  EXPECT_THAT(Jobs(got), ElementsAre("77"));
  EXPECT_EQ(Entries(), 0u);
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  EXPECT_EQ(inbox.accepted(), 1u);
  EXPECT_EQ(inbox.refused(), 0u);
}

TEST_F(BurstInboxTest, NoControlTreeIsNoRequest) {
  options_.control_root = tmp_ / "missing";
  BurstInbox inbox(options_, clock_);
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  EXPECT_EQ(inbox.refused(), 0u);
}

TEST_F(BurstInboxTest, HostileEntriesAreRefusedCountedAndRemoved) {
  BurstInbox inbox(options_, clock_);
  const std::string good = Put("77", 1000);
  // A link to the good request, a big file, garbage, a wrong name, a FIFO, a directory.
  ASSERT_EQ(::symlink(good.c_str(),
                      (tmp_ / "control/w1/burst-1800000000001-aaaaaaaaaaaaaaaa.json").c_str()),
            0);
  tmp_.Write("control/w1/burst-1800000000002-bbbbbbbbbbbbbbbb.json", std::string(5000, 'x'));
  tmp_.Write("control/w1/burst-1800000000003-cccccccccccccccc.json", "{\"version\":1,");
  tmp_.Write("control/w1/evil.sh", "rm -rf /");
  ASSERT_EQ(::mkfifo((tmp_ / "control/w1/burst-1800000000004-dddddddddddddddd.json").c_str(), 0644),
            0);
  std::filesystem::create_directory(tmp_ / "control/w1/burst-1800000000005-eeeeeeeeeeeeeeee.json");
  tmp_.Write("control/w1/.burst-1800000000006-ffffffffffffffff.json.tmp.abc", "partial");
  EXPECT_THAT(Jobs(inbox.Poll()), ElementsAre("77"));
  const auto& by = inbox.refused_by_reason();
  EXPECT_EQ(by.at("symlink"), 1u);
  EXPECT_EQ(by.at("too_large"), 1u);
  EXPECT_EQ(by.at("invalid_json"), 1u);
  EXPECT_EQ(by.at("bad_name"), 1u);
  EXPECT_EQ(by.at("not_regular"), 2u);
  EXPECT_EQ(inbox.refused(), 6u);
  EXPECT_EQ(Entries(), 1u);  // only the writer's temporary is left alone
  EXPECT_FALSE(log_.empty());
}

// A request of bytes that are not UTF-8 is refused with a printable message, and the inbox's
// statistics (which go into the health report as JSON) still serialise.
TEST_F(BurstInboxTest, ARequestThatIsNotUtf8IsRefusedPrintably) {
  BurstInbox inbox(options_, clock_);
  tmp_.Write("control/w1/burst-1800000000007-aaaaaaaaaaaaaaaa.json",
             std::string("{\"job_id\":\xff\xfe\xc3(") + std::string(50, '\x80'));
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  EXPECT_EQ(inbox.refused_by_reason().at("invalid_json"), 1u);
  const nlohmann::json stats = inbox.Stats();
  const std::string problem = stats.at("last_problem").get<std::string>();
  EXPECT_THAT(problem, ::testing::HasSubstr("\\xFF"));
  for (const char c : problem)
    EXPECT_TRUE(c >= 0x20 && c < 0x7F) << problem;
  EXPECT_NO_THROW(stats.dump());
  ASSERT_FALSE(log_.empty());
  EXPECT_THAT(log_.back(), ::testing::HasSubstr("not valid JSON"));
  EXPECT_EQ(Entries(), 0u);
}

TEST_F(BurstInboxTest, OnlyTheDaemonAccountsFilesCount) {
  options_.expected_uid = geteuid() + 1;
  BurstInbox inbox(options_, clock_);
  Put("77", 1000);
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  // The directory itself is not the daemon account's (here: the test's own uid is not).
  EXPECT_EQ(inbox.refused_by_reason().at("wrong_owner"), 1u);
}

TEST_F(BurstInboxTest, StaleFutureAndRepeatedRequestsAreRefused) {
  BurstInbox inbox(options_, clock_);
  Put("1", 121'000);
  Put("2", -61'000);
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  EXPECT_EQ(inbox.refused_by_reason().at("stale"), 1u);
  EXPECT_EQ(inbox.refused_by_reason().at("future"), 1u);
  Put("3", 1000, "1111111111111111");
  EXPECT_THAT(Jobs(inbox.Poll()), ElementsAre("3"));
  clock_.Advance(61'000);
  Put("4", 1000, "1111111111111111");  // a replayed nonce
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  EXPECT_EQ(inbox.refused_by_reason().at("duplicate"), 1u);
}

TEST_F(BurstInboxTest, RateLimitedPerJobAndPerNode) {
  BurstInbox inbox(options_, clock_);
  Put("77", 1000);
  EXPECT_EQ(inbox.Poll().size(), 1u);
  clock_.Advance(30'000);
  Put("77", 1000);  // the same job again within a minute
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  EXPECT_EQ(inbox.refused_by_reason().at("rate_limited"), 1u);
  // Node-wide: at most 6 in 10 minutes, whatever the jobs.
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(1000);
    Put(std::to_string(100 + i), 500);
  }
  EXPECT_EQ(inbox.Poll().size(), 5u);
  EXPECT_EQ(inbox.refused_by_reason().at("rate_limited"), 6u);
  EXPECT_EQ(Entries(), 0u);
}

TEST_F(BurstInboxTest, AFloodIsReadAFewFilesAPoll) {
  BurstInbox inbox(options_, clock_);
  for (int i = 0; i < 40; ++i)
    tmp_.Write("control/w1/junk-" + std::to_string(i), "x");
  EXPECT_THAT(inbox.Poll(), IsEmpty());
  EXPECT_EQ(inbox.refused(), 16u);
  EXPECT_EQ(Entries(), 24u);
}

// A request the sampler could not carry out (the job has no process here) is a refusal, not an
// acceptance, and leaves the job's and the node's burst budget as it was.
TEST_F(BurstInboxTest, ARequestNotCarriedOutUsesNoBudget) {
  options_.max_bursts_per_window = 1;
  BurstInbox inbox(options_, clock_);
  Put("77", 500);
  std::vector<StackBurstRequest> got = inbox.Poll();
  ASSERT_EQ(got.size(), 1u);
  inbox.NoteNotCarriedOut(got[0], "job_not_here");
  EXPECT_EQ(inbox.accepted(), 0u);
  EXPECT_EQ(inbox.refused_by_reason().at("job_not_here"), 1u);
  EXPECT_EQ(inbox.Stats()["refused"], 1u);
  // The same job asks again at once: neither the per-job gap nor the node's limit of one
  // burst a window stops it.
  Put("77", 400);
  EXPECT_THAT(Jobs(inbox.Poll()), ElementsAre("77"));
  EXPECT_EQ(inbox.accepted(), 1u);
}

}  // namespace
}  // namespace burst_inbox_test
}  // namespace expanse::agent
