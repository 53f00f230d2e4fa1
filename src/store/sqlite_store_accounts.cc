// SqliteStore: organisations, users, memberships, console sessions and API tokens.
#include <string>
#include <vector>

#include "store/message_text.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

using store_internal::QuoteForMessage;

constexpr std::size_t kMaxSlugChars = 63;

Status ValidateSlug(std::string_view slug) {
  bool valid = !slug.empty() && slug.size() <= kMaxSlugChars;
  for (const char c : slug) {
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  }
  if (!valid) {
    return InvalidArgumentError("invalid organization slug " + QuoteForMessage(slug) +
                                ": use 1 to 63 characters from a-z, 0-9 and '-'");
  }
  return OkStatus();
}

// Scopes are stored space-separated, so a scope must be non-empty and free of blanks.
Status ValidateScopes(const std::vector<std::string>& scopes) {
  for (const std::string& scope : scopes) {
    const bool has_blank = scope.find_first_of(" \t\r\n") != std::string::npos;
    if (scope.empty() || has_blank) {
      return InvalidArgumentError("invalid API token scope " + QuoteForMessage(scope) +
                                  ": scopes are non-empty and contain no blanks");
    }
  }
  return OkStatus();
}

std::string UserNotFound(int64_t id) { return "user " + std::to_string(id) + " not found"; }

}  // namespace

Result<Organization> SqliteStore::OrganizationByIdLocked(int64_t id) {
  EXPANSE_ASSIGN_OR_RETURN(
      Statement row, db_.Query(SelectSql(kOrganizationColumns, "organizations WHERE id = ?1"), id));
  EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
  if (!found) {
    return NotFoundError("organization " + std::to_string(id) + " not found");
  }
  return ReadOrganization(row);
}

Result<User> SqliteStore::UserByIdLocked(int64_t id) {
  EXPANSE_ASSIGN_OR_RETURN(Statement row,
                           db_.Query(SelectSql(kUserColumns, "users WHERE id = ?1"), id));
  EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
  if (!found) {
    return NotFoundError(UserNotFound(id));
  }
  return ReadUser(row);
}

Result<Organization> SqliteStore::CreateOrganization(std::string_view slug, std::string_view name,
                                                     int64_t now_ms) {
  EXPANSE_RETURN_IF_ERROR(ValidateSlug(slug));
  return Transact(Access::kWrite, [&]() -> Result<Organization> {
    const Result<int64_t> inserted =
        InsertLocked("INSERT INTO organizations (slug, name, created_at_ms) VALUES (?1, ?2, ?3)",
                     slug, name, now_ms);
    if (inserted.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("organization slug " + QuoteForMessage(slug) + " already exists");
    }
    EXPANSE_RETURN_IF_ERROR(inserted.status());
    return OrganizationByIdLocked(*inserted);
  });
}

Result<Organization> SqliteStore::GetOrganization(int64_t id) {
  return Transact(Access::kRead, [&] { return OrganizationByIdLocked(id); });
}

Result<Organization> SqliteStore::GetOrganizationBySlug(std::string_view slug) {
  return Transact(Access::kRead, [&]() -> Result<Organization> {
    return QueryOneLocked<Organization>(
        ReadOrganization,
        NotFoundError("organization slug " + QuoteForMessage(slug) + " not found"),
        SelectSql(kOrganizationColumns, "organizations WHERE slug = ?1"), slug);
  });
}

Result<User> SqliteStore::CreateUser(std::string_view email, std::string_view display_name,
                                     std::string_view password_hash, int64_t now_ms) {
  const std::string normalized = NormalizeEmail(email);
  if (normalized.empty()) {
    return InvalidArgumentError("user e-mail address is empty");
  }
  return Transact(Access::kWrite, [&]() -> Result<User> {
    const Result<int64_t> inserted = InsertLocked(
        "INSERT INTO users (email, display_name, password_hash, created_at_ms) "
        "VALUES (?1, ?2, ?3, ?4)",
        normalized, display_name, password_hash, now_ms);
    if (inserted.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("user with e-mail " + QuoteForMessage(normalized) +
                                " already exists");
    }
    EXPANSE_RETURN_IF_ERROR(inserted.status());
    return UserByIdLocked(*inserted);
  });
}

Result<User> SqliteStore::GetUser(int64_t id) {
  return Transact(Access::kRead, [&] { return UserByIdLocked(id); });
}

Result<User> SqliteStore::GetUserByEmail(std::string_view email) {
  const std::string normalized = NormalizeEmail(email);
  return Transact(Access::kRead, [&]() -> Result<User> {
    return QueryOneLocked<User>(
        ReadUser, NotFoundError("user with e-mail " + QuoteForMessage(normalized) + " not found"),
        SelectSql(kUserColumns, "users WHERE email = ?1"), normalized);
  });
}

Status SqliteStore::SetUserPassword(int64_t user_id, std::string_view password_hash) {
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE users SET password_hash = ?2 WHERE id = ?1", user_id, password_hash));
    if (db_.Changes() == 0) {
      return NotFoundError(UserNotFound(user_id));
    }
    return OkStatus();
  });
}

Status SqliteStore::PutMembership(const Membership& membership) {
  return Transact(Access::kWrite, [&]() -> Status {
    // Looked up first so the error names which side is missing, not just "FOREIGN KEY".
    EXPANSE_RETURN_IF_ERROR(OrganizationByIdLocked(membership.org_id));
    EXPANSE_RETURN_IF_ERROR(UserByIdLocked(membership.user_id));
    return db_.Execute(
        "INSERT INTO memberships (org_id, user_id, role, can_register_compute, slurm_user) "
        "VALUES (?1, ?2, ?3, ?4, ?5) "
        "ON CONFLICT (org_id, user_id) DO UPDATE "
        "SET role = excluded.role, can_register_compute = excluded.can_register_compute, "
        "slurm_user = excluded.slurm_user",
        membership.org_id, membership.user_id, RoleName(membership.role),
        int64_t{membership.can_register_compute}, membership.slurm_user);
  });
}

Result<Membership> SqliteStore::GetMembership(int64_t org_id, int64_t user_id) {
  return Transact(Access::kRead, [&]() -> Result<Membership> {
    return QueryOneLocked<Membership>(
        ReadMembership,
        NotFoundError("user " + std::to_string(user_id) + " is not a member of organization " +
                      std::to_string(org_id)),
        SelectSql(kMembershipColumns, "memberships WHERE org_id = ?1 AND user_id = ?2"), org_id,
        user_id);
  });
}

Result<std::vector<Membership>> SqliteStore::ListMembershipsOfUser(int64_t user_id) {
  return Transact(Access::kRead, [&]() -> Result<std::vector<Membership>> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query(SelectSql(kMembershipColumns, "memberships WHERE user_id = ?1 ORDER BY org_id"),
                  user_id));
    std::vector<Membership> memberships;
    while (true) {
      EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
      if (!has_row) {
        return memberships;
      }
      EXPANSE_ASSIGN_OR_RETURN(const Membership membership, ReadMembership(rows));
      memberships.push_back(membership);
    }
  });
}

Status SqliteStore::CreateSession(const Session& session) {
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(UserByIdLocked(session.user_id));
    // The user's expired sessions go as a new one comes: nothing else deletes them (a sign-out
    // deletes its own), so each sign-in would leave a row for good.
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("DELETE FROM sessions WHERE user_id = ?1 AND expires_at_ms <= ?2",
                    session.user_id, session.created_at_ms));
    Status inserted = db_.Execute(
        "INSERT INTO sessions (id_hash, user_id, csrf_token, created_at_ms, expires_at_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5)",
        session.id_hash, session.user_id, session.csrf_token, session.created_at_ms,
        session.expires_at_ms);
    if (inserted.code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("a session with this id already exists");
    }
    return inserted;
  });
}

Result<Session> SqliteStore::GetSession(std::string_view id_hash, int64_t now_ms) {
  return Transact(Access::kRead, [&]() -> Result<Session> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement row,
        db_.Query(SelectSql(kSessionColumns, "sessions WHERE id_hash = ?1"), id_hash));
    EXPANSE_ASSIGN_OR_RETURN(const bool found, row.Step());
    if (!found) {
      return NotFoundError("session not found");
    }
    Session session = ReadSession(row);
    // Expiry is inclusive: a session whose expires_at_ms is now has ended.
    if (session.expires_at_ms <= now_ms) {
      return NotFoundError("session expired at " +
                           store_internal::FormatUtcMillis(session.expires_at_ms));
    }
    return session;
  });
}

Status SqliteStore::DeleteSession(std::string_view id_hash) {
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(db_.Execute("DELETE FROM sessions WHERE id_hash = ?1", id_hash));
    if (db_.Changes() == 0) {
      return NotFoundError("session not found");
    }
    return OkStatus();
  });
}

Result<ApiToken> SqliteStore::CreateApiToken(const ApiToken& token) {
  EXPANSE_RETURN_IF_ERROR(ValidateScopes(token.scopes));
  return Transact(Access::kWrite, [&]() -> Result<ApiToken> {
    EXPANSE_RETURN_IF_ERROR(OrganizationByIdLocked(token.org_id));
    EXPANSE_RETURN_IF_ERROR(UserByIdLocked(token.user_id));
    const Result<int64_t> inserted = InsertLocked(
        "INSERT INTO api_tokens (user_id, org_id, name, token_hash, scopes, created_at_ms, "
        "expires_at_ms, revoked_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        token.user_id, token.org_id, token.name, token.token_hash, JoinScopes(token.scopes),
        token.created_at_ms, token.expires_at_ms, token.revoked_at_ms);
    if (inserted.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("an API token with this hash already exists");
    }
    EXPANSE_RETURN_IF_ERROR(inserted.status());
    const std::string dead =
        "org_id = ?1 AND user_id = ?2 AND (revoked_at_ms <> 0 OR "
        "(expires_at_ms <> 0 AND expires_at_ms <= ?3))";
    EXPANSE_RETURN_IF_ERROR(db_.Execute("DELETE FROM api_tokens WHERE " + dead +
                                            " AND id NOT IN (SELECT id FROM api_tokens WHERE " +
                                            dead + " ORDER BY id DESC LIMIT ?4)",
                                        token.org_id, token.user_id, token.created_at_ms,
                                        kKeptDeadApiTokens));
    ApiToken stored = token;
    stored.id = *inserted;
    return stored;
  });
}

Result<ApiToken> SqliteStore::GetApiTokenByHash(std::string_view token_hash) {
  return Transact(Access::kRead, [&]() -> Result<ApiToken> {
    return QueryOneLocked<ApiToken>(ReadApiToken, NotFoundError("API token not found"),
                                    SelectSql(kApiTokenColumns, "api_tokens WHERE token_hash = ?1"),
                                    token_hash);
  });
}

Status SqliteStore::RevokeApiToken(int64_t id, int64_t now_ms) {
  return Transact(Access::kWrite, [&]() -> Status {
    // A token revoked twice keeps the first revocation time.
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE api_tokens SET revoked_at_ms = CASE WHEN revoked_at_ms = 0 THEN ?2 "
                    "ELSE revoked_at_ms END WHERE id = ?1",
                    id, now_ms));
    if (db_.Changes() == 0) {
      return NotFoundError("API token " + std::to_string(id) + " not found");
    }
    return OkStatus();
  });
}

Result<std::vector<ApiToken>> SqliteStore::ListApiTokens(int64_t org_id, int64_t user_id) {
  return Transact(Access::kRead, [&]() -> Result<std::vector<ApiToken>> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query(
            SelectSql(kApiTokenColumns,
                      "api_tokens WHERE org_id = ?1 AND (?2 = 0 OR user_id = ?2) ORDER BY id"),
            org_id, user_id));
    std::vector<ApiToken> tokens;
    while (true) {
      EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
      if (!has_row)
        return tokens;
      tokens.push_back(ReadApiToken(rows));
    }
  });
}

}  // namespace expanse::store::sqlite_internal
