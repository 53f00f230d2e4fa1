#include "agent/server_requests.h"

#include <cctype>

#include "wire/json_parse.h"

namespace expanse::agent {
namespace {

using nlohmann::json;

constexpr size_t kMaxRemembered = 1000;
constexpr size_t kMaxResults = 64;  // what a heartbeat may carry (the server's limit)
constexpr size_t kMaxMessageBytes = 400;

// The first line of a program's output, cut to a whole UTF-8 character within `max` bytes.
std::string FirstLine(const std::string& text, size_t max) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > max) {
    size_t end = max;
    while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80)
      --end;
    line.resize(end);
  }
  return line;
}

}  // namespace

bool IsSlurmJobId(std::string_view text) {
  if (text.empty() || text.size() > 64 || !std::isdigit(static_cast<unsigned char>(text[0])))
    return false;
  bool separator = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c)))
      continue;
    if ((c == '_' || c == '+') && !separator && i + 1 < text.size()) {
      separator = true;
      continue;
    }
    return false;
  }
  return true;
}

void ServerRequests::Handle(const json& answer) {
  const auto requests = answer.find("requests");
  if (requests == answer.end() || !requests->is_array())
    return;
  for (const json& r : *requests) {
    if (!r.is_object())
      continue;
    const auto id = r.find("id");
    if (id == r.end() || !id->is_number_integer() || id->get<int64_t>() <= 0)
      continue;
    const std::string kind = r.value("kind", json("")).is_string() ? r.value("kind", "") : "";
    const json job = r.value("job_id", json(""));
    const std::string job_id = job.is_string() ? job.get<std::string>() : "";
    {
      std::lock_guard lock(mu_);
      if (ran_.contains(id->get<int64_t>()) || results_.size() >= kMaxResults)
        continue;
      ran_.insert(id->get<int64_t>());
      while (ran_.size() > kMaxRemembered)
        ran_.erase(ran_.begin());
    }
    json result = Run(id->get<int64_t>(), kind, job_id);
    std::lock_guard lock(mu_);
    results_.push_back(std::move(result));
  }
}

void ServerRequests::HandleAnswer(std::string_view body) {
  // A real answer is shallow (depth 3) with a few short requests; these limits are far above
  // it and still bound what a wrong or hostile answer costs.
  Result<json> answer = wire::ParseJson(
      body, wire::JsonLimits{.max_depth = 8, .max_values = 10'000, .max_string_bytes = 64 * 1024});
  if (answer.ok() && answer->is_object())
    Handle(*answer);
}

json ServerRequests::Run(int64_t id, const std::string& kind, const std::string& job_id) {
  const auto outcome = [&](bool ok, std::string message) {
    log_("server request " + std::to_string(id) + ": " + message);
    return json{{"id", id}, {"ok", ok}, {"message", std::move(message)}};
  };
  if (kind != "scancel")
    return outcome(false, "unknown request kind \"" + FirstLine(kind, 32) + "\"; not run");
  if (!IsSlurmJobId(job_id))
    return outcome(false, "refused: \"" + FirstLine(job_id, 64) + "\" is not a SLURM job id");
  SubprocessOptions options;
  options.argv = {"scancel", job_id};
  options.timeout = std::chrono::seconds(15);
  options.max_output_bytes = 4096;
  Result<SubprocessResult> ran = host_.Run(options);
  if (!ran.ok())
    return outcome(false, "scancel " + job_id + ": " + FirstLine(ran.status().message(), 300));
  if (ran->timed_out)
    return outcome(false, "scancel " + job_id + ": timed out after 15 s");
  if (ran->exit_code != 0) {
    const std::string said = FirstLine(ran->stderr_text, 300);
    return outcome(false, "scancel " + job_id + ": exit " +
                              std::to_string(ran->exit_code.value_or(-1)) +
                              (said.empty() ? "" : ": " + said));
  }
  return outcome(true, FirstLine("scancel " + job_id + ": cancelled", kMaxMessageBytes));
}

json ServerRequests::PendingResults() {
  std::lock_guard lock(mu_);
  return json(json::array_t(results_.begin(), results_.end()));
}

void ServerRequests::Acknowledge(size_t count) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < count && !results_.empty(); ++i)
    results_.pop_front();
}

}  // namespace expanse::agent
