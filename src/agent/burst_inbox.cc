#include "agent/burst_inbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/file_util.h"
#include "core/quote.h"
#include "spool/hostile_read.h"

namespace expanse::agent {
namespace {

constexpr size_t kMaxRecentNonces = 256;
constexpr size_t kMaxUnremovable = 256;
constexpr size_t kMaxJobsRemembered = 1024;

// Removes an examined entry without following it: a file or link, else an empty directory.
bool RemoveEntry(int dir_fd, const std::string& name) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT)
    return true;
  if (errno == EISDIR || errno == EPERM)
    return ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT;
  return false;
}

}  // namespace

BurstInbox::BurstInbox(BurstInboxOptions options, Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

void BurstInbox::Refuse(const std::string& reason, const std::string& message) {
  ++refused_;
  if (by_reason_.size() < 32 || by_reason_.contains(reason))
    ++by_reason_[reason];
  last_problem_ = message.substr(0, 300);
  if (logged_reasons_.insert(reason).second && logged_reasons_.size() <= 32 && options_.log)
    options_.log("stack burst request refused (" + reason + "): " + last_problem_);
}

void BurstInbox::NoteNotCarriedOut(const StackBurstRequest& request, const std::string& reason) {
  // Poll accepted it last among what it handed out for this job: its budget entries are the
  // newest ones (an accepted request's job had no burst within per_job_gap_ms before it).
  if (accepted_ > 0)
    --accepted_;
  if (!accepted_times_.empty())
    accepted_times_.pop_back();
  last_by_job_.erase(request.slurm_job_id > 0 ? std::to_string(request.slurm_job_id)
                                              : request.job_id);
  Refuse(reason.empty() ? "not_carried_out" : reason,
         "the sampler could not start the burst for job " + request.job_id);
}

bool BurstInbox::RateLimited(const StackBurstRequest& r, int64_t now_ms, std::string& why) {
  while (!accepted_times_.empty() && accepted_times_.front() <= now_ms - options_.window_ms)
    accepted_times_.pop_front();
  if (accepted_times_.size() >= options_.max_bursts_per_window) {
    why = "already " + std::to_string(accepted_times_.size()) + " bursts on this node in " +
          std::to_string(options_.window_ms / 1000) + " s";
    return true;
  }
  const std::string job = r.slurm_job_id > 0 ? std::to_string(r.slurm_job_id) : r.job_id;
  auto last = last_by_job_.find(job);
  if (last != last_by_job_.end() && now_ms - last->second < options_.per_job_gap_ms) {
    why =
        "job " + job + " had a burst " + std::to_string((now_ms - last->second) / 1000) + " s ago";
    return true;
  }
  return false;
}

std::vector<StackBurstRequest> BurstInbox::Poll() {
  std::vector<StackBurstRequest> out;
  const std::string root = options_.control_root;
  fs::UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root_fd.valid())
    return out;  // no control tree yet: no request was ever made
  Result<fs::UniqueFd> dir =
      spool::OpenHostileDirectory(root_fd.get(), root, options_.hostname, options_.expected_uid);
  if (!dir.ok()) {
    if (dir.status().code() != StatusCode::kNotFound)
      Refuse(dir.status().reason().empty() ? "unreadable" : dir.status().reason(),
             dir.status().message());
    return out;
  }
  const std::string dir_path = fs::JoinPath(root, options_.hostname);
  Result<std::vector<std::string>> names = fs::ListDirectoryAt(dir->get(), dir_path);
  if (!names.ok()) {
    Refuse("unreadable", names.status().message());
    return out;
  }
  std::sort(names->begin(), names->end());  // burst-<trigger_ms>-...: oldest first, mostly
  size_t examined = 0;
  for (const std::string& name : *names) {
    // Dot entries are a writer's temporaries (docs/formats/stack-burst.md).
    if (name.empty() || name[0] == '.' || unremovable_.contains(name))
      continue;
    if (examined++ >= options_.max_files_per_poll)
      break;  // the rest at the next poll
    const int64_t now_ms = clock_.NowMs();
    Result<std::string_view> bytes =
        spool::ReadHostileFile(dir->get(), dir_path, name,
                               spool::HostileReadLimits{.expected_uid = options_.expected_uid,
                                                        .max_bytes = kMaxStackBurstRequestBytes},
                               buffer_);
    if (!bytes.ok() && bytes.status().code() == StatusCode::kNotFound)
      continue;  // removed meanwhile
    if (!bytes.ok() && bytes.status().reason() == "unreadable") {
      Refuse("unreadable", bytes.status().message());
      continue;  // an I/O error: the next poll tries again
    }
    std::string reason;
    std::string message;
    Result<StackBurstRequest> request = bytes.ok() ? DecodeStackBurstRequest(name, *bytes)
                                                   : Result<StackBurstRequest>(bytes.status());
    if (!request.ok()) {
      reason = request.status().reason().empty() ? "bad_request" : request.status().reason();
      message = QuoteForMessage(name, 100) + ": " + request.status().message();
    } else if (request->trigger_ms < now_ms - options_.max_age_ms) {
      reason = "stale";
      message = QuoteForMessage(name, 100) + ": asked " +
                std::to_string((now_ms - request->trigger_ms) / 1000) + " s ago";
    } else if (request->trigger_ms > now_ms + options_.max_future_ms) {
      reason = "future";
      message = QuoteForMessage(name, 100) + ": dated " +
                std::to_string((request->trigger_ms - now_ms) / 1000) +
                " s ahead of this node's clock";
    } else if (std::find(recent_nonces_.begin(), recent_nonces_.end(), request->nonce) !=
               recent_nonces_.end()) {
      reason = "duplicate";
      message = QuoteForMessage(name, 100) + ": seen before";
    } else if (std::string why; RateLimited(*request, now_ms, why)) {
      reason = "rate_limited";
      message = QuoteForMessage(name, 100) + ": " + why;
    }
    if (!RemoveEntry(dir->get(), name)) {
      if (unremovable_.size() < kMaxUnremovable)
        unremovable_.insert(name);
      Refuse("not_removable", QuoteForMessage(name, 100) + " cannot be removed");
      continue;  // never carried out: it would be seen again
    }
    if (!reason.empty()) {
      Refuse(reason, message);
      continue;
    }
    recent_nonces_.push_back(request->nonce);
    if (recent_nonces_.size() > kMaxRecentNonces)
      recent_nonces_.pop_front();
    const std::string job =
        request->slurm_job_id > 0 ? std::to_string(request->slurm_job_id) : request->job_id;
    if (last_by_job_.size() >= kMaxJobsRemembered && !last_by_job_.contains(job)) {
      std::erase_if(last_by_job_, [&](const auto& entry) {
        return now_ms - entry.second >= options_.per_job_gap_ms;
      });
      if (last_by_job_.size() >= kMaxJobsRemembered)
        last_by_job_.clear();  // bounded; the node-wide limit still holds
    }
    last_by_job_[job] = now_ms;
    accepted_times_.push_back(now_ms);
    ++accepted_;
    out.push_back(std::move(*request));
  }
  return out;
}

nlohmann::json BurstInbox::Stats() const {
  nlohmann::json out = {
      {"accepted", accepted_}, {"refused", refused_}, {"refused_by_reason", by_reason_}};
  if (!last_problem_.empty())
    out["last_problem"] = last_problem_;
  return out;
}

}  // namespace expanse::agent
