#include "core/status.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse {
namespace {

TEST(StatusTest, DefaultIsOk) {
  const Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status.ToString(), "OK");
  EXPECT_EQ(status, OkStatus());
}

TEST(StatusTest, OkDropsMessageSoAllOkStatusesAreEqual) {
  const Status status(StatusCode::kOk, "ignored");
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status, OkStatus());
}

TEST(StatusTest, ErrorKeepsCodeAndMessage) {
  const Status status = NotFoundError("no such job 42");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "no such job 42");
  EXPECT_EQ(status.ToString(), "NOT_FOUND: no such job 42");
}

TEST(StatusTest, ToStringWithoutMessageIsJustTheCodeName) {
  EXPECT_EQ(Status(StatusCode::kInternal, "").ToString(), "INTERNAL");
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(InternalError("x"), InternalError("x"));
  EXPECT_NE(InternalError("x"), InternalError("y"));
  EXPECT_NE(InternalError("x"), DataLossError("x"));
}

TEST(StatusTest, EveryFactoryUsesItsCode) {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  const std::vector<Case> cases = {
      {InvalidArgumentError("m"), StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {NotFoundError("m"), StatusCode::kNotFound, "NOT_FOUND"},
      {AlreadyExistsError("m"), StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
      {PermissionDeniedError("m"), StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
      {FailedPreconditionError("m"), StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {UnavailableError("m"), StatusCode::kUnavailable, "UNAVAILABLE"},
      {DeadlineExceededError("m"), StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {DataLossError("m"), StatusCode::kDataLoss, "DATA_LOSS"},
      {InternalError("m"), StatusCode::kInternal, "INTERNAL"},
      {UnauthenticatedError("m"), StatusCode::kUnauthenticated, "UNAUTHENTICATED"},
      {ResourceExhaustedError("m"), StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.name;
    EXPECT_EQ(StatusCodeName(c.code), c.name);
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
}

TEST(StatusTest, OutOfRangeCodeHasAName) {
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(999)), "UNKNOWN_CODE");
}

TEST(StatusTest, StreamsAsToString) {
  std::ostringstream out;
  out << UnavailableError("slurmctld down");
  EXPECT_EQ(out.str(), "UNAVAILABLE: slurmctld down");
}

TEST(StatusReasonTest, ErrorKeepsItsReason) {
  Status s = UnauthenticatedError("credential revoked").WithReason("credential_revoked");
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.reason(), "credential_revoked");
  EXPECT_NE(s, UnauthenticatedError("credential revoked"));
}

TEST(StatusReasonTest, OkStatusDropsReason) {
  EXPECT_EQ(OkStatus().WithReason("anything").reason(), "");
  EXPECT_EQ(OkStatus().WithReason("anything"), OkStatus());
}

}  // namespace
}  // namespace expanse
