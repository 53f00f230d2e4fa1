// The sampler's side of live bursts (docs/formats/stack-burst.md): the stack burst requests
// the controller left for this node in <prefix>/spool/control/<host>/, read as hostile input.
// Whoever can write to the shared mount controls every name, type, owner and byte there, so:
//   - the host directory must be a real directory owned by the daemon account, each entry a
//     plain single-linked file of that owner, at most kMaxStackBurstRequestBytes, opened without
//     following links or blocking (spool/hostile_read.h), named and shaped as the format says;
//   - a request must be fresh (its trigger no older than max_age_ms, no further ahead of this
//     clock than max_future_ms), not one seen before (nonce), and within the rate limits: one
//     burst per job per per_job_gap_ms, max_bursts_per_window per node per window_ms;
//   - every entry examined is removed, taken or refused, so none is read twice and a hostile
//     file cannot make the sampler spin; at most max_files_per_poll entries per poll.
// Refusals are counted by reason (Stats) and each reason is logged once.
//
// Not thread-safe: the sampler's loop owns one.
#ifndef EXPANSE_AGENT_BURST_INBOX_H_
#define EXPANSE_AGENT_BURST_INBOX_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/stack_burst_request.h"
#include "core/clock.h"

namespace expanse::agent {

struct BurstInboxOptions {
  std::string control_root;  // <prefix>/spool/control (ControlTreeRoot)
  std::string hostname;      // this node: its directory below the root
  uid_t expected_uid = 0;    // the daemon account, which the controller writes as
  size_t max_files_per_poll = 16;
  int64_t max_age_ms = 120'000;
  int64_t max_future_ms = 60'000;
  int64_t per_job_gap_ms = 60'000;
  size_t max_bursts_per_window = 6;
  int64_t window_ms = 600'000;
  std::function<void(const std::string&)> log;
};

class BurstInbox {
 public:
  BurstInbox(BurstInboxOptions options, Clock& clock);

  // The requests that passed every check, oldest first; each entry examined is removed.
  // A missing directory is normal (no request yet) and yields nothing.
  std::vector<StackBurstRequest> Poll();
  // A request Poll handed out and the caller could not carry out (e.g. "job_not_here"): it
  // counts as refused, not accepted, and uses none of the node's or the job's burst budget.
  void NoteNotCarriedOut(const StackBurstRequest& request, const std::string& reason);

  uint64_t accepted() const { return accepted_; }
  uint64_t refused() const { return refused_; }
  const std::map<std::string, uint64_t>& refused_by_reason() const { return by_reason_; }
  // {"accepted", "refused", "refused_by_reason", "last_problem"} for the health report.
  nlohmann::json Stats() const;

 private:
  void Refuse(const std::string& reason, const std::string& message);
  bool RateLimited(const StackBurstRequest& request, int64_t now_ms, std::string& why);

  BurstInboxOptions options_;
  Clock& clock_;
  std::string buffer_;
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  std::map<std::string, uint64_t> by_reason_;
  std::set<std::string> logged_reasons_;
  std::string last_problem_;
  // Entries that could not be removed (a non-empty directory planted there): skipped, bounded.
  std::set<std::string> unremovable_;
  std::deque<std::string> recent_nonces_;       // bounded
  std::map<std::string, int64_t> last_by_job_;  // job -> this clock's time of its last burst
  std::deque<int64_t> accepted_times_;          // within window_ms
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_BURST_INBOX_H_
