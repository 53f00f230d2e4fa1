// The direct transport of trace segments in one process: a worker's SegmentDirect asks for a
// grant through the shared spool, the controller's SegmentGrantIssuer obtains it from a real
// expanse-server, and the worker sends the segment with it; auto turns to the relay when no
// grant comes or the data plane cannot be reached; hostile grant files and requests are refused.
#include "agent/segment_direct.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/segment_grant_files.h"
#include "agent/segment_grant_issuer.h"
#include "agent/segment_test_server.h"
#include "core/file_util.h"
#include "crypto/hash.h"
#include "net/http_client.h"

namespace expanse::agent {
namespace segment_direct_test {
namespace {

using nlohmann::json;
using namespace segment_testing;
namespace stdfs = std::filesystem;

TEST(SegmentGrantFilesTest, NamesAndDocumentsRoundTripAndRefuseAnythingElse) {
  const std::string sha(64, 'a');
  EXPECT_EQ(SegmentGrantRequestName({sha, 1234}), "request-" + sha + "-1234");
  const auto parsed = ParseSegmentGrantRequestName("request-" + sha + "-1234");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->sha256, sha);
  EXPECT_EQ(parsed->bytes, 1234u);
  for (const std::string& bad : std::vector<std::string>{
           "request-" + sha, "request-" + sha + "-", "request-" + sha + "-0",
           "request-" + sha + "-01", "request-" + sha + "-99999999999",
           "request-" + std::string(64, 'A') + "-5", "request-" + sha.substr(1) + "-5",
           "request-" + sha + "-5x", ".request-" + sha + "-5"}) {
    EXPECT_FALSE(ParseSegmentGrantRequestName(bad).has_value()) << bad;
  }
  EXPECT_TRUE(IsSegmentGrantFileName("grant-" + sha + ".json"));
  EXPECT_FALSE(IsSegmentGrantFileName("grant-" + sha + ".json.tmp"));

  const SegmentGrantFile file{"exp_sg_abc.def", "https://dp.example/dp/v1/segments", kStart};
  Result<SegmentGrantFile> back = DecodeSegmentGrantFile(EncodeSegmentGrantFile(file));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->grant, file.grant);
  EXPECT_EQ(back->upload_url, file.upload_url);
  EXPECT_EQ(back->expires_at_ms, kStart);
  for (const std::string& bad : std::vector<std::string>{
           std::string("{"), std::string("[]"),
           std::string(R"({"grant":"exp_cc_x","upload_url":"https://a/b","expires_at_ms":1})"),
           std::string(R"({"grant":"exp_sg_x y","upload_url":"https://a/b","expires_at_ms":1})"),
           std::string(
               R"({"grant":"exp_sg_x","upload_url":"http://dp.example/b","expires_at_ms":1})"),
           std::string(R"({"grant":"exp_sg_x","upload_url":"https://a/b","expires_at_ms":"1"})"),
           std::string(
               R"({"grant":"exp_sg_x","upload_url":"https://a/b","expires_at_ms":1,"x":[[[1]]]})"),
           std::string(5000, ' ')}) {
    Result<SegmentGrantFile> refused = DecodeSegmentGrantFile(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().reason(), "bad_grant_file");
  }
}

// The server's answer to a grant request is read without throwing: a wrongly typed member used
// to end the controller daemon (nlohmann's value() throws type_error on the upload thread).
TEST(SegmentGrantFilesTest, TheServersGrantAnswerIsReadAsHostileInput) {
  const std::string fallback = "https://dp.example/dp/v1/segments";
  Result<SegmentGrantFile> file = GrantFileFromAnswer(
      R"({"grant":"exp_sg_abc","expires_at_ms":1700000000000,"upload_url":"https://up.example/s"})",
      fallback);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->grant, "exp_sg_abc");
  EXPECT_EQ(file->expires_at_ms, 1'700'000'000'000);
  EXPECT_EQ(file->upload_url, "https://up.example/s");
  for (const char* relative : {R"("upload_url":"/dp/v1/segments",)", ""}) {
    file = GrantFileFromAnswer(
        std::string(R"({"grant":"exp_sg_abc",)") + relative + R"("expires_at_ms":5})", fallback);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->upload_url, fallback) << "a bare path or none: where the controller sends";
  }
  for (const std::string& bad : std::vector<std::string>{
           R"({"grant":7,"expires_at_ms":5})", R"({"grant":["exp_sg_a"],"expires_at_ms":5})",
           R"({"grant":"exp_sg_a","expires_at_ms":"5"})",
           R"({"grant":"exp_sg_a","expires_at_ms":1.5e300})",
           R"({"grant":"exp_sg_a","expires_at_ms":-1})",
           R"({"grant":"exp_sg_a","expires_at_ms":18446744073709551615})",
           R"({"grant":"exp_sg_a","expires_at_ms":5,"upload_url":{"a":1}})",
           R"({"grant":"exp_sg_a","expires_at_ms":5,"upload_url":"http://far.example/s"})",
           R"({"grant":"exp_cc_a","expires_at_ms":5})", R"({"expires_at_ms":5})", "[1]", "null",
           "{", std::string(5000, ' ')}) {
    Result<SegmentGrantFile> refused = GrantFileFromAnswer(bad, fallback);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().reason(), "bad_grant_answer") << bad;
    EXPECT_EQ(refused.status().message().rfind("the server's segment grant answer: ", 0), 0u)
        << refused.status();
  }
}

class SegmentDirectTest : public SegmentServerTest {
 protected:
  void SetUp() override {
    SegmentServerTest::SetUp();
    ready_ = dir_.path() + "/worker1/control/capture-ready";
    grant_root_ = dir_.path() + "/spool/segment-grants";
  }
  std::unique_ptr<SegmentDirect> Direct(bool may_relay) {
    return std::make_unique<SegmentDirect>(
        SegmentDirectOptions{.may_relay = may_relay,
                             .ready_dir = ready_,
                             .grant_dir = grant_root_ + "/worker1",
                             .quarantine_dir = dir_.path() + "/worker1/control/segment-quarantine",
                             .expected_uid = geteuid(),
                             .grant_wait_ms = 30'000,
                             .backoff_base_ms = 1000},
        clock_);
  }
  std::unique_ptr<SegmentGrantIssuer> Issuer() {
    return std::make_unique<SegmentGrantIssuer>(
        SegmentGrantIssuerOptions{.grant_root = grant_root_,
                                  .data_plane_url = base_url_,
                                  .expected_uid = geteuid(),
                                  .min_pass_interval_ms = 0},
        *client_, [this] { return credential_; }, clock_);
  }
  // The step after a send: waits for its answer and lets the worker handle it.
  SegmentDirect::Next Answered(SegmentDirect& direct) {
    direct.WaitForSend();
    return direct.Flush();
  }
  std::string GrantDir() const { return grant_root_ + "/worker1"; }

  std::string ready_, grant_root_;
};

TEST_F(SegmentDirectTest, AGrantedSegmentGoesStraightToTheServerOnce) {
  const std::string segment = Segment("worker1", 7);
  const std::string sha = crypto::Sha256Hex(segment);
  Write(ready_ + "/seg-42-worker1-7-1.json", segment);
  auto direct = Direct(/*may_relay=*/false);
  auto issuer = Issuer();

  // 1. The worker asks.
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Names(GrantDir()),
            std::vector<std::string>{"request-" + sha + "-" + std::to_string(segment.size())});
  EXPECT_EQ(direct->stats().requested, 1u);
  // 2. The controller answers.
  ASSERT_TRUE(issuer->RunOnce().ok());
  EXPECT_EQ(issuer->stats().issued, 1u);
  EXPECT_EQ(Names(GrantDir()), std::vector<std::string>{"grant-" + sha + ".json"});
  struct stat st {};
  ASSERT_EQ(stat((GrantDir() + "/grant-" + sha + ".json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // 3. The worker sends, off its thread, and cleans up after the 200.
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Answered(*direct), SegmentDirect::Next::kIdle);
  EXPECT_EQ(direct->stats().uploaded, 1u);
  EXPECT_EQ(direct->stats().bytes, segment.size());
  EXPECT_TRUE(Names(ready_).empty());
  EXPECT_TRUE(Names(GrantDir()).empty());
  std::vector<store::TraceSegmentRecord> stored = Stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].host, "worker1");
  EXPECT_EQ(stored[0].sha256, sha);

  // The same segment again (a sampler killed after its send, before the file went): once.
  Write(ready_ + "/seg-42-worker1-7-1.json", segment);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  ASSERT_TRUE(issuer->RunOnce().ok());
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Answered(*direct), SegmentDirect::Next::kIdle);
  EXPECT_EQ(direct->stats().duplicates, 1u);
  EXPECT_EQ(Stored().size(), 1u);
}

TEST_F(SegmentDirectTest, AutoRelaysWhenNoGrantComesAndTriesDirectAgainLater) {
  Write(ready_ + "/seg-42-worker1-7-1.json", Segment("worker1", 7));
  auto direct = Direct(/*may_relay=*/true);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Names(GrantDir()).size(), 1u);
  clock_.Advance(10'000);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);  // still waiting
  clock_.Advance(25'000);                                  // no controller answered
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kRelay);
  EXPECT_EQ(direct->stats().fallbacks, 1u);
  EXPECT_NE(direct->stats().last_error.find("no segment grant within 30 s"), std::string::npos);
  EXPECT_TRUE(Names(GrantDir()).empty());  // the request went with it
  // Relay for ten minutes, then direct again.
  clock_.Advance(5 * 60'000);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kRelay);
  clock_.Advance(6 * 60'000);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(direct->stats().requested, 2u);
}

TEST_F(SegmentDirectTest, DirectNeverRelaysAndAsksAgain) {
  Write(ready_ + "/seg-42-worker1-7-1.json", Segment("worker1", 7));
  auto direct = Direct(/*may_relay=*/false);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  const std::vector<std::string> asked = Names(GrantDir());
  ASSERT_EQ(asked.size(), 1u);
  stdfs::remove(GrantDir() + "/" + asked[0]);  // taken by a controller that then died
  clock_.Advance(6 * 60'000);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(direct->stats().requested, 2u);
  EXPECT_EQ(Names(GrantDir()), asked);
  EXPECT_EQ(direct->stats().fallbacks, 0u);
}

TEST_F(SegmentDirectTest, AnUnreachableDataPlaneTurnsAutoToTheRelayAndDirectToRetries) {
  const std::string segment = Segment("worker1", 7);
  const std::string sha = crypto::Sha256Hex(segment);
  Write(ready_ + "/seg-42-worker1-7-1.json", segment);
  const std::string nowhere = EncodeSegmentGrantFile(
      {"exp_sg_00.00", "http://127.0.0.1:1/dp/v1/segments", kStart + 15 * 60'000});
  for (bool may_relay : {true, false}) {
    SCOPED_TRACE(may_relay ? "auto" : "direct");
    auto direct = Direct(may_relay);
    EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);  // asks
    Write(GrantDir() + "/grant-" + sha + ".json", nowhere);
    EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);  // sends
    direct->WaitForSend();
    if (may_relay) {
      EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kRelay);
      EXPECT_EQ(direct->stats().fallbacks, 1u);
    } else {
      EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
      EXPECT_EQ(direct->stats().retries, 1u);
      EXPECT_EQ(direct->stats().fallbacks, 0u);
    }
    EXPECT_FALSE(direct->stats().last_error.empty());
    EXPECT_EQ(Names(ready_).size(), 1u);  // nothing lost
    stdfs::remove_all(GrantDir());
  }
}

TEST_F(SegmentDirectTest, AnExpiredGrantIsRenewedAndAForgedOneNeverAdmitsAnything) {
  const std::string segment = Segment("worker1", 7);
  const std::string sha = crypto::Sha256Hex(segment);
  Write(ready_ + "/seg-42-worker1-7-1.json", segment);
  auto direct = Direct(/*may_relay=*/false);
  auto issuer = Issuer();
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  ASSERT_TRUE(issuer->RunOnce().ok());
  // The server's clock runs past the grant's 15 minutes (the worker's does not know).
  server_clock_.Advance(16 * 60'000);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Answered(*direct), SegmentDirect::Next::kBusy);  // grant_expired: asks again
  EXPECT_EQ(direct->stats().requested, 2u);
  ASSERT_TRUE(issuer->RunOnce().ok());
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Answered(*direct), SegmentDirect::Next::kIdle);
  EXPECT_EQ(direct->stats().uploaded, 1u);

  // A grant made up on the shared mount: refused by the server, nothing stored.
  const std::string other = Segment("worker1", 8);
  const std::string other_sha = crypto::Sha256Hex(other);
  Write(ready_ + "/seg-42-worker1-8-1.json", other);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  Write(GrantDir() + "/grant-" + other_sha + ".json",
        EncodeSegmentGrantFile(
            {"exp_sg_7b7d.00", base_url_ + "/dp/v1/segments", clock_.NowMs() + 60'000}));
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Answered(*direct), SegmentDirect::Next::kBusy);
  EXPECT_NE(direct->stats().last_error.find("grant_invalid"), std::string::npos)
      << direct->stats().last_error;
  EXPECT_EQ(Stored().size(), 1u);
  EXPECT_EQ(Names(ready_).size(), 1u);
}

TEST_F(SegmentDirectTest, ASegmentThatDoesNotMatchItsGrantIsQuarantined) {
  // The file names another host than the directory it is granted for.
  const std::string segment = Segment("worker2", 7);
  Write(ready_ + "/seg-42-worker2-7-1.json", segment);
  auto direct = Direct(/*may_relay=*/true);
  auto issuer = Issuer();
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  ASSERT_TRUE(issuer->RunOnce().ok());
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(Answered(*direct), SegmentDirect::Next::kIdle);
  EXPECT_EQ(direct->stats().refused, (std::map<std::string, uint64_t>{{"grant_mismatch", 1}}));
  EXPECT_EQ(Names(dir_.path() + "/worker1/control/segment-quarantine"),
            std::vector<std::string>{"seg-42-worker2-7-1.json.grant_mismatch"});
  EXPECT_TRUE(Stored().empty());
}

TEST_F(SegmentDirectTest, HostileGrantFilesAndRequestsAreRefused) {
  const std::string segment = Segment("worker1", 7);
  const std::string sha = crypto::Sha256Hex(segment);
  Write(ready_ + "/seg-42-worker1-7-1.json", segment);
  auto direct = Direct(/*may_relay=*/false);
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  // A link where the grant goes, then a grant that is not one: each dropped, asked again.
  stdfs::remove(GrantDir() + "/request-" + sha + "-" + std::to_string(segment.size()));
  stdfs::create_symlink("/etc/passwd", GrantDir() + "/grant-" + sha + ".json");
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  Write(GrantDir() + "/grant-" + sha + ".json", R"({"grant": "exp_cc_stolen"})");
  EXPECT_EQ(direct->Flush(), SegmentDirect::Next::kBusy);
  EXPECT_EQ(direct->stats().refused,
            (std::map<std::string, uint64_t>{{"bad_grant_file", 1}, {"grant_symlink", 1}}));
  EXPECT_EQ(direct->stats().requested, 3u);

  // The controller's side: names it cannot parse, links and directories are removed unanswered.
  const std::string host2 = grant_root_ + "/worker2";
  Write(host2 + "/request-nothex-5", "");
  stdfs::create_symlink("/etc/passwd", host2 + "/request-" + std::string(64, 'b') + "-5");
  stdfs::create_directories(host2 + "/request-" + std::string(64, 'c') + "-5");
  Write(host2 + "/.request-tmp", "");  // a writer's temporary: left alone
  auto issuer = Issuer();
  ASSERT_TRUE(issuer->RunOnce().ok());
  EXPECT_EQ(issuer->stats().refused,
            (std::map<std::string, uint64_t>{{"bad_name", 1}, {"not_regular", 1}, {"symlink", 1}}));
  EXPECT_EQ(issuer->stats().issued, 1u);  // worker1's real request
  const std::vector<std::string> left = {".request-tmp", "request-" + std::string(64, 'c') + "-5"};
  EXPECT_EQ(Names(host2), left);
  // A grant nobody took goes after an hour.
  clock_.Advance(61 * 60'000);
  const std::string grant = GrantDir() + "/grant-" + sha + ".json";
  const timespec old[2] = {{.tv_sec = kStart / 1000, .tv_nsec = 0},
                           {.tv_sec = kStart / 1000, .tv_nsec = 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, grant.c_str(), old, 0), 0);
  ASSERT_TRUE(issuer->RunOnce().ok());
  EXPECT_EQ(issuer->stats().stale_removed, 1u);
  EXPECT_FALSE(stdfs::exists(grant));
}

}  // namespace
}  // namespace segment_direct_test
}  // namespace expanse::agent
