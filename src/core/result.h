// Result<T>: either a value of type T or a non-OK Status (absl::StatusOr in spirit),
// plus the two macros that keep error propagation short:
//
//   Result<Config> LoadConfig(std::string_view path) {
//     EXPANSE_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     EXPANSE_RETURN_IF_ERROR(CheckPermissions(path));
//     return ParseConfig(text);
//   }

#ifndef EXPANSE_CORE_RESULT_H_
#define EXPANSE_CORE_RESULT_H_

#include <concepts>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/status.h"

namespace expanse {

template <typename T>
class Result;

namespace internal {
// Reading the value of a failed Result is a programming error, not an input error:
// print the status and abort, so the bug is found rather than propagated.
[[noreturn]] void DieOnBadResultAccess(const Status& status);

// What Result<T>'s converting constructor accepts: arguments T can be built from,
// other than T itself, a Result, or a Status (those have their own constructors).
template <typename U, typename T>
concept ConvertibleToResultValue =
    std::constructible_from<T, U&&> && !std::same_as<std::remove_cvref_t<U>, T> &&
    !std::same_as<std::remove_cvref_t<U>, Result<T>> && !std::convertible_to<U&&, Status>;
}  // namespace internal

template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_reference_v<T>, "Result<T&> is not supported; use a pointer");
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "use Status directly");

 public:
  // Implicit on purpose, so a function returning Result<T> can `return value;` or
  // `return NotFoundError(...);`.
  Result(const T& value) : value_(value) {}        // NOLINT(google-explicit-constructor)
  Result(T&& value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // Anything T can be built from, e.g. `return "text";` for Result<std::string>.
  // The concept excludes Result itself, so copy and move construction are not
  // hijacked; clang-tidy 14 does not read the constraint.
  template <internal::ConvertibleToResultValue<T> U>
  Result(U&& value)  // NOLINT(google-explicit-constructor,bugprone-forwarding-reference-overload)
      : value_(std::in_place, std::forward<U>(value)) {}

  // A Result built from an OK Status would hold neither a value nor an error; that
  // is a bug in the caller, reported as kInternal instead of being trusted.
  Result(Status status)  // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? InternalError("Result constructed from an OK Status")
                            : std::move(status)) {}

  bool ok() const { return value_.has_value(); }

  // OK when a value is held.
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  // Must only be called when ok(); aborts otherwise (see DieOnBadResultAccess).
  const T& value() const& {
    CheckHasValue();
    return *value_;
  }
  T& value() & {
    CheckHasValue();
    return *value_;
  }
  T&& value() && {
    CheckHasValue();
    return std::move(*value_);
  }

  // The value, or `fallback` when an error is held: for readers that take a default on
  // purpose (a lenient field of an outside answer), never to hide an error that matters.
  template <typename U>
  T value_or(U&& fallback) && {
    return ok() ? std::move(*value_) : static_cast<T>(std::forward<U>(fallback));
  }

  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckHasValue() const {
    if (!value_.has_value()) {
      internal::DieOnBadResultAccess(status_);
    }
  }

  Status status_;  // OK iff value_ holds a value.
  std::optional<T> value_;
};

namespace internal {
inline const Status& StatusOf(const Status& status) { return status; }
template <typename T>
const Status& StatusOf(const Result<T>& result) {
  return result.status();
}
}  // namespace internal

}  // namespace expanse

// Evaluates `expr` (a Status or a Result<T>) and returns its status from the
// enclosing function when it is not OK.
#define EXPANSE_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                   \
    if (::expanse::Status expanse_internal_status = ::expanse::internal::StatusOf(expr); \
        !expanse_internal_status.ok()) {                                                 \
      return expanse_internal_status;                                                    \
    }                                                                                    \
  } while (false)

// Evaluates the Result<T> expression, returns its status from the enclosing function
// when it failed, and otherwise moves the value into `lhs`, which may declare a
// variable (`EXPANSE_ASSIGN_OR_RETURN(auto text, ReadFile(path));`).
// Expands to several statements: do not use it as the body of an unbraced if/else.
// `lhs` must not contain an unparenthesised comma (structured bindings do); the
// expression may, because it is taken as __VA_ARGS__.
#define EXPANSE_ASSIGN_OR_RETURN(lhs, ...)                                               \
  EXPANSE_ASSIGN_OR_RETURN_IMPL_(EXPANSE_RESULT_CONCAT_(expanse_result_, __LINE__), lhs, \
                                 __VA_ARGS__)

#define EXPANSE_ASSIGN_OR_RETURN_IMPL_(result, lhs, ...) \
  auto result = (__VA_ARGS__);                           \
  if (!result.ok()) {                                    \
    return std::move(result).status();                   \
  }                                                      \
  lhs = std::move(result).value()  // NOLINT(bugprone-macro-parentheses): lhs may declare

#define EXPANSE_RESULT_CONCAT_(a, b) EXPANSE_RESULT_CONCAT_INNER_(a, b)
#define EXPANSE_RESULT_CONCAT_INNER_(a, b) a##b

#endif  // EXPANSE_CORE_RESULT_H_
