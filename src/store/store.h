// The persistence interface of expanse-server's control plane.
//
// Callers see only this interface; SQLite (sqlite_store.h) is the default implementation and a
// PostgreSQL one can be added without touching callers. Every method is one atomic unit: where a
// flow changes several rows (issuing a token invalidates older ones; exchanging a token consumes
// it, revokes the old credential and stores the new one) the implementation does it in one
// transaction, so a crash or a concurrent request never leaves a half-applied change.
//
// Times are Unix epoch milliseconds, passed in by the caller (which owns the clock), 0 = unset.
// Secrets are never stored: tokens, credentials and session ids arrive already hashed.
#ifndef EXPANSE_STORE_STORE_H_
#define EXPANSE_STORE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "store/job_store.h"

namespace expanse::store {

enum class Role { kOwner, kAdmin, kMember, kViewer };
std::string_view RoleName(Role role);
Result<Role> ParseRole(std::string_view name);

struct Organization {
  int64_t id = 0;
  std::string slug;  // [a-z0-9-]{1,63}, unique
  std::string name;
  int64_t created_at_ms = 0;
};

struct User {
  int64_t id = 0;
  std::string email;  // unique, compared case-insensitively (stored lower-case)
  std::string display_name;
  std::string password_hash;  // Argon2id string from crypto::HashPassword
  int64_t created_at_ms = 0;
  bool disabled = false;
};

struct Membership {
  int64_t org_id = 0;
  int64_t user_id = 0;
  Role role = Role::kViewer;
  // Registering a compute is an explicit permission (owners and admins hold it by role;
  // a member holds it only when granted here).
  bool can_register_compute = false;
  // The SLURM user the member's jobs run under ("" = none): what an API token with the scope
  // jobs:own may read. Set by the server's operator (expanse-server admin add-user
  // --slurm-user), never by the member: it decides whose jobs they see.
  std::string slurm_user;
};

struct Session {
  std::string id_hash;  // crypto::HashSecretToken of the cookie value
  int64_t user_id = 0;
  std::string csrf_token;  // echoed by the console in a header on every state-changing request
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
};

struct ApiToken {
  int64_t id = 0;
  int64_t user_id = 0;
  int64_t org_id = 0;
  std::string name;
  std::string token_hash;
  std::vector<std::string> scopes;  // e.g. "read", "compute:register", "admin"; no blanks
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;  // 0 = does not expire
  int64_t revoked_at_ms = 0;
};

enum class ComputeState { kRegistered, kActive, kStale, kDeprovisioned };
std::string_view ComputeStateName(ComputeState state);
Result<ComputeState> ParseComputeState(std::string_view name);

struct Compute {
  std::string id;  // "cmp_" + random, chosen by the caller
  int64_t org_id = 0;
  std::string name;
  std::string type;  // "slurm"
  ComputeState state = ComputeState::kRegistered;
  int64_t created_at_ms = 0;
  int64_t created_by_user = 0;
  // What the Add compute panel shows and the exchange hands to the installer.
  std::string pinned_daemon_version;
  std::string control_plane_url;
  std::string data_plane_url;
  // From the latest heartbeat.
  int64_t last_heartbeat_ms = 0;
  std::string controller_host;
  std::string daemon_version;
  int64_t deprovisioned_at_ms = 0;
};

struct InstallToken {
  int64_t id = 0;
  std::string compute_id;
  std::string token_hash;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  int64_t used_at_ms = 0;         // set once by a successful exchange
  int64_t invalidated_at_ms = 0;  // set when re-issued or the compute is deprovisioned
  int64_t created_by_user = 0;
};

struct Credential {
  int64_t id = 0;
  std::string compute_id;
  std::string secret_hash;
  int64_t created_at_ms = 0;
  int64_t revoked_at_ms = 0;
  std::string revoke_reason;  // "replaced", "deprovisioned"
  int64_t first_heartbeat_ms = 0;
  // Host facts sent with the exchange.
  std::string hostname;
  std::string daemon_version;
  std::string slurm_version;
  std::string role;
};

struct Heartbeat {
  std::string compute_id;
  int64_t credential_id = 0;
  int64_t received_at_ms = 0;
  std::string controller_host;
  std::string daemon_version;
  std::string body_json;  // the whole validated heartbeat document, for the console and diagnostics
};

// The form in which e-mail addresses are stored, looked up and rate-limited: surrounding
// blanks removed, ASCII letters lower-cased. Addresses compare case-insensitively in ASCII
// only: that is what every mail system agrees on, while folding other scripts depends on the
// Unicode version and locale.
std::string NormalizeEmail(std::string_view email);

struct AuditEvent {
  int64_t id = 0;
  int64_t at_ms = 0;
  int64_t org_id = 0;  // 0 = not tied to an organisation (e.g. a failed login for an unknown user)
  std::string actor;   // "user:<id>", "token:<id>", "compute:<id>", "anonymous"
  std::string action;  // e.g. "install_token.issued", "install_token.refused", "login.failed"
  std::string target;  // e.g. a compute id
  std::string detail_json;
  std::string remote_addr;
};

// An alert rule of an organisation (docs/formats/alerts.md). kind "verdict": a job with a
// verdict `verdict` lasting at least min_duration_s fires once per job; kind "digest": every
// period_s, one message per user with GPU time in the period.
struct AlertRule {
  int64_t id = 0;
  int64_t org_id = 0;
  std::string name;
  std::string kind;     // "verdict" or "digest"
  std::string verdict;  // a verdict code for kind "verdict", "" for a digest
  int64_t min_duration_s = 0;
  int64_t period_s = 0;      // digests only
  std::string channel;       // "webhook" or "email"
  std::string target;        // the webhook URL, or an address ("{user}" is the job's user)
  int64_t max_per_hour = 0;  // deliveries of this rule per hour; later ones are throttled
  // "scancel": after the warning, a job whose verdict still holds action_grace_s later is
  // cancelled through its compute's controller; with action_dry_run, only reported.
  std::string action;
  int64_t action_grace_s = 0;
  bool action_dry_run = true;
  bool enabled = true;
  std::string created_by;  // the actor: "user:<id>", "token:<id>"
  int64_t created_at_ms = 0;
};

// One message of a rule about one subject: a job ("<compute id>/<job id>") or a user's digest
// ("digest/<user>/<period start ms>"). (rule_id, subject) is unique: that is the deduplication.
struct AlertDelivery {
  int64_t id = 0;
  int64_t rule_id = 0;
  int64_t org_id = 0;
  std::string subject;
  std::string compute_id;  // "" for a digest
  std::string job_id;
  std::string user;
  // pending (claimed, not yet sent), sent, failed (gave up), throttled (over max_per_hour),
  // retry (failed, tried again later).
  std::string state;
  int attempts = 0;
  std::string last_error;
  std::string summary;  // one line: what the message said
  std::string message;  // the message as JSON ({"subject", "text"}), for retries and the audit
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

// A request from the server to a compute's controller, carried in heartbeat answers
// (docs/formats/heartbeat.md): today only "scancel" of a job, made by an alert rule's action.
struct ComputeRequest {
  int64_t id = 0;
  std::string compute_id;
  int64_t org_id = 0;
  std::string kind;  // "scancel"
  std::string job_id;
  std::string reason;  // why, for the audit log and the controller's log
  int64_t rule_id = 0;
  std::string state;   // pending, done, failed
  std::string result;  // what the controller reported
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  // Only in CreateComputeRequest, never stored: when not 0, the compute's request of the same
  // kind for the job made before this time (for an earlier run of a requeued job, or an
  // earlier job with the same id) is made pending again as this one, under a new id.
  int64_t replaces_made_before_ms = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // --- organisations, users, memberships -------------------------------------------------------
  // kAlreadyExists on a duplicate slug / email; kInvalidArgument on a slug outside
  // [a-z0-9-]{1,63} or an empty email. Emails are lower-cased (ASCII only) on the way in and
  // in lookups.
  virtual Result<Organization> CreateOrganization(std::string_view slug, std::string_view name,
                                                  int64_t now_ms) = 0;
  virtual Result<Organization> GetOrganization(int64_t id) = 0;
  virtual Result<Organization> GetOrganizationBySlug(std::string_view slug) = 0;
  virtual Result<User> CreateUser(std::string_view email, std::string_view display_name,
                                  std::string_view password_hash, int64_t now_ms) = 0;
  virtual Result<User> GetUser(int64_t id) = 0;
  virtual Result<User> GetUserByEmail(std::string_view email) = 0;
  virtual Status SetUserPassword(int64_t user_id, std::string_view password_hash) = 0;
  // Inserts or replaces the membership of (org_id, user_id).
  virtual Status PutMembership(const Membership& membership) = 0;
  virtual Result<Membership> GetMembership(int64_t org_id, int64_t user_id) = 0;
  virtual Result<std::vector<Membership>> ListMembershipsOfUser(int64_t user_id) = 0;

  // --- console sessions and API tokens ---------------------------------------------------------
  virtual Status CreateSession(const Session& session) = 0;
  // kNotFound when absent or expired at now_ms (expires_at_ms <= now_ms).
  virtual Result<Session> GetSession(std::string_view id_hash, int64_t now_ms) = 0;
  // kNotFound when absent.
  virtual Status DeleteSession(std::string_view id_hash) = 0;
  // Returns the token with its id assigned. kInvalidArgument for an empty scope or one with
  // blanks (scopes are stored space-separated). In the same transaction, the maker's tokens in
  // the organisation that are revoked or expired (at token.created_at_ms) are deleted past the
  // newest kKeptDeadApiTokens, so a loop of issuing and revoking does not grow the table (and
  // every listing) for ever.
  virtual Result<ApiToken> CreateApiToken(const ApiToken& token) = 0;
  static constexpr int64_t kKeptDeadApiTokens = 100;
  virtual Result<ApiToken> GetApiTokenByHash(std::string_view token_hash) = 0;
  virtual Status RevokeApiToken(int64_t id, int64_t now_ms) = 0;
  // The tokens of one organisation, oldest first; of one user there when user_id != 0.
  virtual Result<std::vector<ApiToken>> ListApiTokens(int64_t org_id, int64_t user_id) = 0;

  // --- computes ----------------------------------------------------------------------------------
  virtual Result<Compute> CreateCompute(const Compute& compute) = 0;
  virtual Result<Compute> GetCompute(std::string_view id) = 0;
  virtual Result<std::vector<Compute>> ListComputes(int64_t org_id) = 0;
  // Every organisation's computes by id, at most `limit` (the server's /metrics).
  virtual Result<std::vector<Compute>> ListAllComputes(int limit) = 0;

  // Stores a new install token and, in the same transaction, invalidates every earlier token of
  // the same compute that is still unused (invalidated_at_ms = token.created_at_ms). Returns the
  // token with its id assigned; used/invalidated start unset whatever `token` holds.
  // kInvalidArgument when expires_at_ms <= created_at_ms, kFailedPrecondition when the compute is
  // deprovisioned.
  virtual Result<InstallToken> IssueInstallToken(const InstallToken& token) = 0;
  virtual Result<InstallToken> GetInstallTokenByHash(std::string_view token_hash) = 0;

  // The single-use exchange, in one transaction:
  //   token unknown                        -> kNotFound
  //   already used / invalidated / expired -> kFailedPrecondition, message names which
  //   compute deprovisioned                -> kFailedPrecondition
  // otherwise marks the token used at now_ms, revokes every unrevoked credential of the compute
  // (reason "replaced"), stores `credential` (its compute_id is taken from the token,
  // created_at_ms is now_ms, the revocation and first-heartbeat fields start unset) and returns
  // it with its id assigned. Two concurrent exchanges of one token: exactly one succeeds.
  virtual Result<Credential> ExchangeInstallToken(std::string_view token_hash,
                                                  const Credential& credential, int64_t now_ms) = 0;
  virtual Result<Credential> GetCredentialByHash(std::string_view secret_hash) = 0;
  // The credential and its compute in one statement (a compute's every request is
  // authenticated this way); kNotFound when no credential has the hash.
  struct CredentialAndCompute {
    Credential credential;
    Compute compute;
  };
  virtual Result<CredentialAndCompute> GetCredentialAndComputeByHash(
      std::string_view secret_hash) = 0;
  virtual Result<Credential> GetCredential(int64_t id) = 0;

  // Stores the heartbeat as the compute's latest, moves a registered or stale compute to active,
  // updates last_heartbeat_ms / controller_host / daemon_version, and sets the credential's
  // first_heartbeat_ms when unset. kFailedPrecondition when the compute is deprovisioned.
  // "Latest" is by received_at_ms: a heartbeat older than the newest stored one is kept as
  // history but does not roll the compute's fields back. The credential is checked again inside
  // the transaction: kPermissionDenied when it belongs to another compute, kUnauthenticated when
  // it was revoked (e.g. replaced by a concurrent exchange). The history keeps the compute's
  // heartbeats of the kHeartbeatHistoryMs before the newest one stored; older ones are deleted.
  // At most one per kMinHeartbeatSpacingMs, and bodies over kMaxHistoryHeartbeatBytes only in
  // the newest (below).
  virtual Status RecordHeartbeat(const Heartbeat& heartbeat) = 0;
  // A heartbeat every 30 s of a 1,000-GPU compute is ~0.3 MB: a day of them is ~750 MB.
  static constexpr int64_t kHeartbeatHistoryMs = 24 * 3600 * 1000;
  // The history's rows before the newest are at least this far apart: a newest row this close
  // to the one before it is replaced by the next heartbeat.
  static constexpr int64_t kMinHeartbeatSpacingMs = 10'000;
  // A body larger than this is kept only while its heartbeat is the compute's newest; in the
  // history it becomes {"omitted_bytes": <its size>}.
  static constexpr int64_t kMaxHistoryHeartbeatBytes = 1 << 20;
  // kNotFound when the compute is unknown or has sent no heartbeat.
  virtual Result<Heartbeat> LatestHeartbeat(std::string_view compute_id) = 0;
  // Active computes whose last heartbeat is older than cutoff_ms become stale; returns how many.
  virtual Result<int> MarkStaleComputes(int64_t cutoff_ms) = 0;
  // state -> deprovisioned, every credential revoked (reason "deprovisioned"), every unused
  // install token invalidated. History (heartbeats, audit) stays. Idempotent.
  virtual Status DeprovisionCompute(std::string_view compute_id, int64_t now_ms) = 0;

  // --- health ------------------------------------------------------------------------------------
  // One trivial read of the database (on PostgreSQL, over each of the store's connections):
  // OK when it answers; kUnavailable when it is away (a PostgreSQL server stopped), for the
  // load balancer's readiness check.
  virtual Status Ping() = 0;

  // --- audit log ---------------------------------------------------------------------------------
  virtual Status AppendAudit(const AuditEvent& event) = 0;
  // Newest first (ties: last appended first). org_id 0 = all organisations. limit >= 1.
  virtual Result<std::vector<AuditEvent>> ListAudit(int64_t org_id, int limit) = 0;

  // --- alerts ------------------------------------------------------------------------------------
  // kInvalidArgument naming the field for a rule the schema refuses; kNotFound for the org.
  virtual Result<AlertRule> CreateAlertRule(const AlertRule& rule) = 0;
  // Oldest first. org_id 0 = every organisation's enabled rules (the evaluator's list).
  virtual Result<std::vector<AlertRule>> ListAlertRules(int64_t org_id) = 0;
  // kNotFound unless the rule exists in that organisation. Its deliveries go with it.
  virtual Status DeleteAlertRule(int64_t org_id, int64_t rule_id) = 0;
  // Pauses or resumes a rule (its deliveries stay); the rule as it is now. kNotFound as above.
  virtual Result<AlertRule> SetAlertRuleEnabled(int64_t org_id, int64_t rule_id, bool enabled) = 0;
  // Claims (rule, subject) for one message: inserts a delivery in state "pending" and returns
  // it, or kAlreadyExists when one exists (another evaluation, or another replica, has it).
  virtual Result<AlertDelivery> ClaimAlertDelivery(const AlertDelivery& delivery) = 0;
  // kNotFound when the rule has no delivery about `subject`.
  virtual Result<AlertDelivery> GetAlertDelivery(int64_t rule_id, std::string_view subject) = 0;
  // Sets state, attempts, last_error, summary, message and updated_at_ms of delivery `id`.
  virtual Status UpdateAlertDelivery(const AlertDelivery& delivery) = 0;
  // Takes delivery `id` for one more send if it is still in `state` as last read
  // (seen_updated_at_ms): moves its updated_at_ms to now_ms and answers true. False when
  // another evaluation (another replica) took or changed it first: that one sends it.
  virtual Result<bool> TakeAlertDelivery(int64_t id, std::string_view state,
                                         int64_t seen_updated_at_ms, int64_t now_ms) = 0;
  // Deliveries of the rule in state `state` updated at or after since_ms.
  virtual Result<int64_t> CountAlertDeliveries(int64_t rule_id, std::string_view state,
                                               int64_t since_ms) = 0;
  // Newest first. rule_id 0 = every rule of the organisation; state "" = any.
  virtual Result<std::vector<AlertDelivery>> ListAlertDeliveries(int64_t org_id, int64_t rule_id,
                                                                 std::string_view state,
                                                                 int limit) = 0;

  // --- requests to a compute's controller
  // --------------------------------------------------------- kAlreadyExists when the compute
  // already has a request of that kind for that job (made at or after
  // request.replaces_made_before_ms when that is set).
  virtual Result<ComputeRequest> CreateComputeRequest(const ComputeRequest& request) = 0;
  // Oldest first; state "" = any.
  virtual Result<std::vector<ComputeRequest>> ListComputeRequests(std::string_view compute_id,
                                                                  std::string_view state,
                                                                  int limit) = 0;
  // Marks the compute's pending request `id` done or failed with the controller's `result`.
  // kNotFound unless that compute has that request pending (a report for another compute's
  // request, or a second report, changes nothing).
  virtual Result<ComputeRequest> FinishComputeRequest(std::string_view compute_id, int64_t id,
                                                      bool ok, std::string_view result,
                                                      int64_t now_ms) = 0;

  // --- SLURM jobs --------------------------------------------------------------------------------
  // The job records, node events and GPU allocations of the computes (job_store.h). They share
  // this store's database and its rules: one transaction per call, writes and reads of both
  // interfaces serialised together. Lives as long as this Store.
  virtual JobStore& Jobs() = 0;
};

}  // namespace expanse::store

#endif  // EXPANSE_STORE_STORE_H_
