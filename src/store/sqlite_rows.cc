#include "store/sqlite_rows.h"

#include "store/message_text.h"

namespace expanse::store::sqlite_internal {
namespace {

// A CHECK constraint keeps bad names out, so reaching this means the file was edited by
// hand or damaged.
Status BadStoredName(const Status& parse_status, std::string_view where) {
  return DataLossError("stored " + std::string(where) + " is invalid: " + parse_status.message());
}

}  // namespace

std::string SelectSql(std::string_view columns, std::string_view rest) {
  std::string sql = "SELECT ";
  sql += columns;
  sql += " FROM ";
  sql += rest;
  return sql;
}

Organization ReadOrganization(const Statement& row) {
  Organization organization;
  organization.id = row.ColumnInt(0);
  organization.slug = row.ColumnText(1);
  organization.name = row.ColumnText(2);
  organization.created_at_ms = row.ColumnInt(3);
  return organization;
}

User ReadUser(const Statement& row) {
  User user;
  user.id = row.ColumnInt(0);
  user.email = row.ColumnText(1);
  user.display_name = row.ColumnText(2);
  user.password_hash = row.ColumnText(3);
  user.created_at_ms = row.ColumnInt(4);
  user.disabled = row.ColumnInt(5) != 0;
  return user;
}

Result<Membership> ReadMembership(const Statement& row) {
  Membership membership;
  membership.org_id = row.ColumnInt(0);
  membership.user_id = row.ColumnInt(1);
  Result<Role> role = ParseRole(row.ColumnText(2));
  if (!role.ok()) {
    return BadStoredName(role.status(), "membership role");
  }
  membership.role = *role;
  membership.can_register_compute = row.ColumnInt(3) != 0;
  membership.slurm_user = row.ColumnText(4);
  return membership;
}

Session ReadSession(const Statement& row) {
  Session session;
  session.id_hash = row.ColumnText(0);
  session.user_id = row.ColumnInt(1);
  session.csrf_token = row.ColumnText(2);
  session.created_at_ms = row.ColumnInt(3);
  session.expires_at_ms = row.ColumnInt(4);
  return session;
}

ApiToken ReadApiToken(const Statement& row) {
  ApiToken token;
  token.id = row.ColumnInt(0);
  token.user_id = row.ColumnInt(1);
  token.org_id = row.ColumnInt(2);
  token.name = row.ColumnText(3);
  token.token_hash = row.ColumnText(4);
  token.scopes = SplitScopes(row.ColumnText(5));
  token.created_at_ms = row.ColumnInt(6);
  token.expires_at_ms = row.ColumnInt(7);
  token.revoked_at_ms = row.ColumnInt(8);
  return token;
}

Result<Compute> ReadCompute(const Statement& row) { return ReadComputeFrom(row, 0); }

Result<Compute> ReadComputeFrom(const Statement& row, int first) {
  Compute compute;
  compute.id = row.ColumnText(first + 0);
  compute.org_id = row.ColumnInt(first + 1);
  compute.name = row.ColumnText(first + 2);
  compute.type = row.ColumnText(first + 3);
  Result<ComputeState> state = ParseComputeState(row.ColumnText(first + 4));
  if (!state.ok()) {
    return BadStoredName(state.status(),
                         "state of compute " + store_internal::IdForMessage(compute.id));
  }
  compute.state = *state;
  compute.created_at_ms = row.ColumnInt(first + 5);
  compute.created_by_user = row.ColumnInt(first + 6);
  compute.pinned_daemon_version = row.ColumnText(first + 7);
  compute.control_plane_url = row.ColumnText(first + 8);
  compute.data_plane_url = row.ColumnText(first + 9);
  compute.last_heartbeat_ms = row.ColumnInt(first + 10);
  compute.controller_host = row.ColumnText(first + 11);
  compute.daemon_version = row.ColumnText(first + 12);
  compute.deprovisioned_at_ms = row.ColumnInt(first + 13);
  return compute;
}

InstallToken ReadInstallToken(const Statement& row) {
  InstallToken token;
  token.id = row.ColumnInt(0);
  token.compute_id = row.ColumnText(1);
  token.token_hash = row.ColumnText(2);
  token.created_at_ms = row.ColumnInt(3);
  token.expires_at_ms = row.ColumnInt(4);
  token.used_at_ms = row.ColumnInt(5);
  token.invalidated_at_ms = row.ColumnInt(6);
  token.created_by_user = row.ColumnInt(7);
  return token;
}

Credential ReadCredential(const Statement& row) { return ReadCredentialFrom(row, 0); }

Credential ReadCredentialFrom(const Statement& row, int first) {
  Credential credential;
  credential.id = row.ColumnInt(first + 0);
  credential.compute_id = row.ColumnText(first + 1);
  credential.secret_hash = row.ColumnText(first + 2);
  credential.created_at_ms = row.ColumnInt(first + 3);
  credential.revoked_at_ms = row.ColumnInt(first + 4);
  credential.revoke_reason = row.ColumnText(first + 5);
  credential.first_heartbeat_ms = row.ColumnInt(first + 6);
  credential.hostname = row.ColumnText(first + 7);
  credential.daemon_version = row.ColumnText(first + 8);
  credential.slurm_version = row.ColumnText(first + 9);
  credential.role = row.ColumnText(first + 10);
  return credential;
}

Heartbeat ReadHeartbeat(const Statement& row) {
  Heartbeat heartbeat;
  heartbeat.compute_id = row.ColumnText(0);
  heartbeat.credential_id = row.ColumnInt(1);
  heartbeat.received_at_ms = row.ColumnInt(2);
  heartbeat.controller_host = row.ColumnText(3);
  heartbeat.daemon_version = row.ColumnText(4);
  heartbeat.body_json = row.ColumnText(5);
  return heartbeat;
}

AuditEvent ReadAuditEvent(const Statement& row) {
  AuditEvent event;
  event.id = row.ColumnInt(0);
  event.at_ms = row.ColumnInt(1);
  event.org_id = row.ColumnInt(2);
  event.actor = row.ColumnText(3);
  event.action = row.ColumnText(4);
  event.target = row.ColumnText(5);
  event.detail_json = row.ColumnText(6);
  event.remote_addr = row.ColumnText(7);
  return event;
}

JobRecord ReadJobRecord(const Statement& row) {
  JobRecord job;
  job.compute_id = row.ColumnText(0);
  job.job_id = row.ColumnText(1);
  job.name = row.ColumnText(2);
  job.user = row.ColumnText(3);
  job.account = row.ColumnText(4);
  job.partition = row.ColumnText(5);
  job.state = row.ColumnText(6);
  job.nodes = row.ColumnText(7);
  job.submit_ms = row.ColumnInt(8);
  job.start_ms = row.ColumnInt(9);
  job.end_ms = row.ColumnInt(10);
  job.req_nodes = row.ColumnInt(11);
  job.req_cpus = row.ColumnInt(12);
  job.req_gpus = row.ColumnInt(13);
  job.req_mem_mib = row.ColumnInt(14);
  job.time_limit_s = row.ColumnInt(15);
  job.observed_ms = row.ColumnInt(16);
  return job;
}

JobNodeEvent ReadJobNodeEvent(const Statement& row) {
  JobNodeEvent event;
  event.compute_id = row.ColumnText(0);
  event.job_id = row.ColumnText(1);
  event.host = row.ColumnText(2);
  event.kind = row.ColumnText(3);
  event.at_ms = row.ColumnInt(4);
  return event;
}

GpuAllocation ReadGpuAllocation(const Statement& row) {
  GpuAllocation allocation;
  allocation.compute_id = row.ColumnText(0);
  allocation.job_id = row.ColumnText(1);
  allocation.host = row.ColumnText(2);
  allocation.gpu_uuid = row.ColumnText(3);
  allocation.gpu_index = row.ColumnInt(4);
  allocation.gpu_minor = row.ColumnInt(5);
  allocation.from_ms = row.ColumnInt(6);
  allocation.to_ms = row.ColumnInt(7);
  return allocation;
}

std::string JoinScopes(const std::vector<std::string>& scopes) {
  std::string joined;
  for (const std::string& scope : scopes) {
    joined += joined.empty() ? "" : " ";
    joined += scope;
  }
  return joined;
}

std::vector<std::string> SplitScopes(std::string_view joined) {
  std::vector<std::string> scopes;
  while (!joined.empty()) {
    const std::size_t blank = joined.find(' ');
    scopes.emplace_back(joined.substr(0, blank));
    joined = blank == std::string_view::npos ? std::string_view() : joined.substr(blank + 1);
  }
  return scopes;
}

}  // namespace expanse::store::sqlite_internal
