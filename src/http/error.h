// The one JSON error shape every Expanse HTTP endpoint answers with:
//
//   {"error": {"code": "stable_machine_code", "message": "clear human message"}}
//
// `code` is snake_case and never changes meaning, so clients branch on it; `message`
// is for the person reading it and may change. See docs/formats/http-errors.md.

#ifndef EXPANSE_HTTP_ERROR_H_
#define EXPANSE_HTTP_ERROR_H_

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"
#include "http/message.h"

namespace expanse::http {

// {"error":{"code":...,"message":...}}. Bytes that are not valid UTF-8 are replaced
// by U+FFFD so the body is always valid JSON.
std::string ErrorBody(std::string_view code, std::string_view message);

Response ErrorResponse(int status, std::string_view code, std::string_view message);

// The HTTP status for a failed operation: kInvalidArgument 400, kUnauthenticated 401,
// kPermissionDenied 403, kNotFound 404, kAlreadyExists and kFailedPrecondition 409,
// kResourceExhausted 429, kUnavailable 503, anything else 500.
int HttpStatusFor(StatusCode code);

// ErrorResponse(HttpStatusFor(status.code()), code, status.message()), where code is
// status.reason() when set and otherwise the lower-cased code name
// ("invalid_argument"). The message reaches the client: keep secrets and internal
// paths out of messages of statuses that are returned this way.
Response ErrorResponse(const Status& status);

// 429 with Retry-After (whole seconds, at least 1) and code "rate_limited".
Response TooManyRequestsResponse(std::chrono::seconds retry_after);

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_ERROR_H_
