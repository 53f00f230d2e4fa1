// How a Listener plugs into httplib: which httplib hooks see a request, how its body
// is read within the limit, and how Request/Response convert.
//
// httplib 0.11.4 routes with std::regex and reads bodies in ways that need fencing:
// - GET/HEAD and unknown methods are answered from the pre-routing hook, which runs
//   before httplib touches the body, using our Router.
// - POST/PUT/PATCH/DELETE go through one catch-all "content reader" route, so the
//   body is read by our receiver, which counts decoded bytes. httplib's own reader
//   enforces set_payload_max_length only for Content-Length bodies: chunked or
//   gzip-encoded bodies would otherwise grow without bound.
// - libstdc++'s regex matcher recurses once per character (about 300 bytes of stack
//   each), so paths are capped at kMaxPathBytes before the catch-all regex sees them.
// - The body limit is the matched route's (Router::Match::max_body_bytes) or the
//   listener's, looked up before the body is read.
// - httplib calls the logger after the response is written (write_response_core), on the
//   worker thread that handled the request: that is where a large request's freed memory
//   is handed back with malloc_trim, off the request's latency.

#include <malloc.h>
#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "http/error.h"
#include "http/listener.h"
#include "http/listener_server.h"

namespace expanse::http {

namespace {

constexpr size_t kMaxPathBytes = 2048;
constexpr const char* kAnyPath = R"([\s\S]*)";

// `text` quoted for a log line or message: printable ASCII kept, everything else
// (control bytes, non-ASCII, quotes, backslashes) escaped, and cut at 200 bytes.
std::string Quote(std::string_view text) {
  constexpr size_t kMaxQuoted = 200;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxQuoted; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
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

bool IsPseudoHeader(const std::string& name) {
  for (const char* pseudo : {"REMOTE_ADDR", "REMOTE_PORT", "LOCAL_ADDR", "LOCAL_PORT"}) {
    if (strcasecmp(name.c_str(), pseudo) == 0) {
      return true;
    }
  }
  return false;
}

bool HasLineBreak(std::string_view text) {
  return text.find_first_of("\r\n") != std::string_view::npos;
}

Request ToRequest(const httplib::Request& in, std::string body,
                  std::map<std::string, std::string, std::less<>> path_params) {
  Request out;
  out.method = in.method;
  out.path = in.path;
  out.path_params = std::move(path_params);
  for (const auto& [name, value] : in.params) {
    out.query_params.emplace(name, value);
  }
  for (const auto& [name, value] : in.headers) {
    if (!IsPseudoHeader(name)) {
      out.headers.emplace_back(name, value);
    }
  }
  out.body = std::move(body);
  out.remote_addr = in.remote_addr;
  out.remote_port = in.remote_port;
  return out;
}

// The JSON error for a status httplib chose itself (a malformed request, a body or
// URI over its limits), filled in by the error handler.
std::pair<const char*, const char*> DescribeHttplibError(int status) {
  switch (status) {
    case 400:
      return {"bad_request", "the request is not valid HTTP"};
    case 404:
      return {"not_found", "no such resource"};
    case 413:
      return {"body_too_large", "the request body is too large"};
    case 414:
      return {"uri_too_long", "the request URI is too long"};
    case 416:
      return {"range_not_satisfiable", "the Range header cannot be satisfied"};
    case 500:
      return {"internal", "internal error while handling the request"};
    default:
      return {"http_error", "the request failed"};
  }
}

// --- Hostile-input checks of the pre-routing hook (docs/formats/http-errors.md) -----------

// Why the request's Content-Length cannot be trusted, or nullptr. Two of them (RFC 9112
// §6.3: "MUST treat it as an unrecoverable error") or one that is not a plain decimal number
// would let this server and a proxy in front of it disagree on where the body ends.
const char* BadContentLength(const httplib::Request& in) {
  const size_t count = in.get_header_value_count("Content-Length");
  if (count == 0) {
    return nullptr;
  }
  if (count > 1) {
    return "the request has more than one Content-Length header";
  }
  const std::string value = in.get_header_value("Content-Length");
  if (value.empty() || value.size() > 19 ||
      value.find_first_not_of("0123456789") != std::string::npos) {
    return "the Content-Length header is not a decimal number";
  }
  return nullptr;
}

// httplib 0.11.4 parses Range before any hook runs and then applies it to the body of any
// answer (Server::apply_ranges): JSON and errors included, and with every range listed, so
// "bytes=0-,0-,..." repeated the whole body once per range in a multipart answer (2,000
// ranges on a 1 KB page gave 2.4 MB). The hook therefore takes the ranges off the request
// before anything is served, and ApplyRange gives at most one back.
httplib::Ranges TakeRanges(const httplib::Request& in) {
  // The hook receives httplib's own Request (a non-const local of Server::process_request)
  // by const reference, so writing through the const_cast is defined; it is the only way to
  // keep httplib from applying the ranges itself.
  httplib::Ranges taken;
  taken.swap(const_cast<httplib::Request&>(in).ranges);
  return taken;
}

// Serves one byte range of a GET/HEAD answer when its handler declared it range-able
// (`Accept-Ranges: bytes`, static and stored files only) and it is a 200; everything else
// is answered whole, which RFC 9110 §14.2 allows for any Range. More than one range is
// answered whole too, so an answer is never larger than the content. A single range past
// the end gets 416 with `Content-Range: bytes */<size>`.
void ApplyRange(const httplib::Request& in, const httplib::Ranges& ranges, httplib::Response& out) {
  if (ranges.size() != 1 || out.status != 200 || out.get_header_value("Accept-Ranges") != "bytes" ||
      in.has_header("If-Range") || out.body.empty()) {
    return;  // we send no validators, so an If-Range never matches: the whole content
  }
  const auto size = static_cast<ssize_t>(out.body.size());
  auto [first, last] = ranges.front();
  if (first < 0 && last < 0) {
    return;  // "bytes=-": no range at all
  }
  if (first < 0) {  // a suffix: the last `last` bytes
    first = last == 0 ? size : std::max<ssize_t>(0, size - last);
    last = size - 1;
  } else if (last < 0 || last >= size) {
    last = size - 1;
  }
  if (first >= size) {
    const Response refused = ErrorResponse(
        416, "range_not_satisfiable",
        "the range starts past the end of the " + std::to_string(size) + "-byte content");
    out.status = refused.status;
    out.set_header("Content-Range", "bytes */" + std::to_string(size));
    out.set_content(refused.body, refused.content_type.c_str());
    return;
  }
  // httplib cuts the body and writes Content-Range from this one, now well-formed, range.
  const_cast<httplib::Request&>(in).ranges.assign(1, {first, last});
  out.status = 206;
}

// Set by the reader or a handler on this worker thread; consumed after the response.
thread_local bool trim_heap_after_response = false;

}  // namespace

void RequestHeapTrim() { trim_heap_after_response = true; }

void Listener::InstallHandlers() {
  httplib::Server& http = *server_->http;

  auto write = [this](const httplib::Request& in, const Response& response,
                      httplib::Response& out) {
    if (response.status < 100 || response.status > 599) {
      LogError(options_.name + " listener: handler for " + in.method + " " + Quote(in.path) +
               " returned HTTP status " + std::to_string(response.status));
      const Response fallback =
          ErrorResponse(500, "internal", "internal error while handling the request");
      out.status = fallback.status;
      out.set_content(fallback.body, fallback.content_type.c_str());
      return;
    }
    out.status = response.status;
    bool has_cache_control = false;
    for (const auto& [name, value] : response.headers) {
      if (name.empty() || HasLineBreak(name) || HasLineBreak(value)) {
        LogError(options_.name + " listener: dropped response header " + Quote(name) +
                 " with a line break for " + in.method + " " + Quote(in.path));
        continue;
      }
      has_cache_control = has_cache_control || strcasecmp(name.c_str(), "Cache-Control") == 0;
      out.set_header(name.c_str(), value);
    }
    // API answers can carry secrets (tokens, user data); handlers that serve
    // cacheable content say so themselves.
    if (!has_cache_control) {
      out.set_header("Cache-Control", "no-store");
    }
    out.set_header("X-Content-Type-Options", "nosniff");
    out.set_content(response.body, response.content_type.c_str());
  };

  auto serve = [this, write](const httplib::Request& in, std::string body, httplib::Response& out) {
    Router::Match match = router_.Find(in.method, in.path);
    if (match.handler == nullptr) {
      if (match.allowed_methods.empty()) {
        write(in,
              ErrorResponse(404, "not_found", "no route for " + in.method + " " + Quote(in.path)),
              out);
        return;
      }
      std::string allow;
      for (const std::string& method : match.allowed_methods) {
        allow += (allow.empty() ? "" : ", ") + method;
      }
      Response response =
          ErrorResponse(405, "method_not_allowed",
                        in.method + " is not allowed for " + Quote(in.path) + "; use " + allow);
      response.headers.emplace_back("Allow", allow);
      write(in, response, out);
      return;
    }
    const Request request = ToRequest(in, std::move(body), std::move(match.path_params));
    Response response;
    try {
      response = (*match.handler)(request);
    } catch (const std::exception& e) {
      LogError(options_.name + " listener: handler for " + in.method + " " + Quote(in.path) +
               " threw: " + Quote(e.what()));
      response = ErrorResponse(500, "internal", "internal error while handling the request");
    } catch (...) {
      LogError(options_.name + " listener: handler for " + in.method + " " + Quote(in.path) +
               " threw a non-standard exception");
      response = ErrorResponse(500, "internal", "internal error while handling the request");
    }
    write(in, response, out);
  };

  // glibc keeps what a request freed in its arenas for reuse; after one large request that
  // can be hundreds of MB that the process then holds for good. Giving it back costs a few
  // milliseconds, so only after requests that were large.
  auto trim_heap = [this] {
    if (std::exchange(trim_heap_after_response, false)) {
      malloc_trim(0);
      ++heap_trims_;
    }
  };
  http.set_logger([trim_heap](const httplib::Request&, const httplib::Response&) { trim_heap(); });

  http.set_pre_routing_handler(httplib::Server::HandlerWithResponse(
      [serve, write, trim_heap](const httplib::Request& in, httplib::Response& out) {
        trim_heap();  // left over when the previous response could not be written
        const httplib::Ranges ranges = TakeRanges(in);
        if (const char* why = BadContentLength(in)) {
          write(in, ErrorResponse(400, "bad_request", why), out);
          out.set_header("Connection", "close");
          return httplib::Server::HandlerResponse::Handled;
        }
        if (in.path.size() > kMaxPathBytes) {
          write(in,
                ErrorResponse(
                    414, "uri_too_long",
                    "the request path is longer than " + std::to_string(kMaxPathBytes) + " bytes"),
                out);
          out.set_header("Connection", "close");
          return httplib::Server::HandlerResponse::Handled;
        }
        const std::string& method = in.method;
        if (method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE") {
          return httplib::Server::HandlerResponse::Unhandled;  // body first: see below
        }
        // GET and HEAD carry no body we read; other methods (OPTIONS, TRACE, PRI,
        // CONNECT) get 404/405 from the router before httplib could read theirs.
        serve(in, std::string(), out);
        ApplyRange(in, ranges, out);
        return httplib::Server::HandlerResponse::Handled;
      }));

  const httplib::Server::HandlerWithContentReader read_then_serve =
      [this, serve, write](const httplib::Request& in, httplib::Response& out,
                           const httplib::ContentReader& reader) {
        const size_t route_limit = router_.Find(in.method, in.path).max_body_bytes;
        const size_t max_body = route_limit != 0 ? route_limit : options_.max_body_bytes;
        std::string body;
        bool too_large = false;
        bool read = false;
        const bool multipart = in.is_multipart_form_data();
        if (multipart) {
          // Not accepted, but drained (within the limit) so a keep-alive connection
          // stays in step.
          size_t seen = 0;
          read = reader([](const httplib::MultipartFormData&) { return true; },
                        [&](const char*, size_t n) {
                          seen += n;
                          too_large = too_large || seen > max_body;
                          return !too_large;
                        });
        } else {
          read = reader([&](const char* data, size_t n) {
            if (n > max_body - body.size()) {
              too_large = true;
              return false;
            }
            body.append(data, n);
            return true;
          });
        }
        const size_t trim_after = options_.trim_heap_after_bytes;
        if (trim_after != 0 && body.size() >= trim_after) {
          trim_heap_after_response = true;
        }
        Response response;
        if (too_large || out.status == 413) {
          response = ErrorResponse(
              413, "body_too_large",
              "the request body is larger than " + std::to_string(max_body) + " bytes");
        } else if (!read) {
          response = ErrorResponse(400, "bad_request", "could not read the request body");
        } else if (multipart) {
          response = ErrorResponse(415, "unsupported_media_type",
                                   "multipart/form-data bodies are not accepted");
        } else {
          serve(in, std::move(body), out);
          return;
        }
        write(in, response, out);
        if (!read) {
          // Unread body bytes are still on the connection; the client should not reuse it.
          out.set_header("Connection", "close");
        }
      };
  http.Post(kAnyPath, read_then_serve);
  http.Put(kAnyPath, read_then_serve);
  http.Patch(kAnyPath, read_then_serve);
  http.Delete(kAnyPath, read_then_serve);

  // Answers httplib produced on its own (malformed request line, URI too long, ...)
  // get the JSON error shape too. Bodies we wrote are left alone.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& out) {
        if (!out.body.empty()) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        const auto [code, message] = DescribeHttplibError(out.status);
        out.set_content(ErrorBody(code, message), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));

  // Handlers' exceptions are caught in serve(); this catches what httplib itself
  // might throw while routing (std::regex, allocation).
  http.set_exception_handler(
      [this](const httplib::Request& in, httplib::Response& out, std::exception_ptr error) {
        std::string what = "a non-standard exception";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = Quote(e.what());
        } catch (...) {
        }
        LogError(options_.name + " listener: error while routing " + in.method + " " +
                 Quote(in.path) + ": " + what);
        out.status = 500;
        out.set_content(ErrorBody("internal", "internal error while handling the request"),
                        "application/json");
      });
}

}  // namespace expanse::http
