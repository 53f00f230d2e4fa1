// Several ingest batches in one POST /dp/v1/ingest (wire/ingest_envelope.h) against a real
// server: each batch is validated, stored and answered as if it had come alone.
#include <httplib.h>
#include <zstd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/api_test_util.h"
#include "wire/ingest_envelope.h"

namespace expanse::server::api_testing {
namespace {

// One host's minute of gpu.sm_util for `gpu` (60 samples), with a job record when job_id is set.
std::string Batch(int sequence, const std::string& gpu, const std::string& job_id = "",
                  int samples = 60) {
  json dt = json::array(), v = json::array();
  for (int i = 0; i < samples; ++i) {
    dt.push_back(i == 0 ? 0 : 1);
    v.push_back(i % 100);
  }
  json doc = {{"version", 1},
              {"stream", "telemetry"},
              {"sequence", sequence},
              {"series",
               {{{"host", "worker1"},
                 {"device", gpu},
                 {"metric", "gpu.sm_util"},
                 {"t0", kStart},
                 {"dt", dt},
                 {"v", v}}}}};
  if (!job_id.empty()) {
    doc["jobs"] = {{{"job_id", job_id},
                    {"state", "RUNNING"},
                    {"user", "ana"},
                    {"start_ms", kStart},
                    {"observed_ms", kStart}}};
  }
  return doc.dump();
}

std::string Zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 1));
  return out;
}

class ApiEnvelopeTest : public ApiTest {
 protected:
  void Customize(ServerOptions& options) override { options.max_envelope_samples = 1300; }
  Reply PostEnvelope(const std::string& body, const std::string& credential,
                     const std::string& ack = "") {
    httplib::Headers headers = Bearer(credential);
    if (!ack.empty())
      headers.emplace("Expanse-Ack", ack);
    httplib::Result r =
        client_->Post("/dp/v1/ingest", headers, body, wire::kIngestEnvelopeContentType);
    Reply reply;
    if (!r) {
      ADD_FAILURE() << httplib::to_string(r.error());
      return reply;
    }
    reply.status = r->status;
    reply.body = json::parse(r->body, nullptr, false);
    return reply;
  }
  std::string NewCredential() {
    return Exchange(IssueToken(NewCompute(token_))).body.value("credential", "");
  }
};

TEST_F(ApiEnvelopeTest, EachBatchIsAnsweredAsIfItCameAlone) {
  const std::string credential = NewCredential();
  std::string envelope;
  wire::AppendEnvelopeFrame(envelope, "application/json", Batch(1, "GPU-a", "101"));
  wire::AppendEnvelopeFrame(envelope, "application/json",
                            R"({"version":1,"stream":"telemetry","sequence":2,"series":[)"
                            R"({"host":"worker1","metric":"m","t0":1,"dt":[0],"v":["x"]}]})");
  wire::AppendEnvelopeFrame(envelope, "application/zstd", Zstd(Batch(3, "GPU-b", "102")));
  wire::AppendEnvelopeFrame(envelope, "text/plain", "hello");
  Reply first = PostEnvelope(envelope, credential);
  ASSERT_EQ(first.status, 200) << first.body;
  const json& answers = first.body["answers"];
  ASSERT_EQ(answers.size(), 4u) << first.body;
  EXPECT_EQ(answers[0]["status"], 200);
  EXPECT_EQ(answers[0]["body"]["samples"], 60);
  EXPECT_EQ(answers[0]["body"]["jobs"], 1);
  EXPECT_EQ(answers[0]["body"]["duplicate"], false);
  EXPECT_EQ(answers[0]["body"]["durable"], true);
  EXPECT_NE(answers[0]["body"]["batch_id"].get<std::string>().find("/telemetry/1"),
            std::string::npos);
  EXPECT_EQ(answers[1]["status"], 400);
  EXPECT_EQ(answers[1]["body"]["error"]["code"], "invalid_batch");
  EXPECT_EQ(answers[2]["status"], 200);
  EXPECT_EQ(answers[2]["body"]["samples"], 60);
  EXPECT_EQ(answers[3]["status"], 400);
  EXPECT_EQ(answers[3]["body"]["error"]["code"], "unsupported_media_type");
  // Both good batches' jobs were stored, nothing of the refused ones.
  Reply jobs = Call("GET", "/api/v1/orgs/acme/jobs", "", Bearer(token_));
  ASSERT_EQ(jobs.status, 200);
  EXPECT_EQ(jobs.body["jobs"].size(), 2u) << jobs.body;

  // The same request again: each stored batch is a repeat, the bad ones are refused again.
  Reply again = PostEnvelope(envelope, credential);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.body["answers"][0]["body"]["duplicate"], true);
  EXPECT_EQ(again.body["answers"][1]["status"], 400);
  EXPECT_EQ(again.body["answers"][2]["body"]["duplicate"], true);
  // And one of them alone is the same repeat.
  Reply alone = Call("POST", "/dp/v1/ingest", Batch(3, "GPU-b", "102"), Bearer(credential));
  EXPECT_EQ(alone.body["duplicate"], true);
}

TEST_F(ApiEnvelopeTest, TheRequestItselfIsRefusedWhenItIsNotAnEnvelope) {
  const std::string credential = NewCredential();
  Reply malformed = PostEnvelope("application/json 999\n{}", credential);
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(Code(malformed), "invalid_envelope");
  EXPECT_NE(malformed.body["error"]["message"].get<std::string>().find("frame 0"),
            std::string::npos);
  std::string envelope;
  wire::AppendEnvelopeFrame(envelope, "application/json", Batch(1, "GPU-a"));
  Reply forged = PostEnvelope(envelope, "exp_cc_forged");
  EXPECT_EQ(forged.status, 401);
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/jobs", "", Bearer(token_)).body["jobs"].size(), 0u);
}

// A request's batches past its sample cap (1,300 here; one batch's cap by default), together,
// are left for the next request (503 envelope_full): the first is always taken.
TEST_F(ApiEnvelopeTest, BatchesPastTheRequestsSampleCapAreLeftForTheNext) {
  const std::string credential = NewCredential();
  std::string envelope;
  wire::AppendEnvelopeFrame(envelope, "application/zstd", Zstd(Batch(1, "GPU-a", "", 1200)));
  wire::AppendEnvelopeFrame(envelope, "application/zstd", Zstd(Batch(2, "GPU-b", "", 1200)));
  wire::AppendEnvelopeFrame(envelope, "application/json", Batch(3, "GPU-c"));
  Reply reply = PostEnvelope(envelope, credential);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json& answers = reply.body["answers"];
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0]["status"], 200);
  EXPECT_EQ(answers[0]["body"]["samples"], 1200);
  EXPECT_EQ(answers[1]["status"], 503);
  EXPECT_EQ(answers[1]["body"]["error"]["code"], "envelope_full");
  EXPECT_EQ(answers[2]["status"], 200);  // small enough to fit still
  // The one left out is stored by the next request, not refused.
  std::string next;
  wire::AppendEnvelopeFrame(next, "application/zstd", Zstd(Batch(2, "GPU-b", "", 1200)));
  Reply second = PostEnvelope(next, credential);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.body["answers"][0]["body"]["duplicate"], false);
  EXPECT_EQ(second.body["answers"][0]["body"]["samples"], 1200);
}

// Answers on receipt apply to every batch of the envelope: each has its own mark, in order,
// and a sync covers them all. The same batch twice in one request is stored once.
TEST_F(ApiEnvelopeTest, ReceiptsAndRepeatsWithinOneRequest) {
  const std::string credential = NewCredential();
  std::string envelope;
  wire::AppendEnvelopeFrame(envelope, "application/json", Batch(1, "GPU-a"));
  wire::AppendEnvelopeFrame(envelope, "application/json", Batch(2, "GPU-b"));
  wire::AppendEnvelopeFrame(envelope, "application/json", Batch(1, "GPU-a"));
  Reply reply = PostEnvelope(envelope, credential, "received");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json& answers = reply.body["answers"];
  ASSERT_EQ(answers.size(), 3u);
  const uint64_t first = answers[0]["body"]["mark"].get<uint64_t>();
  const uint64_t second = answers[1]["body"]["mark"].get<uint64_t>();
  EXPECT_GE(first, 1u);
  EXPECT_GT(second, first);
  EXPECT_EQ(answers[0]["body"]["duplicate"], false);
  EXPECT_EQ(answers[1]["body"]["duplicate"], false);
  EXPECT_EQ(answers[2]["body"]["duplicate"], true);
  EXPECT_EQ(answers[2]["body"]["samples"], 0);
  EXPECT_EQ(answers[0]["body"]["store_epoch"], answers[1]["body"]["store_epoch"]);
  Reply synced = Call("POST", "/dp/v1/sync", "", Bearer(credential));
  ASSERT_EQ(synced.status, 200) << synced.body;
  EXPECT_GE(synced.body["durable_mark"].get<uint64_t>(), second);
}

}  // namespace
}  // namespace expanse::server::api_testing
