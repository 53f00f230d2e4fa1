#include "http/request_checks.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/quote.h"

namespace expanse::http_internal {

namespace {

bool IsOws(char c) { return c == ' ' || c == '\t'; }

// `text` without the spaces and tabs around it (RFC 9110 §5.5: they are not part of a field
// value, and a list element may be surrounded by them).
std::string_view TrimOws(std::string_view text) {
  while (!text.empty() && IsOws(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && IsOws(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerAscii(a[i]) != LowerAscii(b[i])) {
      return false;
    }
  }
  return true;
}

bool AllDigits(std::string_view text) {
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
  }
  return true;
}

// The value of `digits` (only '0'-'9', at most 19 of them, so it fits in 64 bits).
uint64_t DigitsValue(std::string_view digits) {
  uint64_t value = 0;
  for (const char c : digits) {
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

// One Range piece, "first-last" with either side optional; nullopt when malformed. "-" alone
// is accepted, as httplib accepted it, and PlanRange serves it whole.
std::optional<ByteRange> ParseRangePiece(std::string_view piece) {
  // 18 digits stay below 2^63, so every accepted number fits int64_t.
  constexpr size_t kMaxRangeDigits = 18;
  const size_t dash = piece.find('-');
  if (dash == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view first = piece.substr(0, dash);
  const std::string_view last = piece.substr(dash + 1);
  if (!AllDigits(first) || !AllDigits(last) || first.size() > kMaxRangeDigits ||
      last.size() > kMaxRangeDigits) {
    return std::nullopt;  // a second '-' fails AllDigits(last)
  }
  ByteRange range;
  if (!first.empty()) {
    range.first = static_cast<int64_t>(DigitsValue(first));
  }
  if (!last.empty()) {
    range.last = static_cast<int64_t>(DigitsValue(last));
  }
  if (range.first >= 0 && range.last >= 0 && range.first > range.last) {
    return std::nullopt;
  }
  return range;
}

}  // namespace

Result<Target> ParseTarget(std::string_view target) {
  if (target.empty() || target.front() != '/') {
    // "*" (OPTIONS) and the absolute form ("http://host/x", for proxies) route nowhere here.
    return InvalidArgumentError("the request target " + Quote(target) +
                                " is not a path starting with \"/\"");
  }
  const size_t question = target.find('?');
  Target parsed;
  parsed.raw_path = std::string(target.substr(0, question));
  parsed.path = PercentDecode(parsed.raw_path, /*plus_is_space=*/false);
  if (question == std::string_view::npos) {
    return parsed;
  }
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view piece = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (piece.empty()) {
      continue;
    }
    const size_t equals = piece.find('=');
    const std::string_view name = piece.substr(0, equals);
    const std::string_view value =
        equals == std::string_view::npos ? std::string_view() : piece.substr(equals + 1);
    parsed.query.emplace(PercentDecode(name, /*plus_is_space=*/true),
                         PercentDecode(value, /*plus_is_space=*/true));
  }
  return parsed;
}

Result<Framing> CheckFraming(const std::vector<std::string_view>& content_lengths,
                             const std::vector<std::string_view>& transfer_encodings) {
  // 19 digits always fit in 64 bits; 20 may not.
  constexpr size_t kMaxContentLengthDigits = 19;
  if (content_lengths.size() > 1) {
    // Even equal values: a proxy that keeps the first and one that keeps the last must not
    // be given the chance to disagree with us.
    return InvalidArgumentError("the request has more than one Content-Length header");
  }
  if (!content_lengths.empty() && !transfer_encodings.empty()) {
    return InvalidArgumentError("the request has both Content-Length and Transfer-Encoding");
  }
  if (!content_lengths.empty()) {
    const std::string_view value = TrimOws(content_lengths.front());
    if (value.empty() || value.size() > kMaxContentLengthDigits || !AllDigits(value)) {
      return InvalidArgumentError("the Content-Length header is not a decimal number");
    }
    return Framing{.kind = Framing::Kind::kContentLength, .content_length = DigitsValue(value)};
  }
  if (!transfer_encodings.empty()) {
    // Exactly one field saying "chunked": two fields ("chunked" twice) would apply it twice,
    // and any other coding leaves us guessing where the body ends.
    if (transfer_encodings.size() != 1 ||
        !EqualsIgnoringCase(TrimOws(transfer_encodings.front()), "chunked")) {
      return InvalidArgumentError("Transfer-Encoding other than chunked is not accepted");
    }
    return Framing{.kind = Framing::Kind::kChunked, .content_length = 0};
  }
  return Framing{};
}

std::optional<std::vector<ByteRange>> ParseRangeHeader(std::string_view value) {
  // The unit is compared case-insensitively (RFC 9110 §14.1).
  constexpr std::string_view kUnit = "bytes=";
  if (value.size() < kUnit.size() || !EqualsIgnoringCase(value.substr(0, kUnit.size()), kUnit)) {
    return std::nullopt;
  }
  std::string_view rest = value.substr(kUnit.size());
  std::vector<ByteRange> ranges;
  // Every piece is checked, so "bytes=" and "bytes=0-1," (an empty piece) are malformed.
  while (true) {
    if (ranges.size() == kMaxRanges) {
      return std::nullopt;  // before parsing more: a huge header costs no more than this
    }
    const size_t comma = rest.find(',');
    const std::optional<ByteRange> range = ParseRangePiece(TrimOws(rest.substr(0, comma)));
    if (!range) {
      return std::nullopt;
    }
    ranges.push_back(*range);
    if (comma == std::string_view::npos) {
      return ranges;
    }
    rest = rest.substr(comma + 1);
  }
}

RangePlan PlanRange(const std::vector<ByteRange>& ranges, uint64_t size) {
  if (ranges.size() != 1 || size == 0) {
    return {};
  }
  const ByteRange& range = ranges.front();
  if (range.first < 0 && range.last < 0) {
    return {};  // "bytes=-": no range at all
  }
  RangePlan plan{.kind = RangePlan::Kind::kPartial, .first = 0, .last = size - 1};
  if (range.first < 0) {
    // A suffix: the last `last` bytes, all of them when it is longer than the content. A
    // suffix of 0 bytes ("-0") selects nothing, which RFC 9110 §14.1.2 calls unsatisfiable.
    const auto suffix = static_cast<uint64_t>(range.last);
    if (suffix == 0) {
      return {.kind = RangePlan::Kind::kUnsatisfiable};
    }
    plan.first = suffix >= size ? 0 : size - suffix;
    return plan;
  }
  if (range.last >= 0 && range.last < range.first) {
    return {};  // ParseRangeHeader refuses these; another caller's is ignored like any Range
  }
  plan.first = static_cast<uint64_t>(range.first);
  if (plan.first >= size) {
    return {.kind = RangePlan::Kind::kUnsatisfiable};
  }
  if (range.last >= 0 && static_cast<uint64_t>(range.last) < size) {
    plan.last = static_cast<uint64_t>(range.last);
  }
  return plan;
}

std::string Quote(std::string_view text) {
  constexpr size_t kMaxQuoted = 200;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxQuoted; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += text.size() > kMaxQuoted ? "\"..." : "\"";
  return out;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 416:
      return "Range Not Satisfiable";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 426:
      return "Upgrade Required";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace expanse::http_internal
