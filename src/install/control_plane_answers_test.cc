#include "install/control_plane_answers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::install {
namespace control_plane_answers_test {
namespace {

using ::testing::HasSubstr;

// What the server's exchange route answers (src/server/control_routes.cc), trimmed.
constexpr char kExchange[] =
    R"({"credential":"exp_cc_abc","credential_id":7,)"
    R"("organization":{"id":1,"slug":"acme","name":"Acme Research"},)"
    R"("compute":{"id":"cmp_1","name":"gpu-cluster","state":"pending","last_heartbeat_ms":0},)"
    R"("control_plane_url":"https://cp.example","data_plane_url":"https://dp.example"})";

TEST(ControlPlaneAnswersTest, TheServersAnswersAreDecoded) {
  Result<ExchangedCredential> exchanged = DecodeExchange(kExchange);
  ASSERT_TRUE(exchanged.ok()) << exchanged.status().message();
  EXPECT_EQ(exchanged->credential, "exp_cc_abc");
  EXPECT_EQ(exchanged->credential_id, "7");
  EXPECT_EQ(exchanged->compute.id, "cmp_1");
  EXPECT_EQ(exchanged->compute.organization_name, "Acme Research");
  EXPECT_EQ(exchanged->compute.data_plane_url, "https://dp.example");

  // An older server's introspection carries the plane URLs in the compute.
  Result<ComputeSummary> summary = DecodeIntrospection(
      R"({"compute":{"id":"cmp_1","name":"c","control_plane_url":"https://cp.old"}})");
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->control_plane_url, "https://cp.old");

  Result<Enrolment> enrolment = DecodeEnrolment(R"({"enrolled":true,"last_heartbeat_ms":42})");
  ASSERT_TRUE(enrolment.ok()) << enrolment.status().message();
  EXPECT_TRUE(enrolment->enrolled);
  EXPECT_EQ(enrolment->last_heartbeat_ms, 42);
  EXPECT_FALSE(DecodeEnrolment("{}")->enrolled);
}

TEST(ControlPlaneAnswersTest, AnswersOfAnotherShapeAreRefusedByName) {
  EXPECT_EQ(DecodeIntrospection("<html>bad gateway</html>").status().reason(), "invalid_answer");
  EXPECT_THAT(DecodeIntrospection(R"({"compute":{"name":7}})").status().message(),
              HasSubstr("answer.compute.name must be a string"));
  EXPECT_THAT(DecodeExchange(R"({"credential":"token"})").status().message(),
              HasSubstr("carries no credential"));
  EXPECT_THAT(DecodeEnrolment(R"({"enrolled":"yes"})").status().message(),
              HasSubstr("answer.enrolled must be true or false"));
  EXPECT_THAT(DecodeEnrolment(R"({"last_heartbeat_ms":-1})").status().message(),
              HasSubstr("answer.last_heartbeat_ms must be an integer"));
  // The installer prints the compute's name: a terminal escape in it is refused, not shown.
  EXPECT_THAT(
      DecodeIntrospection(R"({"compute":{"name":"x\u001b]0;owned\u0007"}})").status().message(),
      HasSubstr("answer.compute.name contains a control character"));
}

TEST(ControlPlaneAnswersTest, ErrorAnswersKeepTheServersCodeAsTheReason) {
  const Status revoked = StatusFromControlPlaneAnswer(
      401, R"({"error":{"code":"install_token_used","message":"used at 12:00"}})",
      "POST /cp/v1/install-tokens/exchange");
  EXPECT_EQ(revoked.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(revoked.reason(), "install_token_used");
  EXPECT_EQ(revoked.message(),
            "POST /cp/v1/install-tokens/exchange: the control plane answered 401 "
            "install_token_used (used at 12:00)");
  const Status proxy = StatusFromControlPlaneAnswer(502, "<html>\x1b[2J</html>", "GET /x");
  EXPECT_EQ(proxy.code(), StatusCode::kUnavailable);
  EXPECT_EQ(proxy.reason(), "http_502");
  EXPECT_EQ(proxy.message(), "GET /x: the control plane answered 502 http_502");
  EXPECT_EQ(StatusFromControlPlaneAnswer(409, "", "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusFromControlPlaneAnswer(404, "", "x").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace control_plane_answers_test
}  // namespace expanse::install
