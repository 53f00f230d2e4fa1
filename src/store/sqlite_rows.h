// Internal to the store module: the column lists the SQLite store selects and the functions
// that turn one result row into a store.h or job_store.h struct. A reader expects exactly the
// columns of its list, in that order, so queries are written as "SELECT " + kXColumns + " FROM
// ...".
#ifndef EXPANSE_STORE_SQLITE_ROWS_H_
#define EXPANSE_STORE_SQLITE_ROWS_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "store/job_store.h"
#include "store/sql_connection.h"
#include "store/store.h"

namespace expanse::store::sqlite_internal {

inline constexpr std::string_view kOrganizationColumns = "id, slug, name, created_at_ms";
inline constexpr std::string_view kUserColumns =
    "id, email, display_name, password_hash, created_at_ms, disabled";
inline constexpr std::string_view kMembershipColumns =
    "org_id, user_id, role, can_register_compute, slurm_user";
inline constexpr std::string_view kSessionColumns =
    "id_hash, user_id, csrf_token, created_at_ms, expires_at_ms";
inline constexpr std::string_view kApiTokenColumns =
    "id, user_id, org_id, name, token_hash, scopes, created_at_ms, expires_at_ms, revoked_at_ms";
inline constexpr std::string_view kComputeColumns =
    "id, org_id, name, type, state, created_at_ms, created_by_user, pinned_daemon_version, "
    "control_plane_url, data_plane_url, last_heartbeat_ms, controller_host, daemon_version, "
    "deprovisioned_at_ms";
inline constexpr std::string_view kInstallTokenColumns =
    "id, compute_id, token_hash, created_at_ms, expires_at_ms, used_at_ms, invalidated_at_ms, "
    "created_by_user";
inline constexpr std::string_view kCredentialColumns =
    "id, compute_id, secret_hash, created_at_ms, revoked_at_ms, revoke_reason, "
    "first_heartbeat_ms, hostname, daemon_version, slurm_version, role";
inline constexpr std::string_view kHeartbeatColumns =
    "compute_id, credential_id, received_at_ms, controller_host, daemon_version, body_json";
inline constexpr std::string_view kAuditEventColumns =
    "id, at_ms, org_id, actor, action, target, detail_json, remote_addr";
inline constexpr std::string_view kJobColumns =
    "compute_id, job_id, name, \"user\", account, partition, state, nodes, submit_ms, start_ms, "
    "end_ms, req_nodes, req_cpus, req_gpus, req_mem_mib, time_limit_s, observed_ms";
inline constexpr std::string_view kJobNodeEventColumns = "compute_id, job_id, host, kind, at_ms";
inline constexpr std::string_view kGpuAllocationColumns =
    "compute_id, job_id, host, gpu_uuid, gpu_index, gpu_minor, from_ms, to_ms";
inline constexpr std::string_view kStackSampleColumns =
    "compute_id, job_id, host, window_start_ms, window_end_ms, folded, thread_state, count, "
    "gpu_idle";

// "SELECT <columns> FROM <rest>". Both parts are constant SQL; values are bound.
std::string SelectSql(std::string_view columns, std::string_view rest);

Organization ReadOrganization(const Statement& row);
User ReadUser(const Statement& row);
// kDataLoss when the stored role is not one RoleName() produces.
Result<Membership> ReadMembership(const Statement& row);
Session ReadSession(const Statement& row);
ApiToken ReadApiToken(const Statement& row);
// kDataLoss when the stored state is not one ComputeStateName() produces.
Result<Compute> ReadCompute(const Statement& row);
// The same from column `first` on, for a row that holds more than the compute (a join).
Result<Compute> ReadComputeFrom(const Statement& row, int first);
InstallToken ReadInstallToken(const Statement& row);
Credential ReadCredential(const Statement& row);
Credential ReadCredentialFrom(const Statement& row, int first);
Heartbeat ReadHeartbeat(const Statement& row);
AuditEvent ReadAuditEvent(const Statement& row);
JobRecord ReadJobRecord(const Statement& row);
JobNodeEvent ReadJobNodeEvent(const Statement& row);
GpuAllocation ReadGpuAllocation(const Statement& row);

// API token scopes are stored as one space-separated string.
std::string JoinScopes(const std::vector<std::string>& scopes);
std::vector<std::string> SplitScopes(std::string_view joined);

}  // namespace expanse::store::sqlite_internal

#endif  // EXPANSE_STORE_SQLITE_ROWS_H_
