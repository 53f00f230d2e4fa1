// SqliteStore as a JobStore: the capture agent's per-process window aggregates, kept whole per
// process and window and read back per job for a time range.
#include <algorithm>
#include <string>
#include <vector>

#include "store/job_validation.h"
#include "store/sqlite_store_impl.h"

namespace expanse::store::sqlite_internal {
namespace {

Status ValidateCaptureWindow(const std::string& where, const CaptureWindow& w) {
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey(where, w.compute_id, w.job_id));
  if (w.host.empty())
    return InvalidArgumentError(where + ": host is empty");
  if (w.pid <= 0 || w.pid > (int64_t{1} << 31))
    return InvalidArgumentError(where + ": pid " + std::to_string(w.pid) + " is out of range");
  if (w.window_start_ms <= 0 || w.window_end_ms <= w.window_start_ms) {
    return InvalidArgumentError(where + ": window [" + std::to_string(w.window_start_ms) + ", " +
                                std::to_string(w.window_end_ms) + ") is empty or before 1970");
  }
  if (w.doc.size() < 2 || w.doc.size() > kMaxCaptureWindowBytes) {
    return InvalidArgumentError(where + ": doc is " + std::to_string(w.doc.size()) +
                                " bytes; it must be 2.." + std::to_string(kMaxCaptureWindowBytes));
  }
  return OkStatus();
}

}  // namespace

Status SqliteStore::PutCaptureWindows(const std::vector<CaptureWindow>& windows) {
  std::vector<std::string_view> compute_ids;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    EXPANSE_RETURN_IF_ERROR(
        ValidateCaptureWindow("capture_windows[" + std::to_string(i) + "]", windows[i]));
    compute_ids.push_back(windows[i].compute_id);
  }
  if (windows.empty())
    return OkStatus();
  return Transact(Access::kWrite, [&]() -> Status {
    EXPANSE_RETURN_IF_ERROR(CheckComputesExistLocked(compute_ids));
    // A window is final once the agent closed it: a redelivered batch replaces it.
    EXPANSE_ASSIGN_OR_RETURN(
        Statement upsert,
        db_.Prepare("INSERT INTO capture_windows (compute_id, job_id, host, pid, "
                    "window_start_ms, window_end_ms, doc) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                    "ON CONFLICT (compute_id, job_id, host, pid, window_start_ms) DO UPDATE SET "
                    "window_end_ms = excluded.window_end_ms, doc = excluded.doc"));
    for (const CaptureWindow& w : windows) {
      EXPANSE_RETURN_IF_ERROR(upsert.BindAll(w.compute_id, w.job_id, w.host, w.pid,
                                             w.window_start_ms, w.window_end_ms, w.doc));
      EXPANSE_RETURN_IF_ERROR(upsert.Run());
      upsert.Reset();
    }
    return OkStatus();
  });
}

Result<std::vector<CaptureWindow>> SqliteStore::JobCaptureWindows(std::string_view compute_id,
                                                                  std::string_view job_id,
                                                                  int64_t from_ms, int64_t to_ms,
                                                                  int limit, size_t max_doc_bytes) {
  constexpr std::string_view kWhere = "job capture windows";
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateJobKey(kWhere, compute_id, job_id));
  EXPANSE_RETURN_IF_ERROR(store_internal::ValidateTimeRange(kWhere, from_ms, to_ms));
  if (limit < 1 || limit > kMaxJobCaptureWindows) {
    return InvalidArgumentError(std::string(kWhere) + ": limit is " + std::to_string(limit) +
                                "; it must be between 1 and " +
                                std::to_string(kMaxJobCaptureWindows));
  }
  return Transact(Access::kRead, [&]() -> Result<std::vector<CaptureWindow>> {
    EXPANSE_RETURN_IF_ERROR(ComputeByIdLocked(compute_id));
    // In pages, after the last row read: PostgreSQL hands a statement's whole result over at
    // once, so one statement for `limit` rows would hold them all whatever the byte bound.
    constexpr int64_t kPageRows = 500;
    std::vector<CaptureWindow> windows;
    size_t doc_bytes = 0;
    while (doc_bytes <= max_doc_bytes && windows.size() < static_cast<size_t>(limit)) {
      const bool first = windows.empty();
      const int64_t page = std::min<int64_t>(kPageRows, limit - std::ssize(windows));
      EXPANSE_ASSIGN_OR_RETURN(
          Statement rows,
          db_.Query("SELECT host, pid, window_start_ms, window_end_ms, doc FROM capture_windows "
                    "WHERE compute_id = ?1 AND job_id = ?2 "
                    "AND (?4 = 0 OR window_start_ms < ?4) AND (?3 = 0 OR window_end_ms > ?3) "
                    "AND (?6 = 1 OR window_start_ms > ?7 OR (window_start_ms = ?7 AND "
                    "(host > ?8 OR (host = ?8 AND pid > ?9)))) "
                    "ORDER BY window_start_ms, host, pid LIMIT ?5",
                    compute_id, job_id, from_ms, to_ms, page, int64_t{first ? 1 : 0},
                    first ? int64_t{0} : windows.back().window_start_ms,
                    first ? std::string() : windows.back().host,
                    first ? int64_t{0} : windows.back().pid));
      int64_t read = 0;
      while (doc_bytes <= max_doc_bytes) {
        EXPANSE_ASSIGN_OR_RETURN(const bool has_row, rows.Step());
        if (!has_row)
          break;
        ++read;
        windows.push_back(CaptureWindow{.compute_id = std::string(compute_id),
                                        .job_id = std::string(job_id),
                                        .host = rows.ColumnText(0),
                                        .pid = rows.ColumnInt(1),
                                        .window_start_ms = rows.ColumnInt(2),
                                        .window_end_ms = rows.ColumnInt(3),
                                        .doc = rows.ColumnText(4)});
        doc_bytes += windows.back().doc.size();
      }
      if (read < page)
        break;  // the last page (or the bound was passed inside it)
    }
    return windows;
  });
}

}  // namespace expanse::store::sqlite_internal
