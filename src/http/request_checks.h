// Internal to the http module: the pure checks between "request header parsed" and
// "handler runs". No I/O and no Boost type, so each is table-tested and fuzzed on its own.
// The listener's sessions (listener_session.h) call them; docs/formats/http-errors.md lists
// the answers they lead to.

#ifndef EXPANSE_HTTP_REQUEST_CHECKS_H_
#define EXPANSE_HTTP_REQUEST_CHECKS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace expanse::http_internal {

// The longest request path (before the query) the listener routes; a longer one is 414.
inline constexpr size_t kMaxPathBytes = 2048;

// A request target in origin form ("/path?query"), decoded.
struct Target {
  std::string path{};  // percent-decoded ("%2F" becomes '/'); '+' stays '+'
  // As sent, for the router: it splits at the '/' sent and decodes each segment, so a path
  // parameter may hold "%2F" (a job id "a/b" is one segment).
  std::string raw_path{};
  // name -> value, both percent-decoded with '+' as a space (HTML forms); a parameter without
  // '=' has an empty value; empty pieces ("a=1&&b=2") are skipped.
  std::multimap<std::string, std::string, std::less<>> query{};
};

// kInvalidArgument, with a message for the client, when the target is not in origin form
// (it must start with '/': "*", "http://host/x" and "" are refused). A '%' not followed by
// two hex digits is kept literally, as browsers and curl send it. Never throws.
Result<Target> ParseTarget(std::string_view target);

// How the request says its body ends.
struct Framing {
  enum class Kind { kNone, kContentLength, kChunked };
  Kind kind = Kind::kNone;
  uint64_t content_length = 0;  // for kContentLength
};

// The request's framing from every Content-Length and Transfer-Encoding field value, in the
// order sent. kInvalidArgument (answered 400 and the connection closed) with exactly these
// messages:
//   "the request has more than one Content-Length header"
//   "the Content-Length header is not a decimal number"   (empty, a sign, a comma list, over
//                                                           19 digits)
//   "the request has both Content-Length and Transfer-Encoding"
//   "Transfer-Encoding other than chunked is not accepted" ("gzip", "gzip, chunked", ...;
//                                                           "chunked" compares case-insensitively)
// RFC 9112 §6.3: a proxy in front of us and this server must never disagree on where a
// body ends, so nothing ambiguous is accepted even where the RFC would allow it.
Result<Framing> CheckFraming(const std::vector<std::string_view>& content_lengths,
                             const std::vector<std::string_view>& transfer_encodings);

// One byte range as sent: first/last are -1 when absent ("500-" has last -1; the suffix
// "-500" has first -1 and last 500).
struct ByteRange {
  int64_t first = -1;
  int64_t last = -1;
};

// The ranges of a Range header value ("bytes=0-99,200-"). nullopt when it is malformed (not
// "bytes=", a piece that is not digits-digits, first > last, a number over 18 digits, more
// than kMaxRanges pieces); the listener answers such a header with 416.
inline constexpr size_t kMaxRanges = 4096;
std::optional<std::vector<ByteRange>> ParseRangeHeader(std::string_view value);

// What a range-able 200 answer of `size` bytes becomes for `ranges`:
struct RangePlan {
  enum class Kind { kWhole, kPartial, kUnsatisfiable };
  Kind kind = Kind::kWhole;
  uint64_t first = 0;  // kPartial: the inclusive byte range served
  uint64_t last = 0;
};
// One range is served (a suffix counted from the end, a last byte past the end cut to the
// end); none, more than one, "bytes=-" or an empty content is served whole, so an answer is
// never larger than the content (RFC 9110 §14.2 lets a server ignore Range). A single range
// starting at or past the end is unsatisfiable (416).
RangePlan PlanRange(const std::vector<ByteRange>& ranges, uint64_t size);

// `text` quoted for a log line or message: printable ASCII kept, everything else (control
// bytes, non-ASCII, quotes, backslashes) escaped as \xNN or \" \\, cut at 200 bytes with
// "..." after the closing quote.
std::string Quote(std::string_view text);

// The reason phrase for a status code ("OK", "Not Found", ...); "Unknown" for codes without
// one. Only for the status line: clients read the code.
std::string_view ReasonPhrase(int status);

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_REQUEST_CHECKS_H_
