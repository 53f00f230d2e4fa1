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

}  // namespace
}  // namespace api_limits_test
}  // namespace expanse::server
