#include "doctor/findings.h"

#include <algorithm>
#include <cstdint>

namespace expanse::doctor {

const char* SeverityName(Severity severity) {
  return severity == Severity::kAction ? "action" : "info";
}

int ExitStatusFor(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::kAction; })
             ? 1
             : 0;
}

nlohmann::json FindingsJson(const std::vector<Finding>& findings, const std::string& target,
                            int64_t now_ms) {
  nlohmann::json list = nlohmann::json::array();
  for (const Finding& f : findings) {
    list.push_back({{"code", f.code},
                    {"severity", SeverityName(f.severity)},
                    {"host", f.host},
                    {"seen", f.seen},
                    {"fix", f.fix}});
  }
  return {{"version", 1},
          {"target", target},
          {"checked_at_ms", now_ms},
          {"needs_action", ExitStatusFor(findings) != 0},
          {"findings", std::move(list)}};
}

std::string FindingsJsonText(const std::vector<Finding>& findings, const std::string& target,
                             int64_t now_ms) {
  // ensure_ascii: a worker's text (already quoted where it holds controls) cannot reach the
  // terminal as raw C1 bytes, whatever a future check copies into a finding.
  return FindingsJson(findings, target, now_ms)
             .dump(2, ' ', true, nlohmann::json::error_handler_t::replace) +
         "\n";
}

std::string FindingsText(const std::vector<Finding>& findings) {
  std::string out;
  size_t actions = 0;
  for (const Finding& f : findings) {
    if (f.severity == Severity::kAction)
      ++actions;
    out += f.severity == Severity::kAction ? "ACTION " : "info   ";
    out += f.code;
    if (!f.host.empty())
      out += " on " + f.host;
    out += ": " + f.seen + "\n";
    if (!f.fix.empty())
      out += "       fix: " + f.fix + "\n";
  }
  if (actions == 0) {
    out += "expanse doctor: nothing to do";
    out += findings.empty() ? "\n" : " (" + std::to_string(findings.size()) + " notes above)\n";
  } else {
    out += "expanse doctor: " + std::to_string(actions) +
           (actions == 1 ? " finding needs" : " findings need") + " action\n";
  }
  return out;
}

}  // namespace expanse::doctor
