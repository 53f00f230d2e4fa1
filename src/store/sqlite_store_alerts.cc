// SqliteStore: alert rules, their deliveries and the requests their actions make of a
// compute's controller (docs/formats/alerts.md).
#include <string>

#include "store/sqlite_rows.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

constexpr std::string_view kAlertRuleColumns =
    "id, org_id, name, kind, verdict, min_duration_s, period_s, channel, target, max_per_hour, "
    "action, action_grace_s, action_dry_run, enabled, created_by, created_at_ms";

AlertRule ReadAlertRule(const Statement& row) {
  AlertRule rule;
  rule.id = row.ColumnInt(0);
  rule.org_id = row.ColumnInt(1);
  rule.name = row.ColumnText(2);
  rule.kind = row.ColumnText(3);
  rule.verdict = row.ColumnText(4);
  rule.min_duration_s = row.ColumnInt(5);
  rule.period_s = row.ColumnInt(6);
  rule.channel = row.ColumnText(7);
  rule.target = row.ColumnText(8);
  rule.max_per_hour = row.ColumnInt(9);
  rule.action = row.ColumnText(10);
  rule.action_grace_s = row.ColumnInt(11);
  rule.action_dry_run = row.ColumnInt(12) != 0;
  rule.enabled = row.ColumnInt(13) != 0;
  rule.created_by = row.ColumnText(14);
  rule.created_at_ms = row.ColumnInt(15);
  return rule;
}

constexpr std::string_view kAlertDeliveryColumns =
    "id, rule_id, org_id, subject, compute_id, job_id, \"user\", state, attempts, last_error, "
    "summary, message, created_at_ms, updated_at_ms";

AlertDelivery ReadAlertDelivery(const Statement& row) {
  AlertDelivery d;
  d.id = row.ColumnInt(0);
  d.rule_id = row.ColumnInt(1);
  d.org_id = row.ColumnInt(2);
  d.subject = row.ColumnText(3);
  d.compute_id = row.ColumnText(4);
  d.job_id = row.ColumnText(5);
  d.user = row.ColumnText(6);
  d.state = row.ColumnText(7);
  d.attempts = static_cast<int>(row.ColumnInt(8));
  d.last_error = row.ColumnText(9);
  d.summary = row.ColumnText(10);
  d.message = row.ColumnText(11);
  d.created_at_ms = row.ColumnInt(12);
  d.updated_at_ms = row.ColumnInt(13);
  return d;
}

constexpr std::string_view kComputeRequestColumns =
    "id, compute_id, org_id, kind, job_id, reason, rule_id, state, result, created_at_ms, "
    "updated_at_ms";

ComputeRequest ReadComputeRequest(const Statement& row) {
  ComputeRequest r;
  r.id = row.ColumnInt(0);
  r.compute_id = row.ColumnText(1);
  r.org_id = row.ColumnInt(2);
  r.kind = row.ColumnText(3);
  r.job_id = row.ColumnText(4);
  r.reason = row.ColumnText(5);
  r.rule_id = row.ColumnInt(6);
  r.state = row.ColumnText(7);
  r.result = row.ColumnText(8);
  r.created_at_ms = row.ColumnInt(9);
  r.updated_at_ms = row.ColumnInt(10);
  return r;
}

template <typename T>
Result<std::vector<T>> ReadAll(Statement& rows, T (*read)(const Statement&)) {
  std::vector<T> out;
  while (true) {
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
    if (!has_row)
      return out;
    out.push_back(read(rows));
  }
}

}  // namespace

Result<AlertRule> SqliteStore::CreateAlertRule(const AlertRule& rule) {
  return Transact(Access::kWrite, [&]() -> Result<AlertRule> {
    EXPANSE_RETURN_IF_ERROR(OrganizationByIdLocked(rule.org_id));
    EXPANSE_ASSIGN_OR_RETURN(
        const int64_t id,
        InsertLocked(
            "INSERT INTO alert_rules (org_id, name, kind, verdict, min_duration_s, period_s, "
            "channel, target, max_per_hour, action, action_grace_s, action_dry_run, enabled, "
            "created_by, created_at_ms) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            rule.org_id, rule.name, rule.kind, rule.verdict, rule.min_duration_s, rule.period_s,
            rule.channel, rule.target, rule.max_per_hour, rule.action, rule.action_grace_s,
            int64_t{rule.action_dry_run ? 1 : 0}, int64_t{rule.enabled ? 1 : 0}, rule.created_by,
            rule.created_at_ms));
    AlertRule stored = rule;
    stored.id = id;
    return stored;
  });
}

Result<std::vector<AlertRule>> SqliteStore::ListAlertRules(int64_t org_id) {
  return Transact(Access::kRead, [&]() -> Result<std::vector<AlertRule>> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        org_id == 0
            ? db_.Query(SelectSql(kAlertRuleColumns, "alert_rules WHERE enabled = 1 ORDER BY id"))
            : db_.Query(SelectSql(kAlertRuleColumns, "alert_rules WHERE org_id = ?1 ORDER BY id"),
                        org_id));
    return ReadAll(rows, ReadAlertRule);
  });
}

Status SqliteStore::DeleteAlertRule(int64_t org_id, int64_t rule_id) {
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("DELETE FROM alert_rules WHERE id = ?1 AND org_id = ?2", rule_id, org_id));
    if (db_.Changes() == 0)
      return NotFoundError("alert rule " + std::to_string(rule_id) + " not found");
    return OkStatus();
  });
}

Result<AlertRule> SqliteStore::SetAlertRuleEnabled(int64_t org_id, int64_t rule_id, bool enabled) {
  return Transact(Access::kWrite, [&]() -> Result<AlertRule> {
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE alert_rules SET enabled = ?3 WHERE id = ?1 AND org_id = ?2", rule_id,
                    org_id, int64_t{enabled ? 1 : 0}));
    if (db_.Changes() == 0)
      return NotFoundError("alert rule " + std::to_string(rule_id) + " not found");
    return QueryOneLocked<AlertRule>(
        ReadAlertRule, NotFoundError("alert rule " + std::to_string(rule_id) + " not found"),
        SelectSql(kAlertRuleColumns, "alert_rules WHERE id = ?1"), rule_id);
  });
}

Result<AlertDelivery> SqliteStore::ClaimAlertDelivery(const AlertDelivery& delivery) {
  return Transact(Access::kWrite, [&]() -> Result<AlertDelivery> {
    const Result<int64_t> inserted = InsertLocked(
        "INSERT INTO alert_deliveries (rule_id, org_id, subject, compute_id, job_id, \"user\", "
        "state, "
        "attempts, last_error, summary, message, created_at_ms, updated_at_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, '', ?7, ?8, ?9, ?9)",
        delivery.rule_id, delivery.org_id, delivery.subject, delivery.compute_id, delivery.job_id,
        delivery.user, delivery.summary, delivery.message, delivery.created_at_ms);
    if (inserted.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("alert rule " + std::to_string(delivery.rule_id) +
                                " already has a delivery about " + delivery.subject);
    }
    EXPANSE_RETURN_IF_ERROR(inserted.status());
    AlertDelivery stored = delivery;
    stored.id = *inserted;
    stored.state = "pending";
    stored.attempts = 0;
    stored.last_error.clear();
    stored.updated_at_ms = delivery.created_at_ms;
    return stored;
  });
}

Result<AlertDelivery> SqliteStore::GetAlertDelivery(int64_t rule_id, std::string_view subject) {
  return Transact(Access::kRead, [&]() -> Result<AlertDelivery> {
    return QueryOneLocked<AlertDelivery>(
        ReadAlertDelivery,
        NotFoundError("alert rule " + std::to_string(rule_id) + " has no delivery about " +
                      std::string(subject)),
        SelectSql(kAlertDeliveryColumns, "alert_deliveries WHERE rule_id = ?1 AND subject = ?2"),
        rule_id, subject);
  });
}

Status SqliteStore::UpdateAlertDelivery(const AlertDelivery& delivery) {
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(db_.Execute(
        "UPDATE alert_deliveries SET state = ?2, attempts = ?3, last_error = ?4, summary = ?5, "
        "message = ?6, updated_at_ms = ?7 WHERE id = ?1",
        delivery.id, delivery.state, int64_t{delivery.attempts}, delivery.last_error,
        delivery.summary, delivery.message, delivery.updated_at_ms));
    if (db_.Changes() == 0)
      return NotFoundError("alert delivery " + std::to_string(delivery.id) + " not found");
    return OkStatus();
  });
}

Result<bool> SqliteStore::TakeAlertDelivery(int64_t id, std::string_view state,
                                            int64_t seen_updated_at_ms, int64_t now_ms) {
  // One conditional UPDATE: atomic by itself in both engines, so two replicas cannot both
  // take the same delivery.
  return OneStatement([&]() -> Result<bool> {
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE alert_deliveries SET updated_at_ms = ?4 "
                    "WHERE id = ?1 AND state = ?2 AND updated_at_ms = ?3",
                    id, state, seen_updated_at_ms, now_ms));
    return db_.Changes() == 1;
  });
}

Result<int64_t> SqliteStore::CountAlertDeliveries(int64_t rule_id, std::string_view state,
                                                  int64_t since_ms) {
  return Transact(Access::kRead, [&]() -> Result<int64_t> {
    EXPANSE_ASSIGN_OR_RETURN(Statement row,
                             db_.Query("SELECT count(*) FROM alert_deliveries WHERE rule_id = ?1 "
                                       "AND state = ?2 AND updated_at_ms >= ?3",
                                       rule_id, state, since_ms));
    EXPANSE_ASSIGN_OR_RETURN(const bool has_row, row.Step());
    return has_row ? row.ColumnInt(0) : 0;
  });
}

Result<std::vector<AlertDelivery>> SqliteStore::ListAlertDeliveries(int64_t org_id, int64_t rule_id,
                                                                    std::string_view state,
                                                                    int limit) {
  if (limit < 1)
    return InvalidArgumentError("alert delivery list limit must be at least 1");
  return Transact(Access::kRead, [&]() -> Result<std::vector<AlertDelivery>> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query(SelectSql(kAlertDeliveryColumns,
                            "alert_deliveries WHERE org_id = ?1 AND (?2 = 0 OR rule_id = ?2) "
                            "AND (?3 = '' OR state = ?3) "
                            "ORDER BY updated_at_ms DESC, id DESC LIMIT ?4"),
                  org_id, rule_id, state, int64_t{limit}));
    return ReadAll(rows, ReadAlertDelivery);
  });
}

Result<ComputeRequest> SqliteStore::CreateComputeRequest(const ComputeRequest& request) {
  return Transact(Access::kWrite, [&]() -> Result<ComputeRequest> {
    ComputeRequest stored = request;
    stored.replaces_made_before_ms = 0;
    stored.state = "pending";
    stored.result.clear();
    stored.updated_at_ms = request.created_at_ms;
    if (request.replaces_made_before_ms > 0) {
      // Before the INSERT: a failed statement ends a PostgreSQL transaction. Under a new id: a
      // controller runs each id once (ServerRequests), and one that ran the earlier request
      // but has not reported it yet would skip this one and report the old outcome for it.
      // (SQLite's max(id) + 1, since a new row may take a deleted row's id there;
      // PostgreSQL's identity, which a later INSERT draws from.)
      const std::string new_id = db_.engine() == Engine::kSqlite
                                     ? "(SELECT max(id) + 1 FROM compute_requests)"
                                     : "nextval(pg_get_serial_sequence('compute_requests', 'id'))";
      EXPANSE_ASSIGN_OR_RETURN(
          Statement renewed,
          db_.Query(
              "UPDATE compute_requests SET id = " + new_id +
                  ", org_id = ?4, reason = ?5, rule_id = ?6, state = 'pending', result = '', "
                  "created_at_ms = ?7, updated_at_ms = ?7 WHERE compute_id = ?1 AND kind = ?2 "
                  "AND job_id = ?3 AND created_at_ms < ?8 RETURNING id",
              request.compute_id, request.kind, request.job_id, request.org_id, request.reason,
              request.rule_id, request.created_at_ms, request.replaces_made_before_ms));
      EXPANSE_ASSIGN_OR_RETURN(const bool renewed_one, renewed.Step());
      if (renewed_one) {
        stored.id = renewed.ColumnInt(0);
        return stored;
      }
    }
    const Result<int64_t> inserted = InsertLocked(
        "INSERT INTO compute_requests (compute_id, org_id, kind, job_id, reason, rule_id, state, "
        "result, created_at_ms, updated_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', '', ?7, "
        "?7)",
        request.compute_id, request.org_id, request.kind, request.job_id, request.reason,
        request.rule_id, request.created_at_ms);
    if (inserted.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExistsError("compute " + request.compute_id + " already has a " + request.kind +
                                " request for job " + request.job_id);
    }
    EXPANSE_RETURN_IF_ERROR(inserted.status());
    stored.id = *inserted;
    return stored;
  });
}

Result<std::vector<ComputeRequest>> SqliteStore::ListComputeRequests(std::string_view compute_id,
                                                                     std::string_view state,
                                                                     int limit) {
  if (limit < 1)
    return InvalidArgumentError("compute request list limit must be at least 1");
  return Transact(Access::kRead, [&]() -> Result<std::vector<ComputeRequest>> {
    EXPANSE_ASSIGN_OR_RETURN(
        Statement rows,
        db_.Query(SelectSql(kComputeRequestColumns,
                            "compute_requests WHERE compute_id = ?1 AND (?2 = '' OR state = ?2) "
                            "ORDER BY id LIMIT ?3"),
                  compute_id, state, int64_t{limit}));
    return ReadAll(rows, ReadComputeRequest);
  });
}

Result<ComputeRequest> SqliteStore::FinishComputeRequest(std::string_view compute_id, int64_t id,
                                                         bool ok, std::string_view result,
                                                         int64_t now_ms) {
  return Transact(Access::kWrite, [&]() -> Result<ComputeRequest> {
    EXPANSE_RETURN_IF_ERROR(
        db_.Execute("UPDATE compute_requests SET state = ?3, result = ?4, updated_at_ms = ?5 "
                    "WHERE id = ?1 AND compute_id = ?2 AND state = 'pending'",
                    id, compute_id, std::string_view(ok ? "done" : "failed"), result, now_ms));
    if (db_.Changes() == 0) {
      return NotFoundError("compute " + std::string(compute_id) + " has no pending request " +
                           std::to_string(id));
    }
    return QueryOneLocked<ComputeRequest>(
        ReadComputeRequest, NotFoundError("compute request " + std::to_string(id) + " not found"),
        SelectSql(kComputeRequestColumns, "compute_requests WHERE id = ?1"), id);
  });
}

}  // namespace expanse::store::sqlite_internal
