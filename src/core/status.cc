#include "core/status.h"

#include <ostream>
#include <utility>

namespace expanse {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
  }
  // Reachable only through a cast from an out-of-range integer.
  return "UNKNOWN_CODE";
}

Status::Status(StatusCode code, std::string message) : code_(code) {
  if (code_ != StatusCode::kOk) {
    message_ = std::move(message);
  }
}

std::string Status::ToString() const {
  std::string out(StatusCodeName(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

Status Status::WithReason(std::string reason) && {
  if (!ok())
    reason_ = std::move(reason);
  return std::move(*this);
}

Status Status::WithReason(std::string reason) const& {
  Status copy = *this;
  return std::move(copy).WithReason(std::move(reason));
}

std::ostream& operator<<(std::ostream& os, const Status& status) { return os << status.ToString(); }

Status InvalidArgumentError(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
Status NotFoundError(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
Status AlreadyExistsError(std::string message) {
  return {StatusCode::kAlreadyExists, std::move(message)};
}
Status PermissionDeniedError(std::string message) {
  return {StatusCode::kPermissionDenied, std::move(message)};
}
Status FailedPreconditionError(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
Status UnavailableError(std::string message) {
  return {StatusCode::kUnavailable, std::move(message)};
}
Status DeadlineExceededError(std::string message) {
  return {StatusCode::kDeadlineExceeded, std::move(message)};
}
Status DataLossError(std::string message) { return {StatusCode::kDataLoss, std::move(message)}; }
Status InternalError(std::string message) { return {StatusCode::kInternal, std::move(message)}; }
Status UnauthenticatedError(std::string message) {
  return {StatusCode::kUnauthenticated, std::move(message)};
}
Status ResourceExhaustedError(std::string message) {
  return {StatusCode::kResourceExhausted, std::move(message)};
}

}  // namespace expanse
