// ControlPlane: the rules of expanse-server's control plane, independent of HTTP.
//
// Organisations, users and their roles; console sessions and API tokens; computes, their
// single-use install tokens, the exchange for a compute credential, heartbeats, enrolment and
// deprovisioning; an audit record of every security-relevant event. The HTTP layer
// (control_routes.cc) only translates requests to these calls and Status to JSON errors; every
// failure a client must tell apart carries a stable Status::reason() (see docs/api.md).
#ifndef EXPANSE_SERVER_CONTROL_PLANE_H_
#define EXPANSE_SERVER_CONTROL_PLANE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "core/status.h"
#include "crypto/password.h"
#include "server/principal.h"
#include "server/segment_grant.h"
#include "store/store.h"

namespace expanse::server {

class AlertSender;  // alert_sender.h

struct ControlPlaneOptions {
  int64_t install_token_ttl_ms = 60 * 60 * 1000;  // the spec's "short-lived" token: 1 h
  int64_t session_ttl_ms = 12 * 60 * 60 * 1000;
  // An active compute with no heartbeat for this long is shown as stale.
  int64_t stale_after_ms = 5 * 60 * 1000;
  // What Add compute shows and the exchange hands to the installer when a compute has no
  // URLs of its own: the public addresses of this server's planes.
  std::string control_plane_url;
  std::string data_plane_url;
  std::string daemon_version;
  crypto::PasswordHashCost password_cost = crypto::InteractiveCost();
};

// The most computes an organisation may register: as many as an organisation-wide job list or
// rollup may name (past it those would answer 400 for the whole organisation, for good, since
// a compute is never deleted).
inline constexpr size_t kMaxComputesPerOrganization = 1000;

// Facts the installer reports when it exchanges a token.
struct HostFacts {
  std::string hostname;
  std::string daemon_version;
  std::string slurm_version;
  std::string role;  // "controller"
};

class ControlPlane {
 public:
  ControlPlane(store::Store& store, Clock& clock, ControlPlaneOptions options);

  // --- bootstrap (expanse-server admin) ----------------------------------------------------------
  struct Bootstrapped {
    store::Organization org;
    store::User user;
    std::string api_token;  // shown once
  };
  // Creates an organisation, its owner and an admin API token. Idempotent for the org and the
  // user when the password matches; always issues a new token.
  Result<Bootstrapped> Bootstrap(std::string_view org_slug, std::string_view org_name,
                                 std::string_view email, std::string_view password,
                                 std::string_view token_name);
  // Adds the user (or checks the password of an existing one) and sets their membership; a
  // membership's SLURM user is kept.
  Result<store::User> AddUser(std::string_view org_slug, std::string_view email,
                              std::string_view password, store::Role role,
                              bool can_register_compute);
  // The operator's mapping of a member to the SLURM user their jobs run under ("" removes it):
  // what their jobs:own tokens read. A name as SLURM and the system's user database take it
  // (letters, digits, . _ - @, at most 64, not starting with -); audited as
  // membership.slurm_user_set.
  Status SetSlurmUser(std::string_view org_slug, std::string_view email,
                      std::string_view slurm_user);

  // --- console sessions and API tokens -----------------------------------------------------------
  struct LoginResult {
    std::string session_cookie;  // secret; only its hash is stored
    std::string csrf_token;
    store::User user;
    int64_t expires_at_ms = 0;
  };
  // kUnauthenticated/"login_failed" for an unknown user, a wrong password or a disabled account
  // (one message for all three, so a caller cannot probe which emails exist).
  // The email is normalised first (store::NormalizeEmail). Takes the time of one password
  // check whether or not the account exists. Events go to the user's organisations.
  Result<LoginResult> Login(std::string_view email, std::string_view password,
                            std::string_view remote_addr);
  Status Logout(std::string_view session_cookie);
  // `csrf_header` must equal the session's token when `state_changing`.
  Result<Principal> AuthenticateSession(std::string_view session_cookie,
                                        std::string_view csrf_header, bool state_changing);
  Result<Principal> AuthenticateApiToken(std::string_view bearer);
  // The organisations the principal can see, with its role in each.
  Result<std::vector<std::pair<store::Organization, store::Membership>>> Organizations(
      const Principal& principal);

  // --- alert rules (control_plane_alerts.cc, docs/formats/alerts.md) ----------------------------
  // Admins create and delete rules; anyone who may view the organisation lists them (webhook
  // URLs shown to admins only: such a URL is itself a credential) and their deliveries.
  // `sender` says what this server can deliver: an "email" rule needs an SMTP server, a webhook
  // to this machine --alert-loopback-webhooks.
  Result<store::AlertRule> CreateAlertRule(const Principal& principal, std::string_view org_slug,
                                           store::AlertRule rule, const AlertSender& sender,
                                           std::string_view remote_addr);
  struct AlertRules {
    std::vector<store::AlertRule> rules;
    bool show_targets = false;  // the caller is an admin of the organisation
  };
  Result<AlertRules> ListAlertRules(const Principal& principal, std::string_view org_slug);
  Status DeleteAlertRule(const Principal& principal, std::string_view org_slug, int64_t rule_id,
                         std::string_view remote_addr);
  // Pauses or resumes a rule (admins).
  Result<store::AlertRule> SetAlertRuleEnabled(const Principal& principal,
                                               std::string_view org_slug, int64_t rule_id,
                                               bool enabled, std::string_view remote_addr);
  Result<std::vector<store::AlertDelivery>> ListAlertDeliveries(const Principal& principal,
                                                                std::string_view org_slug,
                                                                int64_t rule_id,
                                                                std::string_view state, int limit);

  // --- computes and install tokens
  // ----------------------------------------------------------------
  Result<store::Compute> CreateCompute(const Principal& principal, std::string_view org_slug,
                                       std::string_view name, std::string_view type);
  Result<std::vector<store::Compute>> ListComputes(const Principal& principal,
                                                   std::string_view org_slug);
  Result<store::Compute> GetCompute(const Principal& principal, std::string_view compute_id);

  // Whose jobs a caller may read: every job of the organisation (`only_user` none), or, for an
  // API token whose scopes grant no more than jobs:own, the jobs of its member's SLURM user
  // (Membership::slurm_user, read at each request, so the operator's change applies at once).
  // The compute (or the organisation's computes) for the job routes, checked like GetCompute
  // but at kViewOwnJobs. kPermissionDenied when such a token's member has no SLURM user set.
  struct JobReader {
    std::optional<std::string> only_user;
  };
  Result<store::Compute> GetComputeForJobs(const Principal& principal, std::string_view compute_id,
                                           JobReader* reader);
  Result<std::vector<store::Compute>> ListComputesForJobs(const Principal& principal,
                                                          std::string_view org_slug,
                                                          JobReader* reader);

  struct IssuedToken {
    std::string token;  // shown once
    int64_t expires_at_ms = 0;
    store::Compute compute;
  };
  // Issues a token for the compute and invalidates its earlier unused tokens.
  Result<IssuedToken> IssueInstallToken(const Principal& principal, std::string_view compute_id,
                                        std::string_view remote_addr);

  // API tokens people make for scripts and the CLI (`expanse job report`): scopes no wider
  // than the maker's role allows, an expiry (default 90 days, at most 365), shown once, at
  // most 50 live per person and organisation. Made from a signed-in session only (no token can
  // make a successor); revoked from a session or with an admin token. A disabled account's
  // tokens stop working. Audited as api_token.issued / api_token.revoked.
  struct IssuedApiToken {
    std::string token;  // shown once
    store::ApiToken info;
  };
  Result<IssuedApiToken> IssueApiToken(const Principal& principal, std::string_view org_slug,
                                       std::string_view name,
                                       const std::vector<std::string>& scopes,
                                       int64_t expires_in_days, std::string_view remote_addr);
  // A member's own tokens; an admin's view is every token of the organisation.
  Result<std::vector<store::ApiToken>> ListApiTokens(const Principal& principal,
                                                     std::string_view org_slug);
  // One's own token, or (admin) any token of the organisation.
  Status RevokeApiToken(const Principal& principal, std::string_view org_slug, int64_t token_id,
                        std::string_view remote_addr);

  struct Introspection {
    store::Organization org;
    store::Compute compute;
    int64_t expires_at_ms = 0;
  };
  // Validates without consuming, so an installer can refuse a token for another compute
  // before it changes anything.
  Result<Introspection> IntrospectInstallToken(std::string_view token,
                                               std::string_view remote_addr);

  struct Enrolment {
    std::string credential;  // secret, shown once
    store::Credential record;
    store::Compute compute;
    store::Organization org;
  };
  // Consumes the token; revokes the compute's previous credential at once.
  Result<Enrolment> ExchangeInstallToken(std::string_view token, const HostFacts& facts,
                                         std::string_view remote_addr);

  // --- the daemon's side
  // ---------------------------------------------------------------------------
  struct ComputeIdentity {
    store::Credential credential;
    store::Compute compute;
  };
  // kUnauthenticated with reason "credential_revoked" (the daemon stops itself) or
  // "credential_invalid".
  Result<ComputeIdentity> AuthenticateCredential(std::string_view bearer);
  // The compute of a credential (by its stored hash) that this replica authenticated before,
  // from memory; nullopt when not known here. It says nothing about a revocation since then,
  // which the caller must have checked elsewhere (TelemetryStore::AppendForCredential does,
  // in the batch's claim). A credential refused by AuthenticateCredential is forgotten.
  std::optional<std::string> RememberedCompute(std::string_view secret_hash);
  void ForgetCredential(std::string_view secret_hash);
  // A segment-scoped grant (segment_grant.h) that `identity`'s controller asked for: host,
  // SHA-256 and length of one segment, for kSegmentGrantTtlMs from now.
  std::string IssueSegmentGrant(const ComputeIdentity& identity, const std::string& host,
                                const std::string& sha256, int64_t bytes, int64_t* expires_ms);
  // What a grant admits, once its signature, credential and expiry hold: kUnauthenticated with
  // reason grant_invalid, grant_revoked (its credential was revoked or replaced) or
  // grant_expired.
  struct GrantedSegment {
    SegmentGrant grant;
    store::Compute compute;
    std::string credential_secret_hash;  // of the credential that asked for the grant
  };
  Result<GrantedSegment> AuthenticateSegmentGrant(std::string_view token);
  // Validates and stores a heartbeat document (docs/formats/heartbeat.md), and records the
  // outcomes it reports of the server's requests (audited as compute_request.done/failed).
  Status RecordHeartbeat(const ComputeIdentity& identity, std::string_view body_json);
  // The requests the heartbeat answer carries to the compute's controller: its pending ones,
  // oldest first, at most 16.
  Result<std::vector<store::ComputeRequest>> PendingRequests(std::string_view compute_id) {
    return store_.ListComputeRequests(compute_id, "pending", 16);
  }
  // Waits up to timeout_ms for the first heartbeat carrying this credential; returns whether
  // it has arrived. This is how an installer proves enrolment.
  Result<bool> WaitForEnrolment(const ComputeIdentity& identity, int64_t timeout_ms);
  // Whether this credential has heartbeated (at all, or after `after_ms` on the server's
  // clock when that is not 0), and the compute's last heartbeat; kUnauthenticated when the
  // credential was revoked. Does not wait.
  struct EnrolmentState {
    bool enrolled = false;
    int64_t last_heartbeat_ms = 0;
  };
  Result<EnrolmentState> EnrolmentAfter(const ComputeIdentity& identity, int64_t after_ms);
  // For long-polls that hold no thread: `wake` runs once, on the thread that records the
  // next heartbeat of `credential_id`. A waiter whose `done` says true (answered by its
  // fallback meanwhile) is dropped unrun; such waiters are pruned whenever one is added, so
  // their number stays bounded by the requests parked at once.
  struct HeartbeatWaiter {
    std::function<bool()> done;
    std::function<void()> wake;
  };
  void OnNextHeartbeat(int64_t credential_id, HeartbeatWaiter waiter);
  // Waiters registered and not yet woken or pruned (for tests and metrics).
  size_t heartbeat_waiters();
  Status Deprovision(const ComputeIdentity& identity, std::string_view remote_addr);
  Status Deprovision(const Principal& principal, std::string_view compute_id,
                     std::string_view remote_addr);

  // The signed-in user's own record (for the console's top bar).
  Result<store::User> GetUser(int64_t user_id) { return store_.GetUser(user_id); }
  // The latest stored heartbeat document of a compute (callers checked access already).
  Result<store::Heartbeat> LatestHeartbeat(std::string_view compute_id) {
    return store_.LatestHeartbeat(compute_id);
  }
  // Marks computes without a recent heartbeat stale; returns how many changed.
  Result<int> MarkStaleComputes();
  Result<std::vector<store::AuditEvent>> Audit(const Principal& principal,
                                               std::string_view org_slug, int limit);

  const ControlPlaneOptions& options() const { return options_; }
  // Only before serving starts (the public URLs become known once listeners are bound).
  ControlPlaneOptions& mutable_options() { return options_; }

 private:
  Result<JobReader> JobReaderIn(const Principal& principal, int64_t org_id);
  Result<store::Membership> RequirePermission(const Principal& principal, int64_t org_id,
                                              Permission permission);
  void RecordAudit(int64_t org_id, std::string actor, std::string action, std::string target,
                   std::string detail_json, std::string_view remote_addr);
  // An event about a user (sign-ins), recorded in each of the user's organisations.
  void RecordUserAudit(int64_t user_id, std::string action, std::string detail_json,
                       std::string_view remote_addr);
  // A password hash of options_.password_cost that no password matches: Login verifies
  // against it for unknown emails. Computed on first use.
  std::string_view DummyHash();

  store::Store& store_;
  Clock& clock_;
  ControlPlaneOptions options_;
  // Signalled on every recorded heartbeat, for WaitForEnrolment and the waiters.
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  std::multimap<int64_t, HeartbeatWaiter> heartbeat_waiters_;  // by credential id
  // Credentials authenticated here, by stored hash, with their compute (a credential never
  // changes compute). Bounded: emptied when full, which costs a read per credential.
  std::mutex remembered_mu_;
  std::map<std::string, std::string, std::less<>> remembered_computes_;
  std::once_flag dummy_hash_once_;
  std::string dummy_hash_;
};

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_CONTROL_PLANE_H_
