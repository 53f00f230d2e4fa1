// The control plane over HTTP: what the installer and the controller daemon call.
#include <charconv>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "crypto/hash.h"
#include "http/error.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr int64_t kMaxEnrolmentWaitMs = 60'000;

template <typename Fn>
http::Response WithCompute(RouteContext& ctx, const http::Request& req, Fn fn) {
  http::Response refused;
  std::optional<ControlPlane::ComputeIdentity> id = AuthenticateCompute(ctx, req, &refused);
  if (!id)
    return refused;
  return fn(*id);
}

bool TokenRateLimited(RouteContext& ctx, const http::Request& req, http::Response* out) {
  if (ctx.limits.token_per_address->Allow(req.remote_addr))
    return false;
  *out = http::TooManyRequestsResponse(ctx.limits.token_per_address->RetryAfter(req.remote_addr));
  return true;
}

}  // namespace

std::optional<ControlPlane::ComputeIdentity> AuthenticateCompute(RouteContext& ctx,
                                                                 const http::Request& req,
                                                                 http::Response* refused) {
  // Keyed on the credential's hash, so a flood from one compute cannot starve the others.
  std::string key = crypto::HashSecretToken(BearerToken(req));
  if (!ctx.limits.per_credential->Allow(key)) {
    *refused = http::TooManyRequestsResponse(ctx.limits.per_credential->RetryAfter(key));
    return std::nullopt;
  }
  Result<ControlPlane::ComputeIdentity> id = ctx.control.AuthenticateCredential(BearerToken(req));
  if (!id.ok()) {
    *refused = http::ErrorResponse(id.status());
    return std::nullopt;
  }
  return *std::move(id);
}

std::optional<IngestSender> AuthenticateIngestSender(RouteContext& ctx, const http::Request& req,
                                                     http::Response* refused) {
  std::string hash = crypto::HashSecretToken(BearerToken(req));
  if (!ctx.limits.per_credential->Allow(hash)) {
    *refused = http::TooManyRequestsResponse(ctx.limits.per_credential->RetryAfter(hash));
    return std::nullopt;
  }
  if (ctx.tsdb != nullptr && ctx.tsdb->ChecksCredentials()) {
    if (std::optional<std::string> compute = ctx.control.RememberedCompute(hash))
      return IngestSender{.compute_id = *std::move(compute), .unchecked_hash = std::move(hash)};
  }
  Result<ControlPlane::ComputeIdentity> id = ctx.control.AuthenticateCredential(BearerToken(req));
  if (!id.ok()) {
    *refused = http::ErrorResponse(id.status());
    return std::nullopt;
  }
  return IngestSender{.compute_id = std::move(id->compute.id), .unchecked_hash = ""};
}

void RegisterHealthRoute(http::Listener& listener, std::string_view plane, store::Store& store) {
  std::string body = json{{"status", "ok"}, {"plane", std::string(plane)}}.dump();
  listener.Get("/healthz", [body](const http::Request&) { return http::JsonResponse(200, body); });
  listener.Get("/readyz", [body, &store](const http::Request&) {
    if (Status ping = store.Ping(); !ping.ok())
      return http::ErrorResponse(UnavailableError("the store is unavailable: " + ping.message())
                                     .WithReason("store_unavailable"));
    return http::JsonResponse(200, body);
  });
}

void RegisterControlPlaneRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  listener.Post("/cp/v1/install-tokens/introspect", [ctx](const http::Request& req) {
    http::Response limited;
    if (TokenRateLimited(*ctx, req, &limited))
      return limited;
    Result<json> body = JsonObjectBody(req);
    if (!body.ok())
      return http::ErrorResponse(body.status());
    Result<std::string> token = StringField(*body, "token", true);
    if (!token.ok())
      return http::ErrorResponse(token.status());
    auto intro = ctx->control.IntrospectInstallToken(*token, req.remote_addr);
    if (!intro.ok())
      return http::ErrorResponse(intro.status());
    return Json(200, {{"organization", OrganizationJson(intro->org)},
                      {"compute", ComputeJson(intro->compute, ctx->clock.NowMs())},
                      {"expires_at_ms", intro->expires_at_ms}});
  });

  listener.Post("/cp/v1/install-tokens/exchange", [ctx](const http::Request& req) {
    http::Response limited;
    if (TokenRateLimited(*ctx, req, &limited))
      return limited;
    Result<json> body = JsonObjectBody(req);
    if (!body.ok())
      return http::ErrorResponse(body.status());
    HostFacts facts;
    std::string token;
    for (auto [field, out, required] :
         {std::tuple{"token", &token, true}, std::tuple{"hostname", &facts.hostname, true},
          std::tuple{"daemon_version", &facts.daemon_version, true},
          std::tuple{"slurm_version", &facts.slurm_version, false},
          std::tuple{"role", &facts.role, true}}) {
      Result<std::string> v = StringField(*body, field, required);
      if (!v.ok())
        return http::ErrorResponse(v.status());
      *out = std::move(*v);
    }
    auto enrolled = ctx->control.ExchangeInstallToken(token, facts, req.remote_addr);
    if (!enrolled.ok())
      return http::ErrorResponse(enrolled.status());
    return Json(200, {{"credential", enrolled->credential},
                      {"credential_id", enrolled->record.id},
                      {"organization", OrganizationJson(enrolled->org)},
                      {"compute", ComputeJson(enrolled->compute, ctx->clock.NowMs())},
                      {"control_plane_url", enrolled->compute.control_plane_url},
                      {"data_plane_url", enrolled->compute.data_plane_url}});
  });

  http::Handler heartbeat = [ctx](const http::Request& req) {
    return WithCompute(*ctx, req, [&](const ControlPlane::ComputeIdentity& id) {
      Status s = ctx->control.RecordHeartbeat(id, req.body);
      if (!s.ok())
        return http::ErrorResponse(s);
      if (ctx->counters != nullptr)
        ctx->counters->heartbeats.fetch_add(1, std::memory_order_relaxed);
      // The server's pending requests ride on the answer until the controller reports them.
      nlohmann::json requests = nlohmann::json::array();
      if (auto pending = ctx->control.PendingRequests(id.compute.id); pending.ok()) {
        for (const store::ComputeRequest& r : *pending) {
          requests.push_back(
              {{"id", r.id}, {"kind", r.kind}, {"job_id", r.job_id}, {"reason", r.reason}});
        }
      }
      return Json(200, {{"compute_id", id.compute.id},
                        {"credential_id", id.credential.id},
                        {"requests", requests}});
    });
  };
  listener.Post("/cp/v1/heartbeat", std::move(heartbeat), {.max_body_bytes = kHeartbeatBodyBytes});

  // A long-poll: the installer waits up to wait_ms for the daemon's first heartbeat. It
  // holds no thread while it waits (http::Listener::GetDeferred): the next heartbeat of the
  // credential, or the wait's end, answers it.
  listener.GetDeferred("/cp/v1/enrolment", [ctx](const http::Request& req,
                                                 http::Responder responder) {
    http::Response refused;
    std::optional<ControlPlane::ComputeIdentity> found = AuthenticateCompute(*ctx, req, &refused);
    if (!found) {
      responder.Respond(std::move(refused));
      return;
    }
    // after_ms: a reinstall's installer passes the last heartbeat it saw before starting the
    // new daemon, so only a heartbeat of that daemon counts (the compute is enrolled already).
    int64_t wait_ms = 0;
    int64_t after_ms = 0;
    for (auto [name, value, max] :
         {std::tuple{"wait_ms", &wait_ms, kMaxEnrolmentWaitMs},
          std::tuple{"after_ms", &after_ms, std::numeric_limits<int64_t>::max()}}) {
      const std::optional<std::string_view> text = req.QueryParam(name);
      if (!text)
        continue;
      int64_t parsed = -1;
      const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), parsed);
      if (error != std::errc() || end != text->data() + text->size() || parsed < 0 ||
          parsed > max) {
        responder.Respond(http::ErrorResponse(
            400, "invalid_argument",
            std::string(name) + " must be an integer from 0 to " +
                (max == kMaxEnrolmentWaitMs ? std::to_string(max) : std::string("2^63-1"))));
        return;
      }
      *value = parsed;
    }
    const ControlPlane::ComputeIdentity id = *std::move(found);
    auto check = [ctx, id, after_ms] { return ctx->control.EnrolmentAfter(id, after_ms); };
    auto reply = [id](const Result<ControlPlane::EnrolmentState>& enrolment) {
      if (!enrolment.ok())
        return http::ErrorResponse(enrolment.status());
      return Json(200, {{"compute_id", id.compute.id},
                        {"credential_id", id.credential.id},
                        {"enrolled", enrolment->enrolled},
                        {"last_heartbeat_ms", enrolment->last_heartbeat_ms}});
    };
    auto answer_if_settled = [responder, check, reply] {
      Result<ControlPlane::EnrolmentState> enrolment = check();
      if (!enrolment.ok() || enrolment->enrolled)
        responder.Respond(reply(enrolment));
    };
    Result<ControlPlane::EnrolmentState> enrolment = check();
    if (!enrolment.ok() || enrolment->enrolled || wait_ms == 0) {
      responder.Respond(reply(enrolment));
      return;
    }
    responder.ExpireAfter(std::chrono::milliseconds(wait_ms),
                          [check, reply] { return reply(check()); });
    ctx->control.OnNextHeartbeat(
        id.credential.id,
        {.done = [responder] { return responder.answered(); }, .wake = answer_if_settled});
    answer_if_settled();  // a heartbeat between the first check and the waiter's registration
  });

  listener.Post("/cp/v1/deprovision", [ctx](const http::Request& req) {
    return WithCompute(*ctx, req, [&](const ControlPlane::ComputeIdentity& id) {
      Status s = ctx->control.Deprovision(id, req.remote_addr);
      if (!s.ok())
        return http::ErrorResponse(s);
      return Json(200, {{"compute_id", id.compute.id}, {"state", "deprovisioned"}});
    });
  });
}

}  // namespace expanse::server
