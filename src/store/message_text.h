// Internal to the store module: how stored text, ids and times appear in error messages.
//
// Everything in a store error message may reach an operator's terminal or a web page, and
// most of it was typed by someone else (slugs, e-mail addresses, compute ids from a URL), so
// it is escaped here. Secret hashes never reach these helpers.
#ifndef EXPANSE_STORE_MESSAGE_TEXT_H_
#define EXPANSE_STORE_MESSAGE_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace expanse::store::store_internal {

// `text` in double quotes with quotes, backslashes and non-printable bytes escaped
// (\xAB), cut to a readable length. Same rules as the env-file parser's messages.
std::string QuoteForMessage(std::string_view text);

// An identifier chosen by a caller (a compute id such as "cmp_4f2a"): as is when it is
// plain (1 to 64 characters from [A-Za-z0-9_.:-]), otherwise quoted like QuoteForMessage,
// so the common case reads naturally and a hostile id still cannot inject anything.
std::string IdForMessage(std::string_view id);

// Unix epoch milliseconds as ISO 8601 UTC: "2024-05-01T12:00:00.250Z".
std::string FormatUtcMillis(int64_t epoch_ms);

}  // namespace expanse::store::store_internal

#endif  // EXPANSE_STORE_MESSAGE_TEXT_H_
