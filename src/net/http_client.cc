#include "net/http_client.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string>
#include <utility>

#include <curl/curl.h>

#include "core/quote.h"
#include "net/curl_global.h"
#include "net/http_headers.h"
#include "net/url_policy.h"

namespace expanse::net {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

using internal::HasLineBreakOrNul;
using internal::SlistFree;

struct BodySink {
  std::string* body;
  size_t limit;
  bool over_limit = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const size_t bytes = size * count;
  if (sink->body->size() + bytes > sink->limit) {
    sink->over_limit = true;
    return 0;  // libcurl stops the transfer with CURLE_WRITE_ERROR
  }
  sink->body->append(data, bytes);
  return bytes;
}

// libcurl's header callback, called with each header line of each response it reads.
size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  const size_t bytes = size * count;
  AddResponseHeaderLine(*static_cast<HeaderList*>(user), std::string_view(data, bytes));
  return bytes;
}

Status MapCurlError(CURLcode code, const HttpRequest& request, const char* detail) {
  std::string message =
      request.method + " " + QuoteForMessage(request.url, 200) + ": " + curl_easy_strerror(code);
  if (detail != nullptr && detail[0] != '\0' && message.find(detail) == std::string::npos)
    message += std::string(" (") + detail + ")";
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceededError(std::move(message)).WithReason("timeout");
    case CURLE_FILESIZE_EXCEEDED:
      return ResourceExhaustedError(std::move(message)).WithReason("response_too_large");
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return InvalidArgumentError(std::move(message)).WithReason("invalid_url");
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
      return UnavailableError(std::move(message)).WithReason("tls_error");
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION:
    case CURLE_NOT_BUILT_IN:
      return InternalError(std::move(message));
    default:
      return UnavailableError(std::move(message)).WithReason("network_error");
  }
}

}  // namespace

struct HttpClient::Handle {
  CURL* easy = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  ~Handle() {
    if (easy != nullptr)
      curl_easy_cleanup(easy);
  }
};

std::optional<std::string_view> HttpResponse::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name))
      return value;
  }
  return std::nullopt;
}

HttpClient::HttpClient(HttpClientOptions options, std::unique_ptr<Handle> handle)
    : options_(std::move(options)), handle_(std::move(handle)) {}

HttpClient::~HttpClient() = default;

Result<std::unique_ptr<HttpClient>> HttpClient::Create(HttpClientOptions options) {
  if (options.connect_timeout.count() <= 0 || options.total_timeout.count() <= 0) {
    return InvalidArgumentError("http client: timeouts must be positive");
  }
  if (options.max_response_bytes == 0)
    return InvalidArgumentError("http client: max_response_bytes must be positive");
  // Checked here so that a wrong SSL_CERT_FILE is reported once, at start-up, by name,
  // instead of as a TLS failure on every request.
  if (!options.ca_file.empty() && ::access(options.ca_file.c_str(), R_OK) != 0) {
    return InvalidArgumentError("http client: the CA file " +
                                QuoteForMessage(options.ca_file, 200) +
                                " (SSL_CERT_FILE) cannot be read")
        .WithReason("ca_file_unreadable");
  }
  if (const std::string failed = internal::CurlGlobalInit(); !failed.empty())
    return InternalError("libcurl initialisation failed: " + failed);
  auto handle = std::make_unique<Handle>();
  handle->easy = curl_easy_init();
  if (handle->easy == nullptr)
    return InternalError("libcurl could not create a handle");
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(options), std::move(handle)));
}

Result<HttpResponse> HttpClient::Send(const HttpRequest& request) {
  const bool post = request.method == "POST";
  const bool put = request.method == "PUT";
  if (!post && !put && request.method != "GET" && request.method != "DELETE" &&
      request.method != "HEAD") {
    return InvalidArgumentError("http client: unsupported method " +
                                QuoteForMessage(request.method))
        .WithReason("invalid_method");
  }
  EXPANSE_RETURN_IF_ERROR(CheckUrlAllowed(request.url));
  UrlParts parts;
  EXPANSE_RETURN_IF_ERROR(SplitUrl(request.url, &parts));

  std::unique_ptr<curl_slist, SlistFree> header_list;
  auto add_header = [&](const std::string& line) -> Status {
    curl_slist* grown = curl_slist_append(header_list.get(), line.c_str());
    if (grown == nullptr)
      return ResourceExhaustedError("http client: out of memory for request headers");
    (void)header_list.release();
    header_list.reset(grown);
    return OkStatus();
  };
  for (const auto& [name, value] : request.headers) {
    // The value is not quoted in the message: it may be the credential.
    if (name.empty() || HasLineBreakOrNul(name) || HasLineBreakOrNul(value) ||
        name.find(':') != std::string::npos) {
      return InvalidArgumentError("http client: header " + QuoteForMessage(name) +
                                  " has an invalid name or a line break in its value")
          .WithReason("invalid_header");
    }
    // "Name;" is libcurl's spelling of a header with an empty value.
    EXPANSE_RETURN_IF_ERROR(add_header(value.empty() ? name + ";" : name + ": " + value));
  }
  // Not on a signed request: libcurl 7.88 would sign the removal as an empty "expect" header
  // that it never sends, and the store refuses the signature (a 100-continue round trip is
  // what a large PUT to an object store costs anyway).
  if (!request.aws_sigv4)
    EXPANSE_RETURN_IF_ERROR(add_header("Expect:"));

  std::lock_guard lock(mu_);
  CURL* easy = handle_->easy;
  // Reset drops every option of the previous request but keeps its open connections.
  curl_easy_reset(easy);
  handle_->error[0] = '\0';
  HttpResponse response;
  const size_t max_response_bytes =
      request.max_response_bytes != 0
          ? std::min(request.max_response_bytes, options_.max_response_bytes)
          : options_.max_response_bytes;
  BodySink sink{&response.body, max_response_bytes};
  const auto timeout_ms = [](std::chrono::milliseconds ms) {
    return static_cast<long>(ms.count());
  };

  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, handle_->error);
  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM in a threaded daemon
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(easy, CURLOPT_PROXY_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(easy, CURLOPT_PROXY_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(easy, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  if (!options_.ca_file.empty()) {
    // Exactly this bundle: without clearing CAPATH, libcurl would also trust the directory
    // it was built with (Debian: /etc/ssl/certs).
    curl_easy_setopt(easy, CURLOPT_CAINFO, options_.ca_file.c_str());
    curl_easy_setopt(easy, CURLOPT_CAPATH, nullptr);
    curl_easy_setopt(easy, CURLOPT_PROXY_CAINFO, options_.ca_file.c_str());
    curl_easy_setopt(easy, CURLOPT_PROXY_CAPATH, nullptr);
  }
  if (!options_.https_proxy.empty() && parts.scheme == "https")
    curl_easy_setopt(easy, CURLOPT_PROXY, options_.https_proxy.c_str());
  if (!options_.no_proxy.empty())
    curl_easy_setopt(easy, CURLOPT_NOPROXY, options_.no_proxy.c_str());
  if (IsLoopbackHost(parts.host))
    curl_easy_setopt(easy, CURLOPT_PROXY, "");  // "" overrides the proxy environment
  curl_easy_setopt(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms(options_.connect_timeout));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms(options_.total_timeout));
  curl_easy_setopt(easy, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_response_bytes));
  if (post || put) {
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    if (put)
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, "PUT");  // the body as POST sends it
  } else if (request.method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    if (request.method == "DELETE")
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
  std::string sigv4_provider, sigv4_user;
  if (request.aws_sigv4) {
    sigv4_provider = "aws:amz:" + request.aws_sigv4->region + ":" + request.aws_sigv4->service;
    sigv4_user = request.aws_sigv4->access_key + ":" + request.aws_sigv4->secret_key;
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4_provider.c_str());
    curl_easy_setopt(easy, CURLOPT_USERPWD, sigv4_user.c_str());
  }
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &response.headers);

  const CURLcode code = curl_easy_perform(easy);
  // The handle outlives this call; it must not keep pointers into this frame.
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, nullptr);
  if (request.aws_sigv4) {
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, nullptr);
    curl_easy_setopt(easy, CURLOPT_USERPWD, nullptr);
  }
  if (code != CURLE_OK) {
    if (sink.over_limit) {
      return ResourceExhaustedError(request.method + " " + QuoteForMessage(request.url, 200) +
                                    ": the answer exceeds " + std::to_string(max_response_bytes) +
                                    " bytes")
          .WithReason("response_too_large");
    }
    return MapCurlError(code, request, handle_->error);
  }
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace expanse::net
