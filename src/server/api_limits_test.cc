// Hostile bodies against the real server over HTTP (docs/api.md, "Limits"): nesting deep
// enough to overflow a recursive dump, gzip and zstd bombs, and malformed sign-ins. Each must
// get its documented refusal, leave the server answering, and not cost the memory the body
// would expand to.
#include <httplib.h>
#include <unistd.h>
#include <zstd.h>

#include <cstddef>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/http_test_util.h"
#include "server/api_test_util.h"
#include "server/ingest_batch.h"

namespace expanse::server {
namespace api_limits_test {
namespace {

using nlohmann::json;

using api_testing::ApiTest;
using api_testing::kHeartbeat;

// What the process holds in memory now (not what it has reserved): /proc/self/statm's
// resident pages. Compared before and after a request, it bounds what the request kept
// allocated at its peak only when nothing was freed in between, so the bound below is loose.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total_pages = 0;
  size_t resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}
// A request refused as it should be allocates a few MB at most; the bodies below would
// expand to gigabytes of JSON nodes.
constexpr size_t kMaxGrowthBytes = 200u << 20;

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

using http::testing::Gzip;

// One zstd frame; `declare_size` false leaves the decoded size out of the frame header, as a
// streaming compressor (or an attacker) would.
std::string Zstd(const std::string& text, bool declare_size = true) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, declare_size ? 1 : 0);
  std::string out(ZSTD_compressBound(text.size()), '\0');
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  ZSTD_inBuffer in{text.data(), text.size(), 0};
  if (declare_size)
    ZSTD_CCtx_setPledgedSrcSize(cctx, text.size());
  const size_t left = ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_end);
  EXPECT_EQ(left, 0u);
  ZSTD_freeCCtx(cctx);
  out.resize(o.pos);
  return out;
}

class ApiLimitsTest : public ApiTest {
 protected:
  std::string Credential() {
    if (credential_.empty()) {
      credential_ = Exchange(IssueToken(NewCompute(token_))).body["credential"];
    }
    return credential_;
  }

  Reply Post(const std::string& path, const std::string& body, const std::string& content_type,
             httplib::Headers headers) {
    httplib::Result r = client_->Post(path, headers, body, content_type.c_str());
    Reply reply;
    if (!r) {
      ADD_FAILURE() << "POST " << path << ": " << httplib::to_string(r.error());
      return reply;
    }
    reply.status = r->status;
    reply.body = json::parse(r->body, nullptr, false);
    return reply;
  }

  std::string Message(const Reply& r) { return r.body["error"].value("message", ""); }

  // The server still answers, and accepts a good heartbeat.
  void ExpectServerAlive() {
    EXPECT_EQ(Call("POST", "/cp/v1/heartbeat", kHeartbeat, Bearer(Credential())).status, 200);
  }

  std::string credential_;
};

TEST_F(ApiLimitsTest, DeeplyNestedHeartbeatIsRefusedNamingTheDepth) {
  // The abuse test's crash: 60,000 nested arrays in an unknown field, 120 KB.
  const std::string body = R"({"version":1,"daemon_version":"0.1.0","controller_host":"ctl",)"
                           R"("extra":)" +
                           Nested(60'000) + "}";
  Reply r = Call("POST", "/cp/v1/heartbeat", body, Bearer(Credential()));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Code(r), "json_too_deep");
  EXPECT_EQ(Message(r), "heartbeat: the document nests arrays and objects deeper than 32 levels");
  // Just inside the limit: the nesting is fine (the field is unknown and small, so kept).
  const std::string ok_body = R"({"version":1,"daemon_version":"0.1.0","controller_host":"ctl",)"
                              R"("extra":)" +
                              Nested(31) + "}";
  EXPECT_EQ(Call("POST", "/cp/v1/heartbeat", ok_body, Bearer(Credential())).status, 200);
  ExpectServerAlive();
}

TEST_F(ApiLimitsTest, DeeplyNestedSessionAndConsoleBodiesAreRefusedNamingTheDepth) {
  Reply session = Call("POST", "/api/v1/session", R"({"email":)" + Nested(1000) + "}");
  EXPECT_EQ(session.status, 400) << session.body;
  EXPECT_EQ(Code(session), "json_too_deep");
  EXPECT_EQ(Message(session),
            "the request body: the document nests arrays and objects deeper than 8 levels");

  Reply console = Call("POST", "/api/v1/orgs/acme/computes",
                       R"({"name":)" + Nested(1000) + R"(,"type":1})", Bearer(token_));
  EXPECT_EQ(console.status, 400) << console.body;
  EXPECT_EQ(Code(console), "json_too_deep");

  Reply token = Call("POST", "/cp/v1/install-tokens/introspect", Nested(9));
  EXPECT_EQ(Code(token), "json_too_deep");
  ExpectServerAlive();
}

TEST_F(ApiLimitsTest, DeeplyNestedIngestIsRefusedAsJsonAndAsZstd) {
  const std::string batch = R"({"version":1,"stream":"telemetry","sequence":1,"series":[],)"
                            R"("extra":)" +
                            Nested(60'000) + "}";
  Reply plain = Post("/dp/v1/ingest", batch, "application/json", Bearer(Credential()));
  EXPECT_EQ(plain.status, 400) << plain.body;
  EXPECT_EQ(Code(plain), "json_too_deep");
  EXPECT_EQ(Message(plain), "batch: the document nests arrays and objects deeper than 16 levels");

  Reply zstd = Post("/dp/v1/ingest", Zstd(batch), "application/zstd", Bearer(Credential()));
  EXPECT_EQ(zstd.status, 400) << zstd.body;
  EXPECT_EQ(Code(zstd), "json_too_deep");
  // Nesting inside a record section, where the fast path would look first.
  const std::string in_jobs =
      R"({"version":1,"stream":"telemetry","sequence":2,"jobs":)" + Nested(100) + "}";
  EXPECT_EQ(Code(Post("/dp/v1/ingest", in_jobs, "application/json", Bearer(Credential()))),
            "json_too_deep");
  ExpectServerAlive();
}

TEST_F(ApiLimitsTest, GzipBombOnSessionIs413WithoutExpanding) {
  // 16 MiB of '[' gzip to about 16 KB: what took the server from 22 MB to 1.1 GB.
  const std::string bomb = Gzip(std::string(16u << 20, '['));
  ASSERT_LT(bomb.size(), 64u << 10);
  const size_t before = ResidentBytes();
  Reply r = Post("/api/v1/session", bomb, "application/json", {{"Content-Encoding", "gzip"}});
  const size_t after = ResidentBytes();
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(Code(r), "body_too_large");
  EXPECT_EQ(Message(r), "the request body is larger than 65536 bytes");
  EXPECT_LT(after, before + kMaxGrowthBytes) << "resident " << before << " -> " << after;
  ExpectServerAlive();
}

TEST_F(ApiLimitsTest, OversizeBodiesAreRefusedPerRoute) {
  // Console bodies are small; the heartbeat may be larger (but not unbounded).
  Reply console =
      Call("POST", "/api/v1/orgs/acme/computes",
           R"({"name":")" + std::string(64u << 10, 'n') + R"(","type":"slurm"})", Bearer(token_));
  EXPECT_EQ(console.status, 413);
  const std::string padded = R"({"version":1,"daemon_version":"0.1.0","controller_host":"ctl",)"
                             R"("diagnostics":{},"pad":")" +
                             std::string(100u << 10, 'p') + R"("})";
  Reply heartbeat = Call("POST", "/cp/v1/heartbeat", padded, Bearer(Credential()));
  EXPECT_EQ(heartbeat.status, 400) << heartbeat.body;  // read in full, refused by the string cap
  EXPECT_EQ(Code(heartbeat), "json_too_large");
  Reply huge =
      Call("POST", "/cp/v1/heartbeat", std::string((8u << 20) + 1, ' '), Bearer(Credential()));
  EXPECT_EQ(huge.status, 413);
}

TEST_F(ApiLimitsTest, ZstdBombOnIngestIs413WithoutExpanding) {
  const std::string json_bomb(kMaxIngestJsonBytes + 1, '[');
  const std::string declared = Zstd(json_bomb, /*declare_size=*/true);
  const std::string undeclared = Zstd(json_bomb, /*declare_size=*/false);
  ASSERT_LT(declared.size(), 64u << 10);
  ASSERT_LT(undeclared.size(), 64u << 10);
  for (const std::string* bomb : {&declared, &undeclared}) {
    const size_t before = ResidentBytes();
    Reply r = Post("/dp/v1/ingest", *bomb, "application/zstd", Bearer(Credential()));
    const size_t after = ResidentBytes();
    EXPECT_EQ(r.status, 413) << r.body;  // not 429: retrying the same batch cannot help
    EXPECT_EQ(Code(r), "body_too_large");
    EXPECT_NE(Message(r).find("64 MiB"), std::string::npos) << r.body;
    EXPECT_LT(after, before + kMaxGrowthBytes) << "resident " << before << " -> " << after;
  }
  ExpectServerAlive();
}

// A malformed sign-in costs a try from the address's bucket (10), so the parser cannot be
// hammered for free: after ten, even a well-formed sign-in waits.
TEST_F(ApiLimitsTest, MalformedSignInsCountAgainstTheAddressLimit) {
  for (int i = 0; i < 10; ++i) {
    Reply r = Call("POST", "/api/v1/session", "{not json");
    ASSERT_EQ(r.status, 400) << i << " " << r.body;
    EXPECT_EQ(Code(r), "invalid_json");
  }
  Reply limited = Call("POST", "/api/v1/session", "{not json");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(Code(limited), "rate_limited");
  Reply good =
      Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"pw-owner"})");
  EXPECT_EQ(good.status, 429);
  clock_.Advance(60 * 1000);
  EXPECT_EQ(
      Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"pw-owner"})")
          .status,
      200);
}

TEST_F(ApiLimitsTest, ASignInWithAnEmailNoAccountCanHaveKeepsNoLimiterKeyOfIt) {
  // 16,000 bytes of "email" (a body's strings may be 16 KiB): the sign-in limiters per email
  // and per account would each keep it as a key, up to 100,000 of them.
  const std::string huge = std::string(16'000, 'a') + "@acme.example";
  for (const std::string& email : {huge, std::string("no-at-sign")}) {
    Reply r =
        Call("POST", "/api/v1/session", json{{"email", email}, {"password", "pw-owner"}}.dump());
    EXPECT_EQ(r.status, 401) << r.body;
  }
  EXPECT_EQ(app_->limits().login_per_address->size(), 1u);
  EXPECT_EQ(app_->limits().login_per_email->size(), 0u);
  EXPECT_EQ(app_->limits().login_per_account->size(), 0u);
  // It still costs the address a try, as any sign-in does.
  Reply good =
      Call("POST", "/api/v1/session", R"({"email":"owner@acme.example","password":"pw-owner"})");
  EXPECT_EQ(good.status, 200);
  EXPECT_EQ(app_->limits().login_per_email->size(), 1u);
  EXPECT_EQ(app_->limits().login_per_account->size(), 1u);
}

TEST_F(ApiLimitsTest, StoredHeartbeatKeepsOnlySmallUnknownFields) {
  const std::string compute = NewCompute(token_);
  const std::string credential = Exchange(IssueToken(compute)).body["credential"];
  const json heartbeat = {{"version", 1},
                          {"daemon_version", "0.1.0"},
                          {"controller_host", "ctl"},
                          {"future_small", {{"a", 1}}},
                          {"future_large", std::string(4096, 'x')}};
  ASSERT_EQ(Call("POST", "/cp/v1/heartbeat", heartbeat.dump(), Bearer(credential)).status, 200);
  Reply c = Call("GET", "/api/v1/computes/" + compute, "", Bearer(token_));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.body["heartbeat"]["future_small"], json({{"a", 1}}));
  EXPECT_FALSE(c.body["heartbeat"].contains("future_large")) << c.body;
}

// A timeline is one series per GPU (or per host for job.* metrics), and a job may hold 16,384
// GPUs: `points` is shared out so that all series together hold at most 1,000,000 points (a
// 512-GPU job at points=10000 built a 574 MB answer). The answer says how many each got.
TEST_F(ApiLimitsTest, TimelinePointsAreSharedOutOverTheSeries) {
  const std::string compute = NewCompute(token_);
  const std::string credential = Exchange(IssueToken(compute)).body["credential"];
  constexpr int kGpus = 200;
  constexpr int kSamples = 12'000;  // one a second on GPU-0
  const int64_t end = api_testing::kStart + int64_t{kSamples} * 1000;
  clock_.Advance(int64_t{kSamples} * 1000 + 60'000);
  json allocations = json::array();
  for (int i = 0; i < kGpus; ++i) {
    allocations.push_back({{"job_id", "88"},
                           {"host", "w" + std::to_string(i / 8)},
                           {"gpu_uuid", "GPU-" + std::to_string(i)},
                           {"gpu_index", i % 8},
                           {"gpu_minor", i % 8},
                           {"from_ms", api_testing::kStart},
                           {"to_ms", end}});
  }
  json dt = json::array();
  json v = json::array();
  for (int i = 0; i < kSamples; ++i) {
    dt.push_back(i == 0 ? 0 : 1000);
    v.push_back(i % 100);
  }
  const json batch = {{"version", 1},
                      {"stream", "telemetry"},
                      {"sequence", 1},
                      {"series",
                       {{{"host", "w0"},
                         {"device", "GPU-0"},
                         {"metric", "gpu.sm_util"},
                         {"t0", api_testing::kStart},
                         {"dt", dt},
                         {"v", v}}}},
                      {"jobs",
                       {{{"job_id", "88"},
                         {"state", "COMPLETED"},
                         {"user", "ana"},
                         {"account", "ml"},
                         {"partition", "gpu"},
                         {"req_gpus", kGpus},
                         {"start_ms", api_testing::kStart},
                         {"end_ms", end},
                         {"observed_ms", end}}}},
                      {"gpu_allocations", allocations}};
  Reply ingest = Call("POST", "/dp/v1/ingest", batch.dump(), Bearer(credential));
  ASSERT_EQ(ingest.status, 200) << ingest.body;

  const std::string timeline = "/api/v1/computes/" + compute + "/jobs/88/timeline";
  Reply r = Call("GET", timeline + "?points=10000", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["series"].size(), static_cast<size_t>(kGpus));
  EXPECT_EQ(r.body["points_per_series"], 1'000'000 / kGpus);
  size_t points = 0;
  for (const json& series : r.body["series"])
    points += series["points"].size();
  EXPECT_GT(points, 4'000u);
  EXPECT_LE(points, 1'000'000u / kGpus) << "only GPU-0 has samples";
  // Within the budget, the points asked for are given.
  r = Call("GET", timeline + "?points=100", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["points_per_series"], 100);
  EXPECT_LE(r.body["series"][0]["points"].size(), 100u);
  EXPECT_GE(r.body["series"][0]["points"].size(), 99u);
  // The range of `points` itself is unchanged.
  EXPECT_EQ(Call("GET", timeline + "?points=10001", "", Bearer(token_)).status, 400);
}

// The stacks route sums the 10,000 most sampled stacks, each up to 16 KiB: it reads at most
// 16 MiB of them, whatever `limit` is, and says when it stopped short.
TEST_F(ApiLimitsTest, StacksAreReadWithinAByteBudgetAndSayWhenTruncated) {
  const std::string compute = NewCompute(token_);
  constexpr int kStacks = 1'200;  // 19 MB of folded text
  std::vector<store::StackSample> stacks;
  for (int i = 0; i < kStacks; ++i) {
    store::StackSample s;
    s.compute_id = compute;
    s.job_id = "7";
    s.host = "w1";
    s.window_start_ms = api_testing::kStart;
    s.window_end_ms = api_testing::kStart + 60'000;
    s.folded = "main.py:main:1;m" + std::to_string(i) +
               ".py:f:2;pad.py:" + std::string(15'900, 'x') + ":3";
    s.thread_state = "gil";
    s.count = 10'000 - i;
    stacks.push_back(std::move(s));
  }
  const Status put = app_->store().Jobs().PutStacks(stacks);
  ASSERT_TRUE(put.ok()) << put;

  const std::string path = "/api/v1/computes/" + compute + "/jobs/7/stacks";
  Reply r = Call("GET", path + "?limit=1", "", Bearer(token_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["truncated"], true);
  ASSERT_EQ(r.body["stacks"].size(), 1u);
  EXPECT_EQ(r.body["stacks"][0]["count"], 10'000);
  const size_t read = r.body["distinct_stacks"].get<size_t>();
  EXPECT_LT(read, static_cast<size_t>(kStacks));
  EXPECT_GT(read, 1'000u);
  // The stacks read are the most sampled ones, within the budget.
  EXPECT_LE(read * stacks[0].folded.size(), store::kMaxJobStacksBytes);
  int64_t total = 0;
  for (size_t i = 0; i < read; ++i)
    total += 10'000 - static_cast<int64_t>(i);
  EXPECT_EQ(r.body["total_count"], total);
  EXPECT_EQ(r.body["top_frames"][0]["frame"], "pad.py:" + std::string(15'900, 'x') + ":3");

  // A job whose stacks fit is read whole.
  Reply small = Call("GET", "/api/v1/computes/" + compute + "/jobs/8/stacks", "", Bearer(token_));
  ASSERT_EQ(small.status, 200) << small.body;
  EXPECT_EQ(small.body["truncated"], false);
}

}  // namespace
}  // namespace api_limits_test
}  // namespace expanse::server
