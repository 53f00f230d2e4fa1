// Heavy reads (job lists, timelines, ledgers, verdicts, stacks, capture) hold one of a few slots
// while they run (routes.h, AnswerHeavyConsoleJson): with every slot taken, another is asked to
// come back (503 queries_busy, Retry-After 1), while sign-ins and light reads are answered.
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/api_test_util.h"
#include "server/concurrency_slots.h"

namespace expanse::server {
namespace {

using api_testing::ApiTest;

class ApiHeavyReadsTest : public ApiTest {
 protected:
  void Customize(ServerOptions& options) override { options.heavy_reads_at_once = 2; }
};

TEST_F(ApiHeavyReadsTest, WithEverySlotTakenAHeavyReadIsAskedToComeBack) {
  const std::string compute = NewCompute(token_);
  const std::string job = "/api/v1/computes/" + compute + "/jobs/4242";
  const std::vector<std::string> heavy = {"/api/v1/orgs/acme/jobs",
                                          "/api/v1/orgs/acme/efficiency",
                                          job,
                                          job + "/timeline",
                                          job + "/ledger",
                                          job + "/verdicts",
                                          job + "/stacks",
                                          job + "/capture"};

  std::optional<ConcurrencySlots::Slot> first = app_->heavy_reads().TryTake();
  std::optional<ConcurrencySlots::Slot> second = app_->heavy_reads().TryTake();
  ASSERT_TRUE(first && second);
  ASSERT_FALSE(app_->heavy_reads().TryTake()) << "two slots, as configured";
  for (const std::string& path : heavy) {
    Reply busy = Call("GET", path, "", Bearer(token_));
    EXPECT_EQ(busy.status, 503) << path << ": " << busy.body;
    EXPECT_EQ(Code(busy), "queries_busy") << path;
    EXPECT_EQ(busy.headers.find("Retry-After")->second, "1") << path;
    // A stranger is refused as a stranger: no slot is spent on telling them.
    EXPECT_EQ(Call("GET", path).status, 401) << path;
  }
  EXPECT_EQ(app_->counters().queries_busy.load(), heavy.size()) << "counted for /metrics";
  // Light reads and the rest of the API go on.
  EXPECT_EQ(Call("GET", "/api/v1/orgs/acme/computes", "", Bearer(token_)).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/computes/" + compute + "/nodes", "", Bearer(token_)).status, 200);

  second.reset();
  for (const std::string& path : heavy) {
    Reply answered = Call("GET", path, "", Bearer(token_));
    EXPECT_NE(answered.status, 503) << path << ": " << answered.body;
    EXPECT_EQ(app_->heavy_reads().in_use(), 1) << path << " gave its slot back";
  }
}

}  // namespace
}  // namespace expanse::server
