// The report commands against a real expanse-server in process: the job report and the job
// list read through the real API, error answers turned into one sentence and an exit status,
// and hostile answers from a server that is not Expanse refused without a crash.
//
// EXPANSE_REPORT_RECORD_DIR=<dir> also writes the server's raw answers there: that is how
// tests/fixtures/report/*.json were recorded (report_render_test.cc renders them).
#include "report/report_client.h"

#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "report/report_command.h"
#include "report/report_render.h"
#include "report/report_test_server.h"

namespace expanse::report {
namespace report_client_test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::kStart;
using ::testing::Not;
using testing::ReportServerTest;

class ReportClientTest : public ReportServerTest {
 protected:
  std::unique_ptr<ReportClient> Client(const std::string& token) {
    auto client =
        ReportClient::Create(ConnectionToServer(), ApiToken(token), std::chrono::seconds(10));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The server's raw answer to `path`, written to $EXPANSE_REPORT_RECORD_DIR/<name> when set.
  void Record(const std::string& path, const std::string& name) {
    const char* dir = std::getenv("EXPANSE_REPORT_RECORD_DIR");
    if (dir == nullptr)
      return;
    httplib::Result r = client_->Get(path, Bearer(token_));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    std::ofstream(std::string(dir) + "/" + name) << r->body << "\n";
  }
};

TEST_F(ReportClientTest, TheJobReportReadsTheJobItsGpusVerdictsAndLedger) {
  auto client = Client(token_);
  ASSERT_NE(client, nullptr);
  Result<JobReport> report = client->FetchJobReport("77", kSparklineColumns);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->job.job_id, "77");
  EXPECT_EQ(report->job.user, "ana");
  ASSERT_EQ(report->job.gpus.size(), 2u);
  ASSERT_EQ(report->timeline.series.size(), 2u);
  EXPECT_FALSE(report->timeline.series[0].points.empty());
  std::set<std::string> codes;
  for (const Verdict& v : report->verdicts.verdicts)
    codes.insert(v.code);
  EXPECT_EQ(codes, (std::set<std::string>{"no_process", "over_allocated", "memory_oversized"}));
  EXPECT_EQ(report->ledger.totals.gpus, 2);
  EXPECT_EQ(report->ledger.totals.never_used_gpus, 1);
  EXPECT_DOUBLE_EQ(report->ledger.totals.allocated_gpu_s, 1200);

  const std::string text = RenderJobReport(*report);
  EXPECT_THAT(text, HasSubstr("GPU-idle"));
  EXPECT_THAT(text, HasSubstr("ask for 1 GPU, not 2"));
  EXPECT_THAT(text, HasSubstr("a MIG 1g.35gb slice would do"));
  EXPECT_THAT(text, HasSubstr("█"));
  EXPECT_THAT(text, Not(HasSubstr(token_)));

  const std::string base = "/api/v1/computes/" + compute_ + "/jobs/";
  Record(base + "77", "job_77.json");
  Record(base + "77/timeline?metric=gpu.sm_util&points=60", "timeline_77.json");
  Record(base + "77/verdicts", "verdicts_77.json");
  Record(base + "77/ledger", "ledger_77.json");
  Record(base + "80_3", "job_80_3.json");
  Record(base + "80_3/timeline?metric=gpu.sm_util&points=60", "timeline_80_3.json");
  Record(base + "80_3/verdicts", "verdicts_80_3.json");
  Record(base + "80_3/ledger", "ledger_80_3.json");
  Record("/api/v1/orgs/acme/jobs?user=ana&from=" + std::to_string(kStart - 86'400'000) +
             "&limit=500&offset=0",
         "jobs_ana.json");
}

TEST_F(ReportClientTest, AnArrayTaskIsReportedWithItsStackVerdict) {
  auto client = Client(token_);
  ASSERT_NE(client, nullptr);
  Result<JobReport> report = client->FetchJobReport("80_3", kSparklineColumns);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->verdicts.verdicts.size(), 1u);
  EXPECT_EQ(report->verdicts.verdicts[0].code, "input_bound");
  EXPECT_THAT(RenderJobReport(*report), HasSubstr("__next__"));
}

TEST_F(ReportClientTest, TheJobListHoldsOnlyTheUsersJobs) {
  auto client = Client(token_);
  ASSERT_NE(client, nullptr);
  Result<JobList> list = client->FetchJobList("ana", kStart - 86'400'000, kStart + 3'600'000, 2);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->jobs.size(), 2u);
  EXPECT_EQ(list->jobs[0].job_id, "80_3");  // newest first
  EXPECT_EQ(list->jobs[1].job_id, "77");
  EXPECT_TRUE(list->truncated) << "the cap was reached: more may have matched";
  list = client->FetchJobList("ana", kStart - 86'400'000, kStart + 3'600'000, 100);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->jobs.size(), 2u);
  EXPECT_FALSE(list->truncated);
  EXPECT_THAT(RenderJobList(*list), Not(HasSubstr("bobs")));
  // A window that starts after both jobs ended holds none of them.
  list = client->FetchJobList("ana", kStart + 2 * 3'600'000, kStart + 3'600'000, 100);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->jobs.empty());
}

TEST_F(ReportClientTest, ErrorAnswersBecomeOneSentenceAndAnExitStatus) {
  auto client = Client(token_);
  ASSERT_NE(client, nullptr);
  Result<JobReport> missing = client->FetchJobReport("999", 60);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "job 999 not found on compute \"" + compute_ + "\"");
  EXPECT_EQ(ExitCodeFor(missing.status()), kExitNotFound);

  Connection elsewhere = ConnectionToServer();
  elsewhere.compute = "cmp_not_ours";
  auto other = ReportClient::Create(elsewhere, ApiToken(token_), std::chrono::seconds(10));
  ASSERT_TRUE(other.ok());
  missing = (*other)->FetchJobReport("77", 60);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no compute \"cmp_not_ours\""));
  EXPECT_EQ(ExitCodeFor(missing.status()), kExitNotFound);

  auto refused = Client("exp_at_not-a-real-token");
  ASSERT_NE(refused, nullptr);
  Result<JobReport> denied = refused->FetchJobReport("77", 60);
  ASSERT_FALSE(denied.ok());
  EXPECT_THAT(denied.status().message(), HasSubstr("refused the API token"));
  EXPECT_THAT(denied.status().message(), Not(HasSubstr("not-a-real-token")));
  EXPECT_EQ(ExitCodeFor(denied.status()), kExitAuth);

  Connection wrong_org = ConnectionToServer();
  wrong_org.org = "globex";
  auto lister = ReportClient::Create(wrong_org, ApiToken(token_), std::chrono::seconds(10));
  ASSERT_TRUE(lister.ok());
  Result<JobList> list = (*lister)->FetchJobList("ana", 1, kStart, 10);
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("no organisation \"globex\""));
  EXPECT_EQ(ExitCodeFor(list.status()), kExitNotFound);
}

TEST_F(ReportClientTest, TheCommandsRunEndToEndWithTheTokenFromTheEnvironment) {
  const Connection c = ConnectionToServer();
  const EnvLookup env = [&](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "EXPANSE_SERVER")
      return c.server_url;
    if (std::string(name) == "EXPANSE_COMPUTE")
      return c.compute;
    if (std::string(name) == "EXPANSE_ORG")
      return c.org;
    return std::nullopt;
  };
  JobReportFlags flags;
  flags.job_id = "77";
  flags.json = true;
  std::string out;
  Status s = RunJobReport(flags, ApiToken(token_), env, &out);
  ASSERT_TRUE(s.ok()) << s;
  const nlohmann::json doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc["kind"], "expanse.job_report");
  EXPECT_EQ(doc["job"]["job_id"], "77");
  EXPECT_EQ(doc["gpus"].size(), 2u);

  JobsFlags jobs;
  jobs.user = "ana";
  jobs.since = "30d";
  ManualClock clock(kStart + 3'600'000);
  s = RunJobs(jobs, ApiToken(token_), env, clock, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(out, HasSubstr("80_3"));
  EXPECT_THAT(out, HasSubstr("IDLE GPU-H"));

  // Without a token: a usage error naming both ways to give one.
  s = RunJobReport(flags, std::nullopt, env, &out);
  EXPECT_EQ(ExitCodeFor(s), kExitUsage);
  EXPECT_THAT(s.message(), HasSubstr("EXPANSE_API_TOKEN"));
  EXPECT_THAT(s.message(), HasSubstr("--token-file"));
}

TEST_F(ReportClientTest, JsonOutputEscapesC1ControlsFromTheServer) {
  // A job name is stored as SLURM gave it, C1 controls included (valid UTF-8): --json must not
  // print U+009B (CSI) raw.
  const json batch = {{"version", 1},
                      {"stream", "telemetry"},
                      {"sequence", 2},
                      {"series", json::array()},
                      {"jobs",
                       {Job("91",
                            "x\xc2\x9b"
                            "2Jy",
                            "ana", "worker2", 1, kStart)}}};
  Reply ingested = Call("POST", "/dp/v1/ingest", batch.dump(), Bearer(credential_));
  ASSERT_EQ(ingested.status, 200) << ingested.body;
  const Connection c = ConnectionToServer();
  const EnvLookup env = [&](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "EXPANSE_SERVER")
      return c.server_url;
    if (std::string(name) == "EXPANSE_COMPUTE")
      return c.compute;
    if (std::string(name) == "EXPANSE_ORG")
      return c.org;
    return std::nullopt;
  };
  JobsFlags jobs;
  jobs.user = "ana";
  jobs.since = "30d";
  jobs.json = true;
  ManualClock clock(kStart + 3'600'000);
  std::string out;
  Status s = RunJobs(jobs, ApiToken(token_), env, clock, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(out, HasSubstr("x\\u009b2Jy"));
  EXPECT_THAT(out, Not(HasSubstr("\xc2\x9b")));
  jobs.json = false;
  s = RunJobs(jobs, ApiToken(token_), env, clock, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(out, Not(HasSubstr("\xc2\x9b")));
}

TEST(ReportClientUnreachableTest, AClosedPortIsUnreachable) {
  // A port nothing listens on: bind one, learn its number, close it.
  httplib::Server server;
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  server.stop();
  auto client = ReportClient::Create(
      {.server_url = "http://127.0.0.1:" + std::to_string(port), .compute = "cmp_a"},
      ApiToken("exp_at_x"), std::chrono::seconds(5));
  ASSERT_TRUE(client.ok()) << client.status();
  Result<JobReport> report = (*client)->FetchJobReport("1", 60);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("cannot reach the server"));
  EXPECT_EQ(ExitCodeFor(report.status()), kExitUnreachable);
}

// A server that is not Expanse, answering whatever the test sets: the client must refuse each
// answer with a sentence, never crash or hang.
class HostileServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get(".*", [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      if (busy_answers_ > 0) {
        --busy_answers_;
        res.status = 503;
        res.set_header("Retry-After", "1");
        res.set_content(R"({"error":{"code":"queries_busy","message":"ask again shortly"}})",
                        "application/json");
        return;
      }
      res.status = status_;
      res.set_content(body_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Bounded: a server that never starts fails the test instead of hanging it.
    for (int i = 0; i < 500 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(server_.is_running());
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  Status Fetch() {
    auto client = ReportClient::Create({.server_url = "http://127.0.0.1:" + std::to_string(port_),
                                        .org = "acme",
                                        .compute = "cmp_a"},
                                       ApiToken("exp_at_secret-value"), std::chrono::seconds(10));
    if (!client.ok())
      return client.status();
    return (*client)->FetchJobReport("77", 60).status();
  }
  Result<JobList> List(size_t max_jobs) {
    auto client = ReportClient::Create({.server_url = "http://127.0.0.1:" + std::to_string(port_),
                                        .org = "acme",
                                        .compute = "cmp_a"},
                                       ApiToken("exp_at_secret-value"), std::chrono::seconds(10));
    if (!client.ok())
      return client.status();
    return (*client)->FetchJobList("ana", 1, kStart, max_jobs);
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  int status_ = 200;
  std::string body_;
  std::atomic<int> requests_{0};
  std::atomic<int> busy_answers_{0};  // answered 503 queries_busy first
};

TEST_F(HostileServerTest, MalformedAnswersAreRefusedByName) {
  for (const std::string& body :
       {std::string("<html>proxy error</html>"), std::string("[]"), std::string("{}"),
        std::string(
            R"({"compute_id":"c","job_id":"77","requested":{},"used":{"gpus_allocated":"2"}})"),
        std::string(R"({"compute_id":"c","job_id":7})"), std::string(200, '['),
        std::string("{\"a\":") + std::string(100, '[')}) {
    body_ = body;
    const Status s = Fetch();
    ASSERT_FALSE(s.ok()) << body;
    EXPECT_EQ(s.reason(), "invalid_answer") << s;
    EXPECT_EQ(ExitCodeFor(s), kExitFailed);
    EXPECT_THAT(s.message(), HasSubstr("the server's job answer is malformed")) << s;
    EXPECT_THAT(s.message(), Not(HasSubstr("secret-value")));
  }
}

TEST_F(HostileServerTest, ErrorBodiesOfAnyShapeStillGiveOneSentence) {
  status_ = 403;
  body_ =
      R"({"error":{"code":"forbidden","message":"your role in this organization does not allow this"}})";
  Status s = Fetch();
  EXPECT_EQ(ExitCodeFor(s), kExitAuth);
  EXPECT_THAT(s.message(), HasSubstr("the token lacks view on compute \"cmp_a\""));
  status_ = 503;
  body_ = "<html>busy</html>";
  s = Fetch();
  EXPECT_EQ(ExitCodeFor(s), kExitUnreachable);
  EXPECT_EQ(s.message(), "the server answered 503");
  status_ = 400;
  body_ = R"({"error":{"code":"invalid_argument","message":"points must be an integer"}})";
  s = Fetch();
  EXPECT_EQ(ExitCodeFor(s), kExitFailed);
  EXPECT_THAT(s.message(), HasSubstr("points must be an integer"));
}

TEST_F(HostileServerTest, AServerThatRepeatsItsPagesEndsTheListing) {
  // Every page is `limit` copies of one job: nothing new after the first, and never a short
  // page. The listing must stop at once, not walk to the offset cap.
  const std::string job = R"({"compute_id":"cmp_a","job_id":"7","user":"ana","requested":{},)"
                          R"("used":{"gpus_allocated":1,"gpus_active":1,"sm_mean":1,"sm_peak":1,)"
                          R"("gpu_mem_peak_mib":1,"allocated_gpu_hours":1,"idle_gpu_hours":0}})";
  body_ = R"({"jobs":[)";
  for (int i = 0; i < 20; ++i)
    body_ += (i == 0 ? "" : ",") + job;
  body_ += "]}";
  Result<JobList> list = List(20);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().reason(), "invalid_answer") << list.status();
  EXPECT_THAT(list.status().message(), HasSubstr("no job it had not listed already"));
  EXPECT_LE(requests_.load(), 2);
}

// A server running as many large queries as it runs at once answers 503 queries_busy: the read
// is asked again after Retry-After, five times at most, and then fails as unavailable.
TEST_F(HostileServerTest, ABusyServerIsAskedAgainAFewTimes) {
  body_ = R"({"jobs":[]})";
  busy_answers_ = 2;
  Result<JobList> list = List(20);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->jobs.empty());
  EXPECT_EQ(requests_.load(), 3);

  requests_ = 0;
  busy_answers_ = 100;
  list = List(20);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(ExitCodeFor(list.status()), kExitUnreachable);
  EXPECT_THAT(list.status().message(), HasSubstr("the server answered 503 (queries_busy"));
  EXPECT_EQ(requests_.load(), 6);
}

TEST_F(HostileServerTest, AnErrorMessageCarriesNoTerminalControls) {
  // U+009B is CSI in C1: a terminal reads U+009B "2J" as "clear the screen".
  status_ = 503;
  body_ = R"({"error":{"code":"busy","message":"busy \u009b2J\u0085 now"}})";
  const Status s = Fetch();
  EXPECT_EQ(ExitCodeFor(s), kExitUnreachable);
  EXPECT_THAT(s.message(), HasSubstr("the server answered 503 (busy: "));
  EXPECT_THAT(s.message(), Not(HasSubstr("\xc2\x9b")));
  EXPECT_THAT(s.message(), Not(HasSubstr("\xc2\x85")));
}

}  // namespace
}  // namespace report_client_test
}  // namespace expanse::report
