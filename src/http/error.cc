#include "http/error.h"

#include <algorithm>
#include <cctype>
#include <string>

#include <nlohmann/json.hpp>

namespace expanse::http {

std::string ErrorBody(std::string_view code, std::string_view message) {
  const nlohmann::json body = {
      {"error", {{"code", std::string(code)}, {"message", std::string(message)}}}};
  // The replace handler makes dump() total: it cannot throw on invalid UTF-8.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response ErrorResponse(int status, std::string_view code, std::string_view message) {
  return JsonResponse(status, ErrorBody(code, message));
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

Response ErrorResponse(const Status& status) {
  if (status.ok()) {
    // A caller bug; answering 200 with an error body would be worse than a 500.
    return ErrorResponse(500, "internal", "error response built from an OK status");
  }
  std::string code = status.reason();
  if (code.empty()) {
    code = std::string(StatusCodeName(status.code()));
    std::transform(code.begin(), code.end(), code.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  Response response = ErrorResponse(HttpStatusFor(status.code()), code, status.message());
  // Transient by definition (a database away, a lock held): say when to come back.
  if (status.code() == StatusCode::kUnavailable)
    response.headers.emplace_back("Retry-After", "5");
  return response;
}

Response TooManyRequestsResponse(std::chrono::seconds retry_after) {
  const long long seconds = std::max<long long>(retry_after.count(), 1);
  Response response =
      ErrorResponse(429, "rate_limited",
                    "too many requests; retry after " + std::to_string(seconds) + " seconds");
  response.headers.emplace_back("Retry-After", std::to_string(seconds));
  return response;
}

}  // namespace expanse::http
