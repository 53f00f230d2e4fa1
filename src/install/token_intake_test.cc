#include "install/token_intake.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace expanse::install {
namespace token_intake_test {
namespace {

TEST(TokenIntakeTest, TheEnvironmentWinsOverThePrompt) {
  auto intake = ObtainInstallToken(SecretString("exp_it_fromtheenvironment"), true);
  ASSERT_TRUE(intake.ok());
  EXPECT_EQ(intake->source, TokenSource::kEnvironment);
  EXPECT_EQ(intake->token.view(), "exp_it_fromtheenvironment");
}

TEST(TokenIntakeTest, ReinstallNeverPrompts) {
  auto intake = ObtainInstallToken(std::nullopt, /*allow_prompt=*/false);
  ASSERT_FALSE(intake.ok());
  EXPECT_EQ(intake.status().reason(), "install_token_missing");
}

TEST(TokenIntakeTest, NoTerminalNoPromptButAdvice) {
  // Run with stdin from /dev/null: not a terminal, so no prompt may be shown.
  const int saved = dup(STDIN_FILENO);
  const int null = open("/dev/null", O_RDONLY);
  dup2(null, STDIN_FILENO);
  auto intake = ObtainInstallToken(std::nullopt, /*allow_prompt=*/true);
  dup2(saved, STDIN_FILENO);
  close(null);
  close(saved);
  ASSERT_FALSE(intake.ok());
  EXPECT_EQ(intake.status().reason(), "install_token_missing");
  EXPECT_NE(intake.status().message().find("EXPANSE_INSTALL_TOKEN"), std::string::npos);
}

TEST(TokenIntakeTest, ShapeIsCheckedWithoutEchoingTheValue) {
  EXPECT_TRUE(CheckTokenShape("exp_it_AbC-123_xyz0123456").ok());
  for (const char* bad : {"", "exp_cc_0123456789abcdef", "exp_it_short", "exp_it_0123456789 spaces",
                          "exp_it_0123456789abcdef\n"}) {
    Status s = CheckTokenShape(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.reason(), "install_token_malformed");
    if (*bad != '\0') {
      EXPECT_EQ(s.message().find(bad), std::string::npos) << "the message repeats the value";
    }
  }
}

TEST(TokenIntakeTest, MovingASecretLeavesNothingBehind) {
  SecretString a("exp_it_secretsecretsecret");
  SecretString b = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_EQ(b.view(), "exp_it_secretsecretsecret");
}

}  // namespace
}  // namespace token_intake_test
}  // namespace expanse::install
