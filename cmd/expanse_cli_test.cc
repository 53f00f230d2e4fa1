// The operator CLI's own piece of process state: the install token is taken out of the
// environment before anything can start a child process.
#include "expanse_cli.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace expanse::install {
namespace {

TEST(TokenIntakeTest, TheVariableIsTakenOutOfTheEnvironment) {
  setenv(kInstallTokenVariable, "exp_it_0123456789abcdef", 1);
  std::optional<SecretString> token = TakeTokenFromEnvironment();
  ASSERT_TRUE(token.has_value());
  EXPECT_EQ(token->view(), "exp_it_0123456789abcdef");
  EXPECT_EQ(std::getenv(kInstallTokenVariable), nullptr) << "children must not inherit it";
  EXPECT_FALSE(TakeTokenFromEnvironment().has_value());
}

}  // namespace
}  // namespace expanse::install
