// ControlPlane: bootstrap, users, console sessions, API tokens and permission checks.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "crypto/hash.h"
#include "crypto/password.h"
#include "crypto/random.h"
#include "server/control_plane.h"
#include "server/validate.h"

namespace expanse::server {
namespace {

constexpr size_t kSecretBytes = 32;  // sessions and API tokens: 256-bit secrets

Status LoginFailed() {
  return UnauthenticatedError("wrong email or password").WithReason("login_failed");
}

}  // namespace

ControlPlane::ControlPlane(store::Store& store, Clock& clock, ControlPlaneOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

void ControlPlane::RecordAudit(int64_t org_id, std::string actor, std::string action,
                               std::string target, std::string detail_json,
                               std::string_view remote_addr) {
  store::AuditEvent event;
  event.at_ms = clock_.NowMs();
  event.org_id = org_id;
  event.actor = std::move(actor);
  event.action = std::move(action);
  event.target = std::move(target);
  event.detail_json = detail_json.empty() ? "{}" : std::move(detail_json);
  event.remote_addr = std::string(remote_addr);
  // The audit log must not turn a served request into a failure; a lost event is visible in
  // the server log instead.
  if (Status s = store_.AppendAudit(event); !s.ok()) {
    fprintf(stderr, "expanse-server: audit event %s not stored: %s\n", event.action.c_str(),
            s.ToString().c_str());
  }
}

Result<ControlPlane::Bootstrapped> ControlPlane::Bootstrap(std::string_view org_slug,
                                                           std::string_view org_name,
                                                           std::string_view email,
                                                           std::string_view password,
                                                           std::string_view token_name) {
  EXPANSE_RETURN_IF_ERROR(ValidateSlug("organization slug", org_slug));
  EXPANSE_RETURN_IF_ERROR(ValidateText("organization name", org_name, 128));
  EXPANSE_RETURN_IF_ERROR(ValidateText("token name", token_name, 128));
  const int64_t now = clock_.NowMs();

  Bootstrapped out;
  Result<store::Organization> org = store_.GetOrganizationBySlug(org_slug);
  if (!org.ok() && org.status().code() == StatusCode::kNotFound) {
    org = store_.CreateOrganization(org_slug, org_name, now);
  }
  if (!org.ok())
    return org.status();
  out.org = *org;

  EXPANSE_ASSIGN_OR_RETURN(out.user, AddUser(org_slug, email, password, store::Role::kOwner, true));

  store::ApiToken token;
  token.user_id = out.user.id;
  token.org_id = out.org.id;
  token.name = std::string(token_name);
  token.scopes = {"admin"};
  token.created_at_ms = now;
  out.api_token = crypto::NewSecretToken("exp_at_", kSecretBytes);
  token.token_hash = crypto::HashSecretToken(out.api_token);
  EXPANSE_ASSIGN_OR_RETURN(store::ApiToken stored, store_.CreateApiToken(token));
  RecordAudit(out.org.id, "admin-cli", "api_token.issued", "token:" + std::to_string(stored.id), "",
              "");
  return out;
}

Result<store::User> ControlPlane::AddUser(std::string_view org_slug, std::string_view email,
                                          std::string_view password, store::Role role,
                                          bool can_register_compute) {
  EXPANSE_RETURN_IF_ERROR(ValidateEmail(email));
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, store_.GetOrganizationBySlug(org_slug));
  Result<store::User> user = store_.GetUserByEmail(store::NormalizeEmail(email));
  if (user.ok()) {
    // Re-running a bootstrap must not silently take over an account with another password.
    if (!crypto::VerifyPassword(user->password_hash, password)) {
      return AlreadyExistsError("user " + store::NormalizeEmail(email) +
                                " exists with a different password")
          .WithReason("user_exists");
    }
  } else if (user.status().code() == StatusCode::kNotFound) {
    EXPANSE_ASSIGN_OR_RETURN(std::string hash,
                             crypto::HashPassword(password, options_.password_cost));
    user = store_.CreateUser(store::NormalizeEmail(email), store::NormalizeEmail(email), hash,
                             clock_.NowMs());
    if (!user.ok())
      return user.status();
  } else {
    return user.status();
  }
  store::Membership membership{org.id, user->id, role, can_register_compute, ""};
  if (Result<store::Membership> held = store_.GetMembership(org.id, user->id); held.ok())
    membership.slurm_user = held->slurm_user;
  else if (held.status().code() != StatusCode::kNotFound)
    return held.status();
  EXPANSE_RETURN_IF_ERROR(store_.PutMembership(membership));
  return *user;
}

Status ControlPlane::SetSlurmUser(std::string_view org_slug, std::string_view email,
                                  std::string_view slurm_user) {
  const bool valid = slurm_user.size() <= 64 && (slurm_user.empty() || slurm_user.front() != '-') &&
                     std::all_of(slurm_user.begin(), slurm_user.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                              c == '-' || c == '@';
                     });
  if (!valid) {
    return InvalidArgumentError(
               "--slurm-user must be a user name: letters, digits, . _ - @, at most 64, not "
               "starting with -")
        .WithReason("invalid_argument");
  }
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, store_.GetOrganizationBySlug(org_slug));
  EXPANSE_ASSIGN_OR_RETURN(store::User user, store_.GetUserByEmail(store::NormalizeEmail(email)));
  EXPANSE_ASSIGN_OR_RETURN(store::Membership membership, store_.GetMembership(org.id, user.id));
  membership.slurm_user = std::string(slurm_user);
  EXPANSE_RETURN_IF_ERROR(store_.PutMembership(membership));
  RecordAudit(org.id, "operator", "membership.slurm_user_set", "user:" + std::to_string(user.id),
              nlohmann::json{{"slurm_user", membership.slurm_user}}.dump(), "");
  return OkStatus();
}

Result<ControlPlane::LoginResult> ControlPlane::Login(std::string_view typed_email,
                                                      std::string_view password,
                                                      std::string_view remote_addr) {
  const std::string email = store::NormalizeEmail(typed_email);
  if (!ValidateEmail(email).ok() || password.empty() || password.size() > 1024) {
    RecordAudit(0, "anonymous", "login.failed", "", R"({"why":"malformed"})", remote_addr);
    return LoginFailed();
  }
  Result<store::User> user = store_.GetUserByEmail(email);
  if (!user.ok() && user.status().code() != StatusCode::kNotFound)
    return user.status();
  // The hash is checked whether or not the account exists (against a fixed hash for an
  // unknown one) and before `disabled` is looked at, so that the answer takes the same time
  // in every case and cannot tell which emails have accounts.
  const bool password_ok =
      crypto::VerifyPassword(user.ok() ? std::string_view(user->password_hash) : DummyHash(),
                             password) &&
      user.ok();
  if (!password_ok || user->disabled) {
    if (!user.ok()) {
      // Not tied to any organisation: an address nobody has.
      RecordAudit(0, "anonymous", "login.failed", "", "", remote_addr);
    } else {
      RecordUserAudit(user->id, "login.failed", user->disabled ? R"({"why":"disabled"})" : "",
                      remote_addr);
    }
    return LoginFailed();
  }
  LoginResult out;
  out.user = *user;
  out.session_cookie = crypto::NewSecretToken("", kSecretBytes);
  out.csrf_token = crypto::NewSecretToken("", kSecretBytes);
  const int64_t now = clock_.NowMs();
  out.expires_at_ms = now + options_.session_ttl_ms;
  store::Session session{crypto::HashSecretToken(out.session_cookie), user->id, out.csrf_token, now,
                         out.expires_at_ms};
  EXPANSE_RETURN_IF_ERROR(store_.CreateSession(session));
  RecordUserAudit(user->id, "login.succeeded", "", remote_addr);
  return out;
}

std::string_view ControlPlane::DummyHash() {
  std::call_once(dummy_hash_once_, [this] {
    // Made from a random password nobody knows, so no login ever matches it. A failed hash
    // (out of memory) leaves it empty: VerifyPassword then refuses at once.
    Result<std::string> hash =
        crypto::HashPassword(crypto::NewSecretToken("", kSecretBytes), options_.password_cost);
    if (hash.ok())
      dummy_hash_ = std::move(hash).value();
  });
  return dummy_hash_;
}

void ControlPlane::RecordUserAudit(int64_t user_id, std::string action, std::string detail_json,
                                   std::string_view remote_addr) {
  // A user's sign-ins are shown to the admins of each organisation the user belongs to; a
  // user with no organisation has nobody to show them to (organisation 0).
  Result<std::vector<store::Membership>> memberships = store_.ListMembershipsOfUser(user_id);
  std::vector<int64_t> orgs;
  if (memberships.ok()) {
    for (const store::Membership& m : *memberships)
      orgs.push_back(m.org_id);
  }
  if (orgs.empty())
    orgs.push_back(0);
  for (int64_t org_id : orgs) {
    RecordAudit(org_id, "user:" + std::to_string(user_id), action, "", detail_json, remote_addr);
  }
}

Status ControlPlane::Logout(std::string_view session_cookie) {
  return store_.DeleteSession(crypto::HashSecretToken(session_cookie));
}

Result<Principal> ControlPlane::AuthenticateSession(std::string_view session_cookie,
                                                    std::string_view csrf_header,
                                                    bool state_changing) {
  if (session_cookie.empty()) {
    return UnauthenticatedError("sign in first").WithReason("unauthenticated");
  }
  Result<store::Session> session =
      store_.GetSession(crypto::HashSecretToken(session_cookie), clock_.NowMs());
  if (!session.ok()) {
    if (session.status().code() != StatusCode::kNotFound)
      return session.status();
    return UnauthenticatedError("the session has expired; sign in again")
        .WithReason("session_expired");
  }
  if (state_changing && !crypto::ConstantTimeEquals(csrf_header, session->csrf_token)) {
    return PermissionDeniedError("missing or wrong X-CSRF-Token header").WithReason("csrf_failed");
  }
  EXPANSE_ASSIGN_OR_RETURN(store::User user, store_.GetUser(session->user_id));
  if (user.disabled)
    return UnauthenticatedError("account disabled").WithReason("unauthenticated");
  Principal p;
  p.kind = Principal::Kind::kSession;
  p.user_id = user.id;
  return p;
}

Result<Principal> ControlPlane::AuthenticateApiToken(std::string_view bearer) {
  Status invalid =
      UnauthenticatedError("unknown, expired or revoked API token").WithReason("api_token_invalid");
  if (bearer.rfind("exp_at_", 0) != 0)
    return invalid;
  Result<store::ApiToken> token = store_.GetApiTokenByHash(crypto::HashSecretToken(bearer));
  if (!token.ok()) {
    return token.status().code() == StatusCode::kNotFound ? invalid : token.status();
  }
  const int64_t now = clock_.NowMs();
  if (token->revoked_at_ms != 0 || (token->expires_at_ms != 0 && token->expires_at_ms <= now)) {
    return invalid;
  }
  // A disabled account's tokens stop with it, as its sessions do.
  Result<store::User> user = store_.GetUser(token->user_id);
  if (!user.ok())
    return user.status().code() == StatusCode::kNotFound ? invalid : user.status();
  if (user->disabled)
    return invalid;
  Principal p;
  p.kind = Principal::Kind::kApiToken;
  p.user_id = token->user_id;
  p.api_token_id = token->id;
  p.token_org_id = token->org_id;
  p.scopes = token->scopes;
  return p;
}

Result<store::Membership> ControlPlane::RequirePermission(const Principal& principal,
                                                          int64_t org_id, Permission permission) {
  // Another organisation's resources are reported as absent, not forbidden, so their ids
  // cannot be probed.
  const Status not_found = NoSuchOrganizationOrCompute();
  if (principal.kind == Principal::Kind::kApiToken && principal.token_org_id != org_id) {
    return not_found;
  }
  Result<store::Membership> membership = store_.GetMembership(org_id, principal.user_id);
  if (!membership.ok()) {
    return membership.status().code() == StatusCode::kNotFound ? not_found : membership.status();
  }
  bool allowed =
      RoleAllows(*membership, permission) &&
      (principal.kind != Principal::Kind::kApiToken || ScopesAllow(principal.scopes, permission));
  if (!allowed) {
    return PermissionDeniedError("your role in this organization does not allow this")
        .WithReason("forbidden");
  }
  return *membership;
}

Result<std::vector<std::pair<store::Organization, store::Membership>>> ControlPlane::Organizations(
    const Principal& principal) {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<store::Membership> memberships,
                           store_.ListMembershipsOfUser(principal.user_id));
  std::vector<std::pair<store::Organization, store::Membership>> out;
  for (const store::Membership& m : memberships) {
    if (principal.kind == Principal::Kind::kApiToken && principal.token_org_id != m.org_id) {
      continue;
    }
    EXPANSE_ASSIGN_OR_RETURN(store::Organization org, store_.GetOrganization(m.org_id));
    out.emplace_back(std::move(org), m);
  }
  return out;
}

Result<std::vector<store::AuditEvent>> ControlPlane::Audit(const Principal& principal,
                                                           std::string_view org_slug, int limit) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kAdmin).status());
  return store_.ListAudit(org.id, std::clamp(limit, 1, 1000));
}

}  // namespace expanse::server
