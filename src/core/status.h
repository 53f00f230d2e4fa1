// Status: the outcome of an operation that can fail, in the style of absl::Status.
//
// Expanse code reports failure by returning a Status (or a Result<T>, see result.h),
// never by throwing across a module edge. A third-party library that throws is
// wrapped at its boundary and its exception turned into a Status there.

#ifndef EXPANSE_CORE_STATUS_H_
#define EXPANSE_CORE_STATUS_H_

#include <iosfwd>
#include <string>
#include <string_view>

namespace expanse {

// Broad failure categories. Callers branch on the code; the message is for humans.
// Pick the code by what the caller should do next, not by where the error arose.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // the input is malformed; retrying it will not help
  kNotFound,            // a named thing (file, key, job) does not exist
  kAlreadyExists,       // creating something that is already there
  kPermissionDenied,    // the caller is known but not allowed
  kFailedPrecondition,  // the system is not in a state where this can run
  kUnavailable,         // transient: retrying later may succeed
  kDeadlineExceeded,    // a time bound ran out before completion
  kDataLoss,            // stored data is corrupt or truncated
  kInternal,            // a broken invariant inside Expanse
  kUnauthenticated,     // credentials are missing or invalid
  kResourceExhausted,   // a quota, size cap or disk ran out
};

// "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_CODE" for values outside the enum.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  // An OK code carries no message: the message is dropped so that all OK statuses
  // compare equal.
  Status(StatusCode code, std::string message);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // An optional stable, machine-readable reason in snake_case (e.g. "credential_revoked") for
  // callers that must tell apart failures sharing one code; APIs expose it as their error code.
  // Ignored on an OK status.
  const std::string& reason() const { return reason_; }
  Status WithReason(std::string reason) &&;
  Status WithReason(std::string reason) const&;

  // "OK", or "<CODE_NAME>: <message>" (just "<CODE_NAME>" when the message is empty).
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string reason_;
};

// Prints ToString(); lets GoogleTest show readable failures.
std::ostream& operator<<(std::ostream& os, const Status& status);

// Shorthands that name the code at the call site: return NotFoundError("...").
inline Status OkStatus() { return {}; }
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status FailedPreconditionError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status DataLossError(std::string message);
Status InternalError(std::string message);
Status UnauthenticatedError(std::string message);
Status ResourceExhaustedError(std::string message);

}  // namespace expanse

#endif  // EXPANSE_CORE_STATUS_H_
