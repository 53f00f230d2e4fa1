// What an alert says: the subject and text of a verdict alert, of a user's waste digest and of
// a rule's action, and the webhook body (Slack- and Mattermost-compatible). Pure: the caller
// (alert_evaluator.h) gathers the job, its verdict or the user's ledger. docs/formats/alerts.md.
#ifndef EXPANSE_SERVER_ALERT_MESSAGES_H_
#define EXPANSE_SERVER_ALERT_MESSAGES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/efficiency_rollup.h"
#include "server/verdict_rules.h"
#include "store/job_store.h"
#include "store/store.h"

namespace expanse::server {

struct AlertText {
  std::string subject;  // one line
  std::string text;     // several lines, plain text
  // Machine-readable facts (rule, compute, job, verdict code and interval, or the digest's
  // figures): the webhook body's "expanse" member, and what the delivery records.
  nlohmann::json facts = nlohmann::json::object();
};

// `org_console` is the organisation's console address, "https://host:port/#/o/<org>" ("" =
// no links in messages).
//
// "[Expanse] job 42 (ana): stuck for 17 min on gpu01", the verdict's suggestion, its evidence
// (compact JSON, at most ~2 KiB) and the job's console page.
AlertText VerdictAlertText(const store::AlertRule& rule, const store::JobRecord& job,
                           const Verdict& verdict, std::string_view org_console);

// A user's digest of [from_ms, to_ms): jobs, GPU-hours allocated, idle and never used.
AlertText DigestText(const store::AlertRule& rule, const RollupGroup& user, int64_t from_ms,
                     int64_t to_ms, std::string_view org_console);

// The action's notice: with dry_run "would have cancelled", else "cancellation requested".
AlertText ActionText(const store::AlertRule& rule, const store::JobRecord& job,
                     const Verdict& verdict, bool dry_run, std::string_view org_console);

// {"text": subject + text, "username": "Expanse", "expanse": facts}: Slack's and
// Mattermost's incoming webhooks read "text" (and ignore what they do not know). The text is
// ChatSafeText: a job's name is the job's user's to choose.
std::string WebhookBody(const AlertText& alert);

// `text` shown as written by chat services reading Slack-style webhooks, whoever wrote part of
// it: '&', '<' and '>' escaped as Slack asks (else "<!channel>" pings a channel and
// "<https://x|Job page>" disguises a link), a zero-width space after each '@' ("@here",
// "@channel", "@all" notify in Mattermost) and between "](" (a Markdown link).
std::string ChatSafeText(std::string_view text);

// The rule's target for `user`: "{user}" replaced by the job's (or digest's) user.
std::string ExpandAlertTarget(std::string_view target, std::string_view user);

// "17 min", "2 h 5 min", "45 s".
std::string HumanDuration(int64_t ms);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_ALERT_MESSAGES_H_
