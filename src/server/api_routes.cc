// The console and script API: sign-in, organisations, computes, install tokens, audit.
#include <chrono>
#include <string>

#include "deploy/templates.h"
#include "http/error.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/validate.h"

namespace expanse::server {
namespace {

using nlohmann::json;

bool IsStateChanging(const http::Request& req) {
  return req.method != "GET" && req.method != "HEAD";
}

template <typename Fn>
http::Response Authed(RouteContext& ctx, const http::Request& req, Fn fn) {
  Result<Principal> p = AuthenticateConsoleRequest(ctx, req);
  if (!p.ok())
    return http::ErrorResponse(p.status());
  return fn(*p);
}

std::string SessionCookieHeader(const std::string& value, int64_t max_age_s, bool secure) {
  std::string header = std::string(kSessionCookie) + "=" + value +
                       "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(max_age_s);
  if (secure)
    header += "; Secure";
  return header;
}

// An API token as the API shows it: never its secret or hash.
json ApiTokenJson(const store::ApiToken& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"user_id", t.user_id},
          {"scopes", t.scopes},
          {"created_at_ms", t.created_at_ms},
          {"expires_at_ms", t.expires_at_ms},
          {"revoked_at_ms", t.revoked_at_ms}};
}

}  // namespace

http::Response HeavyReadsBusyResponse(RouteContext& ctx) {
  if (ctx.counters != nullptr)
    ctx.counters->queries_busy.fetch_add(1, std::memory_order_relaxed);
  http::Response response = http::ErrorResponse(
      503, "queries_busy",
      "the server is answering as many large queries as it runs at once; ask again shortly");
  response.headers.emplace_back("Retry-After", "1");
  return response;
}

// Resolves the caller from an API token (Authorization: Bearer exp_at_…) or the session
// cookie (plus X-CSRF-Token on state-changing requests), then rate-limits per caller.
Result<Principal> AuthenticateConsoleRequest(RouteContext& ctx, const http::Request& req) {
  std::string_view bearer = BearerToken(req);
  Result<Principal> p =
      !bearer.empty() ? ctx.control.AuthenticateApiToken(bearer)
                      : ctx.control.AuthenticateSession(CookieValue(req, kSessionCookie),
                                                        req.Header("X-CSRF-Token").value_or(""),
                                                        IsStateChanging(req));
  if (!p.ok())
    return p;
  if (!ctx.limits.per_principal->Allow(p->Actor())) {
    return ResourceExhaustedError("too many requests; slow down").WithReason("rate_limited");
  }
  return p;
}

void RegisterConsoleApiRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  listener.Post("/api/v1/session", [ctx](const http::Request& req) {
    // Sign-in is open to anyone, so its parser must not be free to hammer: an address with no
    // tries left is refused before its body is parsed, and a malformed body costs a try like a
    // wrong password does.
    // A browser says where a request comes from: a sign-in posted by another site's form
    // would put the victim in the attacker's account (login CSRF). Clients that are not
    // browsers send no Sec-Fetch-Site.
    if (const auto site = req.Header("Sec-Fetch-Site");
        site && *site != "same-origin" && *site != "none") {
      return http::ErrorResponse(
          PermissionDeniedError(
              "sign-in is taken only from the console's own pages (Sec-Fetch-Site: " +
              std::string(site->substr(0, 32)) + ")")
              .WithReason("cross_site_sign_in"));
    }
    http::RateLimiter& per_address = *ctx->limits.login_per_address;
    if (const std::chrono::seconds wait = per_address.RetryAfter(req.remote_addr); wait.count() > 0)
      return http::TooManyRequestsResponse(wait);
    auto malformed = [&](const Status& status) {
      static_cast<void>(per_address.Allow(req.remote_addr));  // the answer is the 400 anyway
      return http::ErrorResponse(status);
    };
    Result<json> body = JsonObjectBody(req);
    if (!body.ok())
      return malformed(body.status());
    Result<std::string> email = StringField(*body, "email", true);
    Result<std::string> password = StringField(*body, "password", true);
    if (!email.ok())
      return malformed(email.status());
    if (!password.ok())
      return malformed(password.status());
    // Keyed on the email as Login looks it up, so "OPS@…" gets no tries of its own. An email
    // no account can have (Login refuses it unread) costs the address's try only: the other
    // two limiters keep a key per email, and an anonymous client's 16 KiB "emails" would make
    // each of their 100,000 keys that large.
    const std::string account = store::NormalizeEmail(*email);
    const bool could_be_account = ValidateEmail(account).ok();
    for (auto [limiter, key] :
         {std::pair{ctx->limits.login_per_address.get(), req.remote_addr},
          std::pair{ctx->limits.login_per_email.get(), account + " " + req.remote_addr},
          std::pair{ctx->limits.login_per_account.get(), account}}) {
      if (!could_be_account && limiter != ctx->limits.login_per_address.get())
        continue;
      if (!limiter->Allow(key))
        return http::TooManyRequestsResponse(limiter->RetryAfter(key));
    }
    auto login = ctx->control.Login(*email, *password, req.remote_addr);
    if (!login.ok())
      return http::ErrorResponse(login.status());
    http::Response res =
        Json(200, {{"csrf_token", login->csrf_token},
                   {"user", {{"id", login->user.id}, {"email", login->user.email}}},
                   {"expires_at_ms", login->expires_at_ms}});
    int64_t max_age_s = ctx->control.options().session_ttl_ms / 1000;
    res.headers.emplace_back(
        "Set-Cookie", SessionCookieHeader(login->session_cookie, max_age_s, ctx->secure_cookies));
    return res;
  });

  listener.Delete("/api/v1/session", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal&) {
      Status s = ctx->control.Logout(CookieValue(req, kSessionCookie));
      if (!s.ok() && s.code() != StatusCode::kNotFound)
        return http::ErrorResponse(s);
      http::Response res = Json(200, {{"signed_out", true}});
      res.headers.emplace_back("Set-Cookie", SessionCookieHeader("", 0, ctx->secure_cookies));
      return res;
    });
  });

  listener.Get("/api/v1/me", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      auto orgs = ctx->control.Organizations(p);
      if (!orgs.ok())
        return http::ErrorResponse(orgs.status());
      json list = json::array();
      for (const auto& [org, m] : *orgs) {
        json o = OrganizationJson(org);
        o["role"] = std::string(store::RoleName(m.role));
        o["can_register_compute"] = RoleAllows(m, Permission::kRegisterCompute);
        o["can_manage_compute"] = RoleAllows(m, Permission::kManageCompute);
        o["slurm_user"] = m.slurm_user.empty() ? json(nullptr) : json(m.slurm_user);
        list.push_back(std::move(o));
      }
      auto user = ctx->control.GetUser(p.user_id);
      return Json(200, {{"user_id", p.user_id},
                        {"email", user.ok() ? user->email : std::string()},
                        {"organizations", list}});
    });
  });

  listener.Get("/api/v1/orgs/:org/computes", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      auto computes = ctx->control.ListComputes(p, req.PathParam("org"));
      if (!computes.ok())
        return http::ErrorResponse(computes.status());
      json list = json::array();
      for (const auto& c : *computes)
        list.push_back(ComputeJson(c, ctx->clock.NowMs()));
      return Json(200, {{"computes", list}});
    });
  });

  listener.Post("/api/v1/orgs/:org/computes", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      Result<json> body = JsonObjectBody(req);
      if (!body.ok())
        return http::ErrorResponse(body.status());
      Result<std::string> name = StringField(*body, "name", true);
      Result<std::string> type = StringField(*body, "type", true);
      if (!name.ok())
        return http::ErrorResponse(name.status());
      if (!type.ok())
        return http::ErrorResponse(type.status());
      auto c = ctx->control.CreateCompute(p, req.PathParam("org"), *name, *type);
      if (!c.ok())
        return http::ErrorResponse(c.status());
      return Json(201, ComputeJson(*c, ctx->clock.NowMs()));
    });
  });

  listener.Get("/api/v1/computes/:id", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      auto c = ctx->control.GetCompute(p, req.PathParam("id"));
      if (!c.ok())
        return http::ErrorResponse(c.status());
      json out = ComputeJson(*c, ctx->clock.NowMs());
      auto hb = ctx->control.LatestHeartbeat(c->id);
      out["heartbeat"] = hb.ok() ? ParseStoredJson(hb->body_json) : json(nullptr);
      return Json(200, out);
    });
  });

  listener.Post("/api/v1/computes/:id/install-tokens", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      auto t = ctx->control.IssueInstallToken(p, req.PathParam("id"), req.remote_addr);
      if (!t.ok())
        return http::ErrorResponse(t.status());
      return Json(201, {{"token", t->token},
                        {"expires_at_ms", t->expires_at_ms},
                        {"compute_id", t->compute.id},
                        {"control_plane_url", t->compute.control_plane_url},
                        {"data_plane_url", t->compute.data_plane_url},
                        {"daemon_version", t->compute.pinned_daemon_version}});
    });
  });

  // The Add compute panel's filled-in texts. They hold no secret (the token is typed at the
  // script's hidden prompt), so anyone who may view the compute may read them.
  listener.Get("/api/v1/computes/:id/install-templates", [ctx](const http::Request& req) {
    return AnswerConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(auto c, ctx->control.GetCompute(p, req.PathParam("id")));
      deploy::TemplateValues values;
      values.daemon_version = c.pinned_daemon_version;
      values.shared_prefix = std::string(req.QueryParam("shared_prefix").value_or(""));
      values.control_plane_url = c.control_plane_url;
      values.data_plane_url = c.data_plane_url;
      EXPANSE_ASSIGN_OR_RETURN(std::string script, deploy::RenderInstallScript(values));
      EXPANSE_ASSIGN_OR_RETURN(std::string prompt, deploy::RenderAssistantPrompt(values));
      return json{{"compute_id", c.id},
                  {"daemon_version", values.daemon_version},
                  {"shared_prefix", values.shared_prefix},
                  {"control_plane_url", values.control_plane_url},
                  {"data_plane_url", values.data_plane_url},
                  {"install_script", std::move(script)},
                  {"assistant_prompt", std::move(prompt)},
                  // "" when this server's mirror has no signed CLI or no release.pub.
                  {"cli_install_line", CliInstallLineFor(ctx->releases_dir, ctx->control)}};
    });
  });

  listener.Post("/api/v1/computes/:id/deprovision", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      Status s = ctx->control.Deprovision(p, req.PathParam("id"), req.remote_addr);
      if (!s.ok())
        return http::ErrorResponse(s);
      return Json(200,
                  {{"compute_id", std::string(req.PathParam("id"))}, {"state", "deprovisioned"}});
    });
  });

  listener.Get("/api/v1/orgs/:org/audit", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      Result<int64_t> limit = IntQueryParam(req, "limit", 100, 1, 1000);
      if (!limit.ok())
        return http::ErrorResponse(limit.status());
      auto events = ctx->control.Audit(p, req.PathParam("org"), static_cast<int>(*limit));
      if (!events.ok())
        return http::ErrorResponse(events.status());
      json list = json::array();
      for (const auto& e : *events) {
        list.push_back({{"at_ms", e.at_ms},
                        {"actor", e.actor},
                        {"action", e.action},
                        {"target", e.target},
                        {"detail", ParseStoredJson(e.detail_json)},
                        {"remote_addr", e.remote_addr}});
      }
      return Json(200, {{"events", list}});
    });
  });
  // API tokens people make for scripts and the CLI (docs/api.md, "API tokens").
  listener.Get("/api/v1/orgs/:org/api-tokens", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      auto tokens = ctx->control.ListApiTokens(p, req.PathParam("org"));
      if (!tokens.ok())
        return http::ErrorResponse(tokens.status());
      json list = json::array();
      for (const store::ApiToken& t : *tokens)
        list.push_back(ApiTokenJson(t));
      return Json(200, {{"api_tokens", list}});
    });
  });

  listener.Post("/api/v1/orgs/:org/api-tokens", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      Result<json> body = JsonObjectBody(req);
      if (!body.ok())
        return http::ErrorResponse(body.status());
      Result<std::string> name = StringField(*body, "name", true);
      if (!name.ok())
        return http::ErrorResponse(name.status());
      std::vector<std::string> scopes;
      const auto s = body->find("scopes");
      if (s == body->end() || !s->is_array() || s->size() > 3) {
        return http::ErrorResponse(
            InvalidArgumentError("scopes must be an array of one to three scope names")
                .WithReason("invalid_argument"));
      }
      for (const json& scope : *s) {
        if (!scope.is_string()) {
          return http::ErrorResponse(
              InvalidArgumentError("scopes must be strings").WithReason("invalid_argument"));
        }
        scopes.push_back(scope.get<std::string>());
      }
      int64_t days = 0;
      if (const auto d = body->find("expires_in_days"); d != body->end()) {
        if (!d->is_number_integer()) {
          return http::ErrorResponse(InvalidArgumentError("expires_in_days must be an integer")
                                         .WithReason("invalid_argument"));
        }
        days = d->get<int64_t>();
        if (days == 0)
          days = -1;  // an explicit 0 is not "the default"
      }
      auto issued =
          ctx->control.IssueApiToken(p, req.PathParam("org"), *name, scopes, days, req.remote_addr);
      if (!issued.ok())
        return http::ErrorResponse(issued.status());
      json out = ApiTokenJson(issued->info);
      out["token"] = issued->token;
      return Json(201, out);
    });
  });

  listener.Post("/api/v1/orgs/:org/api-tokens/:id/revoke", [ctx](const http::Request& req) {
    return Authed(*ctx, req, [&](const Principal& p) {
      const std::string id_text(req.PathParam("id"));
      char* end = nullptr;
      const long long id = std::strtoll(id_text.c_str(), &end, 10);
      if (id_text.empty() || *end != '\0' || id <= 0)
        return http::ErrorResponse(NotFoundError("no such API token").WithReason("not_found"));
      Status s = ctx->control.RevokeApiToken(p, req.PathParam("org"), id, req.remote_addr);
      if (!s.ok())
        return http::ErrorResponse(s);
      return Json(200, {{"id", id}, {"revoked", true}});
    });
  });
}

}  // namespace expanse::server
