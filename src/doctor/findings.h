// What `expanse-daemon doctor` reports: findings with stable codes (docs/formats/doctor.md),
// rendered for people or as JSON for monitoring, and the exit status they add up to.
#ifndef EXPANSE_DOCTOR_FINDINGS_H_
#define EXPANSE_DOCTOR_FINDINGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace expanse::doctor {

enum class Severity {
  kAction,  // something is broken or about to be: the exit status is 1
  kInfo,    // worth knowing (a collector turned off by a setting); nothing to do
};

struct Finding {
  std::string code;  // stable, e.g. "HOOK_MISSING"
  Severity severity = Severity::kAction;
  std::string host;  // the node it is about; "" = the deployment (controller side)
  std::string seen;  // what was observed, with the file, value or number that shows it
  std::string fix;   // a command to run or a setting to change
};

// A finding the operator must act on.
inline Finding ActionFinding(std::string code, std::string host, std::string seen,
                             std::string fix) {
  return {std::move(code), Severity::kAction, std::move(host), std::move(seen), std::move(fix)};
}

const char* SeverityName(Severity severity);

// 0 when no finding needs action, 1 otherwise. (2, a usage error or a doctor that could not
// run at all, is the command's own.)
int ExitStatusFor(const std::vector<Finding>& findings);

// {"version":1,"target":...,"checked_at_ms":...,"needs_action":bool,"findings":[...]}
nlohmann::json FindingsJson(const std::vector<Finding>& findings, const std::string& target,
                            int64_t now_ms);

// FindingsJson as the text --json prints: every non-ASCII character escaped (\uXXXX), so no
// C1 control or other text from a worker reaches a terminal raw; ends in a newline.
std::string FindingsJsonText(const std::vector<Finding>& findings, const std::string& target,
                             int64_t now_ms);

// One block per finding ("ACTION HOOK_MISSING on ctl: ...\n  fix: ...") and a last line
// saying whether anything needs doing.
std::string FindingsText(const std::vector<Finding>& findings);

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_FINDINGS_H_
