// The segment relay end to end in one process: a worker's ready segments relayed into the
// shared spool, and the controller's uploader taking them (and refusing hostile ones) to a real
// expanse-server.
#include "agent/segment_upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/segment_relay.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "core/test_temp_dir.h"
#include "crypto/password.h"
#include "net/http_client.h"
#include "server/server_app.h"

namespace expanse::agent {
namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

constexpr int64_t kStart = 1'800'000'000'000;

std::string Segment(const std::string& host, int pid, const std::string& kernel = "gemm") {
  return json{
      {"traceEvents", {{{"ph", "X"}, {"name", kernel}, {"pid", pid}, {"ts", 1.0}, {"dur", 2.0}}}},
      {"otherData",
       {{"format", "expanse-trace-segment/1"},
        {"job_id", "42"},
        {"host", host},
        {"pid", pid},
        {"uid", 1001},
        {"window_start_ms", kStart},
        {"window_end_ms", kStart + 10'000},
        {"trigger", {{"id", "42-1-GPU-a"}, {"reason", "gpu_idle"}}},
        {"events", 1}}}}
      .dump();
}

void Write(const std::string& path, const std::string& text) {
  stdfs::create_directories(stdfs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  if (!stdfs::exists(dir))
    return names;
  for (const auto& e : stdfs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

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

class SegmentUploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions options;
    options.db_path = dir_.path() + "/db.sqlite";
    options.control_listen = "127.0.0.1:0";
    options.control.password_cost = crypto::MinimumCost();
    options.control.control_plane_url = "http://127.0.0.1:1";
    options.control.data_plane_url = "http://127.0.0.1:2";
    options.control.daemon_version = "0.1.0";
    auto app = server::ServerApp::Create(options, server_clock_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = *std::move(app);
    ASSERT_TRUE(app_->Start().ok());
    base_url_ = "http://127.0.0.1:" + std::to_string(app_->control_port());
    auto client = net::HttpClient::Create({});
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    auto boot = app_->control().Bootstrap("acme", "Acme", "owner@acme.example", "pw", "t");
    ASSERT_TRUE(boot.ok()) << boot.status();
    const std::string api = boot->api_token;
    compute_ = Call("/api/v1/orgs/acme/computes", R"({"name":"c1","type":"slurm"})", api)["id"];
    const json token = Call("/api/v1/computes/" + compute_ + "/install-tokens", "", api);
    credential_ = Call("/cp/v1/install-tokens/exchange",
                       json{{"token", token["token"]},
                            {"hostname", "ctl01"},
                            {"daemon_version", "0.1.0"},
                            {"role", "controller"}}
                           .dump(),
                       "")["credential"];
    relay_root_ = dir_.path() + "/spool/segments";
  }
  void TearDown() override {
    if (app_)
      app_->Stop();
  }
  json Call(const std::string& path, const std::string& body, const std::string& bearer) {
    net::HttpRequest request{.method = "POST", .url = base_url_ + path, .body = body};
    request.headers = {{"Content-Type", "application/json"}};
    if (!bearer.empty())
      request.headers.emplace_back("Authorization", "Bearer " + bearer);
    Result<net::HttpResponse> r = client_->Send(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? json::parse(r->body, nullptr, false) : json();
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
  std::vector<store::TraceSegmentRecord> Stored() {
    auto listed = app_->store().Jobs().JobTraceSegments(compute_, "42", 0, 0, 100);
    EXPECT_TRUE(listed.ok()) << listed.status();
    return listed.ok() ? *listed : std::vector<store::TraceSegmentRecord>{};
  }

  testing::TempDir dir_;
  ManualClock server_clock_{kStart};
  ManualClock clock_{kStart};
  std::unique_ptr<server::ServerApp> app_;
  std::unique_ptr<net::HttpClient> client_;
  std::string base_url_, compute_, credential_, relay_root_;
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
}  // namespace expanse::agent
