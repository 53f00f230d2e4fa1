// HTTP bindings of the control plane (for installers and daemons) and of the console/query API.
// See docs/api.md for every endpoint, its body and its error codes.
#ifndef EXPANSE_SERVER_ROUTES_H_
#define EXPANSE_SERVER_ROUTES_H_

#include <memory>
#include <optional>

#include "core/clock.h"
#include "http/error.h"
#include "http/listener.h"
#include "http/rate_limiter.h"
#include "promstore/forwarder.h"
#include "promstore/remote_telemetry_store.h"
#include "server/alert_sender.h"
#include "server/concurrency_slots.h"
#include "server/control_plane.h"
#include "server/route_util.h"
#include "server/segment_store.h"
#include "server/server_metrics.h"
#include "store/job_store.h"
#include "tsdb/telemetry_store.h"

namespace expanse::server {

// Brute-force and flood protection. Keys: client address, email, credential.
struct RateLimits {
  std::unique_ptr<http::RateLimiter> login_per_address;
  // Keyed "<normalised email> <address>": one address guessing at one account. Not the email
  // alone, so that someone else's guessing cannot lock the owner out (docs/api.md).
  std::unique_ptr<http::RateLimiter> login_per_email;
  // Keyed by the normalised email: a ceiling over all addresses, far above an owner's use.
  std::unique_ptr<http::RateLimiter> login_per_account;
  std::unique_ptr<http::RateLimiter> token_per_address;  // introspect and exchange
  std::unique_ptr<http::RateLimiter> per_credential;     // daemon calls
  std::unique_ptr<http::RateLimiter> per_principal;      // console and scripts

  // A compute's controller uploads one batch per worker per flush (10 s) and one at a time,
  // each a round trip of about 5 ms: some 200 requests a second at most, from the ~2,000
  // workers one controller carries (docs/scaling.md). The default leaves it that and room for
  // heartbeats, segments and retries, so no honest compute is throttled, while one leaked
  // credential still cannot send more than this. (It was 20 until 2026-12-06: any compute of
  // over ~200 workers fell behind for good, its outbox growing.)
  static constexpr double kDefaultCredentialRequestsPerSecond = 250;

  // credential_per_second: sustained daemon requests per credential (burst 5 s worth).
  static Result<RateLimits> Default(
      Clock& clock, double credential_per_second = kDefaultCredentialRequestsPerSecond);
};

struct RouteContext {
  ControlPlane& control;
  Clock& clock;
  RateLimits& limits;
  bool secure_cookies = true;  // false only when the console is plain HTTP on loopback
  tsdb::TelemetryStore* tsdb = nullptr;
  store::JobStore* jobs = nullptr;
  std::string releases_dir;             // --releases-dir; "" when the server serves no mirror
  AlertSender* alert_sender = nullptr;  // says whether email rules can be delivered
  ServerCounters* counters = nullptr;   // what /metrics reports; null: not counted
  // --forward-remote-write: gets a copy of every stored batch's samples; null: none.
  promstore::RemoteWriteForwarder* forwarder = nullptr;
  // --telemetry-store remote: the store, for what /metrics shows of its writes; null: embedded.
  promstore::RemoteTelemetryStore* remote_telemetry = nullptr;
  // Where trace segments' bytes are kept (segment_store.h); null: the server keeps none.
  SegmentStore* segments = nullptr;
  // Trace segments parsed at once (segment_routes.cc); set wherever `segments` is.
  ConcurrencySlots* segment_parses = nullptr;
  // Heavy reads at once (AnswerHeavyConsoleJson); null: not limited.
  ConcurrencySlots* heavy_reads = nullptr;
  int64_t stack_retention_ms = 0;   // --stack-retention; 0: stacks are kept for ever
  size_t max_envelope_samples = 0;  // ServerOptions::max_envelope_samples
};

// The compute behind the request's credential, rate-limited per credential; on refusal
// fills `refused` (401 with credential_revoked / credential_invalid, or 429) and returns none.
std::optional<ControlPlane::ComputeIdentity> AuthenticateCompute(RouteContext& ctx,
                                                                 const http::Request& req,
                                                                 http::Response* refused);

// The sender of an ingest batch: its compute and, when the credential was not read for this
// request, its stored hash (unchecked_hash), which the telemetry store's claim then checks.
struct IngestSender {
  std::string compute_id;
  std::string unchecked_hash;
};
// AuthenticateCompute for the data plane: a credential this replica authenticated before is
// taken from memory when the telemetry store checks credentials in its claims
// (TelemetryStore::ChecksCredentials), saving a database read per batch.
std::optional<IngestSender> AuthenticateIngestSender(RouteContext& ctx, const http::Request& req,
                                                     http::Response* refused);

void RegisterControlPlaneRoutes(http::Listener& listener, RouteContext& context);
void RegisterConsoleApiRoutes(http::Listener& listener, RouteContext& context);
void RegisterDataPlaneRoutes(http::Listener& listener, RouteContext& context);
void RegisterQueryRoutes(http::Listener& listener, RouteContext& context);
void RegisterStackRoutes(http::Listener& listener, RouteContext& context);
// GET /api/v1/computes/:id/jobs/:job/capture: the capture agent's evidence (capture_routes.cc).
void RegisterCaptureRoutes(http::Listener& listener, RouteContext& context);
// Trace segments: POST /dp/v1/segments on the data plane; GET
// /api/v1/computes/{id}/jobs/{job}/segments and …/segments/{sha256} (segment_routes.cc).
void RegisterSegmentRoutes(http::Listener& data_listener, http::Listener& console_listener,
                           RouteContext& context);
// The idle ledger: GET /api/v1/computes/{id}/jobs/{job}/ledger and /api/v1/orgs/{org}/efficiency.
void RegisterLedgerRoutes(http::Listener& listener, RouteContext& context);
// GET /metrics for Prometheus (server_metrics.h), answered only to `Authorization: Bearer
// <token>`; 404 for everything else, so it cannot be probed. `start_ms`: the replica's start.
void RegisterMetricsRoute(http::Listener& listener, RouteContext& context, store::Store& store,
                          std::string token, int64_t start_ms);
// Verdicts: GET /api/v1/computes/{id}/jobs/{job}/verdicts.
void RegisterVerdictRoutes(http::Listener& listener, RouteContext& context);
// Alerts: /api/v1/orgs/{org}/alert-rules (GET, POST), .../alert-rules/{id} (PATCH, DELETE) and
// /api/v1/orgs/{org}/alert-deliveries.
void RegisterAlertRoutes(http::Listener& listener, RouteContext& context);

// The caller of a console/script request: an API token (Authorization: Bearer exp_at_…) or the
// session cookie plus X-CSRF-Token on state-changing requests; rate-limited per caller.
Result<Principal> AuthenticateConsoleRequest(RouteContext& ctx, const http::Request& req);

// The job a job route's :id and :job name, if the caller may read it
// (ControlPlane::GetComputeForJobs); to a jobs:own token, another SLURM user's job answers 404
// as an unknown job does.
struct ReadableJob {
  store::Compute compute;
  store::JobRecord job;
};
Result<ReadableJob> LookUpReadableJob(RouteContext& ctx, const Principal& principal,
                                      const http::Request& req);

// The common part of a job's evidence routes (stacks, capture): the compute, if the caller may
// read the job's (evidence may arrive before the job record, so an unknown job of a visible
// compute is not an error, except to a jobs:own token, which reads only jobs known to be its
// user's), and the ?from=&to= range in Unix ms (0 or absent = open; to after from).
struct JobEvidenceQuery {
  store::Compute compute;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
};
Result<JobEvidenceQuery> ReadJobEvidenceQuery(RouteContext& ctx, const Principal& principal,
                                              const http::Request& req);

// A console/script GET: authenticates the caller, then answers 200 with what fn(principal)
// returns (a Result<nlohmann::json>), or the JSON error of whichever step failed.
template <typename Fn>
http::Response AnswerConsoleJson(RouteContext& ctx, const http::Request& req, Fn fn) {
  Result<Principal> principal = AuthenticateConsoleRequest(ctx, req);
  if (!principal.ok())
    return http::ErrorResponse(principal.status());
  Result<nlohmann::json> body = fn(*principal);
  if (!body.ok())
    return http::ErrorResponse(body.status());
  return Json(200, *body);
}
// 503 `queries_busy` with Retry-After 1: every heavy-read slot is taken (counted in
// ctx.counters).
http::Response HeavyReadsBusyResponse(RouteContext& ctx);

// AnswerConsoleJson for reads whose cost grows with a job's size and history (job lists,
// timelines, ledgers, verdicts, stacks, capture): each holds one of ctx.heavy_reads' slots while
// fn runs, so that a few callers' long reads cannot take every worker of the listener away from
// sign-ins, heartbeats and ingest; a caller who finds them all taken is asked to come back in a
// second (the console does). The slot is taken after authentication: a stranger takes none.
template <typename Fn>
http::Response AnswerHeavyConsoleJson(RouteContext& ctx, const http::Request& req, Fn fn) {
  Result<Principal> principal = AuthenticateConsoleRequest(ctx, req);
  if (!principal.ok())
    return http::ErrorResponse(principal.status());
  std::optional<ConcurrencySlots::Slot> slot =
      ctx.heavy_reads != nullptr ? ctx.heavy_reads->TryTake() : std::nullopt;
  if (ctx.heavy_reads != nullptr && !slot)
    return HeavyReadsBusyResponse(ctx);
  Result<nlohmann::json> body = fn(*principal);
  if (!body.ok())
    return http::ErrorResponse(body.status());
  return Json(200, *body);
}
// GET /healthz (the process answers) and GET /readyz (it can serve: its store answers; 503
// with Retry-After otherwise), for a load balancer's checks.
void RegisterHealthRoute(http::Listener& listener, std::string_view plane, store::Store& store);
// GET / and GET /assets/<path>: the web console's page and assets, compiled into the binary.
void RegisterConsolePageRoutes(http::Listener& listener);
// GET /releases/<name>: the regular files directly inside `releases_dir`, read-only (a
// release mirror for installers); GET /install: the CLI installer for that mirror
// (deploy/cli_installer.h), for the control plane's public URL as `control` has it when asked.
// kInvalidArgument when the directory does not exist.
Status RegisterReleaseMirrorRoutes(http::Listener& listener, const std::string& releases_dir,
                                   const ControlPlane& control);
// The Add compute panel's first line (curl … /install | sh) when `releases_dir` serves a CLI
// and its key, else "".
std::string CliInstallLineFor(const std::string& releases_dir, const ControlPlane& control);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_ROUTES_H_
