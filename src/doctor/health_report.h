// A worker's spool health report (docs/formats/spool.md, "Health file"; written by the
// sampler, agent/sampler_role.cc) read into the doctor's facts. The file is hostile input: the
// container is checked by spool::DecodeSpoolFile, the JSON under wire::ParseJson's limits, and
// a member of the wrong type is refused or skipped, never thrown on.
#ifndef EXPANSE_DOCTOR_HEALTH_REPORT_H_
#define EXPANSE_DOCTOR_HEALTH_REPORT_H_

#include <string>
#include <string_view>

#include "core/result.h"
#include "doctor/facts.h"

namespace expanse::doctor {

// The whole health.rec file of `host`'s spool directory. Errors (kDataLoss / kInvalidArgument)
// say what is wrong in words fit for a finding: a damaged container, a report for another
// host, a payload that is not a JSON object.
Result<NodeFacts> ReadHealthFile(std::string_view bytes, const std::string& host);

// The report's JSON payload alone.
Result<NodeFacts> ParseHealthPayload(std::string_view payload, const std::string& host,
                                     int64_t written_ms);

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_HEALTH_REPORT_H_
