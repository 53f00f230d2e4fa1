// The alerts API: an organisation's alert rules and what they delivered.
// docs/api.md (Alerts) and docs/formats/alerts.md.
#include <cstdlib>
#include <string>

#include "net/url_policy.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace expanse::server {
namespace {

using nlohmann::json;

// A webhook URL is a credential (whoever has it can post to the channel): non-admins see
// only where it points.
std::string ShownTarget(const store::AlertRule& rule, bool show_targets) {
  if (show_targets || rule.channel != "webhook")
    return rule.target;
  net::UrlParts parts;
  if (!net::SplitUrl(rule.target, &parts).ok())
    return "(hidden)";
  return parts.scheme + "://" + parts.host + "/…";
}

json RuleJson(const store::AlertRule& r, bool show_targets) {
  json out = {{"id", r.id},
              {"name", r.name},
              {"kind", r.kind},
              {"channel", r.channel},
              {"target", ShownTarget(r, show_targets)},
              {"max_per_hour", r.max_per_hour},
              {"enabled", r.enabled},
              {"created_by", r.created_by},
              {"created_at_ms", r.created_at_ms}};
  if (r.kind == "verdict") {
    out["verdict"] = r.verdict;
    out["min_duration_s"] = r.min_duration_s;
    out["action"] = r.action.empty() ? json(nullptr) : json(r.action);
    if (!r.action.empty()) {
      out["action_grace_s"] = r.action_grace_s;
      out["action_dry_run"] = r.action_dry_run;
    }
  } else {
    out["period_s"] = r.period_s;
  }
  return out;
}

json DeliveryJson(const store::AlertDelivery& d) {
  json out = {{"id", d.id},
              {"rule_id", d.rule_id},
              {"subject", d.subject},
              {"state", d.state},
              {"attempts", d.attempts},
              {"summary", d.summary},
              {"created_at_ms", d.created_at_ms},
              {"updated_at_ms", d.updated_at_ms}};
  if (!d.compute_id.empty()) {
    out["compute_id"] = d.compute_id;
    out["job_id"] = d.job_id;
  }
  if (!d.user.empty())
    out["user"] = d.user;
  if (!d.last_error.empty())
    out["error"] = d.last_error;
  return out;
}

// Optional members of a rule's JSON, each of its type; kInvalidArgument naming it otherwise.
Result<int64_t> IntMember(const json& body, const char* name, int64_t fallback) {
  const auto it = body.find(name);
  if (it == body.end())
    return fallback;
  if (!it->is_number_integer()) {
    return InvalidArgumentError(std::string(name) + " must be an integer")
        .WithReason("invalid_argument");
  }
  return it->get<int64_t>();
}

Result<bool> BoolMember(const json& body, const char* name, bool fallback) {
  const auto it = body.find(name);
  if (it == body.end())
    return fallback;
  if (!it->is_boolean()) {
    return InvalidArgumentError(std::string(name) + " must be true or false")
        .WithReason("invalid_argument");
  }
  return it->get<bool>();
}

Result<store::AlertRule> RuleFromJson(const json& body) {
  store::AlertRule rule;
  EXPANSE_ASSIGN_OR_RETURN(rule.name, StringField(body, "name", true));
  EXPANSE_ASSIGN_OR_RETURN(rule.kind, StringField(body, "kind", false));
  if (rule.kind.empty())
    rule.kind = "verdict";
  EXPANSE_ASSIGN_OR_RETURN(rule.verdict, StringField(body, "verdict", false));
  EXPANSE_ASSIGN_OR_RETURN(rule.channel, StringField(body, "channel", true));
  EXPANSE_ASSIGN_OR_RETURN(rule.target, StringField(body, "target", true));
  EXPANSE_ASSIGN_OR_RETURN(rule.action, StringField(body, "action", false));
  EXPANSE_ASSIGN_OR_RETURN(rule.min_duration_s, IntMember(body, "min_duration_s", 0));
  EXPANSE_ASSIGN_OR_RETURN(rule.period_s,
                           IntMember(body, "period_s", rule.kind == "digest" ? 604'800 : 0));
  EXPANSE_ASSIGN_OR_RETURN(rule.max_per_hour, IntMember(body, "max_per_hour", 20));
  EXPANSE_ASSIGN_OR_RETURN(rule.action_grace_s, IntMember(body, "action_grace_s", 900));
  EXPANSE_ASSIGN_OR_RETURN(rule.action_dry_run, BoolMember(body, "action_dry_run", true));
  EXPANSE_ASSIGN_OR_RETURN(rule.enabled, BoolMember(body, "enabled", true));
  return rule;
}

int64_t IdParam(const http::Request& req) {
  const std::string text(req.PathParam("id"));
  char* end = nullptr;
  const long long id = std::strtoll(text.c_str(), &end, 10);
  return text.empty() || *end != '\0' || id <= 0 ? 0 : id;
}

// A request about rule :id: the caller authenticated, the id parsed (an id that is not a
// positive integer is no rule: 404), then 200 with what fn(principal, id) gives.
template <typename Fn>
http::Response AnswerForRule(RouteContext& ctx, const http::Request& req, Fn fn) {
  Result<Principal> p = AuthenticateConsoleRequest(ctx, req);
  if (!p.ok())
    return http::ErrorResponse(p.status());
  const int64_t id = IdParam(req);
  if (id == 0)
    return http::ErrorResponse(NotFoundError("no such alert rule").WithReason("not_found"));
  Result<json> answer = fn(*p, id);
  if (!answer.ok())
    return http::ErrorResponse(answer.status());
  return Json(200, *answer);
}

}  // namespace

void RegisterAlertRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  listener.Get("/api/v1/orgs/:org/alert-rules", [ctx](const http::Request& req) {
    return AnswerConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(auto listed, ctx->control.ListAlertRules(p, req.PathParam("org")));
      json rules = json::array();
      for (const store::AlertRule& r : listed.rules)
        rules.push_back(RuleJson(r, listed.show_targets));
      return json{{"alert_rules", rules},
                  {"email", ctx->alert_sender != nullptr && ctx->alert_sender->can_email()}};
    });
  });

  listener.Post("/api/v1/orgs/:org/alert-rules", [ctx](const http::Request& req) {
    Result<Principal> p = AuthenticateConsoleRequest(*ctx, req);
    if (!p.ok())
      return http::ErrorResponse(p.status());
    Result<json> body = JsonObjectBody(req);
    if (!body.ok())
      return http::ErrorResponse(body.status());
    Result<store::AlertRule> rule = RuleFromJson(*body);
    if (!rule.ok())
      return http::ErrorResponse(rule.status());
    if (ctx->alert_sender == nullptr)
      return http::ErrorResponse(FailedPreconditionError("this server delivers no alerts"));
    Result<store::AlertRule> created = ctx->control.CreateAlertRule(
        *p, req.PathParam("org"), std::move(*rule), *ctx->alert_sender, req.remote_addr);
    if (!created.ok())
      return http::ErrorResponse(created.status());
    return Json(201, RuleJson(*created, true));
  });

  listener.Delete("/api/v1/orgs/:org/alert-rules/:id", [ctx](const http::Request& req) {
    return AnswerForRule(*ctx, req, [&](const Principal& p, int64_t id) -> Result<json> {
      EXPANSE_RETURN_IF_ERROR(
          ctx->control.DeleteAlertRule(p, req.PathParam("org"), id, req.remote_addr));
      return json{{"id", id}, {"deleted", true}};
    });
  });

  // {"enabled": false} pauses a rule, true resumes it; nothing else of a rule changes (make a
  // new rule instead: its deliveries would otherwise mean something else).
  listener.Patch("/api/v1/orgs/:org/alert-rules/:id", [ctx](const http::Request& req) {
    return AnswerForRule(*ctx, req, [&](const Principal& p, int64_t id) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const json body, JsonObjectBody(req));
      const auto enabled = body.find("enabled");
      if (body.size() != 1 || enabled == body.end() || !enabled->is_boolean()) {
        return InvalidArgumentError("the body must be {\"enabled\": true} or {\"enabled\": false}")
            .WithReason("invalid_argument");
      }
      EXPANSE_ASSIGN_OR_RETURN(
          const store::AlertRule rule,
          ctx->control.SetAlertRuleEnabled(p, req.PathParam("org"), id, enabled->get<bool>(),
                                           req.remote_addr));
      return RuleJson(rule, true);
    });
  });

  listener.Get("/api/v1/orgs/:org/alert-deliveries", [ctx](const http::Request& req) {
    return AnswerConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const int64_t rule_id,
                               IntQueryParam(req, "rule_id", 0, 0, INT64_MAX));
      EXPANSE_ASSIGN_OR_RETURN(const int64_t limit, IntQueryParam(req, "limit", 100, 1, 1000));
      const std::string state(req.QueryParam("state").value_or(""));
      if (!state.empty() && state != "pending" && state != "sent" && state != "failed" &&
          state != "throttled" && state != "retry") {
        return InvalidArgumentError("state must be pending, sent, failed, throttled or retry")
            .WithReason("invalid_argument");
      }
      EXPANSE_ASSIGN_OR_RETURN(
          auto deliveries, ctx->control.ListAlertDeliveries(p, req.PathParam("org"), rule_id, state,
                                                            static_cast<int>(limit)));
      json list = json::array();
      for (const store::AlertDelivery& d : deliveries)
        list.push_back(DeliveryJson(d));
      return json{{"alert_deliveries", list}};
    });
  });
}

}  // namespace expanse::server
