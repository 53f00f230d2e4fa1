// Trace segments end to end: sent by a compute's daemon to the data plane, listed and downloaded
// through the console API, expired by retention.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "crypto/hash.h"
#include "server/api_test_util.h"

namespace expanse::server {
namespace api_segments_test {
namespace {

using nlohmann::json;

json Segment(const std::string& job, const std::string& host, int pid, int64_t start_ms,
             const std::string& kernel = "_Z4gemmv") {
  return api_testing::TraceSegment(job, host, pid, start_ms, kernel);
}

class ApiSegmentsTest : public api_testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    compute_ = NewCompute(token_);
    credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");
  }
  Reply Send(const std::string& body) {
    return Call("POST", "/dp/v1/segments", body, Bearer(credential_));
  }
  Reply List(const std::string& job = "77") {
    return Call("GET", "/api/v1/computes/" + compute_ + "/jobs/" + job + "/segments", "",
                Bearer(token_));
  }
  std::string SegmentFile(const std::string& sha) {
    return (dir_ / "db.sqlite.segments" / compute_ / sha.substr(0, 2) / (sha + ".json")).string();
  }
  std::string compute_;
  std::string credential_;
};

TEST_F(ApiSegmentsTest, ASegmentSentTwiceIsKeptOnceListedAndDownloadedAsSent) {
  const std::string text = Segment("77", "worker1", 101, api_testing::kStart).dump();
  const std::string sha = crypto::Sha256Hex(text);
  Reply sent = Send(text);
  ASSERT_EQ(sent.status, 200) << sent.body;
  EXPECT_EQ(sent.body, (json{{"sha256", sha}, {"duplicate", false}, {"bytes", text.size()}}));
  // A retry after a lost answer, or the same segment by the other transport.
  clock_.Advance(1000);
  Reply again = Send(text);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.body["duplicate"], true);
  ASSERT_TRUE(Send(Segment("77", "worker2", 202, api_testing::kStart - 5000).dump()).status == 200);
  ASSERT_TRUE(Send(Segment("78", "worker1", 101, api_testing::kStart).dump()).status == 200);

  Reply listed = List();
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.body["segments"].size(), 2u) << listed.body;
  EXPECT_EQ(listed.body["truncated"], false);
  EXPECT_EQ(listed.body["segments"][0]["host"], "worker2");  // the older window first
  const json& first = listed.body["segments"][1];
  EXPECT_EQ(first["sha256"], sha);
  EXPECT_EQ(first["pid"], 101);
  EXPECT_EQ(first["window_start_ms"], api_testing::kStart);
  EXPECT_EQ(first["window_end_ms"], api_testing::kStart + 10'000);
  EXPECT_EQ(first["trigger_reason"], "gpu_idle");
  EXPECT_EQ(first["trigger_id"], "77-1-GPU-a");
  EXPECT_EQ(first["bytes"], text.size());
  EXPECT_EQ(first["events"], 1);
  EXPECT_EQ(first["received_ms"], api_testing::kStart);  // the first arrival's
  const std::string download = first["download"];
  EXPECT_EQ(download, "/api/v1/computes/" + compute_ + "/jobs/77/segments/" + sha);

  Reply got = Call("GET", download, "", Bearer(token_));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body.dump(), text);
  EXPECT_EQ(got.headers.find("Content-Disposition")->second,
            "attachment; filename=\"seg-77-worker1-101-" + std::to_string(api_testing::kStart) +
                ".json\"");
  // The list names the file as the download does: the console's link keeps that name.
  EXPECT_EQ(first["file_name"],
            "seg-77-worker1-101-" + std::to_string(api_testing::kStart) + ".json");
  EXPECT_TRUE(std::filesystem::exists(SegmentFile(sha)));
  EXPECT_EQ(std::filesystem::status(SegmentFile(sha)).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// Job ids and a relayed segment's host are a worker's text: the download link keeps the job id
// one path segment, and the file name cannot close its quotes and name another file.
TEST_F(ApiSegmentsTest, AHostileJobIdOrHostCannotBendTheDownload) {
  const std::string host = "x\"; filename*=UTF-8''evil.html; a=";
  const std::string text = Segment("7?x", host, 101, api_testing::kStart).dump();
  Reply sent = Send(text);
  ASSERT_EQ(sent.status, 200) << sent.body;
  Reply listed = List("7%3Fx");
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.body["segments"].size(), 1u) << listed.body;
  const std::string download = listed.body["segments"][0]["download"];
  EXPECT_EQ(download,
            "/api/v1/computes/" + compute_ + "/jobs/7%3Fx/segments/" + crypto::Sha256Hex(text));
  Reply got = Call("GET", download, "", Bearer(token_));
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body.dump(), text);
  EXPECT_EQ(got.headers.find("Content-Disposition")->second,
            "attachment; filename=\"seg-7_x-x___filename__UTF-8__evil.html__a_-101-" +
                std::to_string(api_testing::kStart) + ".json\"");
}

TEST_F(ApiSegmentsTest, TheListBriefsEachWindowsPcSampling) {
  json sampled = Segment("77", "worker1", 101, api_testing::kStart);
  sampled["otherData"]["pc_sampling"] = {
      {"state", "sampled"},
      {"total_samples", 860},
      {"dropped_samples", 0},
      {"stall_reasons",
       {{"smsp__pcsamp_warps_issue_stalled_long_scoreboard", 700},
        {"smsp__pcsamp_warps_issue_stalled_selected", 160}}},
      {"functions",
       {{{"name", "_Z4gemmv"},
         {"samples", 800},
         {"stall_reasons", {{"smsp__pcsamp_warps_issue_stalled_long_scoreboard", 700}}},
         {"pcs", json::array()}}}}};
  json restricted = Segment("77", "worker2", 202, api_testing::kStart + 20'000);
  restricted["otherData"]["pc_sampling"] = {{"state", "restricted"},
                                            {"reason", "RmProfilingAdminOnly=1"}};
  ASSERT_EQ(Send(sampled.dump()).status, 200);
  ASSERT_EQ(Send(restricted.dump()).status, 200);
  ASSERT_EQ(Send(Segment("77", "worker3", 303, api_testing::kStart + 40'000).dump()).status, 200);
  json bad = Segment("77", "worker4", 404, api_testing::kStart);
  bad["otherData"]["pc_sampling"] = {{"state", "sampled"}, {"functions", "gemm"}};
  Reply refused = Send(bad.dump());
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(Code(refused), "bad_segment") << refused.body;

  Reply listed = List();
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.body["segments"].size(), 3u) << listed.body;
  EXPECT_EQ(listed.body["segments"][0]["pc_sampling"],
            json::parse(R"({"state": "sampled", "total_samples": 860, "dropped_samples": 0,
              "stall_reasons": [["smsp__pcsamp_warps_issue_stalled_long_scoreboard", 700],
                                ["smsp__pcsamp_warps_issue_stalled_selected", 160]],
              "functions": [{"name": "_Z4gemmv", "samples": 800,
                             "stall": "smsp__pcsamp_warps_issue_stalled_long_scoreboard"}]})"));
  EXPECT_EQ(listed.body["segments"][1]["pc_sampling"],
            (json{{"state", "restricted"}, {"reason", "RmProfilingAdminOnly=1"}}));
  EXPECT_FALSE(listed.body["segments"][2].contains("pc_sampling")) << "a window without it";
}

TEST_F(ApiSegmentsTest, WhatIsNotASegmentIsRefusedAndNothingIsKept) {
  json no_header = Segment("77", "worker1", 101, api_testing::kStart);
  no_header.erase("otherData");
  json wrong_format = Segment("77", "worker1", 101, api_testing::kStart);
  wrong_format["otherData"]["format"] = "expanse-trace-segment/9";
  json long_window = Segment("77", "worker1", 101, api_testing::kStart);
  long_window["otherData"]["window_end_ms"] = api_testing::kStart + 600'001;
  for (const std::string& body :
       {std::string("not json"), no_header.dump(), wrong_format.dump(), long_window.dump()}) {
    Reply r = Send(body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(Code(r), "bad_segment") << r.body;
  }
  // Not the daemon's credential: refused before anything is read.
  Reply anonymous = Call("POST", "/dp/v1/segments",
                         Segment("77", "worker1", 101, api_testing::kStart).dump(), {});
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(List().body["segments"], json::array());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "db.sqlite.segments" / compute_));
}

TEST_F(ApiSegmentsTest, ASegmentIsReadOnlyThroughItsOwnJobAndCompute) {
  const std::string text = Segment("77", "worker1", 101, api_testing::kStart).dump();
  const std::string sha = crypto::Sha256Hex(text);
  ASSERT_EQ(Send(text).status, 200);
  Reply other_job =
      Call("GET", "/api/v1/computes/" + compute_ + "/jobs/78/segments/" + sha, "", Bearer(token_));
  EXPECT_EQ(other_job.status, 404) << other_job.body;
  Reply bad_name = Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/segments/not-a-sha", "",
                        Bearer(token_));
  EXPECT_EQ(bad_name.status, 400) << bad_name.body;
  Reply unknown =
      Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/segments/" + std::string(64, 'a'), "",
           Bearer(token_));
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  Reply anonymous =
      Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/segments/" + sha, "", {});
  EXPECT_EQ(anonymous.status, 401) << anonymous.body;
  // Its file changed on disk: refused, and the answer names no path of the server's.
  {
    std::ofstream changed(SegmentFile(sha), std::ios::trunc);
    changed << text.substr(0, text.size() - 1) << ' ';
  }
  Reply damaged =
      Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/segments/" + sha, "", Bearer(token_));
  EXPECT_EQ(damaged.status, 500) << damaged.body;
  EXPECT_EQ(Code(damaged), "segment_bytes_changed") << damaged.body;
  EXPECT_EQ(damaged.body.dump().find(dir_.string()), std::string::npos) << damaged.body;
  // Listed, but its bytes lost (a disk replaced): said so, not served empty.
  std::filesystem::remove(SegmentFile(sha));
  Reply gone =
      Call("GET", "/api/v1/computes/" + compute_ + "/jobs/77/segments/" + sha, "", Bearer(token_));
  EXPECT_EQ(gone.status, 404) << gone.body;
  EXPECT_EQ(Code(gone), "segment_bytes_missing") << gone.body;
}

TEST_F(ApiSegmentsTest, RetentionForgetsOldSegmentsAndRemovesTheirBytes) {
  const std::string old_text = Segment("77", "worker1", 101, api_testing::kStart).dump();
  ASSERT_EQ(Send(old_text).status, 200);
  clock_.Advance(int64_t{20} * 24 * 3600 * 1000);
  const std::string new_text = Segment("77", "worker1", 102, api_testing::kStart).dump();
  ASSERT_EQ(Send(new_text).status, 200);
  clock_.Advance(int64_t{11} * 24 * 3600 * 1000);  // the first is 31 days old, the second 11
  Result<int64_t> expired = app_->ExpireSegmentsOnce(clock_.NowMs());
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(*expired, 1);  // fewer than a batch: serve.cc's retention thread stops there
  Reply listed = List();
  ASSERT_EQ(listed.body["segments"].size(), 1u) << listed.body;
  EXPECT_EQ(listed.body["segments"][0]["pid"], 102);
  EXPECT_FALSE(std::filesystem::exists(SegmentFile(crypto::Sha256Hex(old_text))));
  EXPECT_TRUE(std::filesystem::exists(SegmentFile(crypto::Sha256Hex(new_text))));
}

TEST_F(ApiSegmentsTest, AGrantAdmitsExactlyTheSegmentItNamesFromTheWorkerWithoutACredential) {
  const std::string text = Segment("77", "worker1", 101, api_testing::kStart).dump();
  const std::string sha = crypto::Sha256Hex(text);
  const auto ask = [&](const std::string& host, const std::string& s, size_t size) {
    return Call("POST", "/dp/v1/segment-grants",
                json{{"host", host}, {"sha256", s}, {"bytes", size}}.dump(), Bearer(credential_));
  };
  Reply granted = ask("worker1", sha, text.size());
  ASSERT_EQ(granted.status, 201) << granted.body;
  const std::string grant = granted.body["grant"];
  EXPECT_EQ(grant.rfind("exp_sg_", 0), 0u);
  EXPECT_EQ(granted.body["expires_at_ms"], api_testing::kStart + 15 * 60 * 1000);
  EXPECT_EQ(granted.body["upload_url"], "http://127.0.0.1:2/dp/v1/segments");

  // Bytes that are not the grant's are refused before they are parsed (a grant is not a
  // secret: no one may make the server parse a document of their own with it).
  Reply unparsed = Call("POST", "/dp/v1/segments", std::string(1000, '['), Bearer(grant));
  EXPECT_EQ(unparsed.status, 403) << unparsed.body;
  EXPECT_EQ(Code(unparsed), "grant_mismatch");
  // Other bytes, or the same bytes naming another host, are not what the grant names.
  Reply other = Call("POST", "/dp/v1/segments",
                     Segment("77", "worker1", 102, api_testing::kStart).dump(), Bearer(grant));
  EXPECT_EQ(other.status, 403) << other.body;
  EXPECT_EQ(Code(other), "grant_mismatch");
  Reply for_worker2 = ask("worker2", sha, text.size());
  Reply wrong_host = Call("POST", "/dp/v1/segments", text, Bearer(for_worker2.body["grant"]));
  EXPECT_EQ(wrong_host.status, 403) << wrong_host.body;
  // A grant changed by a byte is no grant.
  std::string tampered = grant;
  tampered[10] = tampered[10] == '0' ? '1' : '0';
  Reply forged = Call("POST", "/dp/v1/segments", text, Bearer(tampered));
  EXPECT_EQ(forged.status, 401) << forged.body;
  EXPECT_EQ(Code(forged), "grant_invalid");
  EXPECT_EQ(List().body["segments"], json::array());

  Reply sent = Call("POST", "/dp/v1/segments", text, Bearer(grant));
  ASSERT_EQ(sent.status, 200) << sent.body;
  EXPECT_EQ(sent.body["sha256"], sha);
  ASSERT_EQ(List().body["segments"].size(), 1u);
  EXPECT_EQ(List().body["segments"][0]["host"], "worker1");

  // Expired, then voided with the credential that asked for it.
  clock_.Advance(15 * 60 * 1000);
  Reply expired = Call("POST", "/dp/v1/segments", text, Bearer(grant));
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(Code(expired), "grant_expired");
  Reply fresh = ask("worker1", sha, text.size());
  ASSERT_EQ(fresh.status, 201);
  credential_ = Exchange(IssueToken(compute_)).body.value("credential", "");  // replaces the old
  Reply revoked = Call("POST", "/dp/v1/segments", text, Bearer(fresh.body["grant"]));
  EXPECT_EQ(revoked.status, 401) << revoked.body;
  EXPECT_EQ(Code(revoked), "grant_revoked");
}

TEST_F(ApiSegmentsTest, OnlyTheComputesControllerGetsAGrantAndOnlyForASegmentItCouldSend) {
  const json request = {{"host", "worker1"}, {"sha256", std::string(64, 'a')}, {"bytes", 100}};
  EXPECT_EQ(Call("POST", "/dp/v1/segment-grants", request.dump(), {}).status, 401);
  EXPECT_EQ(Call("POST", "/dp/v1/segment-grants", request.dump(), Bearer(token_)).status, 401);
  for (const json& bad :
       {json{{"host", "worker1"}, {"sha256", "ABC"}, {"bytes", 100}},
        json{{"host", "worker1"}, {"sha256", std::string(64, 'z')}, {"bytes", 100}},
        json{{"host", "../x"}, {"sha256", std::string(64, 'a')}, {"bytes", 100}},
        json{{"host", "worker1"}, {"sha256", std::string(64, 'a')}, {"bytes", int64_t{1} << 40}}}) {
    Reply r = Call("POST", "/dp/v1/segment-grants", bad.dump(), Bearer(credential_));
    EXPECT_EQ(r.status, 400) << bad.dump() << " " << r.body;
  }
}

}  // namespace
}  // namespace api_segments_test
}  // namespace expanse::server

namespace expanse::server::api_segments_test {
namespace {

// A write a crash cut short leaves its temporary; it goes once it is stale: when its segment is
// sent again or removed, or when retention's sweep comes to its directory (a segment the daemon
// sent again before the temporary was stale is never written again). A younger one may be
// another request's write in progress: kept.
TEST_F(ApiSegmentsTest, TemporariesACrashLeftAreRemovedOnceStale) {
  const std::string text = Segment("77", "worker1", 101, api_testing::kStart).dump();
  const std::string sha = crypto::Sha256Hex(text);
  const std::filesystem::path file = SegmentFile(sha);
  const auto temporary = [&](const std::string& of, const std::string& suffix, int64_t age_ms) {
    const std::filesystem::path path =
        std::filesystem::path(SegmentFile(of)).parent_path() / ("." + of + ".json.tmp." + suffix);
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text.substr(0, 10);
    const int64_t mtime_ms = clock_.NowMs() - age_ms;
    const timespec times[2] = {{mtime_ms / 1000, 0}, {mtime_ms / 1000, 0}};
    EXPECT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
    return path;
  };
  constexpr int64_t kMinute = 60 * 1000;
  const std::filesystem::path stale = temporary(sha, "AAAAAA", 16 * kMinute);
  const std::filesystem::path fresh = temporary(sha, "BBBBBB", kMinute);
  const std::string other_sha(64, 'e');
  const std::filesystem::path other_stale = temporary(other_sha, "CCCCCC", 16 * kMinute);
  const std::filesystem::path other_fresh = temporary(other_sha, "DDDDDD", kMinute);
  ASSERT_EQ(Send(text).status, 200);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(fresh));
  EXPECT_TRUE(std::filesystem::exists(other_stale)) << "another segment's, left to the sweep";
  EXPECT_TRUE(std::filesystem::exists(file));

  ASSERT_EQ(*app_->ExpireSegmentsOnce(clock_.NowMs()), 0);  // the sweep, nothing expired
  EXPECT_FALSE(std::filesystem::exists(other_stale));
  EXPECT_TRUE(std::filesystem::exists(other_fresh));
  EXPECT_TRUE(std::filesystem::exists(fresh));
  EXPECT_TRUE(std::filesystem::exists(file));

  clock_.Advance(int64_t{31} * 24 * 3600 * 1000);  // retention removes it, and the now stale one
  ASSERT_EQ(*app_->ExpireSegmentsOnce(clock_.NowMs()), 1);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

// At most two segments are parsed at once; another is asked to come back, and nothing of it is
// kept.
TEST_F(ApiSegmentsTest, ASegmentBeyondTheParsesAtOnceIsAskedToComeBack) {
  std::optional<ConcurrencySlots::Slot> first = app_->segment_parses().TryTake();
  std::optional<ConcurrencySlots::Slot> second = app_->segment_parses().TryTake();
  ASSERT_TRUE(first && second);
  const std::string text = Segment("77", "worker1", 101, api_testing::kStart).dump();
  Reply busy = Send(text);
  EXPECT_EQ(busy.status, 503) << busy.body;
  EXPECT_EQ(Code(busy), "segments_busy") << busy.body;
  EXPECT_EQ(busy.headers.count("Retry-After"), 1u);
  EXPECT_EQ(app_->counters().segments_busy.load(), 1u) << "counted for /metrics";
  EXPECT_EQ(List().body["segments"], json::array());
  EXPECT_EQ(app_->segment_parses().in_use(), 2);
  second.reset();
  Reply taken = Send(text);
  EXPECT_EQ(taken.status, 200) << taken.body;
  EXPECT_EQ(List().body["segments"].size(), 1u);
  EXPECT_EQ(app_->segment_parses().in_use(), 1) << "the upload gave its slot back";
}

// A server whose segment directory would keep less free than it must: a new segment is refused
// with a time to come back, nothing of it is kept, and one it already has is still taken.
class ApiSegmentsFullDiskTest : public ApiSegmentsTest {
 protected:
  void Customize(ServerOptions& options) override {
    options.segment_keep_free_bytes = std::numeric_limits<uint64_t>::max() / 2;
  }
};

TEST_F(ApiSegmentsFullDiskTest, ANewSegmentIsRefusedWhenItWouldFillTheDisk) {
  const std::string text = Segment("77", "worker1", 101, api_testing::kStart).dump();
  Reply full = Send(text);
  EXPECT_EQ(full.status, 507) << full.body;
  EXPECT_EQ(Code(full), "segment_store_full") << full.body;
  EXPECT_EQ(full.headers.count("Retry-After"), 1u);
  EXPECT_EQ(full.body.dump().find(dir_.string()), std::string::npos) << full.body;
  EXPECT_EQ(List().body["segments"], json::array());
  EXPECT_FALSE(std::filesystem::exists(SegmentFile(crypto::Sha256Hex(text))));
  // Written before the disk filled (here: by hand): a resend adds its row, writing nothing.
  std::filesystem::create_directories(
      std::filesystem::path(SegmentFile(crypto::Sha256Hex(text))).parent_path());
  std::ofstream(SegmentFile(crypto::Sha256Hex(text))) << text;
  Reply kept = Send(text);
  EXPECT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(List().body["segments"].size(), 1u);
}

}  // namespace
}  // namespace expanse::server::api_segments_test
