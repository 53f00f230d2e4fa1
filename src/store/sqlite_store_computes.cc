// SqliteStore: computes, install tokens, the install-token exchange and credentials.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "store/message_text.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

using store_internal::IdForMessage;

std::string ComputeName(std::string_view id) { return "compute " + IdForMessage(id); }

Status DeprovisionedError(std::string_view compute_id) {
  return FailedPreconditionError(ComputeName(compute_id) + " is deprovisioned");
}

// Whether `token` may still be exchanged for `compute` at now_ms. The order matters for
// the message: a used token says so even after its compute was deprovisioned, and a token
// invalidated by deprovisioning names the deprovisioning, not a "newer token".
Status CheckExchangeable(const InstallToken& token, const Compute& compute, int64_t now_ms) {
  if (token.used_at_ms != 0) {
    return FailedPreconditionError("install token has already been used");
  }
  if (compute.state == ComputeState::kDeprovisioned) {
    return DeprovisionedError(compute.id);
  }
  if (token.invalidated_at_ms != 0) {
    return FailedPreconditionError("install token has been replaced by a newer one");
  }
  if (token.expires_at_ms <= now_ms) {
    return FailedPreconditionError("install token expired at " +
                                   store_internal::FormatUtcMillis(token.expires_at_ms));
  }
  return OkStatus();
}

}  // namespace

Result<Compute> SqliteStore::ComputeByIdLocked(std::string_view id) {
  EXPANSE_ASSIGN_OR_RETURN(Statement row,
                           db_.Query(SelectSql(kComputeColumns, "computes WHERE id = ?1"), id));
  EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
  if (!found) {
    return NotFoundError(ComputeName(id) + " not found");
  }
  return ReadCompute(row);
}

Result<Credential> SqliteStore::CredentialByIdLocked(int64_t id) {
  EXPANSE_ASSIGN_OR_RETURN(
      Statement row, db_.Query(SelectSql(kCredentialColumns, "credentials WHERE id = ?1"), id));
  EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
  if (!found) {
    return NotFoundError("credential " + std::to_string(id) + " not found");
  }
  return ReadCredential(row);
}

Result<Compute> SqliteStore::CreateCompute(const Compute& compute) {
  if (compute.id.empty()) {
    return InvalidArgumentError("compute id is empty");
  }
  return Transact(Access::kWrite, [&]() -> Result<Compute> {
    EXPANSE_RETURN_IF_ERROR(OrganizationByIdLocked(compute.org_id));
    const Status inserted = db_.Execute(
        "INSERT INTO computes (id, org_id, name, type, state, created_at_ms, created_by_user, "
        "pinned_daemon_version, control_plane_url, data_plane_url, last_heartbeat_ms, "
        "controller_host, daemon_version, deprovisioned_at_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        compute.id, compute.org_id, compute.name, compute.type, ComputeStateName(compute.state),
        compute.created_at_ms, compute.created_by_user, compute.pinned_daemon_version,
        compute.control_plane_url, compute.data_plane_url, compute.last_heartbeat_ms,
        compute.controller_host, compute.daemon_version, compute.deprovisioned_at_ms);
    if (inserted.code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError(ComputeName(compute.id) + " already exists");
    }
    EXPANSE_RETURN_IF_ERROR(inserted);
    return ComputeByIdLocked(compute.id);
  });
}

Result<Compute> SqliteStore::GetCompute(std::string_view id) {
  return OneStatement([&] { return ComputeByIdLocked(id); });
}

namespace {

// Every row of a computes query, in its order.
Result<std::vector<Compute>> ReadComputes(Statement& rows) {
  std::vector<Compute> computes;
  while (true) {
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
    if (!has_row)
      return computes;
    EXPANSE_ASSIGN_OR_RETURN(Compute compute, ReadCompute(rows));
    computes.push_back(std::move(compute));
  }
}

}  // namespace

Result<std::vector<Compute>> SqliteStore::ListAllComputes(int limit) {
  return Transact(Access::kRead, [&]() -> Result<std::vector<Compute>> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query(SelectSql(kComputeColumns, "computes ORDER BY id LIMIT ?1"), int64_t{limit}));
    return ReadComputes(rows);
  });
}

Result<std::vector<Compute>> SqliteStore::ListComputes(int64_t org_id) {
  return Transact(Access::kRead, [&]() -> Result<std::vector<Compute>> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query(
            SelectSql(kComputeColumns, "computes WHERE org_id = ?1 ORDER BY created_at_ms, id"),
            org_id));
    return ReadComputes(rows);
  });
}

Result<InstallToken> SqliteStore::IssueInstallToken(const InstallToken& token) {
  if (token.expires_at_ms <= token.created_at_ms) {
    return InvalidArgumentError("install token must expire after it is created (created at " +
                                store_internal::FormatUtcMillis(token.created_at_ms) +
                                ", expires at " +
                                store_internal::FormatUtcMillis(token.expires_at_ms) + ")");
  }
  return Transact(Access::kWrite, [&]() -> Result<InstallToken> {
    EXPANSE_ASSIGN_OR_RETURN(const Compute compute, ComputeByIdLocked(token.compute_id));
    if (compute.state == ComputeState::kDeprovisioned) {
      return DeprovisionedError(compute.id);
    }
    // Used tokens keep their history; only the still-usable ones are retired.
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE install_tokens SET invalidated_at_ms = ?2 "
                    "WHERE compute_id = ?1 AND used_at_ms = 0 AND invalidated_at_ms = 0",
                    token.compute_id, token.created_at_ms));
    // A new token starts unused whatever the caller's struct says.
    const Result<int64_t> inserted = InsertLocked(
        "INSERT INTO install_tokens (compute_id, token_hash, created_at_ms, expires_at_ms, "
        "created_by_user) VALUES (?1, ?2, ?3, ?4, ?5)",
        token.compute_id, token.token_hash, token.created_at_ms, token.expires_at_ms,
        token.created_by_user);
    if (inserted.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("an install token with this hash already exists");
    }
    EXPANSE_RETURN_IF_ERROR(inserted.status());
    InstallToken stored = token;
    stored.id = *inserted;
    stored.used_at_ms = 0;
    stored.invalidated_at_ms = 0;
    return stored;
  });
}

Result<InstallToken> SqliteStore::GetInstallTokenByHash(std::string_view token_hash) {
  return Transact(Access::kRead, [&]() -> Result<InstallToken> {
    return QueryOneLocked<InstallToken>(
        ReadInstallToken, NotFoundError("install token not found"),
        SelectSql(kInstallTokenColumns, "install_tokens WHERE token_hash = ?1"), token_hash);
  });
}

Result<Credential> SqliteStore::ExchangeInstallToken(std::string_view token_hash,
                                                     const Credential& credential, int64_t now_ms) {
  // BEGIN IMMEDIATE holds the write lock from the first read, so two exchanges of one token
  // (threads here or other processes on the file) run one after the other and the second
  // sees used_at_ms set.
  return Transact(Access::kWrite, [&]() -> Result<Credential> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement row,
        db_.Query(SelectSql(kInstallTokenColumns, "install_tokens WHERE token_hash = ?1"),
                  token_hash));
    EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
    if (!found) {
      return NotFoundError("install token not found");
    }
    const InstallToken token = ReadInstallToken(row);
    EXPANSE_ASSIGN_OR_RETURN(const Compute compute, ComputeByIdLocked(token.compute_id));
    EXPANSE_RETURN_IF_ERROR(CheckExchangeable(token, compute, now_ms));

    // The guard in WHERE repeats the check above, so even a change to the locking could
    // not let one token be used twice.
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE install_tokens SET used_at_ms = ?2 "
                    "WHERE id = ?1 AND used_at_ms = 0 AND invalidated_at_ms = 0",
                    token.id, now_ms));
    if (db_.Changes() != 1) {
      return FailedPreconditionError("install token has already been used");
    }
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE credentials SET revoked_at_ms = ?2, revoke_reason = 'replaced' "
                    "WHERE compute_id = ?1 AND revoked_at_ms = 0",
                    token.compute_id, now_ms));

    Credential stored = credential;
    stored.compute_id = token.compute_id;
    stored.created_at_ms = now_ms;
    stored.revoked_at_ms = 0;
    stored.revoke_reason.clear();
    stored.first_heartbeat_ms = 0;
    const Result<int64_t> inserted = InsertLocked(
        "INSERT INTO credentials (compute_id, secret_hash, created_at_ms, hostname, "
        "daemon_version, slurm_version, role) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        stored.compute_id, stored.secret_hash, stored.created_at_ms, stored.hostname,
        stored.daemon_version, stored.slurm_version, stored.role);
    if (inserted.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("a credential with this secret hash already exists");
    }
    EXPANSE_RETURN_IF_ERROR(inserted.status());
    stored.id = *inserted;
    return stored;
  });
}

Result<Credential> SqliteStore::GetCredentialByHash(std::string_view secret_hash) {
  return OneStatement([&]() -> Result<Credential> {
    return QueryOneLocked<Credential>(
        ReadCredential, NotFoundError("credential not found"),
        SelectSql(kCredentialColumns, "credentials WHERE secret_hash = ?1"), secret_hash);
  });
}

Result<Store::CredentialAndCompute> SqliteStore::GetCredentialAndComputeByHash(
    std::string_view secret_hash) {
  // Both column lists as one row, the credential's first; the two tables share column names,
  // so each list is selected in a derived table of its own.
  static const std::string kSql =
      "SELECT * FROM (" + SelectSql(kCredentialColumns, "credentials WHERE secret_hash = ?1") +
      ") AS cr JOIN (" + SelectSql(kComputeColumns, "computes") +
      ") AS co ON co.id = cr.compute_id";
  static const int kComputeFirst =
      static_cast<int>(std::count(kCredentialColumns.begin(), kCredentialColumns.end(), ',') + 1);
  return OneStatement([&]() -> Result<CredentialAndCompute> {
    EXPANSE_ASSIGN_OR_RETURN(Statement row, db_.Query(kSql, secret_hash));
    EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
    if (!found)
      return NotFoundError("credential not found");
    EXPANSE_ASSIGN_OR_RETURN(Compute compute, ReadComputeFrom(row, kComputeFirst));
    return CredentialAndCompute{ReadCredential(row), std::move(compute)};
  });
}

Result<Credential> SqliteStore::GetCredential(int64_t id) {
  return Transact(Access::kRead, [&] { return CredentialByIdLocked(id); });
}

}  // namespace expanse::store::sqlite_internal
