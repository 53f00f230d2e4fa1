// HttpClient: the daemon's HTTP(S) client, on libcurl.
//
//   EXPANSE_ASSIGN_OR_RETURN(auto client, net::HttpClient::Create(options));
//   net::HttpRequest request{.method = "POST", .url = url, .headers = {...}, .body = body};
//   EXPANSE_ASSIGN_OR_RETURN(net::HttpResponse response, client->Send(request));
//
// Policy, fixed rather than configurable:
// - TLS peer and host verification are always on (TLS 1.2 or later). The trust store is
//   exactly HttpClientOptions::ca_file, else libcurl's built-in bundle and directory (Debian:
//   /etc/ssl/certs/ca-certificates.crt, /etc/ssl/certs). libcurl does NOT read SSL_CERT_FILE (only
//   the curl tool does), so the daemon passes daemon.env's SSL_CERT_FILE as ca_file and the
//   installer the one in its own environment (install::CaFileFromEnvironment).
// - Plain http only to loopback hosts (url_policy.h); redirects are not followed, so an
//   answer cannot move a request to another host or to plain http.
// - Proxies are HttpClientOptions::https_proxy/no_proxy when set; otherwise they come from the
//   environment, read by libcurl on every request: https_proxy, then
//   HTTPS_PROXY, then all_proxy/ALL_PROXY for https URLs; no_proxy, then NO_PROXY, lists hosts
//   to reach directly. (For http URLs libcurl reads only lower-case http_proxy, a CGI-safety
//   rule of its own.) Loopback URLs never use a proxy: a proxy cannot reach this machine's
//   loopback. An https:// proxy is verified against the same ca_file.
// - Nothing is logged. Error messages name the method and URL, never a header value (the
//   Authorization header holds the credential) or a body.
//
// Thread-safe: requests are serialised on one libcurl handle, which keeps connections alive
// between them.
#ifndef EXPANSE_NET_HTTP_CLIENT_H_
#define EXPANSE_NET_HTTP_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "net/http_headers.h"

namespace expanse::net {

// AWS Signature Version 4, as an S3-compatible object store wants it (libcurl signs). The
// request must carry an x-amz-content-sha256 header (the hex SHA-256 of the body): libcurl
// signs it but does not add it, and stores such as Ceph's RADOS gateway require it.
struct AwsSigV4 {
  std::string region = "us-east-1";
  std::string service = "s3";
  std::string access_key{};
  std::string secret_key{};  // never in a message
};

struct HttpRequest {
  std::string method = "GET";  // "GET", "POST", "PUT", "DELETE" or "HEAD"
  std::string url{};           // absolute; see url_policy.h for what is allowed
  // Sent as given. Names and values must not contain CR, LF or NUL. "Expect:" is suppressed
  // (libcurl would otherwise wait for "100 Continue" before large bodies).
  HeaderList headers{};
  std::string body{};  // POST and PUT only
  std::optional<AwsSigV4> aws_sigv4{};
  // A smaller limit on this answer than the client's max_response_bytes (0: the client's): a
  // client made for large downloads also fetches small documents, which must not take as much.
  size_t max_response_bytes = 0;
};

struct HttpResponse {
  int status = 0;
  // Of the final response, in the order received, at most kMaxResponseHeaders (http_headers.h).
  HeaderList headers{};
  std::string body{};  // at most HttpClientOptions::max_response_bytes

  // The first value of header `name` (compared case-insensitively), if present.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // Bounds the whole exchange, including sending the body and reading the answer.
  std::chrono::milliseconds total_timeout{std::chrono::seconds(120)};
  // A longer answer is refused (kResourceExhausted, "response_too_large"): the server's
  // answers are small JSON documents, and a hostile peer must not fill memory.
  size_t max_response_bytes = 1u << 20;
  // PEM bundle of trusted CAs; "" = libcurl's built-in bundle.
  std::string ca_file{};
  std::string user_agent = "expanse";
  // The proxy for https URLs and the hosts reached directly (libcurl's syntax), given by the
  // caller, e.g. from daemon.env; "" = what libcurl finds in the environment.
  std::string https_proxy{};
  std::string no_proxy{};
};

class HttpClient {
 public:
  // kInvalidArgument when ca_file is given but unreadable or the limits are unusable;
  // kInternal when libcurl cannot be initialised.
  static Result<std::unique_ptr<HttpClient>> Create(HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Any HTTP status is a successful Send: the caller decides what a 500 means. Failures:
  // - kInvalidArgument: a URL the policy refuses ("insecure_url", "unsupported_url",
  //   "invalid_url"), an unknown method, a header with CR/LF ("invalid_header");
  // - kUnavailable: the exchange failed and may succeed later ("network_error": DNS,
  //   connection refused or reset, proxy; "tls_error": handshake or certificate
  //   verification, which needs the operator but must not lose data meanwhile);
  // - kDeadlineExceeded ("timeout"): connect_timeout or total_timeout ran out;
  // - kResourceExhausted ("response_too_large").
  Result<HttpResponse> Send(const HttpRequest& request);

  const HttpClientOptions& options() const { return options_; }

 private:
  struct Handle;
  HttpClient(HttpClientOptions options, std::unique_ptr<Handle> handle);

  const HttpClientOptions options_;
  std::mutex mu_;  // guards handle_, which libcurl allows one transfer at a time
  std::unique_ptr<Handle> handle_;
};

}  // namespace expanse::net

#endif  // EXPANSE_NET_HTTP_CLIENT_H_
