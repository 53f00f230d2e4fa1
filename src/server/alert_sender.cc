#include "server/alert_sender.h"

#include <chrono>
#include <utility>

#include "core/loopback.h"
#include "core/quote.h"
#include "net/url_policy.h"

namespace expanse::server {

Status CheckWebhookUrl(std::string_view url, bool loopback) {
  EXPANSE_RETURN_IF_ERROR(net::CheckUrlAllowed(url));
  net::UrlParts parts;
  EXPANSE_RETURN_IF_ERROR(net::SplitUrl(url, &parts));
  if (IsLoopbackHost(parts.host) && !loopback) {
    return InvalidArgumentError("webhooks to this machine (" + QuoteForMessage(parts.host, 64) +
                                ") are refused unless the server runs with "
                                "--alert-loopback-webhooks")
        .WithReason("loopback_webhook");
  }
  return OkStatus();
}

Result<std::unique_ptr<ChannelAlertSender>> ChannelAlertSender::Create(AlertSenderOptions options,
                                                                       Clock& clock) {
  if (!options.smtp_url.empty())
    EXPANSE_RETURN_IF_ERROR(net::CheckMailAddress(options.mail_from));
  std::unique_ptr<ChannelAlertSender> sender(new ChannelAlertSender(std::move(options), clock));
  net::HttpClientOptions http;
  http.ca_file = sender->options_.ca_file;
  // A receiver that hangs must not hold the evaluator for long; answers are tiny.
  http.connect_timeout = std::chrono::seconds(5);
  http.total_timeout = std::chrono::seconds(15);
  http.max_response_bytes = 64 * 1024;
  http.user_agent = "expanse-server alerts";
  EXPANSE_ASSIGN_OR_RETURN(sender->http_, net::HttpClient::Create(std::move(http)));
  if (!sender->options_.smtp_url.empty()) {
    net::SmtpOptions smtp;
    smtp.url = sender->options_.smtp_url;
    smtp.username = sender->options_.smtp_username;
    smtp.password = sender->options_.smtp_password;
    smtp.ca_file = sender->options_.ca_file;
    smtp.total_timeout = std::chrono::seconds(30);
    EXPANSE_ASSIGN_OR_RETURN(sender->smtp_, net::SmtpClient::Create(std::move(smtp)));
  }
  return sender;
}

Status ChannelAlertSender::Send(std::string_view channel, std::string_view target,
                                const AlertText& alert) {
  if (channel == "webhook")
    return SendWebhook(target, alert);
  if (channel == "email") {
    if (smtp_ == nullptr) {
      return FailedPreconditionError(
                 "no SMTP server is configured (expanse-server serve --smtp-url)")
          .WithReason("email_not_configured");
    }
    net::MailMessage mail;
    mail.from = options_.mail_from;
    mail.to = {std::string(target)};
    mail.subject = alert.subject;
    mail.text = alert.text;
    return smtp_->Send(mail, clock_.NowMs());
  }
  return InvalidArgumentError("unknown alert channel " + QuoteForMessage(channel, 32));
}

Status ChannelAlertSender::SendWebhook(std::string_view url, const AlertText& alert) {
  // Checked again here: the rule may predate a restart without --alert-loopback-webhooks.
  if (Status allowed = CheckWebhookUrl(url, options_.loopback_webhooks); !allowed.ok())
    return FailedPreconditionError(allowed.message()).WithReason(allowed.reason());
  net::HttpRequest request;
  request.method = "POST";
  request.url = std::string(url);
  request.headers = {{"Content-Type", "application/json"}};
  request.body = WebhookBody(alert);
  Result<net::HttpResponse> sent = http_->Send(request);
  if (!sent.ok()) {
    // Without the client's message, which names the URL: a Slack or Mattermost webhook URL is
    // itself the secret, and this text is stored with the delivery for the console.
    const std::string reason(sent.status().reason());
    return Status(sent.status().code(),
                  "the webhook POST failed (" + (reason.empty() ? "error" : reason) + ")")
        .WithReason(reason);
  }
  const net::HttpResponse& response = *sent;
  if (response.status >= 200 && response.status < 300)
    return OkStatus();
  const std::string what = "the webhook answered HTTP " + std::to_string(response.status);
  if (response.status == 429 || response.status >= 500)
    return UnavailableError(what).WithReason("webhook_unavailable");
  return FailedPreconditionError(what).WithReason("webhook_refused");
}

}  // namespace expanse::server
