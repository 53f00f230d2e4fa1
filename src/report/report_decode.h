// Reading the console API's answers (docs/api.md) into report_model.h. Every answer is outside
// input: it may come from an older or newer server, a proxy's error page, or something that is
// not Expanse at all. Each decoder parses with limits (wire::ParseJson) and reads members through
// wire::FieldReader, so a wrong type, an out-of-range number, an oversized array or a missing
// member is a refusal naming the member, never a throw or a silently wrong figure:
//
//   kDataLoss, reason "invalid_answer":
//   "the server's job answer is malformed: job.used.sm_mean must be a number from 0 to 100000"
#ifndef EXPANSE_REPORT_REPORT_DECODE_H_
#define EXPANSE_REPORT_REPORT_DECODE_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "report/report_model.h"

namespace expanse::report {

// Bounds on what one answer may hold; past them the answer is refused rather than read.
inline constexpr size_t kMaxGpus = 65'536;
inline constexpr size_t kMaxPointsPerSeries = 10'000;
inline constexpr size_t kMaxVerdicts = 10'000;
inline constexpr size_t kMaxJobsPerPage = 1'000;

// GET /api/v1/computes/{id}/jobs/{job}
Result<Job> DecodeJob(std::string_view body);
// GET /api/v1/orgs/{org}/jobs?...: the `jobs` list.
Result<std::vector<Job>> DecodeJobPage(std::string_view body);
// GET /api/v1/computes/{id}/jobs/{job}/timeline?metric=...
Result<Timeline> DecodeTimeline(std::string_view body);
// GET /api/v1/computes/{id}/jobs/{job}/verdicts
Result<Verdicts> DecodeVerdicts(std::string_view body);
// GET /api/v1/computes/{id}/jobs/{job}/ledger
Result<Ledger> DecodeLedger(std::string_view body);

}  // namespace expanse::report

#endif  // EXPANSE_REPORT_REPORT_DECODE_H_
