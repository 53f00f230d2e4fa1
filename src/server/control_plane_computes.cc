// ControlPlane: computes, install tokens, the credential exchange, heartbeats, deprovisioning.
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "crypto/hash.h"
#include "crypto/random.h"
#include "server/control_plane.h"
#include "server/heartbeat.h"
#include "server/validate.h"
#include "store/job_validation.h"

namespace expanse::server {
namespace {

constexpr size_t kInstallTokenBytes = 24;  // 192 bits
constexpr size_t kCredentialBytes = 32;    // 256 bits
constexpr size_t kComputeIdBytes = 9;
// Credentials a replica remembers (ControlPlane::RememberedCompute): far more than the
// controllers that send to one replica.
constexpr size_t kMaxRememberedCredentials = 65'536;

Status TokenInvalid() {
  return UnauthenticatedError("unknown install token; copy it again from Add compute")
      .WithReason("install_token_invalid");
}

// Turns the store's exchange/introspection refusals into stable reasons for the installer.
Status TokenRefused(const Status& s) {
  const std::string& m = s.message();
  if (m.find("already been used") != std::string::npos) {
    return s.WithReason("install_token_used");
  }
  if (m.find("replaced") != std::string::npos)
    return s.WithReason("install_token_replaced");
  if (m.find("expired") != std::string::npos)
    return s.WithReason("install_token_expired");
  if (m.find("deprovisioned") != std::string::npos)
    return s.WithReason("compute_deprovisioned");
  return s;
}

std::string JsonDetail(std::initializer_list<std::pair<const char*, std::string>> fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : fields)
    j[k] = v;
  return j.dump();
}

}  // namespace

Result<store::Compute> ControlPlane::CreateCompute(const Principal& principal,
                                                   std::string_view org_slug, std::string_view name,
                                                   std::string_view type) {
  EXPANSE_RETURN_IF_ERROR(ValidateText("compute name", name, 128));
  if (type != "slurm") {
    return InvalidArgumentError("compute type must be \"slurm\"").WithReason("invalid_argument");
  }
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(
      RequirePermission(principal, org.id, Permission::kRegisterCompute).status());
  // Counted before the insert, so requests racing may pass it by their number.
  static_assert(kMaxComputesPerOrganization == store::store_internal::kMaxJobFilterValues);
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<store::Compute> existing, store_.ListComputes(org.id));
  if (existing.size() >= kMaxComputesPerOrganization) {
    return ResourceExhaustedError("an organisation has at most " +
                                  std::to_string(kMaxComputesPerOrganization) + " computes")
        .WithReason("too_many_computes");
  }
  store::Compute c;
  c.id = "cmp_" + crypto::Base64UrlEncode(crypto::RandomBytes(kComputeIdBytes));
  c.org_id = org.id;
  c.name = std::string(name);
  c.type = std::string(type);
  c.created_at_ms = clock_.NowMs();
  c.created_by_user = principal.user_id;
  c.pinned_daemon_version = options_.daemon_version;
  c.control_plane_url = options_.control_plane_url;
  c.data_plane_url = options_.data_plane_url;
  EXPANSE_ASSIGN_OR_RETURN(store::Compute stored, store_.CreateCompute(c));
  RecordAudit(org.id, principal.Actor(), "compute.created", stored.id, "", "");
  return stored;
}

Result<std::vector<store::Compute>> ControlPlane::ListComputes(const Principal& principal,
                                                               std::string_view org_slug) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, org.id, Permission::kView).status());
  return store_.ListComputes(org.id);
}

Result<store::Compute> ControlPlane::GetCompute(const Principal& principal,
                                                std::string_view compute_id) {
  Result<store::Compute> c = LookUpCompute(store_, compute_id);
  if (!c.ok())
    return c.status();
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, c->org_id, Permission::kView).status());
  return c;
}

Result<ControlPlane::JobReader> ControlPlane::JobReaderIn(const Principal& principal,
                                                          int64_t org_id) {
  EXPANSE_ASSIGN_OR_RETURN(const store::Membership membership,
                           RequirePermission(principal, org_id, Permission::kViewOwnJobs));
  JobReader reader;
  if (principal.kind != Principal::Kind::kApiToken ||
      ScopesAllow(principal.scopes, Permission::kView)) {
    return reader;
  }
  if (membership.slurm_user.empty()) {
    return PermissionDeniedError(
               "this token reads only its owner's jobs, and no SLURM user is set for them in "
               "this organization")
        .WithReason("forbidden");
  }
  reader.only_user = membership.slurm_user;
  return reader;
}

Result<store::Compute> ControlPlane::GetComputeForJobs(const Principal& principal,
                                                       std::string_view compute_id,
                                                       JobReader* reader) {
  EXPANSE_ASSIGN_OR_RETURN(store::Compute c, LookUpCompute(store_, compute_id));
  EXPANSE_ASSIGN_OR_RETURN(*reader, JobReaderIn(principal, c.org_id));
  return c;
}

Result<std::vector<store::Compute>> ControlPlane::ListComputesForJobs(const Principal& principal,
                                                                      std::string_view org_slug,
                                                                      JobReader* reader) {
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, LookUpOrganization(store_, org_slug));
  EXPANSE_ASSIGN_OR_RETURN(*reader, JobReaderIn(principal, org.id));
  return store_.ListComputes(org.id);
}

Result<ControlPlane::IssuedToken> ControlPlane::IssueInstallToken(const Principal& principal,
                                                                  std::string_view compute_id,
                                                                  std::string_view remote_addr) {
  EXPANSE_ASSIGN_OR_RETURN(store::Compute compute, LookUpCompute(store_, compute_id));
  // Whoever may register computes may issue the first token of a compute they created;
  // re-issuing for any other compute needs the manage permission.
  Permission needed = compute.created_by_user == principal.user_id ? Permission::kRegisterCompute
                                                                   : Permission::kManageCompute;
  EXPANSE_RETURN_IF_ERROR(RequirePermission(principal, compute.org_id, needed).status());
  if (compute.state == store::ComputeState::kDeprovisioned) {
    return FailedPreconditionError("compute " + compute.id + " is deprovisioned")
        .WithReason("compute_deprovisioned");
  }
  IssuedToken out;
  out.token = crypto::NewSecretToken("exp_it_", kInstallTokenBytes);
  const int64_t now = clock_.NowMs();
  out.expires_at_ms = now + options_.install_token_ttl_ms;
  store::InstallToken t;
  t.compute_id = compute.id;
  t.token_hash = crypto::HashSecretToken(out.token);
  t.created_at_ms = now;
  t.expires_at_ms = out.expires_at_ms;
  t.created_by_user = principal.user_id;
  EXPANSE_ASSIGN_OR_RETURN(store::InstallToken stored, store_.IssueInstallToken(t));
  out.compute = std::move(compute);
  RecordAudit(out.compute.org_id, principal.Actor(), "install_token.issued", out.compute.id,
              JsonDetail({{"token_id", std::to_string(stored.id)}}), remote_addr);
  return out;
}

Result<ControlPlane::Introspection> ControlPlane::IntrospectInstallToken(
    std::string_view token, std::string_view remote_addr) {
  if (token.rfind("exp_it_", 0) != 0)
    return TokenInvalid();
  Result<store::InstallToken> t = store_.GetInstallTokenByHash(crypto::HashSecretToken(token));
  if (!t.ok()) {
    if (t.status().code() != StatusCode::kNotFound)
      return t.status();
    RecordAudit(0, "anonymous", "install_token.refused", "", R"({"why":"unknown"})", remote_addr);
    return TokenInvalid();
  }
  EXPANSE_ASSIGN_OR_RETURN(store::Compute compute, store_.GetCompute(t->compute_id));
  EXPANSE_ASSIGN_OR_RETURN(store::Organization org, store_.GetOrganization(compute.org_id));
  const int64_t now = clock_.NowMs();
  Status refused;
  if (t->used_at_ms != 0) {
    refused = FailedPreconditionError("install token has already been used");
  } else if (t->invalidated_at_ms != 0) {
    refused = FailedPreconditionError("install token has been replaced by a newer one");
  } else if (t->expires_at_ms <= now) {
    refused = FailedPreconditionError("install token expired; issue a new one in Add compute");
  } else if (compute.state == store::ComputeState::kDeprovisioned) {
    refused = FailedPreconditionError("compute " + compute.id + " is deprovisioned");
  }
  if (!refused.ok()) {
    RecordAudit(org.id, "anonymous", "install_token.refused", compute.id,
                JsonDetail({{"why", refused.message()}}), remote_addr);
    return TokenRefused(refused);
  }
  RecordAudit(org.id, "anonymous", "install_token.introspected", compute.id, "", remote_addr);
  return Introspection{std::move(org), std::move(compute), t->expires_at_ms};
}

Result<ControlPlane::Enrolment> ControlPlane::ExchangeInstallToken(std::string_view token,
                                                                   const HostFacts& facts,
                                                                   std::string_view remote_addr) {
  EXPANSE_RETURN_IF_ERROR(ValidateHostname("hostname", facts.hostname));
  EXPANSE_RETURN_IF_ERROR(ValidateText("daemon_version", facts.daemon_version, 64));
  EXPANSE_RETURN_IF_ERROR(ValidateOptionalText("slurm_version", facts.slurm_version, 64));
  if (facts.role != "controller") {
    return InvalidArgumentError("role must be \"controller\": only the controller enrols")
        .WithReason("invalid_argument");
  }
  // Introspection first: it gives the precise refusal and the audit trail.
  EXPANSE_ASSIGN_OR_RETURN(Introspection intro, IntrospectInstallToken(token, remote_addr));

  Enrolment out;
  out.credential = crypto::NewSecretToken("exp_cc_", kCredentialBytes);
  store::Credential c;
  c.secret_hash = crypto::HashSecretToken(out.credential);
  c.created_at_ms = clock_.NowMs();
  c.hostname = facts.hostname;
  c.daemon_version = facts.daemon_version;
  c.slurm_version = facts.slurm_version;
  c.role = facts.role;
  Result<store::Credential> stored =
      store_.ExchangeInstallToken(crypto::HashSecretToken(token), c, c.created_at_ms);
  if (!stored.ok()) {
    RecordAudit(intro.org.id, "anonymous", "install_token.refused", intro.compute.id,
                JsonDetail({{"why", stored.status().message()}}), remote_addr);
    return TokenRefused(stored.status());
  }
  out.record = *stored;
  out.compute = std::move(intro.compute);
  out.org = std::move(intro.org);
  RecordAudit(
      out.org.id, "anonymous", "install_token.exchanged", out.compute.id,
      JsonDetail({{"credential_id", std::to_string(out.record.id)}, {"hostname", facts.hostname}}),
      remote_addr);
  return out;
}

Result<ControlPlane::ComputeIdentity> ControlPlane::AuthenticateCredential(
    std::string_view bearer) {
  Status invalid =
      UnauthenticatedError("unknown compute credential").WithReason("credential_invalid");
  if (bearer.rfind("exp_cc_", 0) != 0)
    return invalid;
  const std::string hash = crypto::HashSecretToken(bearer);
  Result<store::Store::CredentialAndCompute> c = store_.GetCredentialAndComputeByHash(hash);
  if (!c.ok()) {
    if (c.status().code() != StatusCode::kNotFound)
      return c.status();
    ForgetCredential(hash);
    return invalid;
  }
  if (c->credential.revoked_at_ms != 0) {
    ForgetCredential(hash);
    return UnauthenticatedError("this compute credential was revoked (" +
                                c->credential.revoke_reason + "); the daemon must stop")
        .WithReason("credential_revoked");
  }
  {
    std::lock_guard lock(remembered_mu_);
    if (remembered_computes_.size() >= kMaxRememberedCredentials)
      remembered_computes_.clear();
    remembered_computes_.insert_or_assign(hash, c->compute.id);
  }
  return ComputeIdentity{std::move(c->credential), std::move(c->compute)};
}

std::optional<std::string> ControlPlane::RememberedCompute(std::string_view secret_hash) {
  std::lock_guard lock(remembered_mu_);
  const auto it = remembered_computes_.find(secret_hash);
  if (it == remembered_computes_.end())
    return std::nullopt;
  return it->second;
}

void ControlPlane::ForgetCredential(std::string_view secret_hash) {
  std::lock_guard lock(remembered_mu_);
  if (const auto it = remembered_computes_.find(secret_hash); it != remembered_computes_.end())
    remembered_computes_.erase(it);
}

std::string ControlPlane::IssueSegmentGrant(const ComputeIdentity& identity,
                                            const std::string& host, const std::string& sha256,
                                            int64_t bytes, int64_t* expires_ms) {
  SegmentGrant grant{.credential_id = identity.credential.id,
                     .compute_id = identity.compute.id,
                     .host = host,
                     .sha256 = sha256,
                     .bytes = bytes,
                     .expires_ms = clock_.NowMs() + kSegmentGrantTtlMs};
  *expires_ms = grant.expires_ms;
  return EncodeSegmentGrant(grant, identity.credential.secret_hash);
}

Result<ControlPlane::GrantedSegment> ControlPlane::AuthenticateSegmentGrant(
    std::string_view token) {
  EXPANSE_ASSIGN_OR_RETURN(SegmentGrant grant, DecodeSegmentGrant(token));
  const Status invalid = UnauthenticatedError("unknown segment grant").WithReason("grant_invalid");
  Result<store::Credential> c = store_.GetCredential(grant.credential_id);
  if (!c.ok())
    return c.status().code() == StatusCode::kNotFound ? invalid : c.status();
  if (c->compute_id != grant.compute_id || !SegmentGrantSignedBy(token, c->secret_hash))
    return invalid;
  if (c->revoked_at_ms != 0) {
    return UnauthenticatedError("the credential that asked for this segment grant was revoked")
        .WithReason("grant_revoked");
  }
  if (grant.expires_ms <= clock_.NowMs())
    return UnauthenticatedError("this segment grant has expired").WithReason("grant_expired");
  EXPANSE_ASSIGN_OR_RETURN(store::Compute compute, store_.GetCompute(c->compute_id));
  return GrantedSegment{std::move(grant), std::move(compute), c->secret_hash};
}

Status ControlPlane::RecordHeartbeat(const ComputeIdentity& identity, std::string_view body_json) {
  EXPANSE_ASSIGN_OR_RETURN(HeartbeatSummary summary, ValidateHeartbeat(body_json));
  store::Heartbeat hb;
  hb.compute_id = identity.compute.id;
  hb.credential_id = identity.credential.id;
  hb.received_at_ms = clock_.NowMs();
  hb.controller_host = summary.controller_host;
  hb.daemon_version = summary.daemon_version;
  hb.body_json = std::move(summary.normalized_json);
  EXPANSE_RETURN_IF_ERROR(store_.RecordHeartbeat(hb));
  for (const RequestResult& r : summary.request_results) {
    // A result for a request this compute does not have pending (another compute's, or a
    // repeat after a lost answer) changes nothing.
    Result<store::ComputeRequest> finished =
        store_.FinishComputeRequest(identity.compute.id, r.id, r.ok, r.message, hb.received_at_ms);
    if (!finished.ok())
      continue;
    RecordAudit(identity.compute.org_id, "compute:" + identity.compute.id,
                r.ok ? "compute_request.done" : "compute_request.failed",
                identity.compute.id + "/" + finished->job_id,
                JsonDetail({{"request_id", std::to_string(r.id)},
                            {"kind", finished->kind},
                            {"job_id", finished->job_id},
                            {"rule_id", std::to_string(finished->rule_id)},
                            {"result", r.message}}),
                "");
  }
  if (identity.credential.first_heartbeat_ms == 0) {
    RecordAudit(identity.compute.org_id, "compute:" + identity.compute.id, "compute.enrolled",
                identity.compute.id,
                JsonDetail({{"credential_id", std::to_string(identity.credential.id)}}), "");
  }
  std::vector<HeartbeatWaiter> woken;
  {
    std::lock_guard<std::mutex> lock(heartbeat_mu_);
    auto [first, last] = heartbeat_waiters_.equal_range(identity.credential.id);
    for (auto it = first; it != last; ++it)
      woken.push_back(std::move(it->second));
    heartbeat_waiters_.erase(first, last);
    heartbeat_cv_.notify_all();
  }
  // Outside the lock: a waiter reads the store and answers its request.
  for (HeartbeatWaiter& waiter : woken) {
    if (!waiter.done())
      waiter.wake();
  }
  return OkStatus();
}

size_t ControlPlane::heartbeat_waiters() {
  std::lock_guard<std::mutex> lock(heartbeat_mu_);
  return heartbeat_waiters_.size();
}

void ControlPlane::OnNextHeartbeat(int64_t credential_id, HeartbeatWaiter waiter) {
  std::lock_guard<std::mutex> lock(heartbeat_mu_);
  std::erase_if(heartbeat_waiters_, [](const auto& entry) { return entry.second.done(); });
  heartbeat_waiters_.emplace(credential_id, std::move(waiter));
}

Result<bool> ControlPlane::WaitForEnrolment(const ComputeIdentity& identity, int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(heartbeat_mu_);
  while (true) {
    EXPANSE_ASSIGN_OR_RETURN(store::Credential c, store_.GetCredential(identity.credential.id));
    if (c.revoked_at_ms != 0) {
      return UnauthenticatedError("this compute credential was revoked")
          .WithReason("credential_revoked");
    }
    if (c.first_heartbeat_ms != 0)
      return true;
    if (heartbeat_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      EXPANSE_ASSIGN_OR_RETURN(store::Credential last, store_.GetCredential(c.id));
      return last.first_heartbeat_ms != 0;
    }
  }
}

Result<ControlPlane::EnrolmentState> ControlPlane::EnrolmentAfter(const ComputeIdentity& identity,
                                                                  int64_t after_ms) {
  EXPANSE_ASSIGN_OR_RETURN(bool heartbeated, WaitForEnrolment(identity, 0));
  EXPANSE_ASSIGN_OR_RETURN(store::Compute compute, store_.GetCompute(identity.compute.id));
  EnrolmentState out;
  out.last_heartbeat_ms = compute.last_heartbeat_ms;
  out.enrolled = heartbeated && (after_ms == 0 || compute.last_heartbeat_ms > after_ms);
  return out;
}

Status ControlPlane::Deprovision(const ComputeIdentity& identity, std::string_view remote_addr) {
  EXPANSE_RETURN_IF_ERROR(store_.DeprovisionCompute(identity.compute.id, clock_.NowMs()));
  RecordAudit(identity.compute.org_id, "compute:" + identity.compute.id, "compute.deprovisioned",
              identity.compute.id, R"({"by":"uninstall"})", remote_addr);
  RecordAudit(identity.compute.org_id, "compute:" + identity.compute.id, "credential.revoked",
              identity.compute.id, R"({"reason":"deprovisioned"})", remote_addr);
  return OkStatus();
}

Status ControlPlane::Deprovision(const Principal& principal, std::string_view compute_id,
                                 std::string_view remote_addr) {
  EXPANSE_ASSIGN_OR_RETURN(store::Compute compute, LookUpCompute(store_, compute_id));
  EXPANSE_RETURN_IF_ERROR(
      RequirePermission(principal, compute.org_id, Permission::kManageCompute).status());
  EXPANSE_RETURN_IF_ERROR(store_.DeprovisionCompute(compute.id, clock_.NowMs()));
  RecordAudit(compute.org_id, principal.Actor(), "compute.deprovisioned", compute.id,
              R"({"by":"console"})", remote_addr);
  RecordAudit(compute.org_id, principal.Actor(), "credential.revoked", compute.id,
              R"({"reason":"deprovisioned"})", remote_addr);
  return OkStatus();
}

Result<int> ControlPlane::MarkStaleComputes() {
  return store_.MarkStaleComputes(clock_.NowMs() - options_.stale_after_ms);
}

}  // namespace expanse::server
