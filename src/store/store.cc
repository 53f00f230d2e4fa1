#include "store/store.h"

#include <array>
#include <string>
#include <utility>

#include "store/message_text.h"

namespace expanse::store {
namespace {

// Index order matches the enumerators, so a name is names[static_cast<size_t>(value)].
constexpr std::array<std::string_view, 4> kRoleNames = {"owner", "admin", "member", "viewer"};
constexpr std::array<std::string_view, 4> kComputeStateNames = {"registered", "active", "stale",
                                                                "deprovisioned"};

template <typename Enum, std::size_t N>
Result<Enum> ParseName(const std::array<std::string_view, N>& names, std::string_view name,
                       std::string_view what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) {
      return static_cast<Enum>(i);
    }
  }
  std::string expected;
  for (const std::string_view known : names) {
    expected += expected.empty() ? "" : ", ";
    expected += known;
  }
  return InvalidArgumentError("unknown " + std::string(what) + " " +
                              store_internal::QuoteForMessage(name) + "; expected one of " +
                              expected);
}

}  // namespace

std::string NormalizeEmail(std::string_view email) {
  constexpr std::string_view kBlanks = " \t\r\n";
  const size_t begin = email.find_first_not_of(kBlanks);
  if (begin == std::string_view::npos) {
    return "";
  }
  email = email.substr(begin, email.find_last_not_of(kBlanks) - begin + 1);
  std::string lower(email);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return lower;
}

std::string_view RoleName(Role role) {
  const auto index = static_cast<std::size_t>(role);
  return index < kRoleNames.size() ? kRoleNames[index] : "unknown";
}

Result<Role> ParseRole(std::string_view name) { return ParseName<Role>(kRoleNames, name, "role"); }

std::string_view ComputeStateName(ComputeState state) {
  const auto index = static_cast<std::size_t>(state);
  return index < kComputeStateNames.size() ? kComputeStateNames[index] : "unknown";
}

Result<ComputeState> ParseComputeState(std::string_view name) {
  return ParseName<ComputeState>(kComputeStateNames, name, "compute state");
}

}  // namespace expanse::store
