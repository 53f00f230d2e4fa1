// SqliteStore: the audit log.
#include <string>

#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {

Status SqliteStore::Ping() {
  Status main = Transact(Access::kRead, [&]() -> Status {
    EXPANSE_ASSIGN_OR_RETURN(Statement row, db_.Query("SELECT 1"));
    return row.Step().status();
  });
  // The ledger's own connection too (PostgreSQL), whatever the first said: ready means both
  // serve.
  if (!ledger_.has_value())
    return main;
  Status ledger = LedgerStatement([](Connection& db) -> Status {
    EXPANSE_ASSIGN_OR_RETURN(Statement row, db.Query("SELECT 1"));
    return row.Step().status();
  });
  return main.ok() ? ledger : main;
}

Status SqliteStore::AppendAudit(const AuditEvent& event) {
  return Transact(Access::kWrite, [&]() -> Status {
    return db_.Execute(
        "INSERT INTO audit_events (at_ms, org_id, actor, action, target, detail_json, "
        "remote_addr) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        event.at_ms, event.org_id, event.actor, event.action, event.target, event.detail_json,
        event.remote_addr);
  });
}

Result<std::vector<AuditEvent>> SqliteStore::ListAudit(int64_t org_id, int limit) {
  if (limit < 1) {
    return InvalidArgumentError("audit list limit is " + std::to_string(limit) +
                                "; it must be at least 1");
  }
  return Transact(Access::kRead, [&]() -> Result<std::vector<AuditEvent>> {
    // Two statements rather than "?1 = 0 OR org_id = ?1", which would keep SQLite from
    // using the per-organisation index. Events with one timestamp come out in reverse
    // insertion order.
    constexpr std::string_view kAll = "audit_events ORDER BY at_ms DESC, id DESC LIMIT ?1";
    constexpr std::string_view kOfOrg =
        "audit_events WHERE org_id = ?2 ORDER BY at_ms DESC, id DESC LIMIT ?1";
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        org_id == 0 ? db_.Query(SelectSql(kAuditEventColumns, kAll), int64_t{limit})
                    : db_.Query(SelectSql(kAuditEventColumns, kOfOrg), int64_t{limit}, org_id));
    std::vector<AuditEvent> events;
    while (true) {
      EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
      if (!has_row) {
        return events;
      }
      events.push_back(ReadAuditEvent(rows));
    }
  });
}

}  // namespace expanse::store::sqlite_internal
