#include "dcgm/dcgmi_errors.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::dcgm {
namespace dcgmi_errors_test {
namespace {

DcgmiError Recognize(std::string_view line) {
  std::optional<DcgmiError> error = RecognizeDcgmiError(line);
  EXPECT_TRUE(error.has_value()) << line;
  return error.value_or(DcgmiError{});
}

TEST(DcgmiErrorsTest, EngineUnreachable) {
  // Both lines Command.cpp prints on stdout when dcgmConnect_v3 fails.
  DcgmiError first =
      Recognize("Error: unable to establish a connection to the specified host: localhost:5555\n");
  EXPECT_EQ(first.failure, DcgmiFailure::kEngineUnreachable);
  EXPECT_EQ(first.dcgm_return, -21);
  EXPECT_EQ(first.message,
            "Error: unable to establish a connection to the specified host: localhost:5555");
  DcgmiError second = Recognize(
      "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.");
  EXPECT_EQ(second.failure, DcgmiFailure::kEngineUnreachable);
  EXPECT_EQ(FailureReason(second.failure), "engine_unreachable");
}

TEST(DcgmiErrorsTest, WatchFailedWithAndWithoutCode) {
  DcgmiError now = Recognize(
      "Error setting watches. Result: -33: This request is serviced by a module of DCGM that "
      "is not currently loaded");
  EXPECT_EQ(now.failure, DcgmiFailure::kWatchFailed);
  EXPECT_EQ(now.dcgm_return, -33);
  EXPECT_EQ(DcgmReturnName(*now.dcgm_return), "DCGM_ST_MODULE_NOT_LOADED");
  // DCGM 2.x printed no code (NVIDIA/DCGM issues #3 and #53).
  DcgmiError before = Recognize(
      "Error setting watches. Result: The third-party Profiling module returned an "
      "unrecoverable error");
  EXPECT_EQ(before.failure, DcgmiFailure::kWatchFailed);
  EXPECT_EQ(before.dcgm_return, std::nullopt);
  EXPECT_EQ(FailureReason(before.failure), "watch_failed");
}

TEST(DcgmiErrorsTest, DmonFailures) {
  DcgmiError field = Recognize(
      "Error: Got invalid field ID. '9999'. See dcgm_fields.h for a list of valid field IDs.");
  EXPECT_EQ(field.failure, DcgmiFailure::kInvalidField);
  EXPECT_EQ(field.dcgm_return, -1);
  EXPECT_EQ(Recognize("Error: Expected numerical fieldId. Got 'x' instead.").failure,
            DcgmiFailure::kInvalidField);

  DcgmiError lost = Recognize(
      "Error getting values information. Return -21: Host engine connection "
      "invalid/disconnected");
  EXPECT_EQ(lost.failure, DcgmiFailure::kReadFailed);
  EXPECT_EQ(lost.dcgm_return, -21);

  EXPECT_EQ(Recognize("No data returned from the hostengine.").failure, DcgmiFailure::kNoData);
  EXPECT_EQ(Recognize("dmon was stopped due to receiving a signal").failure,
            DcgmiFailure::kStopped);
  EXPECT_EQ(Recognize("Error: unable to initialize DCGM").failure, DcgmiFailure::kInitFailed);
}

TEST(DcgmiErrorsTest, HealthFailures) {
  DcgmiError off = Recognize("Error: Health watches not enabled. Please enable watches. ");
  EXPECT_EQ(off.failure, DcgmiFailure::kHealthNotEnabled);
  EXPECT_EQ(FailureReason(off.failure), "health_watches_not_enabled");
  EXPECT_EQ(off.message, "Error: Health watches not enabled. Please enable watches.");
  EXPECT_EQ(
      Recognize("Error: Unable to check health watches. Return: The Group is not found").failure,
      DcgmiFailure::kHealthFailed);
}

TEST(DcgmiErrorsTest, OtherErrorLines) {
  DcgmiError other =
      Recognize("Unable to get DCGM sorted entities. Error: -3: Generic unspecified error");
  EXPECT_EQ(other.failure, DcgmiFailure::kOther);
  EXPECT_EQ(other.dcgm_return, -3);
  EXPECT_EQ(FailureReason(other.failure), "dcgmi_error");
  EXPECT_EQ(Recognize("Error: something new").dcgm_return, std::nullopt);
}

TEST(DcgmiErrorsTest, OrdinaryOutputIsNoError) {
  for (const std::string_view line :
       {"GPU 0           14           N/A", "#Entity         RPCTR", "ID              #", "", "{",
        "\t\"body\" : ", "2 GPUs found (Active).", "Health monitor systems set successfully.",
        "an Error inside a line"}) {
    EXPECT_EQ(RecognizeDcgmiError(line), std::nullopt) << line;
  }
}

TEST(DcgmiErrorsTest, MessageIsCleanedAndBounded) {
  const std::string hostile = "Error: \x1b[31mred\x07 " + std::string(2000, 'x');
  DcgmiError error = Recognize(hostile);
  EXPECT_EQ(error.message.size(), kMaxErrorMessageBytes);
  EXPECT_TRUE(error.message.starts_with("Error: ?[31mred? xx"));
  // A code past what DCGM defines is not taken as one.
  EXPECT_EQ(Recognize("Error setting watches. Result: -99999999999: x").dcgm_return, std::nullopt);
  EXPECT_EQ(Recognize("Error setting watches. Result: 5: x").dcgm_return, std::nullopt);
}

TEST(DcgmiErrorsTest, ExitStatusToReturnCode) {
  EXPECT_EQ(DcgmReturnOfExitStatus(235), -21);  // DCGM_ST_CONNECTION_NOT_VALID
  EXPECT_EQ(DcgmReturnOfExitStatus(223), -33);  // DCGM_ST_MODULE_NOT_LOADED
  EXPECT_EQ(DcgmReturnOfExitStatus(220), -36);  // DCGM_ST_PROFILING_NOT_SUPPORTED
  EXPECT_EQ(DcgmReturnOfExitStatus(255), -1);   // DCGM_ST_BADPARAM
  EXPECT_EQ(DcgmReturnOfExitStatus(253), -3);   // DCGM_ST_GENERIC_ERROR
  EXPECT_EQ(DcgmReturnOfExitStatus(0), std::nullopt);
  EXPECT_EQ(DcgmReturnOfExitStatus(143), std::nullopt);  // SIGTERM: 128 + 15
  EXPECT_EQ(DcgmReturnOfExitStatus(-1), std::nullopt);
  EXPECT_EQ(DcgmReturnOfExitStatus(256), std::nullopt);
  EXPECT_EQ(DcgmReturnName(0), "");
}

}  // namespace
}  // namespace dcgmi_errors_test
}  // namespace expanse::dcgm
