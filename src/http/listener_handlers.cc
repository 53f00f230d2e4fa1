// ListenerCore: what the listener does with a request between its parsed header and the
// bytes of its answer. No I/O here; the sessions (listener_session.h) do that.
//
// Order of the checks in Admit, each answered with our JSON error before any body byte is
// read (docs/formats/http-errors.md): framing (Content-Length / Transfer-Encoding), target,
// path length, route (404/405), Content-Type multipart, body limit against Content-Length,
// Content-Encoding, Range. A refusal of a request that announced a body closes the
// connection, since its body is still on the wire.

#include <malloc.h>
#include <strings.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "http/body_decoder.h"
#include "http/error.h"
#include "http/listener_core.h"

namespace expanse::http_internal {

namespace {

using http::ErrorResponse;
using http::Response;

// Headers named like the pseudo-headers of other servers (httplib's REMOTE_ADDR, ...): a
// client can send them, so they prove nothing and handlers never see them. Use remote_addr.
bool IsPseudoHeader(std::string_view name) {
  for (const char* pseudo : {"REMOTE_ADDR", "REMOTE_PORT", "LOCAL_ADDR", "LOCAL_PORT"}) {
    if (name.size() == std::strlen(pseudo) && strncasecmp(name.data(), pseudo, name.size()) == 0) {
      return true;
    }
  }
  return false;
}

// The JSON error for an error status a handler answered with an empty body, so that every
// error answer has the documented shape.
Response DescribeEmptyError(int status) {
  switch (status) {
    case 400:
      return ErrorResponse(status, "bad_request", "the request is not valid");
    case 404:
      return ErrorResponse(status, "not_found", "no such resource");
    case 413:
      return ErrorResponse(status, "body_too_large", "the request body is too large");
    case 500:
      return ErrorResponse(status, "internal", "internal error while handling the request");
    default:
      return ErrorResponse(status, "http_error", "the request failed");
  }
}

bool HasLineBreak(std::string_view text) {
  return text.find_first_of("\r\n") != std::string_view::npos;
}

bool NameIs(std::string_view name, const char* wanted) {
  return name.size() == std::strlen(wanted) && strncasecmp(name.data(), wanted, name.size()) == 0;
}

std::optional<std::string_view> FindHeader(const http::HeaderList& headers, const char* name) {
  for (const auto& [key, value] : headers) {
    if (NameIs(key, name)) {
      return value;
    }
  }
  return std::nullopt;
}

std::string Trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  const size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         strncasecmp(text.data(), prefix.data(), prefix.size()) == 0;
}

// `method`: the request's, so that Finish sends no body bytes to a HEAD.
Admission Refuse(std::string_view method, Response response, bool close) {
  Admission admission;
  admission.request.method = std::string(method);
  admission.answer = std::move(response);
  admission.close_after_answer = close;
  return admission;
}

std::string BodyTooLargeMessage(size_t limit) {
  return "the request body is larger than " + std::to_string(limit) + " bytes";
}

// Set by RequestHeapTrim() on a worker thread; read after the handler returns.
thread_local bool heap_trim_requested = false;
// The deferred request whose handler runs on this thread, if one does: its RequestHeapTrim()
// goes to its answer, which may be written after the handler returned.
thread_local PendingAnswer* deferred_answer = nullptr;

}  // namespace

ListenerCore::ListenerCore(http::ListenerOptions options) : options_(std::move(options)) {}

Admission ListenerCore::Admit(RequestHead head) const {
  std::vector<std::string_view> lengths;
  std::vector<std::string_view> encodings;
  for (const auto& [name, value] : head.headers) {
    if (NameIs(name, "Content-Length")) {
      lengths.push_back(value);
    } else if (NameIs(name, "Transfer-Encoding")) {
      encodings.push_back(value);
    }
  }
  Result<Framing> framing = CheckFraming(lengths, encodings);
  if (!framing.ok()) {
    return Refuse(head.method, ErrorResponse(400, "bad_request", framing.status().message()), true);
  }
  const bool has_body = framing->kind != Framing::Kind::kNone;

  Result<Target> target = ParseTarget(head.target);
  if (!target.ok()) {
    return Refuse(head.method, ErrorResponse(400, "bad_request", target.status().message()),
                  has_body);
  }
  if (target->path.size() > kMaxPathBytes) {
    return Refuse(head.method,
                  ErrorResponse(414, "uri_too_long",
                                "the request path is longer than " + std::to_string(kMaxPathBytes) +
                                    " bytes"),
                  has_body);
  }

  const std::string& method = head.method;
  http::Router::Match match = router_.Find(method, target->raw_path);
  if (match.handler == nullptr) {
    if (match.allowed_methods.empty()) {
      return Refuse(
          head.method,
          ErrorResponse(404, "not_found", "no route for " + method + " " + Quote(target->path)),
          has_body);
    }
    std::string allow;
    for (const std::string& allowed : match.allowed_methods) {
      allow += (allow.empty() ? "" : ", ") + allowed;
    }
    Response response =
        ErrorResponse(405, "method_not_allowed",
                      method + " is not allowed for " + Quote(target->path) + "; use " + allow);
    response.headers.emplace_back("Allow", allow);
    return Refuse(head.method, std::move(response), has_body);
  }

  Admission admission;
  admission.handler = match.handler;
  admission.deferred_id = match.deferred_id;
  admission.body_limit = match.max_body_bytes != 0 ? match.max_body_bytes : options_.max_body_bytes;
  admission.framing = *framing;
  if (has_body) {
    if (auto type = FindHeader(head.headers, "Content-Type");
        type && StartsWithNoCase(Trimmed(*type), "multipart/")) {
      return Refuse(head.method,
                    ErrorResponse(415, "unsupported_media_type",
                                  "multipart/form-data bodies are not accepted"),
                    true);
    }
    if (framing->kind == Framing::Kind::kContentLength &&
        framing->content_length > admission.body_limit) {
      return Refuse(head.method,
                    ErrorResponse(413, "body_too_large", BodyTooLargeMessage(admission.body_limit)),
                    true);
    }
    admission.content_encoding =
        std::string(FindHeader(head.headers, "Content-Encoding").value_or(""));
    BodyDecoder decoder = BodyDecoder::For(admission.content_encoding, admission.body_limit);
    if (decoder.error()) {
      return Refuse(head.method, *decoder.error(), true);
    }
    if (auto expect = FindHeader(head.headers, "Expect")) {
      admission.expect_continue = strcasecmp(Trimmed(*expect).c_str(), "100-continue") == 0;
    }
  }
  if (method == "GET" || method == "HEAD") {
    if (auto range = FindHeader(head.headers, "Range")) {
      std::optional<std::vector<ByteRange>> ranges = ParseRangeHeader(*range);
      if (!ranges) {
        return Refuse(
            head.method,
            ErrorResponse(416, "range_not_satisfiable", "the Range header cannot be satisfied"),
            has_body);
      }
      // We send no validators, so an If-Range never matches: the whole content.
      if (!FindHeader(head.headers, "If-Range")) {
        admission.ranges = std::move(ranges);
      }
    }
  }

  http::Request& request = admission.request;
  request.method = method;
  request.path = std::move(target->path);
  request.path_params = std::move(match.path_params);
  request.query_params = std::move(target->query);
  request.headers = std::move(head.headers);
  std::erase_if(request.headers, [](const auto& header) { return IsPseudoHeader(header.first); });
  // Handlers were promised case-insensitive name order (and order as sent within a name).
  std::stable_sort(request.headers.begin(), request.headers.end(),
                   [](const auto& a, const auto& b) {
                     return strcasecmp(a.first.c_str(), b.first.c_str()) < 0;
                   });
  request.remote_addr = std::move(head.remote_addr);
  request.remote_port = head.remote_port;
  return admission;
}

Response ListenerCore::Serve(const Admission& admission, const http::Request& request) const {
  const std::string where =
      options_.name + " listener: handler for " + request.method + " " + Quote(request.path);
  try {
    return (*admission.handler)(request);
  } catch (const std::exception& e) {
    LogError(where + " threw: " + Quote(e.what()));
  } catch (...) {
    LogError(where + " threw a non-standard exception");
  }
  return ErrorResponse(500, "internal", "internal error while handling the request");
}

void ListenerCore::ServeDeferred(const Admission& admission, const http::Request& request,
                                 const std::shared_ptr<PendingAnswer>& pending) const {
  const std::string where =
      options_.name + " listener: handler for " + request.method + " " + Quote(request.path);
  const http::Responder responder(pending);
  deferred_answer = pending.get();
  struct Clear {
    ~Clear() { deferred_answer = nullptr; }
  } clear;
  try {
    deferred_handlers_.at(admission.deferred_id - 1)(request, responder);
    return;
  } catch (const std::exception& e) {
    LogError(where + " threw: " + Quote(e.what()));
  } catch (...) {
    LogError(where + " threw a non-standard exception");
  }
  responder.Respond(ErrorResponse(500, "internal", "internal error while handling the request"));
}

Outgoing ListenerCore::Finish(const Admission* admission, Response response, bool close) const {
  const http::Request* request = admission != nullptr ? &admission->request : nullptr;
  const std::string what =
      request != nullptr ? request->method + " " + Quote(request->path) : std::string("a request");
  if (response.status < 100 || response.status > 599) {
    LogError(options_.name + " listener: handler for " + what + " returned HTTP status " +
             std::to_string(response.status));
    response = ErrorResponse(500, "internal", "internal error while handling the request");
  }

  if (response.status >= 400 && response.body.empty()) {
    const Response described = DescribeEmptyError(response.status);
    response.body = described.body;
    response.content_type = described.content_type;
  }

  Outgoing out;
  std::string headers;
  bool has_cache_control = false;
  bool range_able = false;
  for (const auto& [name, value] : response.headers) {
    if (name.empty() || HasLineBreak(name) || HasLineBreak(value)) {
      LogError(options_.name + " listener: dropped response header " + Quote(name) +
               " with a line break for " + what);
      continue;
    }
    // Framing is ours to write; a handler's copy would contradict it.
    if (NameIs(name, "Content-Length") || NameIs(name, "Transfer-Encoding")) {
      continue;
    }
    if (NameIs(name, "Connection")) {
      close = close || strcasecmp(Trimmed(value).c_str(), "close") == 0;
      continue;
    }
    has_cache_control = has_cache_control || NameIs(name, "Cache-Control");
    range_able = range_able || (NameIs(name, "Accept-Ranges") && Trimmed(value) == "bytes");
    headers += name + ": " + value + "\r\n";
  }
  // API answers can carry secrets (tokens, user data); handlers that serve cacheable
  // content say so themselves.
  if (!has_cache_control) {
    headers += "Cache-Control: no-store\r\n";
  }
  headers += "X-Content-Type-Options: nosniff\r\n";

  out.body = std::move(response.body);
  out.body_length = out.body.size();
  if (request != nullptr && admission->ranges && response.status == 200 && range_able) {
    const RangePlan plan = PlanRange(*admission->ranges, out.body.size());
    const std::string size = std::to_string(out.body.size());
    if (plan.kind == RangePlan::Kind::kPartial) {
      response.status = 206;
      out.body_offset = plan.first;
      out.body_length = plan.last - plan.first + 1;
      headers += "Content-Range: bytes " + std::to_string(plan.first) + "-" +
                 std::to_string(plan.last) + "/" + size + "\r\n";
    } else if (plan.kind == RangePlan::Kind::kUnsatisfiable) {
      Response refused =
          ErrorResponse(416, "range_not_satisfiable",
                        "the range starts past the end of the " + size + "-byte content");
      response.status = refused.status;
      response.content_type = refused.content_type;
      out.body = std::move(refused.body);
      out.body_length = out.body.size();
      headers += "Content-Range: bytes */" + size + "\r\n";
    }
  }

  const int status = response.status;
  const bool no_body = status < 200 || status == 204 || status == 304;
  out.head =
      "HTTP/1.1 " + std::to_string(status) + " " + std::string(ReasonPhrase(status)) + "\r\n";
  if (!response.content_type.empty() && !HasLineBreak(response.content_type) && !no_body) {
    out.head += "Content-Type: " + response.content_type + "\r\n";
  }
  out.head += headers;
  if (!no_body) {
    out.head += "Content-Length: " + std::to_string(out.body_length) + "\r\n";
  }
  if (close) {
    out.head += "Connection: close\r\n";
  }
  out.head += "\r\n";
  if (no_body || (request != nullptr && request->method == "HEAD")) {
    out.body.clear();
    out.body_offset = 0;
    out.body_length = 0;
  }
  out.close = close;
  return out;
}

void ListenerCore::LogError(std::string_view message) const {
  if (options_.error_log) {
    options_.error_log(message);
  } else {
    spdlog::error("{}", message);
  }
}

void ListenerCore::TrimHeap() {
  malloc_trim(0);
  ++heap_trims_;
}

bool ListenerCore::TakeHeapTrimRequest() { return std::exchange(heap_trim_requested, false); }

}  // namespace expanse::http_internal

namespace expanse::http {

void RequestHeapTrim() {
  if (http_internal::deferred_answer != nullptr)
    http_internal::deferred_answer->TrimHeapAfterAnswer();
  else
    http_internal::heap_trim_requested = true;
}

Responder::Responder(std::shared_ptr<http_internal::PendingAnswer> pending)
    : pending_(std::move(pending)) {}

bool Responder::Respond(Response response) const { return pending_->Respond(std::move(response)); }

void Responder::ExpireAfter(std::chrono::milliseconds after,
                            std::function<Response()> fallback) const {
  pending_->ExpireAfter(after, std::move(fallback));
}

bool Responder::answered() const { return pending_->answered(); }

void Responder::TrimHeapAfterAnswer() const { pending_->TrimHeapAfterAnswer(); }

}  // namespace expanse::http
