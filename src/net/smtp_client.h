// SmtpClient: sends a plain-text mail through the site's SMTP server, on libcurl.
//
//   EXPANSE_ASSIGN_OR_RETURN(auto smtp, net::SmtpClient::Create(options));  // options.url =
//   smtp://… EXPANSE_RETURN_IF_ERROR(smtp->Send({.from = ..., .to = {...}, .subject = ..., .text =
//   ...},
//                                      clock.NowMs()));
//
// Policy, as for the HTTP client (http_client.h):
// - smtps:// is TLS from the first byte; smtp:// to any host but loopback must upgrade with
//   STARTTLS (the send fails if the server does not offer it), so a password or a message
//   never crosses the network in clear text. Peer and host verification are always on;
//   the trust store is SmtpOptions::ca_file, else libcurl's default.
// - Credentials (optional) come from the caller, read from a file, never from argv.
// - Addresses and the subject are refused with CR, LF or NUL (no header injection); the
//   message is built here (BuildMailMessage), with the subject RFC 2047-encoded when not ASCII.
// - Nothing is logged; error messages name the server URL, never the credentials or the body.
//
// Thread-safe: sends are serialised.
#ifndef EXPANSE_NET_SMTP_CLIENT_H_
#define EXPANSE_NET_SMTP_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse::net {

struct MailMessage {
  std::string from;             // the envelope and From: address, "alerts@example.org"
  std::vector<std::string> to;  // one or more recipient addresses
  std::string subject;          // one line, UTF-8
  std::string text;             // UTF-8 body; line ends become CRLF
};

struct SmtpOptions {
  std::string url;  // smtp://host[:port] or smtps://host[:port]
  std::string username{};
  std::string password{};
  std::string ca_file{};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds total_timeout{std::chrono::seconds(60)};
};

// kInvalidArgument ("invalid_address") unless `address` is a plain addr-spec: one '@', a
// local part and a domain, at most 254 bytes, no blank, control character, quote, angle
// bracket, comma or semicolon.
Status CheckMailAddress(std::string_view address);

// The RFC 5322 message: Date (from now_ms, UTC), From, To, Subject, Message-ID (unique per
// call), MIME-Version and a UTF-8 text/plain body, every line ending CRLF.
// kInvalidArgument for a bad address, no recipient, or a subject with a line break.
Result<std::string> BuildMailMessage(const MailMessage& message, int64_t now_ms);

class SmtpClient {
 public:
  // kInvalidArgument ("invalid_url") for a URL that is not smtp:// or smtps:// with a host,
  // or one with credentials in it; ("ca_file_unreadable") for an unreadable ca_file.
  static Result<std::unique_ptr<SmtpClient>> Create(SmtpOptions options);
  ~SmtpClient();
  SmtpClient(const SmtpClient&) = delete;
  SmtpClient& operator=(const SmtpClient&) = delete;

  // Failures: kInvalidArgument as BuildMailMessage; kUnavailable when the exchange failed and
  // may succeed later ("network_error", "tls_error", or the server refused for now);
  // kDeadlineExceeded ("timeout"); kFailedPrecondition ("mail_refused") when the server
  // refused the sender, a recipient or the login for good.
  Status Send(const MailMessage& message, int64_t now_ms);

  const SmtpOptions& options() const { return options_; }

 private:
  explicit SmtpClient(SmtpOptions options, bool require_tls)
      : options_(std::move(options)), require_tls_(require_tls) {}
  SmtpOptions options_;
  bool require_tls_;
  std::mutex mu_;
};

}  // namespace expanse::net

#endif  // EXPANSE_NET_SMTP_CLIENT_H_
