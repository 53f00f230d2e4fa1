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

#include <strings.h>

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

}  // namespace

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

  http.set_pre_routing_handler(httplib::Server::HandlerWithResponse(
      [serve, write](const httplib::Request& in, httplib::Response& out) {
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
        return httplib::Server::HandlerResponse::Handled;
      }));

  const size_t max_body = options_.max_body_bytes;
  const httplib::Server::HandlerWithContentReader read_then_serve =
      [serve, write, max_body](const httplib::Request& in, httplib::Response& out,
                               const httplib::ContentReader& reader) {
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
