// libFuzzer target for the listener's request path without a socket (docs/design-http-engine.md,
// "Fuzz target"): Beast's request parser, then ListenerCore (framing and target checks, routing,
// body limits, Range), the capped body decoder, a handler, and the serialized answer.
//
// The first input byte picks how many bytes arrive at a time (1-64), so the ends of the header,
// of chunks and of the body land anywhere; the rest is the request. The session's order is kept:
// header parsed -> Admit -> the parser's body limit set to the route's -> body -> decoder ->
// handler -> Finish. Properties, checked on every answer (a violation traps):
//  - the head is "HTTP/1.1 " and a 3-digit status, lines without a bare CR or LF, and ends
//    with the blank line; Content-Length (when sent) is the length of the body bytes sent;
//  - an error answer (>= 400) with a body is our JSON shape, {"error":{"code":"...",...}};
//  - a decoded body never exceeds its route's limit;
//  - a 206 is one Content-Range and never more than the content.

// <utility> must come before any Boost header (here the standard headers sort first): Boost
// 1.74's asio/awaitable.hpp uses std::exchange without including it, which g++ 12 in C++20
// mode refuses. Fuzzers build with clang, but the rule is kept for every Boost user.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "http/body_decoder.h"
#include "http/error.h"
#include "http/listener.h"
#include "http/listener_core.h"

namespace {

namespace bhttp = boost::beast::http;
using expanse::http_internal::Admission;
using expanse::http_internal::BodyDecoder;
using expanse::http_internal::Framing;
using expanse::http_internal::ListenerCore;
using expanse::http_internal::Outgoing;
using expanse::http_internal::RequestHead;

// As in listener_session.h.
constexpr size_t kMaxHeaderBytes = 16 << 10;
// No route of the fuzz core accepts more body bytes than this (checked on every admission).
constexpr uint64_t kMaxBodyBytes = 64 << 10;
constexpr size_t kEchoLimit = 512;
constexpr size_t kFileBytes = 1000;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_http_request: property violated: %s\n", what);
    __builtin_trap();
  }
}

using expanse::http::Request;
using expanse::http::Response;

// A range-able file.
Response ServeFile(const Request&) {
  Response response;
  response.content_type = "application/octet-stream";
  for (size_t i = 0; i < kFileBytes; ++i) {
    response.body += static_cast<char>('a' + i % 26);
  }
  response.headers.emplace_back("Accept-Ranges", "bytes");
  return response;
}

// The decoded body back, range-able too.
Response Echo(const Request& request) {
  Response response;
  response.content_type = "text/plain";
  response.body = request.body;
  response.headers.emplace_back("Accept-Ranges", "bytes");
  return response;
}

// Path and query parameters as JSON (invalid UTF-8 replaced, as a careful handler would).
Response JsonParams(const Request& request) {
  nlohmann::json body = {{"name", std::string(request.PathParam("name"))}};
  for (const auto& [key, value] : request.query_params) {
    body["query"][key] = value;
  }
  return expanse::http::JsonResponse(
      200, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

const ListenerCore& Core() {
  static const ListenerCore* core = [] {
    expanse::http::ListenerOptions options;
    options.name = "fuzz";
    options.host = "127.0.0.1";
    options.max_body_bytes = 1024;
    options.error_log = [](std::string_view) {};
    auto* made = new ListenerCore(options);
    expanse::http::Router& router = made->router();
    Require(router.Add("GET", "/file", ServeFile).ok(), "GET /file route");
    Require(router.Add("POST", "/echo", Echo, kEchoLimit).ok(), "POST /echo route");
    Require(router.Add("GET", "/json/:name", JsonParams).ok(), "GET /json route");
    return made;
  }();
  return *core;
}

size_t CountOf(std::string_view text, std::string_view needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

void CheckAnswer(const Outgoing& out, bool head_request) {
  const std::string_view head = out.head;
  Require(head.size() >= 13 && head.substr(0, 9) == "HTTP/1.1 ", "status line prefix");
  for (size_t i = 9; i < 12; ++i) {
    Require(head[i] >= '0' && head[i] <= '9', "3-digit status");
  }
  Require(head[12] == ' ', "space after the status");
  const int status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
  Require(head.size() >= 4 && head.substr(head.size() - 4) == "\r\n\r\n", "head ends blank");
  // Every line, split at CRLF, holds no other CR or LF.
  const std::string_view lines = head.substr(0, head.size() - 4);
  size_t start = 0;
  while (start <= lines.size()) {
    const size_t end = std::min(lines.find("\r\n", start), lines.size());
    const std::string_view line = lines.substr(start, end - start);
    Require(line.find_first_of("\r\n") == std::string_view::npos, "bare CR or LF in a line");
    Require(!line.empty(), "empty line inside the head");
    start = end + 2;
  }

  Require(
      out.body_offset <= out.body.size() && out.body_length <= out.body.size() - out.body_offset,
      "body range inside the body");
  if (head_request) {
    Require(out.body_length == 0, "a HEAD answer has no body bytes");
  } else if (status >= 200 && status != 204 && status != 304) {
    Require(head.find("\r\nContent-Length: " + std::to_string(out.body_length) + "\r\n") !=
                std::string_view::npos,
            "Content-Length is the body's length");
  }

  if (status >= 400 && out.body_length > 0) {
    const nlohmann::json body = nlohmann::json::parse(
        std::string_view(out.body).substr(out.body_offset, out.body_length), nullptr, false);
    Require(body.is_object() && body.contains("error") && body["error"].is_object() &&
                body["error"].contains("code") && body["error"]["code"].is_string(),
            "error answer is our JSON shape");
  }

  if (status == 206) {
    Require(CountOf(head, "\r\nContent-Range: ") == 1, "a 206 has one Content-Range");
    // "bytes first-last/size", with first <= last < size; the bytes sent are exactly those
    // (HEAD: none, and the content is not kept).
    unsigned long long first = 0;
    unsigned long long last = 0;
    unsigned long long total = 0;
    const std::string range(head.substr(head.find("\r\nContent-Range: ")));
    Require(std::sscanf(range.c_str(), "\r\nContent-Range: bytes %llu-%llu/%llu", &first, &last,
                        &total) == 3,
            "a 206's Content-Range is bytes first-last/size");
    Require(first <= last && last < total, "a 206's range is inside the content");
    if (!head_request) {
      Require(total == out.body.size(), "Content-Range names the content's size");
      Require(out.body_offset == first && out.body_length == last - first + 1,
              "a 206 sends exactly its range");
    }
  }
}

// The answer to a request the parser refused, as listener_session.h maps it; the connection
// closes after it. `admission`: set once the header was admitted (the body failed).
Outgoing Refuse(const ListenerCore& core, const boost::beast::error_code& ec,
                const Admission* admission, bool request_line_incomplete) {
  using expanse::http::ErrorResponse;
  if (ec == bhttp::error::body_limit && admission != nullptr) {
    return core.Finish(admission, ErrorResponse(413, "body_too_large", "too large"), true);
  }
  if (ec == bhttp::error::header_limit && admission == nullptr) {
    return core.FinishRefusal(
        request_line_incomplete
            ? ErrorResponse(414, "uri_too_long", "the request line is too long")
            : ErrorResponse(431, "headers_too_large", "the request header is too large"));
  }
  return core.Finish(
      admission,
      ErrorResponse(400, "bad_request",
                    std::string("the request is not valid HTTP (") + ec.message() + ")"),
      true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const size_t piece = data[0] % 64 + 1;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ListenerCore& core = Core();

  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  // A number, never boost::none: Beast 1.74 compares the Content-Length with the optional, and
  // any length is "greater than" none. The session uses the largest possible here and checks
  // Content-Length against the route itself (Admit).
  parser.body_limit(std::numeric_limits<uint64_t>::max());

  std::optional<Admission> admission;
  bool keep_alive = true;
  std::string pending;        // given to the parser and not yet consumed
  size_t next_put = 0;        // how many bytes pending must hold before the next put
  bool body_started = false;  // the parser has taken bytes after the header
  size_t offered = 0;
  boost::beast::error_code ec;
  while (!parser.is_done()) {
    if (offered == input.size()) {
      return 0;  // the client stopped sending: the session closes without an answer
    }
    const size_t n = std::min(piece, input.size() - offered);
    pending.append(input.substr(offered, n));
    offered += n;
    while (!pending.empty() && !parser.is_done() && pending.size() >= next_put) {
      const bool in_body = admission.has_value();
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      body_started = body_started || (in_body && used > 0);
      const bool line_incomplete = pending.find("\r\n") == std::string::npos;
      pending.erase(0, used);
      if (ec == bhttp::error::need_more) {
        ec = {};
        // Beast 1.74's parse_chunk_header asserts (so only where NDEBUG is not defined) that a
        // last chunk is parsed again with at least 5 bytes, which fails when a chunked body
        // starts "0\r\n" and is given again with one more byte; the code after the assert
        // handles it (boostorg/beast#2861, fixed upstream in 2024). No chunked body is complete
        // in under 5 bytes, so waiting for them there loses nothing.
        const bool chunked = admission && admission->framing.kind == Framing::Kind::kChunked;
        next_put = chunked && !body_started ? 5 : 0;
        break;
      }
      if (ec) {
        const Admission* admitted = admission ? &*admission : nullptr;
        CheckAnswer(Refuse(core, ec, admitted, line_incomplete),
                    admitted != nullptr && admitted->request.method == "HEAD");
        return 0;
      }
      if (parser.is_header_done() && !admission) {
        const auto& message = parser.get();
        RequestHead head;
        head.method = std::string(message.method_string());
        head.target = std::string(message.target());
        for (const auto& field : message) {
          head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
        }
        head.remote_addr = "127.0.0.1";
        head.remote_port = 40000;
        admission.emplace(core.Admit(std::move(head)));
        keep_alive = message.keep_alive();
        if (admission->answer) {
          CheckAnswer(core.Finish(&*admission, std::move(*admission->answer),
                                  admission->close_after_answer || !keep_alive),
                      message.method_string() == "HEAD");
          return 0;
        }
        Require(admission->body_limit > 0 && admission->body_limit <= kMaxBodyBytes,
                "a route's body limit");
        if (admission->framing.kind == Framing::Kind::kContentLength) {
          Require(admission->framing.content_length <= admission->body_limit,
                  "an admitted Content-Length is within the route's limit");
        }
        if (admission->framing.kind == Framing::Kind::kNone) {
          break;  // no body: the request is complete
        }
        parser.body_limit(admission->body_limit);
      } else if (used == 0) {
        break;
      }
    }
    if (admission && admission->framing.kind == Framing::Kind::kNone) {
      break;
    }
  }
  if (!admission) {
    return 0;
  }

  const bool head_request = admission->request.method == "HEAD";
  std::string raw = std::move(parser.get().body());
  std::string body;
  if (admission->content_encoding.empty()) {
    body = std::move(raw);
  } else {
    BodyDecoder decoder = BodyDecoder::For(admission->content_encoding, admission->body_limit);
    if (!decoder.Append(raw) || !decoder.Finish()) {
      Require(decoder.error().has_value(), "a failed decode says why");
      CheckAnswer(core.Finish(&*admission, *decoder.error(), false), head_request);
      return 0;
    }
    body = decoder.Take();
  }
  Require(body.size() <= admission->body_limit, "decoded body within the route's limit");
  admission->request.body = std::move(body);
  const Response response = core.Serve(*admission, admission->request);
  const Outgoing out = core.Finish(&*admission, response, !keep_alive);
  CheckAnswer(out, head_request);
  if (admission->request.path == "/file" && !head_request) {
    Require(out.body.size() == kFileBytes, "the file's content is whole before its range");
  }
  return 0;
}
