// API tokens people make for themselves (ControlPlane::IssueApiToken and friends).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "crypto/hash.h"
#include "crypto/random.h"
#include "server/control_plane.h"
#include "server/validate.h"

namespace expanse::server {
namespace {

constexpr size_t kTokenSecretBytes = 32;
constexpr int64_t kDefaultDays = 90;
constexpr int64_t kMaxDays = 365;
constexpr int64_t kDayMs = 86'400'000;
// Unexpired, unrevoked tokens one person may hold in one organisation: enough for every
// script and machine they use, and a bound on a runaway loop (each token has a rate of its own).
constexpr size_t kMaxLiveTokensPerUser = 50;

// The permission a scope grants (principal.h's ScopesAllow): a scope may only be handed out by
// someone who holds it.
Permission PermissionOf(const std::string& scope) {
  if (scope == "admin")
    return Permission::kAdmin;
  if (scope == "compute:register")
    return Permission::kRegisterCompute;
  if (scope == "jobs:own")
    return Permission::kViewOwnJobs;
  return Permission::kView;
}

}  // namespace

Result<ControlPlane::IssuedApiToken> ControlPlane::IssueApiToken(
    const Principal& principal, std::string_view org_slug, std::string_view name,
    const std::vector<std::string>& scopes, int64_t expires_in_days, std::string_view remote_addr) {
  EXPANSE_RETURN_IF_ERROR(ValidateText("token name", name, 64));
  if (scopes.empty() || scopes.size() > 3) {
    return InvalidArgumentError(
               "scopes must name one to three of read, jobs:own, compute:register, admin")
        .WithReason("invalid_argument");
  }
  for (size_t i = 0; i < scopes.size(); ++i) {
    const std::string& scope = scopes[i];
    if (std::find(scopes.begin(), scopes.begin() + static_cast<std::ptrdiff_t>(i), scope) !=
        scopes.begin() + static_cast<std::ptrdiff_t>(i)) {
      return InvalidArgumentError("scope \"" + scope + "\" is given twice")
          .WithReason("invalid_argument");
    }
    if (!IsKnownScope(scope)) {
      return InvalidArgumentError("unknown scope \"" + scope.substr(0, 32) +
                                  "\": use read, jobs:own, compute:register or admin")
          .WithReason("invalid_argument");
    }
  }
  if (expires_in_days == 0)
    expires_in_days = kDefaultDays;
  if (expires_in_days < 1 || expires_in_days > kMaxDays) {
    return InvalidArgumentError("expires_in_days must be from 1 to " + std::to_string(kMaxDays))
        .WithReason("invalid_argument");
  }
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_ASSIGN_OR_RETURN(const store::Membership maker,
                           RequirePermission(principal, org.id, Permission::kViewOwnJobs));
  // Tokens are made by people: a leaked token, of any scope, cannot make itself a successor
  // that outlives its revocation.
  if (principal.kind == Principal::Kind::kApiToken) {
    return PermissionDeniedError("API tokens are made from a signed-in session, not with a token")
        .WithReason("forbidden");
  }
  for (const std::string& scope : scopes) {
    Result<store::Membership> allowed = RequirePermission(principal, org.id, PermissionOf(scope));
    if (!allowed.ok()) {
      if (allowed.status().code() != StatusCode::kPermissionDenied)
        return allowed.status();
      return PermissionDeniedError("your role in this organization cannot hand out the scope " +
                                   scope)
          .WithReason("forbidden");
    }
  }
  // A jobs:own token reads the jobs of its maker's SLURM user, which the operator sets.
  if (std::find(scopes.begin(), scopes.end(), "jobs:own") != scopes.end() &&
      maker.slurm_user.empty()) {
    return FailedPreconditionError(
               "no SLURM user is set for you in this organization, so a jobs:own token would "
               "read nothing: ask the server's operator to set it (expanse-server admin "
               "add-user --slurm-user)")
        .WithReason("no_slurm_user");
  }
  const int64_t now = clock_.NowMs();
  EXPANSE_ASSIGN_OR_RETURN(std::vector<store::ApiToken> held,
                           store_.ListApiTokens(org.id, principal.user_id));
  const size_t live =
      static_cast<size_t>(std::count_if(held.begin(), held.end(), [&](const auto& t) {
        return t.revoked_at_ms == 0 && (t.expires_at_ms == 0 || t.expires_at_ms > now);
      }));
  if (live >= kMaxLiveTokensPerUser) {
    return ResourceExhaustedError("you already hold " + std::to_string(live) +
                                  " live API tokens in this organization; revoke one first")
        .WithReason("too_many_tokens");
  }
  IssuedApiToken out;
  out.token = crypto::NewSecretToken("exp_at_", kTokenSecretBytes);
  store::ApiToken token;
  token.user_id = principal.user_id;
  token.org_id = org.id;
  token.name = std::string(name);
  token.token_hash = crypto::HashSecretToken(out.token);
  token.scopes = scopes;
  token.created_at_ms = now;
  token.expires_at_ms = now + expires_in_days * kDayMs;
  EXPANSE_ASSIGN_OR_RETURN(out.info, store_.CreateApiToken(token));
  out.info.token_hash.clear();
  RecordAudit(org.id, principal.Actor(), "api_token.issued", "token:" + std::to_string(out.info.id),
              nlohmann::json{{"name", std::string(name)}, {"scopes", scopes}}.dump(), remote_addr);
  return out;
}

Result<std::vector<store::ApiToken>> ControlPlane::ListApiTokens(const Principal& principal,
                                                                 std::string_view org_slug) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kView).status());
  const bool admin = RequirePermission(principal, org.id, Permission::kAdmin).ok();
  EXPANSE_ASSIGN_OR_RETURN(std::vector<store::ApiToken> tokens,
                           store_.ListApiTokens(org.id, admin ? 0 : principal.user_id));
  for (store::ApiToken& t : tokens)
    t.token_hash.clear();  // never leaves the store's side
  return tokens;
}

Status ControlPlane::RevokeApiToken(const Principal& principal, std::string_view org_slug,
                                    int64_t token_id, std::string_view remote_addr) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kView).status());
  // A leaked read token must not be able to revoke its owner's other tokens.
  if (principal.kind == Principal::Kind::kApiToken &&
      !ScopesAllow(principal.scopes, Permission::kAdmin)) {
    return PermissionDeniedError(
               "API tokens are revoked from a signed-in session or with an "
               "admin token")
        .WithReason("forbidden");
  }
  const bool admin = RequirePermission(principal, org.id, Permission::kAdmin).ok();
  EXPANSE_ASSIGN_OR_RETURN(std::vector<store::ApiToken> tokens,
                           store_.ListApiTokens(org.id, admin ? 0 : principal.user_id));
  const bool found = std::any_of(tokens.begin(), tokens.end(),
                                 [&](const store::ApiToken& t) { return t.id == token_id; });
  if (!found)  // another's token, or another organisation's: absent, as everywhere
    return NotFoundError("no such API token").WithReason("not_found");
  EXPANSE_RETURN_IF_ERROR(store_.RevokeApiToken(token_id, clock_.NowMs()));
  RecordAudit(org.id, principal.Actor(), "api_token.revoked", "token:" + std::to_string(token_id),
              "", remote_addr);
  return OkStatus();
}

}  // namespace expanse::server
