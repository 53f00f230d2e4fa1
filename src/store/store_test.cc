#include "store/store.h"

#include <gtest/gtest.h>

namespace expanse::store {
namespace store_test {
namespace {

TEST(RoleTest, NamesRoundTrip) {
  for (const Role role : {Role::kOwner, Role::kAdmin, Role::kMember, Role::kViewer}) {
    const Result<Role> parsed = ParseRole(RoleName(role));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, role);
  }
  EXPECT_EQ(RoleName(Role::kOwner), "owner");
  EXPECT_EQ(RoleName(Role::kAdmin), "admin");
  EXPECT_EQ(RoleName(Role::kMember), "member");
  EXPECT_EQ(RoleName(Role::kViewer), "viewer");
}

TEST(RoleTest, UnknownNamesAreRefusedWithTheChoices) {
  EXPECT_EQ(ParseRole("superuser").status(),
            InvalidArgumentError(
                "unknown role \"superuser\"; expected one of owner, admin, member, viewer"));
  // Names are exact: no case folding, no blanks.
  EXPECT_FALSE(ParseRole("Owner").ok());
  EXPECT_FALSE(ParseRole(" owner").ok());
  EXPECT_EQ(
      ParseRole("").status(),
      InvalidArgumentError("unknown role \"\"; expected one of owner, admin, member, viewer"));
  EXPECT_EQ(ParseRole("a\"b\n").status().message(),
            "unknown role \"a\\\"b\\x0A\"; expected one of owner, admin, member, viewer");
}

TEST(ComputeStateTest, NamesRoundTrip) {
  for (const ComputeState state : {ComputeState::kRegistered, ComputeState::kActive,
                                   ComputeState::kStale, ComputeState::kDeprovisioned}) {
    const Result<ComputeState> parsed = ParseComputeState(ComputeStateName(state));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, state);
  }
  EXPECT_EQ(ComputeStateName(ComputeState::kRegistered), "registered");
  EXPECT_EQ(ComputeStateName(ComputeState::kActive), "active");
  EXPECT_EQ(ComputeStateName(ComputeState::kStale), "stale");
  EXPECT_EQ(ComputeStateName(ComputeState::kDeprovisioned), "deprovisioned");
}

TEST(ComputeStateTest, UnknownNamesAreRefusedWithTheChoices) {
  EXPECT_EQ(ParseComputeState("deleted").status(),
            InvalidArgumentError("unknown compute state \"deleted\"; expected one of "
                                 "registered, active, stale, deprovisioned"));
  EXPECT_FALSE(ParseComputeState("ACTIVE").ok());
}

}  // namespace
}  // namespace store_test
}  // namespace expanse::store
