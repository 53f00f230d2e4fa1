// Alert rules (ControlPlane::CreateAlertRule and friends): who may make them and what a rule
// may say. The evaluator (alert_evaluator.h) acts on them.
#include <nlohmann/json.hpp>

#include "net/smtp_client.h"
#include "server/alert_evaluator.h"
#include "server/alert_messages.h"
#include "server/alert_sender.h"
#include "server/control_plane.h"
#include "server/validate.h"

namespace expanse::server {
namespace {

constexpr int64_t kMaxMinDurationS = 7 * 86'400;
constexpr int64_t kMinPeriodS = 60;
constexpr int64_t kMaxPeriodS = 31 * 86'400;
constexpr int64_t kMaxGraceS = 86'400;
constexpr int64_t kMaxPerHour = 10'000;
constexpr size_t kMaxRulesPerOrg = 100;

Status Invalid(const std::string& message) {
  return InvalidArgumentError(message).WithReason("invalid_argument");
}

Status CheckRule(const store::AlertRule& rule, const AlertSender& sender) {
  EXPANSE_RETURN_IF_ERROR(ValidateText("rule name", rule.name, 64));
  if (rule.kind == "verdict") {
    if (!IsVerdictCode(rule.verdict)) {
      return Invalid(
          "verdict must be one of no_process, over_allocated, host_bound, "
          "input_bound, io_wait, communication_wait, stuck, sync_bound, "
          "memory_oversized, cpu_only");
    }
    if (rule.min_duration_s < 0 || rule.min_duration_s > kMaxMinDurationS)
      return Invalid("min_duration_s must be from 0 to " + std::to_string(kMaxMinDurationS));
    if (rule.period_s != 0)
      return Invalid("period_s is for digest rules");
  } else if (rule.kind == "digest") {
    if (!rule.verdict.empty())
      return Invalid("a digest rule names no verdict");
    if (rule.period_s < kMinPeriodS || rule.period_s > kMaxPeriodS) {
      return Invalid("period_s must be from " + std::to_string(kMinPeriodS) + " to " +
                     std::to_string(kMaxPeriodS) + " (604800 = weekly)");
    }
    if (!rule.action.empty())
      return Invalid("a digest rule takes no action");
  } else {
    return Invalid("kind must be \"verdict\" or \"digest\"");
  }
  if (rule.channel == "webhook") {
    if (rule.target.size() > 2048)
      return Invalid("the webhook URL is longer than 2048 bytes");
    if (Status url = CheckWebhookUrl(rule.target, sender.loopback_webhooks()); !url.ok())
      return Invalid("target: " + url.message());
  } else if (rule.channel == "email") {
    if (!sender.can_email()) {
      return FailedPreconditionError(
                 "this server sends no mail: start expanse-server serve with --smtp-url")
          .WithReason("email_not_configured");
    }
    if (Status address = net::CheckMailAddress(ExpandAlertTarget(rule.target, "user"));
        !address.ok())
      return Invalid("target: " + address.message());
  } else {
    return Invalid("channel must be \"webhook\" or \"email\"");
  }
  if (rule.max_per_hour < 1 || rule.max_per_hour > kMaxPerHour)
    return Invalid("max_per_hour must be from 1 to " + std::to_string(kMaxPerHour));
  if (!rule.action.empty() && rule.action != "scancel")
    return Invalid("action must be \"scancel\" or absent");
  if (rule.action_grace_s < 0 || rule.action_grace_s > kMaxGraceS)
    return Invalid("action_grace_s must be from 0 to " + std::to_string(kMaxGraceS));
  return OkStatus();
}

}  // namespace

Result<store::AlertRule> ControlPlane::CreateAlertRule(const Principal& principal,
                                                       std::string_view org_slug,
                                                       store::AlertRule rule,
                                                       const AlertSender& sender,
                                                       std::string_view remote_addr) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kAdmin).status());
  EXPANSE_RETURN_IF_ERROR(CheckRule(rule, sender));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<store::AlertRule> existing, store_.ListAlertRules(org.id));
  if (existing.size() >= kMaxRulesPerOrg) {
    return ResourceExhaustedError("an organisation has at most " + std::to_string(kMaxRulesPerOrg) +
                                  " alert rules")
        .WithReason("too_many_rules");
  }
  rule.id = 0;
  rule.org_id = org.id;
  rule.created_by = principal.Actor();
  rule.created_at_ms = clock_.NowMs();
  EXPANSE_ASSIGN_OR_RETURN(store::AlertRule stored, store_.CreateAlertRule(rule));
  nlohmann::json detail = {{"name", stored.name},       {"kind", stored.kind},
                           {"verdict", stored.verdict}, {"channel", stored.channel},
                           {"action", stored.action},   {"dry_run", stored.action_dry_run}};
  RecordAudit(org.id, principal.Actor(), "alert_rule.created",
              "alert_rule:" + std::to_string(stored.id), detail.dump(), remote_addr);
  return stored;
}

Result<ControlPlane::AlertRules> ControlPlane::ListAlertRules(const Principal& principal,
                                                              std::string_view org_slug) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kView).status());
  AlertRules out;
  out.show_targets = RequirePermission(principal, org.id, Permission::kAdmin).ok();
  EXPANSE_ASSIGN_OR_RETURN(out.rules, store_.ListAlertRules(org.id));
  return out;
}

Status ControlPlane::DeleteAlertRule(const Principal& principal, std::string_view org_slug,
                                     int64_t rule_id, std::string_view remote_addr) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kAdmin).status());
  if (Status deleted = store_.DeleteAlertRule(org.id, rule_id); !deleted.ok()) {
    if (deleted.code() == StatusCode::kNotFound)
      return NotFoundError("no such alert rule").WithReason("not_found");
    return deleted;
  }
  RecordAudit(org.id, principal.Actor(), "alert_rule.deleted",
              "alert_rule:" + std::to_string(rule_id), "", remote_addr);
  return OkStatus();
}

Result<store::AlertRule> ControlPlane::SetAlertRuleEnabled(const Principal& principal,
                                                           std::string_view org_slug,
                                                           int64_t rule_id, bool enabled,
                                                           std::string_view remote_addr) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kAdmin).status());
  Result<store::AlertRule> rule = store_.SetAlertRuleEnabled(org.id, rule_id, enabled);
  if (!rule.ok() && rule.status().code() == StatusCode::kNotFound)
    return NotFoundError("no such alert rule").WithReason("not_found");
  EXPANSE_RETURN_IF_ERROR(rule.status());
  RecordAudit(org.id, principal.Actor(), enabled ? "alert_rule.enabled" : "alert_rule.disabled",
              "alert_rule:" + std::to_string(rule_id), "", remote_addr);
  return rule;
}

Result<std::vector<store::AlertDelivery>> ControlPlane::ListAlertDeliveries(
    const Principal& principal, std::string_view org_slug, int64_t rule_id, std::string_view state,
    int limit) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kView).status());
  return store_.ListAlertDeliveries(org.id, rule_id, state, limit);
}

}  // namespace expanse::server
