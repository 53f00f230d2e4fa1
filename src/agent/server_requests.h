// What the server asks of the controller through heartbeat answers (docs/formats/heartbeat.md):
// today only `scancel` of one job, which an alert rule's action requests. Each request runs at
// most once per daemon (a request made again, for a requeued job's next run, has a new id);
// its outcome is reported in the following heartbeats until one is accepted. The answer is the
// server's, authenticated by TLS, and still checked: an unknown kind or a job id that is not
// SLURM's form is refused (and reported), never run.
#ifndef EXPANSE_AGENT_SERVER_REQUESTS_H_
#define EXPANSE_AGENT_SERVER_REQUESTS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/host.h"

namespace expanse::agent {

class ServerRequests {
 public:
  ServerRequests(Host& host, std::function<void(const std::string&)> log)
      : host_(host), log_(std::move(log)) {}

  // The answer's "requests": runs those not run before. Anything malformed is skipped.
  void Handle(const nlohmann::json& answer);
  // The heartbeat answer's body as the server sent it: parsed within a heartbeat answer's
  // limits (anything deeper or larger is not one of ours and is ignored), then Handle().
  void HandleAnswer(std::string_view body);
  // The "request_results" the next heartbeat carries (the outcomes not yet accepted).
  nlohmann::json PendingResults();
  // The heartbeat that carried the first `count` of PendingResults() was accepted.
  void Acknowledge(size_t count);

 private:
  nlohmann::json Run(int64_t id, const std::string& kind, const std::string& job_id);

  Host& host_;
  std::function<void(const std::string&)> log_;
  std::mutex mu_;
  std::set<int64_t> ran_;  // the ids run by this daemon (the newest 1000)
  std::deque<nlohmann::json> results_;
};

// SLURM's job id forms a request may name: "123", "123_4" (array task), "123+1" (het job).
bool IsSlurmJobId(std::string_view text);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SERVER_REQUESTS_H_
