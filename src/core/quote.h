// Quoting untrusted text for error and log messages.
#ifndef EXPANSE_CORE_QUOTE_H_
#define EXPANSE_CORE_QUOTE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace expanse {

// `text` in double quotes, with quotes, backslashes and non-printable bytes escaped (hostile
// input must not reach a terminal raw), cut to `max_chars` characters plus "..." when longer.
std::string QuoteForMessage(std::string_view text, std::size_t max_chars = 64);

// The same escaping without the quotes, for a message that embeds outside bytes itself (a
// parser's "last read: '...'"): the result is printable ASCII, so also valid UTF-8.
std::string EscapeForMessage(std::string_view text, std::size_t max_chars = 256);

// `text` percent-encoded for one segment of a URL's path or a query value: every byte but
// RFC 3986's unreserved ones as %XX, so an id holding '/', '?' or '#' stays one segment.
std::string PercentEncode(std::string_view text);

// `text` percent-decoded. A '%' without two hex digits after it is kept as sent, so a
// hand-typed "100%" survives. `plus_is_space`: HTML forms encode a space as '+' in a query;
// in a path '+' is an ordinary character.
std::string PercentDecode(std::string_view text, bool plus_is_space);

}  // namespace expanse

#endif  // EXPANSE_CORE_QUOTE_H_
