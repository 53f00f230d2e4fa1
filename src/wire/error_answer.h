// The error body every Expanse endpoint answers with (docs/formats/http-errors.md),
// {"error": {"code": "...", "message": "..."}}, read by the daemon and the installer from a
// server's answer. An answer is outside input like any other: it may come from a proxy, an
// older or newer server, or something that is not Expanse at all.
#ifndef EXPANSE_WIRE_ERROR_ANSWER_H_
#define EXPANSE_WIRE_ERROR_ANSWER_H_

#include <string>
#include <string_view>

namespace expanse::wire {

struct ErrorAnswer {
  // snake_case, at most 64 bytes (it becomes a Status reason and goes into log lines), or ""
  // when the body has no such code.
  std::string code;
  // Clean text of at most 1024 bytes, or "" when absent or not text.
  std::string message;
};

// Never fails: a body that is not the documented shape (not JSON, an HTML page from a proxy,
// wrongly typed members) gives empty strings.
ErrorAnswer DecodeErrorAnswer(std::string_view body);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_ERROR_ANSWER_H_
