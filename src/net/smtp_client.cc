#include "net/smtp_client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <string>
#include <utility>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "core/loopback.h"
#include "core/quote.h"
#include "net/curl_global.h"

namespace expanse::net {
namespace {

using internal::HasLineBreakOrNul;
using internal::SlistFree;

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool IsAscii(std::string_view text) {
  for (unsigned char c : text) {
    if (c >= 0x80)
      return false;
  }
  return true;
}

// "Thu, 03 Dec 2026 12:00:00 +0000": RFC 5322's date-time, in UTC, without the locale
// strftime's %a and %b would use.
std::string MailDate(int64_t now_ms) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t seconds = static_cast<std::time_t>(now_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[64];
  std::snprintf(text, sizeof(text), "%s, %02d %s %04d %02d:%02d:%02d +0000", kDays[tm.tm_wday],
                tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return text;
}

// An RFC 2047 encoded-word per at most 45 bytes of UTF-8 (whole characters), so that no
// encoded line runs past 78 characters; ASCII subjects go as they are.
std::string EncodeSubject(std::string_view subject) {
  if (IsAscii(subject))
    return std::string(subject);
  std::string out;
  size_t i = 0;
  while (i < subject.size()) {
    size_t end = std::min(subject.size(), i + 45);
    // Back off to a character boundary (a UTF-8 continuation byte is 10xxxxxx).
    while (end < subject.size() && end > i + 1 &&
           (static_cast<unsigned char>(subject[end]) & 0xC0) == 0x80)
      --end;
    if (!out.empty())
      out += "\r\n ";
    out += "=?UTF-8?B?" + Base64(subject.substr(i, end - i)) + "?=";
    i = end;
  }
  return out;
}

// Lines end CRLF; a lone CR or LF becomes CRLF. (libcurl adds the SMTP dot-stuffing.)
std::string CrlfText(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 32);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r') {
      out += "\r\n";
      if (i + 1 < text.size() && text[i + 1] == '\n')
        ++i;
    } else if (c == '\n') {
      out += "\r\n";
    } else {
      out += c;
    }
  }
  if (out.empty() || !out.ends_with("\r\n"))
    out += "\r\n";
  return out;
}

struct Upload {
  std::string_view data;
  size_t offset = 0;
};

size_t OnRead(char* buffer, size_t size, size_t count, void* user) {
  auto* upload = static_cast<Upload*>(user);
  const size_t n = std::min(size * count, upload->data.size() - upload->offset);
  std::copy_n(upload->data.data() + upload->offset, n, buffer);
  upload->offset += n;
  return n;
}

struct EasyFree {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};

// "smtp"/"smtps" and the host of an smtp URL; empty scheme when it is not one.
std::pair<std::string, std::string> SplitSmtpUrl(std::string_view url) {
  std::string scheme;
  if (url.starts_with("smtps://"))
    scheme = "smtps";
  else if (url.starts_with("smtp://"))
    scheme = "smtp";
  else
    return {};
  std::string_view rest = url.substr(scheme.size() + 3);
  rest = rest.substr(0, rest.find('/'));
  if (rest.find('@') != std::string_view::npos)
    return {scheme, "@"};  // credentials in the URL: refused by the caller
  std::string host;
  if (rest.starts_with("[")) {
    const size_t close = rest.find(']');
    host = std::string(rest.substr(1, close == std::string_view::npos ? 0 : close - 1));
  } else {
    host = std::string(rest.substr(0, rest.find(':')));
  }
  return {scheme, host};
}

}  // namespace

Status CheckMailAddress(std::string_view address) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError("mail address " + QuoteForMessage(address, 100) + " " + why)
        .WithReason("invalid_address");
  };
  if (address.empty() || address.size() > 254)
    return bad("must be 1 to 254 bytes");
  for (unsigned char c : address) {
    if (c <= 0x20 || c == 0x7F || c == '"' || c == '<' || c == '>' || c == ',' || c == ';' ||
        c == '(' || c == ')' || c == '\\')
      return bad("holds a character an address may not (blank, control, quote, bracket)");
  }
  const size_t at = address.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 == address.size() ||
      address.find('@', at + 1) != std::string_view::npos)
    return bad("must be local-part@domain");
  return OkStatus();
}

Result<std::string> BuildMailMessage(const MailMessage& message, int64_t now_ms) {
  EXPANSE_RETURN_IF_ERROR(CheckMailAddress(message.from));
  if (message.to.empty())
    return InvalidArgumentError("a mail needs at least one recipient")
        .WithReason("invalid_address");
  std::string to;
  for (const std::string& rcpt : message.to) {
    EXPANSE_RETURN_IF_ERROR(CheckMailAddress(rcpt));
    to += (to.empty() ? "" : ", ") + rcpt;
  }
  if (HasLineBreakOrNul(message.subject)) {
    return InvalidArgumentError("a mail subject must be one line").WithReason("invalid_subject");
  }
  static std::atomic<uint64_t> sequence{0};
  const std::string domain = message.from.substr(message.from.find('@') + 1);
  std::string out;
  out += "Date: " + MailDate(now_ms) + "\r\n";
  out += "From: " + message.from + "\r\n";
  out += "To: " + to + "\r\n";
  out += "Subject: " + EncodeSubject(message.subject) + "\r\n";
  out += "Message-ID: <expanse." + std::to_string(now_ms) + "." + std::to_string(::getpid()) + "." +
         std::to_string(++sequence) + "@" + domain + ">\r\n";
  out += "MIME-Version: 1.0\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\n";
  out += "Content-Transfer-Encoding: 8bit\r\n";
  out += "Auto-Submitted: auto-generated\r\n";  // RFC 3834: no auto-replies to alerts
  out += "\r\n";
  out += CrlfText(message.text);
  return out;
}

Result<std::unique_ptr<SmtpClient>> SmtpClient::Create(SmtpOptions options) {
  const auto [scheme, host] = SplitSmtpUrl(options.url);
  if (scheme.empty() || host.empty() || host == "@") {
    return InvalidArgumentError("SMTP URL " + QuoteForMessage(options.url, 200) +
                                " must be smtp://host[:port] or smtps://host[:port], without "
                                "credentials (those come from the credentials file)")
        .WithReason("invalid_url");
  }
  if (!options.ca_file.empty() && ::access(options.ca_file.c_str(), R_OK) != 0) {
    return InvalidArgumentError("SMTP client: the CA file " +
                                QuoteForMessage(options.ca_file, 200) + " cannot be read")
        .WithReason("ca_file_unreadable");
  }
  if (const std::string failed = internal::CurlGlobalInit(); !failed.empty())
    return InternalError("libcurl initialisation failed: " + failed);
  const bool require_tls = scheme == "smtp" && !IsLoopbackHost(host);
  return std::unique_ptr<SmtpClient>(new SmtpClient(std::move(options), require_tls));
}

SmtpClient::~SmtpClient() = default;

Status SmtpClient::Send(const MailMessage& message, int64_t now_ms) {
  EXPANSE_ASSIGN_OR_RETURN(const std::string text, BuildMailMessage(message, now_ms));
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<CURL, EasyFree> easy(curl_easy_init());
  if (!easy)
    return InternalError("libcurl could not create a handle");
  CURL* e = easy.get();
  char error[CURL_ERROR_SIZE] = {};
  std::unique_ptr<curl_slist, SlistFree> rcpts;
  for (const std::string& to : message.to) {
    curl_slist* next = curl_slist_append(rcpts.get(), ("<" + to + ">").c_str());
    if (next == nullptr)
      return InternalError("out of memory building the recipient list");
    rcpts.release();
    rcpts.reset(next);
  }
  const std::string from = "<" + message.from + ">";
  Upload upload{text};
  curl_easy_setopt(e, CURLOPT_URL, options_.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(e, CURLOPT_MAIL_FROM, from.c_str());
  curl_easy_setopt(e, CURLOPT_MAIL_RCPT, rcpts.get());
  curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(e, CURLOPT_READFUNCTION, OnRead);
  curl_easy_setopt(e, CURLOPT_READDATA, &upload);
  curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(text.size()));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.total_timeout.count()));
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(e, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  if (require_tls_)
    curl_easy_setopt(e, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_ALL));
  if (!options_.ca_file.empty())
    curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (!options_.username.empty()) {
    curl_easy_setopt(e, CURLOPT_USERNAME, options_.username.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, options_.password.c_str());
  }
  const CURLcode code = curl_easy_perform(e);
  if (code == CURLE_OK)
    return OkStatus();
  long reply = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &reply);
  std::string what = "mail to " + QuoteForMessage(message.to.front(), 100) + " through " +
                     QuoteForMessage(options_.url, 200) + ": " + curl_easy_strerror(code);
  if (error[0] != '\0' && what.find(error) == std::string::npos)
    what += std::string(" (") + error + ")";
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceededError(std::move(what)).WithReason("timeout");
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_USE_SSL_FAILED:
      return UnavailableError(std::move(what)).WithReason("tls_error");
    case CURLE_LOGIN_DENIED:
      return FailedPreconditionError(std::move(what)).WithReason("mail_refused");
    default:
      break;
  }
  // A 5xx reply is the server's final word on this mail (unknown recipient, refused
  // sender); a 4xx asks to try again later.
  if (reply >= 500 && reply < 600)
    return FailedPreconditionError(std::move(what)).WithReason("mail_refused");
  return UnavailableError(std::move(what)).WithReason("network_error");
}

}  // namespace expanse::net
