// The uploader's retry policy against a scripted local HTTP server (cpp-httplib): which
// answers acknowledge, retry, dead-letter or stop, and how long it waits.
#include <httplib.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "net/http_client.h"
#include "outbox/outbox.h"
#include "outbox/outbox_test_util.h"
#include "outbox/uploader.h"
#include "wire/ingest_envelope.h"

namespace expanse::outbox {
namespace uploader_policy_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kStart = 1'800'000'000'000;
constexpr char kCredential[] = "exp_cc_policy-test-secret";

std::string Error(const std::string& code, const std::string& message = "m") {
  return R"({"error":{"code":")" + code + R"(","message":")" + message + R"("}})";
}

struct Answer {
  int status = 200;
  std::string body = R"({"duplicate":false})";
  std::string retry_after = "";
};

struct Received {
  std::string authorization;
  std::string content_type;
  std::string body;
  std::string path;
  std::string ack;  // the Expanse-Ack header
};

// Answers POST /dp/v1/ingest from a script, 200 once the script is used up. A request of
// several batches (an envelope) takes one scripted answer per batch, as the real server answers
// each batch as if it had come alone; each batch is recorded as received on its own.
class ScriptedServer {
 public:
  ScriptedServer() {
    server_.Post(kIngestPath, [this](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard lock(mu_);
      const std::string content_type = request.get_header_value("Content-Type");
      if (content_type == wire::kIngestEnvelopeContentType) {
        ++envelopes_;
        if (envelope_answer_) {  // a server without envelopes, or an unreadable answer
          response.status = envelope_answer_->status;
          response.set_content(envelope_answer_->body, "application/json");
          return;
        }
        Result<std::vector<wire::EnvelopeFrame>> frames = wire::ParseIngestEnvelope(request.body);
        if (!frames.ok()) {
          response.status = 400;
          response.set_content(Error("invalid_envelope", frames.status().message()),
                               "application/json");
          return;
        }
        std::vector<wire::EnvelopeAnswer> answers;
        for (const wire::EnvelopeFrame& frame : *frames) {
          received_.push_back({request.get_header_value("Authorization"),
                               std::string(frame.content_type), std::string(frame.body),
                               request.path, request.get_header_value("Expanse-Ack")});
          const Answer answer = NextAnswer();
          answers.push_back({.status = answer.status, .body = WithBatchId(answer)});
          if (!answer.retry_after.empty())
            answers.back().retry_after = answer.retry_after;
        }
        response.status = 200;
        response.set_content(wire::EncodeEnvelopeAnswers(answers), "application/json");
        return;
      }
      received_.push_back({request.get_header_value("Authorization"), content_type, request.body,
                           request.path, request.get_header_value("Expanse-Ack")});
      const Answer answer = NextAnswer();
      response.status = answer.status;
      if (!answer.retry_after.empty())
        response.set_header("Retry-After", answer.retry_after);
      response.set_content(WithBatchId(answer), "application/json");
    });
    // POST /dp/v1/sync from its own script; 404 once that is used up (a server without it).
    server_.Post(kSyncPath, [this](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard lock(mu_);
      received_.push_back({request.get_header_value("Authorization"), "", "", request.path, ""});
      Answer answer{404, Error("not_found")};
      if (!sync_script_.empty()) {
        answer = sync_script_.front();
        sync_script_.pop_front();
      }
      response.status = answer.status;
      response.set_content(answer.body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // Bound already, so connections wait in the kernel until the loop accepts them.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ScriptedServer() {
    // stop() is a no-op until the accept loop runs, and the loop would then run forever.
    while (!server_.is_running())
      std::this_thread::yield();
    server_.stop();
    thread_.join();
  }

  void Script(std::vector<Answer> answers) {
    std::lock_guard lock(mu_);
    script_.assign(answers.begin(), answers.end());
  }
  void ScriptSync(std::vector<Answer> answers) {
    std::lock_guard lock(mu_);
    sync_script_.assign(answers.begin(), answers.end());
  }
  std::vector<Received> received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  // Every envelope from now on gets `answer` for the whole request.
  void AnswerEnvelopes(std::optional<Answer> answer) {
    std::lock_guard lock(mu_);
    envelope_answer_ = std::move(answer);
  }
  size_t envelopes() {
    std::lock_guard lock(mu_);
    return envelopes_;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  // The server's 2xx answers always name their batch, alone or in an envelope (the uploader
  // trusts no answer that does not): scripted JSON objects without one get one. Anything else
  // (an HTML page, an empty body) goes as scripted.
  std::string WithBatchId(const Answer& answer) {
    nlohmann::json body = nlohmann::json::parse(answer.body, nullptr, false);
    if (answer.status < 200 || answer.status >= 300 || !body.is_object() ||
        body.contains("batch_id"))
      return answer.body;
    body["batch_id"] = "scripted/" + std::to_string(received_.size());
    return body.dump();
  }
  Answer NextAnswer() {
    Answer answer;
    if (!script_.empty()) {
      answer = script_.front();
      script_.pop_front();
    }
    return answer;
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::deque<Answer> script_;
  std::deque<Answer> sync_script_;
  std::vector<Received> received_;
  size_t envelopes_ = 0;
  std::optional<Answer> envelope_answer_;
};

// Run with one batch per request and with envelopes of several: the rules are the same.
class UploaderPolicyTest : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    OutboxOptions options;
    options.directory = dir_.path() + "/outbox";
    options.log = log_.sink();
    auto outbox = Outbox::Open(options, clock_);
    ASSERT_TRUE(outbox.ok()) << outbox.status();
    outbox_ = *std::move(outbox);
    net::HttpClientOptions client_options;
    client_options.total_timeout = std::chrono::seconds(10);
    auto client = net::HttpClient::Create(client_options);
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    uploader_ = MakeUploader(server_.url());
  }

  std::unique_ptr<Uploader> MakeUploader(const std::string& url,
                                         uint64_t max_entries_per_run = 100) {
    UploaderOptions options;
    options.max_entries_per_run = max_entries_per_run;
    options.max_batches_per_request = GetParam();
    options.data_plane_url = url + "/";
    options.backoff_base_ms = 1000;
    options.backoff_cap_ms = 300'000;
    options.log = log_.sink();
    auto uploader = Uploader::Create(
        options, *outbox_, *client_, [] { return std::string(kCredential); }, clock_,
        [this] { return random_; });
    EXPECT_TRUE(uploader.ok()) << uploader.status();
    return uploader.ok() ? *std::move(uploader) : nullptr;
  }

  uint64_t Enqueue(const std::string& tag) {
    auto sequence = outbox_->Enqueue("telemetry", [tag](uint64_t seq) {
      return ZstdJsonPayload(R"({"version":1,"stream":"telemetry","sequence":)" +
                             std::to_string(seq) + R"(,"tag":")" + tag + R"("})");
    });
    EXPECT_TRUE(sequence.ok()) << sequence.status();
    return sequence.ok() ? *sequence : 0;
  }

  RunSummary Run() {
    Result<RunSummary> summary = uploader_->RunOnce();
    EXPECT_TRUE(summary.ok()) << summary.status();
    return summary.ok() ? *summary : RunSummary();
  }

  testing::TempDir dir_;
  testing::LogLines log_;
  ManualClock clock_{kStart};
  double random_ = 0.5;
  ScriptedServer server_;
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<net::HttpClient> client_;
  std::unique_ptr<Uploader> uploader_;
};

TEST_P(UploaderPolicyTest, SendsCompressedBatchesWithTheCredentialAndAcks) {
  Enqueue("a");
  Enqueue("b");
  server_.Script({{200, R"({"batch_id":"c/telemetry/1","duplicate":false})"},
                  {200, R"({"batch_id":"c/telemetry/2","duplicate":true})"}});
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 2u);
  std::vector<Received> received = server_.received();
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[0].authorization, std::string("Bearer ") + kCredential);
  EXPECT_EQ(received[0].content_type, "application/zstd");
  EXPECT_EQ(received[0].body.substr(0, 4), std::string("\x28\xb5\x2f\xfd", 4));
  UploaderStats stats = uploader_->stats();
  EXPECT_EQ(stats.sent, GetParam() == 1 ? 2u : 1u);  // both in one request when they may
  EXPECT_EQ(stats.envelopes, GetParam() == 1 ? 0u : 1u);
  EXPECT_EQ(server_.envelopes(), stats.envelopes);
  EXPECT_EQ(stats.acked, 2u);
  EXPECT_EQ(stats.duplicates, 1u);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
}

TEST_P(UploaderPolicyTest, ServerErrorsBackOffExponentiallyWithJitter) {
  const uint64_t sequence = Enqueue("a");
  server_.Script({{500, Error("internal")},
                  {502, "bad gateway"},
                  {503, Error("unavailable")},
                  {500, Error("internal")}});
  // random_ = 0.5: half of 1 s, 2 s, 4 s, 8 s.
  int64_t expected_delay = 500;
  for (int i = 0; i < 4; ++i) {
    RunSummary summary = Run();
    EXPECT_FALSE(summary.drained);
    EXPECT_EQ(summary.retry_at_ms, clock_.NowMs() + expected_delay) << i;
    // Before the time, RunOnce sends nothing.
    clock_.Advance(expected_delay - 1);
    EXPECT_EQ(Run().retry_at_ms, summary.retry_at_ms);
    EXPECT_EQ(server_.received().size(), static_cast<size_t>(i + 1));
    clock_.Advance(1);
    expected_delay *= 2;
  }
  UploaderStats stats = uploader_->stats();
  EXPECT_EQ(stats.retries, 4u);
  EXPECT_EQ(stats.consecutive_failures, 4u);
  EXPECT_EQ(stats.last_error, "HTTP 500 internal");
  RunSummary recovered = Run();
  EXPECT_TRUE(recovered.drained);
  EXPECT_EQ(recovered.acked, 1u);
  EXPECT_EQ(uploader_->stats().consecutive_failures, 0u);
  EXPECT_EQ(uploader_->stats().last_error, "");
  // Every try carried the same batch.
  for (const Received& r : server_.received())
    EXPECT_EQ(r.body, server_.received()[0].body);
  EXPECT_EQ(outbox_->stats().acked_through, sequence);
  // One line for the streak and one for the recovery, not one per try.
  EXPECT_EQ(log_.lines().size(), 2u) << log_.joined();
}

TEST_P(UploaderPolicyTest, BackoffIsCappedAndFullyJittered) {
  Enqueue("a");
  std::vector<Answer> failures(12, Answer{503, Error("unavailable")});
  server_.Script(failures);
  random_ = 0.999999;
  int64_t last = 0;
  for (int i = 0; i < 12; ++i) {
    RunSummary summary = Run();
    last = summary.retry_at_ms - clock_.NowMs();
    EXPECT_LT(last, 300'000);
    clock_.Advance(last);
  }
  EXPECT_GE(last, 299'000);  // reached the cap
  random_ = 0.0;             // full jitter may retry at once
  server_.Script({{503, Error("unavailable")}});
  EXPECT_EQ(Run().retry_at_ms, clock_.NowMs());
}

TEST_P(UploaderPolicyTest, FailureAfterSomeSuccessesStillReportsThem) {
  Enqueue("a");
  Enqueue("b");
  server_.Script({{200}, {503, Error("unavailable")}});
  RunSummary summary = Run();
  EXPECT_EQ(summary.acked, 1u);
  EXPECT_GT(summary.retry_at_ms, 0);
  EXPECT_FALSE(summary.drained);
}

TEST_P(UploaderPolicyTest, OddErrorCodesAreNotTrusted) {
  Enqueue("a");
  server_.Script({{401, Error("Bad Code\nX")}});
  EXPECT_EQ(uploader_->RunOnce().status().reason(), "credential_invalid");
}

TEST_P(UploaderPolicyTest, RateLimitedHonoursRetryAfter) {
  Enqueue("a");
  server_.Script({{429, Error("rate_limited"), "7"}, {429, Error("rate_limited"), "86400"}});
  EXPECT_EQ(Run().retry_at_ms, clock_.NowMs() + 7000);
  clock_.Advance(7000);
  // A longer Retry-After than the cap is cut to the cap.
  EXPECT_EQ(Run().retry_at_ms, clock_.NowMs() + 300'000);
  EXPECT_EQ(uploader_->stats().last_error, "HTTP 429 rate_limited");
  clock_.Advance(300'000);
  EXPECT_TRUE(Run().drained);
}

TEST_P(UploaderPolicyTest, PoisonBatchIsDeadLetteredAndTheQueueMovesOn) {
  const uint64_t poison = Enqueue("poison");
  Enqueue("good");
  server_.Script(
      {{400, Error("invalid_batch", "batch.series[0].v[0] must be a finite number")}, {200}});
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 2u);
  UploaderStats stats = uploader_->stats();
  EXPECT_EQ(stats.dead_lettered, 1u);
  EXPECT_EQ(stats.acked, 1u);
  EXPECT_EQ(outbox_->stats().dead_lettered_entries, 1u);
  const std::string dead = testing::ReadFile(outbox_->options().directory + "/dead-letter.log");
  EXPECT_THAT(dead, HasSubstr("HTTP 400 invalid_batch: batch.series[0].v[0] must be a finite"));
  EXPECT_THAT(log_.joined(), HasSubstr("refused batch " + std::to_string(poison)));
}

// Answers on receipt leave entries in the outbox until a sync of the same epoch covers them;
// fields of the wrong type are not trusted (and do not throw).
TEST_P(UploaderPolicyTest, ReceiptsWaitForTheirSyncAndOddFieldsAreNotTrusted) {
  uploader_ = MakeUploader(server_.url(), /*max_entries_per_run=*/2);
  const uint64_t first = Enqueue("a");
  Enqueue("b");
  server_.Script({{200, R"({"durable":"yes","store_epoch":"e1","mark":"1","durable_mark":"9"})"},
                  {200, R"({"durable":false,"store_epoch":"e1","mark":5,"durable_mark":4})"}});
  server_.ScriptSync({{200, R"({"store_epoch":"e1","durable_mark":5})"}});
  RunSummary sent = Run();
  EXPECT_FALSE(sent.drained);
  EXPECT_EQ(sent.acked, 0u);  // a's mark is unknown and b's is past durable_mark 4
  EXPECT_EQ(uploader_->stats().unconfirmed, 2u);
  EXPECT_EQ(outbox_->stats().depth_entries, 2u);

  RunSummary synced = Run();
  EXPECT_TRUE(synced.drained);
  EXPECT_EQ(synced.acked, 2u);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
  EXPECT_EQ(outbox_->stats().acked_through, first + 1);
  const std::vector<Received> received = server_.received();
  ASSERT_EQ(received.size(), 3u);
  EXPECT_EQ(received[0].ack, "received");
  EXPECT_EQ(received[2].path, kSyncPath);
  EXPECT_EQ(received[2].authorization, std::string("Bearer ") + kCredential);
}

// A server without /dp/v1/sync (an older build) cannot confirm receipts: what waits is sent
// again, asking for durable answers.
TEST_P(UploaderPolicyTest, ServerWithoutSyncGetsTheUnconfirmedAgainDurably) {
  Enqueue("a");
  server_.Script({{200, R"({"durable":false,"store_epoch":"e1","mark":1,"durable_mark":0})"},
                  {200, R"({"duplicate":true})"}});
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 1u);
  const std::vector<Received> received = server_.received();
  ASSERT_EQ(received.size(), 3u);
  EXPECT_EQ(received[1].path, kSyncPath);
  EXPECT_EQ(received[2].path, kIngestPath);
  EXPECT_EQ(received[2].ack, "");  // durable answers from now on
  EXPECT_EQ(received[2].body, received[0].body);
  EXPECT_EQ(uploader_->stats().resent, 1u);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
  EXPECT_THAT(log_.joined(), HasSubstr("sending the unconfirmed batches again"));
}

// A new store epoch in an answer: the server restarted after answering on receipt.
TEST_P(UploaderPolicyTest, NewStoreEpochSendsTheUnconfirmedAgain) {
  Enqueue("a");
  Enqueue("b");
  server_.Script({{200, R"({"durable":false,"store_epoch":"e1","mark":7,"durable_mark":6})"},
                  {200, R"({"durable":true,"store_epoch":"e2","mark":1,"durable_mark":1})"},
                  {200, R"({"durable":true,"store_epoch":"e2","mark":2,"durable_mark":2})"},
                  {200, R"({"durable":true,"duplicate":true,"store_epoch":"e2","mark":2,)"
                        R"("durable_mark":2})"}});
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 2u);
  const std::vector<Received> received = server_.received();
  ASSERT_EQ(received.size(), 4u);
  EXPECT_EQ(received[2].body, received[0].body);  // a again, then b again
  EXPECT_EQ(received[3].body, received[1].body);
  EXPECT_EQ(uploader_->stats().resent, 2u);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
}

TEST_P(UploaderPolicyTest, RefusedHeaderIsRetriedNotDeadLettered) {
  Enqueue("a");
  server_.Script({{400, Error("invalid_header", "Expanse-Ack must be ...")}});
  EXPECT_GT(Run().retry_at_ms, 0);
  EXPECT_EQ(uploader_->stats().dead_lettered, 0u);
  EXPECT_EQ(outbox_->stats().depth_entries, 1u);
}

TEST_P(UploaderPolicyTest, RevokedCredentialStopsUploadsWithoutLosingData) {
  const uint64_t sequence = Enqueue("a");
  server_.Script({{401, Error("credential_revoked")}});
  Result<RunSummary> stopped = uploader_->RunOnce();
  EXPECT_EQ(stopped.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(stopped.status().reason(), "credential_revoked");
  EXPECT_TRUE(uploader_->stats().stopped);
  // Nothing more is sent, and the entry stays.
  EXPECT_EQ(uploader_->RunOnce().status().reason(), "credential_revoked");
  EXPECT_EQ(server_.received().size(), 1u);
  EXPECT_EQ(outbox_->stats().depth_entries, 1u);
  bool waited = false;
  EXPECT_EQ(uploader_->Run([&](int64_t) { return waited = true; }).reason(), "credential_revoked");
  EXPECT_FALSE(waited);

  uploader_->Resume();
  EXPECT_TRUE(Run().drained);
  EXPECT_EQ(outbox_->stats().acked_through, sequence);
  server_.Script({{401, Error("credential_invalid")}});
  Enqueue("b");
  EXPECT_EQ(uploader_->RunOnce().status().reason(), "credential_invalid");
}

TEST_P(UploaderPolicyTest, ConfigurationErrorsRetryInsteadOfDroppingData) {
  Enqueue("a");
  server_.Script({{404, Error("not_found")}, {403, Error("permission_denied")}});
  EXPECT_GT(Run().retry_at_ms, 0);
  clock_.Advance(10'000);
  EXPECT_GT(Run().retry_at_ms, 0);
  EXPECT_EQ(outbox_->stats().depth_entries, 1u);
  EXPECT_EQ(uploader_->stats().dead_lettered, 0u);
}

TEST_P(UploaderPolicyTest, NetworkErrorsRetryAndNeverLogTheCredential) {
  Enqueue("a");
  // Nothing listens on the port of a server that has gone away.
  std::string gone_url;
  {
    ScriptedServer gone;
    gone_url = gone.url();
  }
  uploader_ = MakeUploader(gone_url);
  RunSummary summary = Run();
  EXPECT_EQ(summary.retry_at_ms, clock_.NowMs() + 500);
  EXPECT_THAT(uploader_->stats().last_error, HasSubstr("network_error"));
  EXPECT_THAT(uploader_->stats().last_error, Not(HasSubstr(kCredential)));
  EXPECT_THAT(log_.joined(), Not(HasSubstr("exp_cc_")));
  EXPECT_EQ(outbox_->stats().depth_entries, 1u);
}

TEST_P(UploaderPolicyTest, RefusesPlainHttpOffLoopback) {
  UploaderOptions options;
  options.data_plane_url = "http://dp.example.com";
  auto uploader = Uploader::Create(
      options, *outbox_, *client_, [] { return std::string("x"); }, clock_);
  EXPECT_EQ(uploader.status().reason(), "insecure_url");
}

TEST_P(UploaderPolicyTest, RunWaitsAsRunOnceSays) {
  Enqueue("a");
  server_.Script({{503, Error("unavailable")}});
  std::vector<int64_t> waits;
  Status status = uploader_->Run([&](int64_t wait_ms) {
    waits.push_back(wait_ms);
    clock_.Advance(wait_ms);
    return waits.size() < 3;
  });
  EXPECT_TRUE(status.ok()) << status;
  // Backing off 0.5 s, then sent and drained, then idle polling.
  EXPECT_EQ(waits, (std::vector<int64_t>{500, 5000, 5000}));
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
}

TEST_P(UploaderPolicyTest, LongBackfillsComeInSlicesSoTheDaemonCanStop) {
  for (int i = 0; i < 250; ++i)
    Enqueue("e" + std::to_string(i));
  std::vector<int64_t> waits;
  Status status = uploader_->Run([&](int64_t wait_ms) {
    waits.push_back(wait_ms);
    return waits.size() < 2;  // the daemon is asked to stop during the backfill
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(waits, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(uploader_->stats().acked, 200u);
  EXPECT_EQ(outbox_->stats().depth_entries, 50u);
}

TEST(BackoffTest, RetryAfterParsing) {
  EXPECT_EQ(ParseRetryAfterMs("7"), 7000);
  EXPECT_EQ(ParseRetryAfterMs(" 120 "), 120'000);
  EXPECT_EQ(ParseRetryAfterMs("0"), 0);
  EXPECT_FALSE(ParseRetryAfterMs("Wed, 21 Oct 2015 07:28:00 GMT").has_value());
  EXPECT_FALSE(ParseRetryAfterMs("-1").has_value());
  EXPECT_FALSE(ParseRetryAfterMs("").has_value());
  EXPECT_FALSE(ParseRetryAfterMs("99999999999999999999").has_value());
}

// What only requests of several batches meet.
class UploaderEnvelopeTest : public UploaderPolicyTest {};

// A server that refuses the envelope (an older build answers its content type 400
// unsupported_media_type) gets the same entries one per request, at once and from then on.
TEST_P(UploaderEnvelopeTest, AServerWithoutEnvelopesGetsOneBatchPerRequest) {
  for (int status : {400, 404, 405, 415, 501}) {
    SCOPED_TRACE(status);
    uploader_ = MakeUploader(server_.url());
    server_.AnswerEnvelopes(Answer{status, Error("unsupported_media_type")});
    const size_t envelopes_before = server_.envelopes();
    const size_t received_before = server_.received().size();
    Enqueue("a");
    Enqueue("b");
    Enqueue("c");
    RunSummary summary = Run();
    EXPECT_TRUE(summary.drained);
    EXPECT_EQ(summary.acked, 3u);
    EXPECT_EQ(uploader_->stats().dead_lettered, 0u);
    EXPECT_EQ(server_.envelopes() - envelopes_before, 1u);
    EXPECT_EQ(server_.received().size() - received_before, 3u);  // each alone
    EXPECT_EQ(outbox_->stats().depth_entries, 0u);
    Enqueue("d");
    Enqueue("e");
    EXPECT_TRUE(Run().drained);
    EXPECT_EQ(server_.envelopes() - envelopes_before, 1u);  // not tried again
  }
  EXPECT_THAT(log_.joined(), HasSubstr("sending one batch per request from now on"));
}

// An answer that does not hold one answer per batch is not trusted for any of them: the same
// entries go again, one per request, and nothing is acknowledged or dead-lettered on its word.
TEST_P(UploaderEnvelopeTest, AnUnreadableAnswerSendsTheBatchesAgainAlone) {
  server_.AnswerEnvelopes(Answer{200, R"({"answers":[{"status":400,"body":{}}]})"});
  Enqueue("a");
  Enqueue("b");
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 2u);
  EXPECT_EQ(uploader_->stats().dead_lettered, 0u);
  EXPECT_EQ(server_.received().size(), 2u);
  EXPECT_THAT(log_.joined(), HasSubstr("holds 1 answers for 2 batches"));
}

// Batches the server left for the next request (envelope_full) go in it, with no backoff and
// no failure counted; a retryable answer stops at its batch, and the batches after it (stored
// or not) go again: a stored one is answered as a repeat.
TEST_P(UploaderEnvelopeTest, LeftOverBatchesGoInTheNextRequestAndARetryStopsAtItsBatch) {
  std::map<std::string, std::string> tag_of;  // payload -> tag
  for (const std::string tag : {"a", "b", "c", "d"}) {
    const uint64_t sequence = Enqueue(tag);
    Result<std::optional<OutboxEntry>> entry = outbox_->Peek(sequence - 1);
    ASSERT_TRUE(entry.ok() && entry->has_value());
    tag_of[(*entry)->payload] = tag;
  }
  server_.Script({{200},
                  {503, Error("envelope_full")},
                  {200},  // the server's answer to c in the first request: not used
                  {200},  // d, not used either
                  {200},  // b again
                  {503, Error("unavailable")},
                  {200},  // d: stored, its answer not used
                  {200},
                  {200, R"({"duplicate":true})"}});
  RunSummary first = Run();
  EXPECT_EQ(first.acked, 2u);  // a, then b in the second request
  EXPECT_GT(first.retry_at_ms, 0);
  EXPECT_EQ(uploader_->stats().consecutive_failures, 1u);  // the 503 unavailable, not the full
  clock_.Advance(first.retry_at_ms - clock_.NowMs());
  RunSummary second = Run();
  EXPECT_TRUE(second.drained);
  EXPECT_EQ(second.acked, 2u);
  EXPECT_EQ(uploader_->stats().duplicates, 1u);
  std::vector<std::string> tags;
  for (const Received& r : server_.received())
    tags.push_back(tag_of[r.body]);
  EXPECT_EQ(tags, (std::vector<std::string>{"a", "b", "c", "d", "b", "c", "d", "c", "d"}));
  EXPECT_EQ(server_.envelopes(), 3u);
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
}

// Entries beyond max_envelope_bytes wait for the next request; one larger than it goes alone.
TEST_P(UploaderEnvelopeTest, AnEnvelopeStaysWithinItsBytes) {
  UploaderOptions options;
  options.data_plane_url = server_.url();
  options.max_envelope_bytes = 1;  // every entry is larger: one per request
  options.log = log_.sink();
  auto uploader = Uploader::Create(
      options, *outbox_, *client_, [] { return std::string(kCredential); }, clock_);
  ASSERT_TRUE(uploader.ok());
  Enqueue("a");
  Enqueue("b");
  Result<RunSummary> summary = (*uploader)->RunOnce();
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(summary->drained);
  EXPECT_EQ(server_.envelopes(), 0u);
  EXPECT_EQ(server_.received().size(), 2u);
}

// A request too large for the server or a proxy (413) is not a reason to stop: the envelope's
// bytes halve until the entries fit, down to one per request.
TEST_P(UploaderEnvelopeTest, ATooLargeEnvelopeIsSentSmaller) {
  server_.AnswerEnvelopes(Answer{413, Error("body_too_large")});
  for (const char* tag : {"a", "b", "c", "d"})
    Enqueue(tag);
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 4u);
  EXPECT_EQ(uploader_->stats().dead_lettered, 0u);
  EXPECT_EQ(uploader_->stats().consecutive_failures, 0u);
  EXPECT_GE(server_.envelopes(), 1u);        // then smaller ones, down to one entry a request
  EXPECT_EQ(server_.received().size(), 4u);  // each one alone in the end
  EXPECT_THAT(log_.joined(), HasSubstr("bytes per request from now on"));
}

// A whole envelope answered 503 (or 429, a network failure) is retried with backoff as a single
// batch would be: envelopes stay on.
TEST_P(UploaderEnvelopeTest, AnEnvelopeTheServerCannotTakeNowIsRetried) {
  server_.AnswerEnvelopes(Answer{503, Error("unavailable")});
  Enqueue("a");
  Enqueue("b");
  RunSummary failed = Run();
  EXPECT_GT(failed.retry_at_ms, 0);
  EXPECT_EQ(uploader_->stats().last_error, "HTTP 503 unavailable");
  server_.AnswerEnvelopes(std::nullopt);
  clock_.Advance(failed.retry_at_ms - clock_.NowMs());
  EXPECT_TRUE(Run().drained);
  EXPECT_EQ(server_.envelopes(), 2u);
  EXPECT_EQ(server_.received().size(), 2u);  // both in the second envelope
  EXPECT_THAT(log_.joined(), Not(HasSubstr("one batch per request")));
}

// A 2xx that names no batch (a proxy's HTML page, an empty body) decodes to empty fields, which
// would read as a durable answer: it is retried with backoff, and the entry stays until the
// store's own answer comes. One entry queued: it goes alone also when envelopes are on.
TEST_P(UploaderPolicyTest, A2xxThatNamesNoBatchIsRetriedNotAcknowledged) {
  const uint64_t sequence = Enqueue("a");
  server_.Script({{200, "<html><body>Maintenance</body></html>"}, {200, ""}});
  RunSummary proxied = Run();
  EXPECT_EQ(proxied.acked, 0u);
  EXPECT_FALSE(proxied.drained);
  EXPECT_EQ(proxied.retry_at_ms, clock_.NowMs() + 500);
  EXPECT_EQ(outbox_->stats().depth_entries, 1u);
  clock_.Advance(500);
  RunSummary empty = Run();
  EXPECT_EQ(empty.acked, 0u);
  EXPECT_EQ(empty.retry_at_ms, clock_.NowMs() + 1000);  // backing off
  EXPECT_EQ(outbox_->stats().depth_entries, 1u);
  UploaderStats stats = uploader_->stats();
  EXPECT_EQ(stats.retries, 2u);
  EXPECT_EQ(stats.acked, 0u);
  EXPECT_EQ(stats.last_error, "HTTP 200 names no batch_id");
  EXPECT_THAT(log_.joined(), HasSubstr("names no batch_id"));
  clock_.Advance(1000);
  RunSummary stored = Run();
  EXPECT_TRUE(stored.drained);
  EXPECT_EQ(stored.acked, 1u);
  EXPECT_EQ(outbox_->stats().acked_through, sequence);
  const std::vector<Received> received = server_.received();
  ASSERT_EQ(received.size(), 3u);
  for (const Received& r : received)
    EXPECT_EQ(r.body, received[0].body);
}

// A 2xx among the answers that names no batch could be a proxy's empty answer: none of the
// envelope's answers is trusted, and the entries go again alone.
TEST_P(UploaderEnvelopeTest, AnAnswerThatNamesNoBatchIsNotTrusted) {
  server_.AnswerEnvelopes(
      Answer{200, R"({"answers":[{"status":200,"body":{}},{"status":200,"body":{}}]})"});
  Enqueue("a");
  Enqueue("b");
  EXPECT_TRUE(Run().drained);
  EXPECT_EQ(server_.received().size(), 2u);  // sent alone after the envelope
  EXPECT_THAT(log_.joined(), HasSubstr("names no batch_id"));
}

// An entry of a content type no frame can carry goes in a request of its own; the others
// still go together.
TEST_P(UploaderEnvelopeTest, AnEntryNoFrameCanCarryGoesAlone) {
  Enqueue("a");
  ASSERT_TRUE(outbox_
                  ->Enqueue("telemetry",
                            [](uint64_t) -> Result<Payload> {
                              return Payload{.content_type = "application/json; charset=utf-8",
                                             .bytes = R"({"version":1})"};
                            })
                  .ok());
  Enqueue("c");
  Enqueue("d");
  EXPECT_TRUE(Run().drained);
  std::vector<Received> received = server_.received();
  ASSERT_EQ(received.size(), 4u);
  EXPECT_EQ(received[1].content_type, "application/json; charset=utf-8");
  // a alone (the odd entry stops its envelope), the odd one alone, then c and d together.
  EXPECT_EQ(server_.envelopes(), 1u);
  EXPECT_EQ(uploader_->stats().sent, 3u);
}

// A refusal for good after receipts in the same envelope: the receipts are synced first (the
// dead-letter acknowledges everything before it), then the batch is dead-lettered and the
// answers after it are taken.
TEST_P(UploaderEnvelopeTest, ARefusalAfterReceiptsInTheSameEnvelopeWaitsForTheirSync) {
  Enqueue("a");
  const uint64_t poison = Enqueue("poison");
  Enqueue("c");
  server_.Script({{200, R"({"batch_id":"x/1","durable":false,"store_epoch":"e1","mark":1,)"
                        R"("durable_mark":0})"},
                  {400, Error("invalid_batch")},
                  {200, R"({"batch_id":"x/3","durable":true,"store_epoch":"e1","mark":3,)"
                        R"("durable_mark":3})"}});
  server_.ScriptSync({{200, R"({"store_epoch":"e1","durable_mark":1})"}});
  RunSummary summary = Run();
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.acked, 3u);
  UploaderStats stats = uploader_->stats();
  EXPECT_EQ(stats.acked, 2u);
  EXPECT_EQ(stats.dead_lettered, 1u);
  EXPECT_EQ(stats.sent, 2u);  // the envelope and the sync before the dead-letter
  EXPECT_EQ(outbox_->stats().depth_entries, 0u);
  EXPECT_THAT(log_.joined(), HasSubstr("refused batch " + std::to_string(poison)));
}

INSTANTIATE_TEST_SUITE_P(SeveralPerRequest, UploaderEnvelopeTest, ::testing::Values(32));

INSTANTIATE_TEST_SUITE_P(BatchesPerRequest, UploaderPolicyTest, ::testing::Values(1, 32),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           return param.param == 1 ? std::string("OnePerRequest")
                                                   : std::string("Envelopes");
                         });

}  // namespace
}  // namespace uploader_policy_test
}  // namespace expanse::outbox
