#include "net/url_policy.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>

#include <curl/curl.h>

#include "core/quote.h"
#include "core/result.h"

namespace expanse::net {
namespace {

struct CurlUrlFree {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};
struct CurlStringFree {
  void operator()(char* text) const { curl_free(text); }
};

Status Invalid(std::string_view url, std::string_view why) {
  return InvalidArgumentError("URL " + QuoteForMessage(url, 200) + " " + std::string(why))
      .WithReason("invalid_url");
}

// The part, or "" when the URL has none.
std::string Part(CURLU* handle, CURLUPart part) {
  char* raw = nullptr;
  if (curl_url_get(handle, part, &raw, 0) != CURLUE_OK || raw == nullptr)
    return {};
  std::unique_ptr<char, CurlStringFree> owned(raw);
  return std::string(raw);
}

}  // namespace

// libcurl's own parser decides what the URL means, so the check and the connection can
// never disagree about the host (a hand-written parser could be fooled by
// "http://127.0.0.1@evil.example/").
Status SplitUrl(std::string_view url, UrlParts* parts) {
  if (url.find('\0') != std::string_view::npos)
    return Invalid(url, "contains a NUL byte");
  std::unique_ptr<CURLU, CurlUrlFree> handle(curl_url());
  if (!handle)
    return InternalError("cannot allocate a libcurl URL handle");
  const std::string text(url);
  if (curl_url_set(handle.get(), CURLUPART_URL, text.c_str(), CURLU_NON_SUPPORT_SCHEME) !=
      CURLUE_OK) {
    return Invalid(url, "is not an absolute URL");
  }
  if (!Part(handle.get(), CURLUPART_USER).empty() ||
      !Part(handle.get(), CURLUPART_PASSWORD).empty()) {
    return Invalid(url, "must not carry a user name or password");
  }
  parts->scheme = Part(handle.get(), CURLUPART_SCHEME);
  std::transform(parts->scheme.begin(), parts->scheme.end(), parts->scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  parts->host = Part(handle.get(), CURLUPART_HOST);
  if (parts->host.size() >= 2 && parts->host.front() == '[' && parts->host.back() == ']')
    parts->host = parts->host.substr(1, parts->host.size() - 2);
  if (parts->host.empty())
    return Invalid(url, "has no host");
  return OkStatus();
}

std::string RedactUrlCredentials(std::string_view url) {
  const std::string text(url);
  std::unique_ptr<CURLU, CurlUrlFree> handle(curl_url());
  const bool parsed = handle && text.find('\0') == std::string::npos &&
                      curl_url_set(handle.get(), CURLUPART_URL, text.c_str(),
                                   CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK;
  // Not a URL, or no credentials as libcurl reads it but an '@' all the same (a password with
  // an unencoded '/', '?' or '#', "http://svc:2024/Secret@proxy", ends the authority early):
  // only what follows the last '@' is shown.
  if (!parsed || (Part(handle.get(), CURLUPART_USER).empty() &&
                  Part(handle.get(), CURLUPART_PASSWORD).empty())) {
    const size_t at = text.rfind('@');
    return at == std::string::npos ? text : "***" + text.substr(at);
  }
  if (curl_url_set(handle.get(), CURLUPART_USER, "***", 0) != CURLUE_OK ||
      curl_url_set(handle.get(), CURLUPART_PASSWORD, nullptr, 0) != CURLUE_OK) {
    return "***";
  }
  const std::string redacted = Part(handle.get(), CURLUPART_URL);
  return redacted.empty() ? "***" : redacted;
}

Status CheckUrlAllowed(std::string_view url) {
  UrlParts parts;
  EXPANSE_RETURN_IF_ERROR(SplitUrl(url, &parts));
  if (parts.scheme == "https")
    return OkStatus();
  if (parts.scheme != "http") {
    return InvalidArgumentError("URL " + QuoteForMessage(url, 200) +
                                " must use https (or http to a loopback address)")
        .WithReason("unsupported_url");
  }
  if (IsLoopbackHost(parts.host))
    return OkStatus();
  return InvalidArgumentError("refusing plain http to " + QuoteForMessage(parts.host, 200) +
                              ": credentials and telemetry would cross the network "
                              "unencrypted; use an https URL (plain http is allowed only to "
                              "loopback addresses)")
      .WithReason("insecure_url");
}

}  // namespace expanse::net
