#include "http/error.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace expanse::http {
namespace {

using ::testing::Contains;
using ::testing::Pair;

TEST(ErrorBodyTest, HasTheOneShape) {
  EXPECT_EQ(ErrorBody("not_found", "no job 42"),
            R"({"error":{"code":"not_found","message":"no job 42"}})");
}

TEST(ErrorBodyTest, EscapesAndStaysValidJson) {
  const std::string body = ErrorBody("bad", "quote \" backslash \\ newline \n bad utf8 \xff end");
  const nlohmann::json parsed = nlohmann::json::parse(body);
  EXPECT_EQ(parsed["error"]["message"],
            "quote \" backslash \\ newline \n bad utf8 \xef\xbf\xbd end");
}

TEST(ErrorResponseTest, IsJsonWithStatus) {
  const Response response = ErrorResponse(409, "conflict", "already there");
  EXPECT_EQ(response.status, 409);
  EXPECT_EQ(response.content_type, "application/json");
  EXPECT_EQ(response.body, R"({"error":{"code":"conflict","message":"already there"}})");
}

TEST(HttpStatusForTest, MapsEveryCode) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(StatusCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDataLoss), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDeadlineExceeded), 500);
}

TEST(ErrorResponseTest, FromStatusUsesLowerCaseCodeName) {
  const Response response = ErrorResponse(NotFoundError("no job 42"));
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(response.body, R"({"error":{"code":"not_found","message":"no job 42"}})");
  EXPECT_EQ(ErrorResponse(InvalidArgumentError("x")).body,
            R"({"error":{"code":"invalid_argument","message":"x"}})");
}

TEST(ErrorResponseTest, FromStatusPrefersReason) {
  const Response response =
      ErrorResponse(UnauthenticatedError("credential revoked").WithReason("credential_revoked"));
  EXPECT_EQ(response.status, 401);
  EXPECT_EQ(response.body,
            R"({"error":{"code":"credential_revoked","message":"credential revoked"}})");
}

TEST(ErrorResponseTest, OkStatusIsACallerBug) {
  const Response response = ErrorResponse(OkStatus());
  EXPECT_EQ(response.status, 500);
  EXPECT_EQ(response.body,
            R"({"error":{"code":"internal","message":"error response built from an OK status"}})");
}

TEST(TooManyRequestsResponseTest, CarriesRetryAfter) {
  const Response response = TooManyRequestsResponse(std::chrono::seconds(12));
  EXPECT_EQ(response.status, 429);
  EXPECT_THAT(response.headers, Contains(Pair("Retry-After", "12")));
  EXPECT_EQ(
      response.body,
      R"({"error":{"code":"rate_limited","message":"too many requests; retry after 12 seconds"}})");
  EXPECT_THAT(TooManyRequestsResponse(std::chrono::seconds(0)).headers,
              Contains(Pair("Retry-After", "1")));
}

TEST(RequestTest, LooksUpParamsAndHeaders) {
  Request request;
  request.path_params = {{"job_id", "42"}};
  request.query_params = {{"state", "running"}, {"state", "pending"}};
  request.headers = {{"Content-Type", "application/json"}, {"X-Trace", "a"}, {"x-trace", "b"}};
  EXPECT_EQ(request.PathParam("job_id"), "42");
  EXPECT_EQ(request.PathParam("other"), "");
  EXPECT_EQ(request.QueryParam("state"), "running");
  EXPECT_EQ(request.QueryParam("missing"), std::nullopt);
  EXPECT_EQ(request.Header("content-type"), "application/json");
  EXPECT_EQ(request.Header("X-TRACE"), "a");
  EXPECT_EQ(request.Header("Content"), std::nullopt);
}

}  // namespace
}  // namespace expanse::http
