#include "agent/server_requests.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memory_host.h"

namespace expanse::agent {
namespace server_requests_test {
namespace {

using nlohmann::json;

class ServerRequestsTest : public ::testing::Test {
 protected:
  ServerRequestsTest() {
    host_.OnRun("scancel", [](const std::vector<std::string>& argv) {
      return argv.size() == 2 && argv[1] == "404"
                 ? MemoryHost::Exit(1, "", "scancel: error: Invalid job id specified\nmore")
                 : MemoryHost::Exit(0);
    });
  }
  json Answer(json requests) { return {{"compute_id", "cmp"}, {"requests", std::move(requests)}}; }

  MemoryHost host_;
  std::vector<std::string> log_;
  ServerRequests requests_{host_, [this](const std::string& line) { log_.push_back(line); }};
};

TEST_F(ServerRequestsTest, RunsEachScancelOnceAndReportsUntilAccepted) {
  const json answer = Answer({{{"id", 7}, {"kind", "scancel"}, {"job_id", "42"}, {"reason", "r"}}});
  requests_.Handle(answer);
  requests_.Handle(answer);  // the next answer still carries it: not run again
  EXPECT_EQ(host_.commands(), (std::vector<std::string>{"scancel 42"}));
  json results = requests_.PendingResults();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["id"], 7);
  EXPECT_EQ(results[0]["ok"], true);
  EXPECT_EQ(results[0]["message"], "scancel 42: cancelled");
  EXPECT_EQ(requests_.PendingResults().size(), 1u);  // until a heartbeat carrying it is accepted
  requests_.Acknowledge(1);
  EXPECT_TRUE(requests_.PendingResults().empty());
  EXPECT_THAT(log_, ::testing::Contains("server request 7: scancel 42: cancelled"));
}

TEST_F(ServerRequestsTest, AFailedScancelIsReportedWithWhatItSaid) {
  requests_.Handle(Answer({{{"id", 8}, {"kind", "scancel"}, {"job_id", "404"}}}));
  json results = requests_.PendingResults();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["ok"], false);
  EXPECT_EQ(results[0]["message"], "scancel 404: exit 1: scancel: error: Invalid job id specified");
}

TEST_F(ServerRequestsTest, RefusesWhatIsNotAScancelOfASlurmJob) {
  requests_.Handle(Answer({{{"id", 1}, {"kind", "shell"}, {"job_id", "42"}},
                           {{"id", 2}, {"kind", "scancel"}, {"job_id", "42; rm -rf /"}},
                           {{"id", 3}, {"kind", "scancel"}, {"job_id", "-u root"}},
                           {{"id", 4}, {"kind", "scancel"}, {"job_id", 42}},
                           {{"id", "5"}, {"kind", "scancel"}, {"job_id", "42"}},
                           "junk",
                           {{"kind", "scancel"}, {"job_id", "42"}}}));
  EXPECT_TRUE(host_.commands().empty());
  json results = requests_.PendingResults();
  ASSERT_EQ(results.size(), 4u);  // ids 1-4 get an answer; no id, no answer
  for (const json& r : results)
    EXPECT_EQ(r["ok"], false) << r.dump();
  EXPECT_THAT(results[0]["message"].get<std::string>(),
              ::testing::HasSubstr("unknown request kind"));
  EXPECT_THAT(results[1]["message"].get<std::string>(), ::testing::HasSubstr("not a SLURM job id"));
  requests_.Handle(json::object());
  requests_.Handle(json{{"requests", "all"}});
  EXPECT_EQ(requests_.PendingResults().size(), 4u);
}

// The body as it arrives: what is not a heartbeat answer within its limits is ignored.
TEST_F(ServerRequestsTest, TheAnswersBodyIsParsedWithinLimits) {
  requests_.HandleAnswer(R"({"requests":[{"id":9,"kind":"scancel","job_id":"77"}]})");
  EXPECT_EQ(host_.commands(), (std::vector<std::string>{"scancel 77"}));
  const std::string nested = std::string(100'000, '[') + std::string(100'000, ']');
  for (const std::string& body :
       {std::string("not json"), std::string(R"([{"id":10}])"), nested,
        std::string(R"({"requests":[{"id":10,"kind":"scancel","job_id":"78"}],"x":)") +
            std::string(20, '[') + std::string(20, ']') + "}"}) {
    requests_.HandleAnswer(body);
  }
  EXPECT_EQ(host_.commands().size(), 1u) << "too deep: not one of ours, so nothing in it runs";
}

TEST(IsSlurmJobIdTest, TheFormsSqueuePrints) {
  for (const char* ok : {"1", "123", "123_4", "123+1"})
    EXPECT_TRUE(IsSlurmJobId(ok)) << ok;
  for (const char* bad : {"", "_1", "1_", "1_2_3", "1+2_3", "12a", "-1", " 1", "1 2", "1;2"})
    EXPECT_FALSE(IsSlurmJobId(bad)) << bad;
  EXPECT_FALSE(IsSlurmJobId(std::string(65, '1')));
}

}  // namespace
}  // namespace server_requests_test
}  // namespace expanse::agent
