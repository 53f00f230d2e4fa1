#include "server/alert_messages.h"

#include <cstdio>
#include <ctime>
#include <string>

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxEvidenceBytes = 2048;

std::string UtcTime(int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

std::string JobLink(std::string_view org_console, const store::JobRecord& job) {
  if (org_console.empty())
    return "";
  return std::string(org_console) + "/computes/" + job.compute_id + "/jobs/" + job.job_id;
}

std::string JoinHosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (size_t i = 0; i < hosts.size() && i < 4; ++i)
    out += (i ? "," : "") + hosts[i];
  if (hosts.size() > 4)
    out += " and " + std::to_string(hosts.size() - 4) + " more";
  return out;
}

std::string Hours(int64_t gpu_ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(gpu_ms) / 3'600'000.0);
  return text;
}

json JobFacts(const store::AlertRule& rule, const store::JobRecord& job) {
  return {{"rule_id", rule.id},     {"rule", rule.name},         {"compute_id", job.compute_id},
          {"job_id", job.job_id},   {"job_name", job.name},      {"user", job.user},
          {"account", job.account}, {"partition", job.partition}};
}

std::string JobLine(const store::JobRecord& job) {
  std::string line = "job " + job.job_id;
  if (!job.name.empty())
    line += " \"" + job.name.substr(0, 80) + "\"";
  if (!job.user.empty())
    line += " of " + job.user;
  if (!job.partition.empty())
    line += " in " + job.partition;
  return line;
}

}  // namespace

std::string HumanDuration(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, ms / 1000);
  if (s < 60)
    return std::to_string(s) + " s";
  const int64_t min = s / 60;
  if (min < 60)
    return std::to_string(min) + " min";
  const int64_t h = min / 60;
  return std::to_string(h) + " h" + (min % 60 ? " " + std::to_string(min % 60) + " min" : "");
}

std::string ExpandAlertTarget(std::string_view target, std::string_view user) {
  std::string out;
  size_t i = 0;
  while (i < target.size()) {
    if (target.substr(i).starts_with("{user}")) {
      out += user;
      i += 6;
    } else {
      out += target[i++];
    }
  }
  return out;
}

AlertText VerdictAlertText(const store::AlertRule& rule, const store::JobRecord& job,
                           const Verdict& verdict, std::string_view org_console) {
  AlertText alert;
  const int64_t length = verdict.to_ms - verdict.from_ms;
  alert.subject = "[Expanse] job " + job.job_id + (job.user.empty() ? "" : " (" + job.user + ")") +
                  ": " + verdict.code + " for " + HumanDuration(length) +
                  (verdict.hosts.empty() ? "" : " on " + JoinHosts(verdict.hosts));
  std::string evidence = verdict.evidence.dump(-1, ' ', false, json::error_handler_t::replace);
  if (evidence.size() > kMaxEvidenceBytes)
    evidence = evidence.substr(0, kMaxEvidenceBytes) + "...";
  std::string& t = alert.text;
  t += JobLine(job) + " on compute " + job.compute_id + ": " + verdict.code + " since " +
       UtcTime(verdict.from_ms) + " (" + HumanDuration(length) + ", confidence " +
       std::to_string(static_cast<int>(verdict.confidence * 100 + 0.5)) + " %).\n";
  if (!verdict.suggestion.empty())
    t += "Suggestion: " + verdict.suggestion + "\n";
  t += "Evidence: " + evidence + "\n";
  if (const std::string link = JobLink(org_console, job); !link.empty())
    t += "Job page: " + link + "\n";
  t += "Rule: \"" + rule.name + "\" (" + verdict.code + " for at least " +
       HumanDuration(rule.min_duration_s * 1000) + ")\n";
  alert.facts = JobFacts(rule, job);
  alert.facts["verdict"] = {{"code", verdict.code},
                            {"from_ms", verdict.from_ms},
                            {"to_ms", verdict.to_ms},
                            {"confidence", verdict.confidence},
                            {"hosts", verdict.hosts},
                            {"gpus", verdict.gpus},
                            {"suggestion", verdict.suggestion}};
  return alert;
}

AlertText ActionText(const store::AlertRule& rule, const store::JobRecord& job,
                     const Verdict& verdict, bool dry_run, std::string_view org_console) {
  AlertText alert;
  const std::string length = HumanDuration(verdict.to_ms - verdict.from_ms);
  alert.subject = "[Expanse] job " + job.job_id + (job.user.empty() ? "" : " (" + job.user + ")") +
                  (dry_run ? ": would have been cancelled (dry run)" : ": cancellation requested");
  alert.text = JobLine(job) + " on compute " + job.compute_id + " has been " + verdict.code +
               " for " + length + ", past the rule's grace of " +
               HumanDuration(rule.action_grace_s * 1000) + " after its warning.\n";
  alert.text += dry_run ? "The rule is a dry run: the job was left running. Turn dry_run off in "
                          "the rule to cancel such jobs.\n"
                        : "Its compute's controller was asked to scancel it.\n";
  if (const std::string link = JobLink(org_console, job); !link.empty())
    alert.text += "Job page: " + link + "\n";
  alert.facts = JobFacts(rule, job);
  alert.facts["action"] = {{"kind", rule.action}, {"dry_run", dry_run}, {"verdict", verdict.code}};
  return alert;
}

AlertText DigestText(const store::AlertRule& rule, const RollupGroup& user, int64_t from_ms,
                     int64_t to_ms, std::string_view org_console) {
  const LedgerTotals& t = user.totals;
  AlertText alert;
  const int idle_percent = t.allocated_ms > 0
                               ? static_cast<int>(100.0 * static_cast<double>(t.idle_ms()) /
                                                      static_cast<double>(t.allocated_ms) +
                                                  0.5)
                               : 0;
  alert.subject = "[Expanse] GPU digest for " + user.key + ": " + Hours(t.idle_ms()) + " of " +
                  Hours(t.allocated_ms) + " GPU-hours idle";
  std::string& s = alert.text;
  s += "GPU use of " + user.key + " from " + UtcTime(from_ms) + " to " + UtcTime(to_ms) + ":\n";
  s += "  jobs with GPUs:        " + std::to_string(user.jobs) + "\n";
  s += "  GPU-hours requested:   " + Hours(t.requested_ms) + "\n";
  s += "  GPU-hours allocated:   " + Hours(t.allocated_ms) + "\n";
  s += "  GPU-hours active:      " + Hours(t.active_ms) + "\n";
  s += "  GPU-hours idle:        " + Hours(t.idle_ms()) + " (" + std::to_string(idle_percent) +
       " %)\n";
  s += "  GPUs never used:       " + std::to_string(t.never_used_gpus) + " of " +
       std::to_string(t.gpus) + "\n";
  if (!org_console.empty())
    s += "Your jobs: " + std::string(org_console) + "/jobs?user=" + user.key + "\n";
  s += "Rule: \"" + rule.name + "\" (every " + HumanDuration(rule.period_s * 1000) + ")\n";
  alert.facts = {{"rule_id", rule.id},
                 {"rule", rule.name},
                 {"user", user.key},
                 {"from_ms", from_ms},
                 {"to_ms", to_ms},
                 {"jobs", user.jobs},
                 {"allocated_gpu_s", t.allocated_ms / 1000},
                 {"active_gpu_s", t.active_ms / 1000},
                 {"idle_gpu_s", t.idle_ms() / 1000},
                 {"never_used_gpus", t.never_used_gpus}};
  return alert;
}

std::string ChatSafeText(std::string_view text) {
  constexpr std::string_view kZeroWidthSpace = "\u200b";
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t i = 0; i < text.size(); ++i) {
    switch (text[i]) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '@':
        out += '@';
        out += kZeroWidthSpace;
        break;
      case ']':
        out += ']';
        if (i + 1 < text.size() && text[i + 1] == '(')
          out += kZeroWidthSpace;
        break;
      default:
        out += text[i];
    }
  }
  return out;
}

std::string WebhookBody(const AlertText& alert) {
  json body = {{"text", ChatSafeText(alert.subject + "\n" + alert.text)},
               {"username", "Expanse"},
               {"expanse", alert.facts}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace expanse::server
