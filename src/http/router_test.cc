#include "http/router.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::http {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

// A handler that answers with `name`, so tests can see which route matched.
Handler Named(std::string name) {
  return [name](const Request&) { return JsonResponse(200, name); };
}

std::string Call(const Router::Match& match) {
  return match.handler == nullptr ? "<none>" : (*match.handler)(Request()).body;
}

class RouterTest : public ::testing::Test {
 protected:
  void Add(std::string_view method, std::string_view pattern) {
    const Status status = router_.Add(method, pattern, Named(std::string(pattern)));
    ASSERT_TRUE(status.ok()) << status;
  }
  Router router_;
};

TEST_F(RouterTest, MatchesLiteralPaths) {
  Add("GET", "/");
  Add("GET", "/api/v1/jobs");
  EXPECT_EQ(Call(router_.Find("GET", "/")), "/");
  EXPECT_EQ(Call(router_.Find("GET", "/api/v1/jobs")), "/api/v1/jobs");
  EXPECT_EQ(Call(router_.Find("GET", "/api/v1/jobs/")), "<none>");
  EXPECT_EQ(Call(router_.Find("GET", "/api/v1")), "<none>");
  EXPECT_EQ(Call(router_.Find("GET", "/API/v1/jobs")), "<none>");
  EXPECT_EQ(Call(router_.Find("GET", "")), "<none>");
}

TEST_F(RouterTest, CapturesPathParams) {
  Add("GET", "/clusters/:cluster/jobs/:job_id");
  const Router::Match match = router_.Find("GET", "/clusters/north/jobs/42");
  EXPECT_EQ(Call(match), "/clusters/:cluster/jobs/:job_id");
  EXPECT_THAT(match.path_params, ElementsAre(Pair("cluster", "north"), Pair("job_id", "42")));
  EXPECT_EQ(Call(router_.Find("GET", "/clusters//jobs/42")), "<none>");  // params are non-empty
  EXPECT_EQ(Call(router_.Find("GET", "/clusters/north/jobs")), "<none>");
}

// The path is split at the '/' sent: an encoded one belongs to its segment (a job id holding
// '/' is one parameter), and each segment is compared and stored decoded.
TEST_F(RouterTest, SplitsAtSlashesSentAndDecodesEachSegment) {
  Add("GET", "/clusters/:cluster/jobs/:job_id");
  Add("GET", "/console/*file");
  Router::Match match = router_.Find("GET", "/clusters/n%20orth/jobs/a%2Fb");
  EXPECT_EQ(Call(match), "/clusters/:cluster/jobs/:job_id");
  EXPECT_THAT(match.path_params, ElementsAre(Pair("cluster", "n orth"), Pair("job_id", "a/b")));
  EXPECT_EQ(Call(router_.Find("GET", "/clusters/north/jobs/a/b")), "<none>");
  EXPECT_EQ(Call(router_.Find("GET", "/clusters/north/%6Aobs/7")),
            "/clusters/:cluster/jobs/:job_id");
  match = router_.Find("GET", "/console/js%2Fapp.js/x%41");
  EXPECT_THAT(match.path_params, ElementsAre(Pair("file", "js/app.js/xA")));
  match = router_.Find("GET", "/clusters/north/jobs/100%");  // a stray '%' is kept
  EXPECT_THAT(match.path_params, ElementsAre(Pair("cluster", "north"), Pair("job_id", "100%")));
}

TEST_F(RouterTest, RestParamTakesTheRemainder) {
  Add("GET", "/console/*file");
  Router::Match match = router_.Find("GET", "/console/js/app.js");
  EXPECT_EQ(Call(match), "/console/*file");
  EXPECT_THAT(match.path_params, ElementsAre(Pair("file", "js/app.js")));
  match = router_.Find("GET", "/console/");
  EXPECT_THAT(match.path_params, ElementsAre(Pair("file", "")));
  match = router_.Find("GET", "/console");
  EXPECT_THAT(match.path_params, ElementsAre(Pair("file", "")));
  EXPECT_EQ(Call(router_.Find("GET", "/consoles/x")), "<none>");
}

TEST_F(RouterTest, MostSpecificRouteWinsWhateverTheOrder) {
  Add("GET", "/files/*rest");
  Add("GET", "/jobs/:id");
  Add("GET", "/jobs/summary");
  Add("GET", "/files/:name");
  EXPECT_EQ(Call(router_.Find("GET", "/jobs/summary")), "/jobs/summary");
  EXPECT_EQ(Call(router_.Find("GET", "/jobs/7")), "/jobs/:id");
  EXPECT_EQ(Call(router_.Find("GET", "/files/a")), "/files/:name");
  EXPECT_EQ(Call(router_.Find("GET", "/files/a/b")), "/files/*rest");
}

TEST_F(RouterTest, HeadUsesGetRoutes) {
  Add("GET", "/health");
  EXPECT_EQ(Call(router_.Find("HEAD", "/health")), "/health");
}

TEST_F(RouterTest, ReportsAllowedMethodsForWrongMethod) {
  Add("GET", "/jobs/:id");
  Add("DELETE", "/jobs/:id");
  Add("POST", "/jobs");
  const Router::Match match = router_.Find("PUT", "/jobs/3");
  EXPECT_EQ(match.handler, nullptr);
  EXPECT_THAT(match.allowed_methods, ElementsAre("DELETE", "GET", "HEAD"));
  EXPECT_THAT(router_.Find("PUT", "/nothing").allowed_methods, IsEmpty());
}

TEST_F(RouterTest, RejectsMalformedPatterns) {
  struct Case {
    const char* pattern;
    const char* message;
  };
  for (const Case& c : {
           Case{"jobs", "GET route \"jobs\": pattern must start with '/'"},
           Case{"", "GET route \"\": pattern must start with '/'"},
           Case{"/jobs/:", "GET route \"/jobs/:\": parameter in segment 2 has no name"},
           Case{"/a/:x/b/:x", "GET route \"/a/:x/b/:x\": parameter \"x\" appears twice"},
           Case{"/a/*rest/b", "GET route \"/a/*rest/b\": '*rest' must be the last segment"},
       }) {
    const Status status = router_.Add("GET", c.pattern, Named("x"));
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.pattern;
    EXPECT_EQ(status.message(), c.message);
  }
  EXPECT_EQ(router_.Add("GET", "/x", nullptr).message(), "GET route \"/x\": handler is empty");
}

TEST_F(RouterTest, RejectsRoutesMatchingTheSamePaths) {
  Add("GET", "/jobs/:id");
  const Status status = router_.Add("GET", "/jobs/:job", Named("x"));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "GET route \"/jobs/:job\": matches the same paths as \"/jobs/:id\"");
  EXPECT_TRUE(router_.Add("POST", "/jobs/:job", Named("x")).ok());
  EXPECT_TRUE(router_.Add("GET", "/jobs/:id/steps", Named("x")).ok());
}

TEST_F(RouterTest, MatchCarriesTheRouteBodyLimit) {
  EXPECT_EQ(router_.LargestBodyLimit(), 0u);
  ASSERT_TRUE(router_.Add("POST", "/big", Named("big"), 1 << 20).ok());
  ASSERT_TRUE(router_.Add("POST", "/small/:id", Named("small"), 100).ok());
  Add("POST", "/default");
  EXPECT_EQ(router_.Find("POST", "/big").max_body_bytes, 1u << 20);
  EXPECT_EQ(router_.Find("POST", "/small/7").max_body_bytes, 100u);
  EXPECT_EQ(router_.Find("POST", "/default").max_body_bytes, 0u);
  EXPECT_EQ(router_.Find("POST", "/nothing").max_body_bytes, 0u);
  EXPECT_EQ(router_.LargestBodyLimit(), 1u << 20);
}

}  // namespace
}  // namespace expanse::http
