// Rendering a job report and a job list, pure: data in, text out, nothing read from the
// machine (the time zone included: times are printed in UTC), so the output of a given answer
// is always the same bytes and golden tests can hold it. The terminal layouts and the JSON
// documents are described in docs/report.md and docs/formats/job-report.md.
#ifndef EXPANSE_REPORT_REPORT_RENDER_H_
#define EXPANSE_REPORT_REPORT_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_model.h"

namespace expanse::report {

// Columns of a GPU's sparkline; the report asks the server for this many timeline buckets.
inline constexpr int kSparklineColumns = 60;

// One character per column over [from_ms, to_ms): the mean of the buckets starting in the
// column, ▁ (0 %) to █ (100 %) in eighths; '·' where no bucket falls (unsampled).
std::string Sparkline(const std::vector<TimelinePoint>& points, int64_t from_ms, int64_t to_ms,
                      int columns = kSparklineColumns);

// What the report notes about a resource besides the verdicts: requests far above use.
struct Note {
  std::string resource;  // "cpu", "memory", "time"
  std::string text;
};
std::vector<Note> ResourceNotes(const Job& job);

// The terminal report of `expanse job report`.
std::string RenderJobReport(const JobReport& report);
// The `--json` document (docs/formats/job-report.md).
nlohmann::json JobReportDocument(const JobReport& report);

// The table of `expanse jobs`.
std::string RenderJobList(const JobList& list);
// Its `--json` document (docs/formats/job-report.md).
nlohmann::json JobListDocument(const JobList& list);

}  // namespace expanse::report

#endif  // EXPANSE_REPORT_REPORT_RENDER_H_
