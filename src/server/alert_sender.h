// How an alert leaves the server: a webhook POST or a mail through the site's SMTP server.
// AlertSender is the seam the evaluator (alert_evaluator.h) calls; ChannelAlertSender is the
// real one, on net::HttpClient and net::SmtpClient (libcurl).
#ifndef EXPANSE_SERVER_ALERT_SENDER_H_
#define EXPANSE_SERVER_ALERT_SENDER_H_

#include <memory>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/result.h"
#include "core/status.h"
#include "net/http_client.h"
#include "net/smtp_client.h"
#include "server/alert_messages.h"

namespace expanse::server {

class AlertSender {
 public:
  virtual ~AlertSender() = default;
  // Sends `alert` to `target` over `channel` ("webhook": a URL, "email": an address).
  // kUnavailable or kDeadlineExceeded: may work later (the evaluator retries); any other
  // error is final for this message.
  virtual Status Send(std::string_view channel, std::string_view target,
                      const AlertText& alert) = 0;
  // Whether "email" rules can be delivered (an SMTP server is configured).
  virtual bool can_email() const = 0;
  // Whether webhooks may go to this machine (--alert-loopback-webhooks): off by default, so
  // that an organisation's admin cannot make the server post to services listening on its
  // loopback.
  virtual bool loopback_webhooks() const = 0;
};

// A webhook target the server will post to: https (or, with `loopback`, http to a loopback
// address), and never a loopback host unless `loopback`. kInvalidArgument saying why.
// Host names are not resolved for this check.
Status CheckWebhookUrl(std::string_view url, bool loopback);

struct AlertSenderOptions {
  // The SMTP server (smtp:// or smtps://); "" = no email delivery.
  std::string smtp_url;
  std::string smtp_username;  // from --smtp-credentials-file, never argv
  std::string smtp_password;
  std::string mail_from = "expanse@localhost";
  // Trust store for https webhooks and TLS to the SMTP server; "" = libcurl's default.
  std::string ca_file;
  // Webhooks to loopback addresses (a receiver on the server's own machine; tests).
  bool loopback_webhooks = false;
};

class ChannelAlertSender final : public AlertSender {
 public:
  static Result<std::unique_ptr<ChannelAlertSender>> Create(AlertSenderOptions options,
                                                            Clock& clock);
  Status Send(std::string_view channel, std::string_view target, const AlertText& alert) override;
  bool can_email() const override { return smtp_ != nullptr; }
  bool loopback_webhooks() const override { return options_.loopback_webhooks; }

 private:
  ChannelAlertSender(AlertSenderOptions options, Clock& clock)
      : options_(std::move(options)), clock_(clock) {}
  Status SendWebhook(std::string_view url, const AlertText& alert);

  AlertSenderOptions options_;
  Clock& clock_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<net::SmtpClient> smtp_;
};

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_ALERT_SENDER_H_
