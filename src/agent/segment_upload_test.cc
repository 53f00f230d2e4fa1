// The segment relay end to end in one process: a worker's ready segments relayed into the
// shared spool, and the controller's uploader taking them (and refusing hostile ones) to a real
// expanse-server.
#include "agent/segment_upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/segment_relay.h"
#include "agent/segment_test_server.h"
#include "core/file_util.h"
#include "net/http_client.h"

namespace expanse::agent {
namespace segment_upload_test {
namespace {

using nlohmann::json;
using namespace segment_testing;
namespace stdfs = std::filesystem;

TEST(SegmentRelayTest, MovesTheOldestReadySegmentPerFlushWhileThereIsRoom) {
  testing::TempDir dir;
  const std::string ready = dir.path() + "/ready", relay = dir.path() + "/spool/worker1";
  Write(ready + "/seg-42-worker1-7-2.json", Segment("worker1", 7));
  Write(ready + "/seg-42-worker1-7-1.json", Segment("worker1", 7, "older"));
  // The older one by its time, whatever the names say.
  const timespec times[2] = {{.tv_sec = 1000, .tv_nsec = 0}, {.tv_sec = 1000, .tv_nsec = 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (ready + "/seg-42-worker1-7-2.json").c_str(), times, 0), 0);
  Write(ready + "/.seg-42-worker1-7-3.json.tmp.x", "partial");  // never relayed
  SegmentRelay relay_one({.ready_dir = ready, .relay_dir = relay, .min_free_bytes = 0});
  relay_one.Flush();
  EXPECT_EQ(Names(relay), std::vector<std::string>{"seg-42-worker1-7-2.json"});
  EXPECT_EQ(*fs::ReadSmallFile(relay + "/seg-42-worker1-7-2.json", 1 << 20),
            std::optional<std::string>(Segment("worker1", 7)));
  struct stat st {};
  ASSERT_EQ(stat((relay + "/seg-42-worker1-7-2.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  relay_one.Flush();
  EXPECT_EQ(Names(relay).size(), 2u);
  EXPECT_EQ(Names(ready), std::vector<std::string>{".seg-42-worker1-7-3.json.tmp.x"});
  EXPECT_EQ(relay_one.stats().relayed, 2u);
}

TEST(SegmentRelayTest, AFullRelayDirectoryLeavesSegmentsWaiting) {
  testing::TempDir dir;
  const std::string ready = dir.path() + "/ready", relay = dir.path() + "/spool/worker1";
  Write(ready + "/seg-42-worker1-7-1.json", Segment("worker1", 7));
  Write(relay + "/seg-42-worker1-6-1.json", Segment("worker1", 6));  // not yet uploaded
  SegmentRelay relay_one(
      {.ready_dir = ready, .relay_dir = relay, .max_relay_bytes = 300, .min_free_bytes = 0});
  relay_one.Flush();
  EXPECT_EQ(Names(ready), std::vector<std::string>{"seg-42-worker1-7-1.json"});
  EXPECT_EQ(relay_one.stats().held_for_space, 1u);
  EXPECT_EQ(relay_one.stats().relayed, 0u);
  // No room on the file system either: it waits.
  SegmentRelay no_space(
      {.ready_dir = ready, .relay_dir = relay, .min_free_bytes = uint64_t{1} << 62});
  no_space.Flush();
  EXPECT_EQ(Names(ready), std::vector<std::string>{"seg-42-worker1-7-1.json"});
  EXPECT_EQ(no_space.stats().held_for_space, 1u);
}

class SegmentUploadTest : public SegmentServerTest {
 protected:
  void SetUp() override {
    SegmentServerTest::SetUp();
    relay_root_ = dir_.path() + "/spool/segments";
  }
  SegmentUploader Uploader() {
    return SegmentUploader(
        {.relay_root = relay_root_,
         .quarantine_dir = dir_.path() + "/state/segment-quarantine",
         .data_plane_url = base_url_,
         .expected_uid = geteuid(),
         .backoff_base_ms = 1000},
        *client_, [this] { return credential_; }, clock_);
  }

  std::string relay_root_;
};

TEST_F(SegmentUploadTest, RelayedSegmentsReachTheServerOnceAndHostileOnesAreQuarantined) {
  Write(relay_root_ + "/worker1/seg-42-worker1-7-1.json", Segment("worker1", 7));
  Write(relay_root_ + "/worker1/seg-42-worker1-8-1.json", "{not json");
  Write(relay_root_ + "/worker2/seg-42-worker2-9-1.json", Segment("worker1", 9));  // not its host
  stdfs::create_symlink("/etc/passwd", relay_root_ + "/worker2/seg-42-worker2-10-1.json");
  Write(relay_root_ + "/worker2/notes.txt", "not a segment");
  SegmentUploader uploader = Uploader();
  ASSERT_TRUE(uploader.RunOnce().ok());
  EXPECT_EQ(uploader.stats().uploaded, 1u);
  EXPECT_EQ(uploader.stats().refused, (std::map<std::string, uint64_t>{
                                          {"bad_segment", 1}, {"symlink", 1}, {"wrong_host", 1}}));
  EXPECT_TRUE(Names(relay_root_ + "/worker1").empty());
  EXPECT_EQ(Names(relay_root_ + "/worker2"), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(Names(relay_root_ + "/.quarantine").size(), 3u);
  std::vector<store::TraceSegmentRecord> stored = Stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].host, "worker1");
  EXPECT_EQ(stored[0].pid, 7);

  // Sent again (a controller killed after the upload, before the file went): kept once.
  Write(relay_root_ + "/worker1/seg-42-worker1-7-1.json", Segment("worker1", 7));
  ASSERT_TRUE(uploader.RunOnce().ok());
  EXPECT_EQ(uploader.stats().uploaded, 2u);
  EXPECT_EQ(uploader.stats().duplicates, 1u);
  EXPECT_EQ(Stored().size(), 1u);
  EXPECT_TRUE(Names(relay_root_ + "/worker1").empty());
}

TEST_F(SegmentUploadTest, AnAbsentServerLeavesTheSegmentForLaterAndARefusedCredentialStops) {
  Write(relay_root_ + "/worker1/seg-42-worker1-7-1.json", Segment("worker1", 7));
  app_->Stop();
  SegmentUploader uploader = Uploader();
  ASSERT_TRUE(uploader.RunOnce().ok());
  EXPECT_EQ(uploader.stats().retries, 1u);
  EXPECT_GT(uploader.stats().next_attempt_ms, kStart);
  EXPECT_FALSE(uploader.stats().last_error.empty());
  EXPECT_EQ(Names(relay_root_ + "/worker1"), std::vector<std::string>{"seg-42-worker1-7-1.json"});
  // While backing off, a pass sends nothing.
  ASSERT_TRUE(uploader.RunOnce().ok());
  EXPECT_EQ(uploader.stats().retries, 1u);
  app_.reset();

  // A server that no longer knows the credential: uploads stop, the segment stays.
  SetUp();
  Write(relay_root_ + "/worker1/seg-42-worker1-7-1.json", Segment("worker1", 7));
  credential_ = "exp_cc_not-a-credential";
  SegmentUploader refused = Uploader();
  EXPECT_EQ(refused.RunOnce().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Names(relay_root_ + "/worker1"), std::vector<std::string>{"seg-42-worker1-7-1.json"});
}

}  // namespace
}  // namespace segment_upload_test
}  // namespace expanse::agent
