// Internal to the release module: adding context to a failure without losing its code or
// reason, so callers can still branch on, e.g., "signature_mismatch"; and the member paths
// the checks of parsed documents name ("releases[0].archives[1].sha256").

#ifndef EXPANSE_RELEASE_STATUS_UTIL_H_
#define EXPANSE_RELEASE_STATUS_UTIL_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"
#include "core/status.h"

namespace expanse::release_internal {

inline Status Annotate(const Status& status, std::string_view prefix) {
  if (status.ok())
    return status;
  return Status(status.code(), std::string(prefix) + status.message()).WithReason(status.reason());
}

template <typename T>
Result<T> Annotate(Result<T> result, std::string_view prefix) {
  if (result.ok())
    return result;
  return Annotate(result.status(), prefix);
}

// "<where>.<name>", or just name when where is empty.
inline std::string MemberPath(std::string_view where, std::string_view name) {
  if (where.empty())
    return std::string(name);
  return std::string(where) + "." + std::string(name);
}

inline std::string ElementPath(std::string_view where, std::string_view name, size_t index) {
  return MemberPath(where, name) + "[" + std::to_string(index) + "]";
}

}  // namespace expanse::release_internal

#endif  // EXPANSE_RELEASE_STATUS_UTIL_H_
