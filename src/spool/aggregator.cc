#include "spool/aggregator.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "core/quote.h"
#include "spool/fs_util.h"
#include "spool/hostile_read.h"
#include "spool/reasons.h"
#include "spool/spool_names.h"

namespace expanse::spool {
namespace {

constexpr char kDeliveryStateFileName[] = "spool-delivered.state";
constexpr size_t kMaxLoggedProblems = 1000;
constexpr uint32_t kMaxThreads = 64;

int64_t MtimeMs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// The reason a failed open or decode carries, or "unreadable" for an I/O error without one.
std::string ReasonOf(const Status& status) {
  return status.reason().empty() ? std::string(reason::kUnreadable) : status.reason();
}

void MergeInto(DrainStats& into, const DrainStats& from) {
  into.files += from.files;
  into.records += from.records;
  into.bytes += from.bytes;
  into.bad += from.bad;
  for (const auto& [reason, count] : from.bad_by_reason)
    into.bad_by_reason[reason] += count;
  for (const auto& [host, stats] : from.per_host) {
    HostDrainStats& host_stats = into.per_host[host];
    host_stats.files += stats.files;
    host_stats.records += stats.records;
    host_stats.bytes += stats.bytes;
    host_stats.bad += stats.bad;
  }
  into.quarantined += from.quarantined;
  into.bad_deleted += from.bad_deleted;
  into.duplicates += from.duplicates;
  into.stale_temps_removed += from.stale_temps_removed;
  into.delete_failures += from.delete_failures;
}

}  // namespace

struct Aggregator::Round {
  explicit Round(const Sink& s) : sink(s) {}

  const Sink& sink;
  std::atomic<size_t> next_host{0};
  std::atomic<bool> stop{false};
  Status failure;      // the first error that ends the round; guarded by mu_
  Status sink_status;  // the first sink failure; guarded by mu_
};

struct Aggregator::Worker {
  DrainStats stats;
  std::string buffer;  // ReadHostileFile's reused buffer
};

std::string DrainLogLine(const DrainStats& stats) {
  return "sampler aggregator drained files=" + std::to_string(stats.files) +
         " records=" + std::to_string(stats.records) + " bytes=" + std::to_string(stats.bytes) +
         " bad=" + std::to_string(stats.bad);
}

Aggregator::Aggregator(AggregatorOptions options, Clock& clock, fs::UniqueFd root,
                       fs::UniqueFd state_dir)
    : options_(std::move(options)),
      clock_(clock),
      root_(std::move(root)),
      state_dir_(std::move(state_dir)),
      quarantine_(root_.get(), options_.spool_root, options_.quarantine, options_.log) {}

Result<std::unique_ptr<Aggregator>> Aggregator::Open(AggregatorOptions options, Clock& clock) {
  if (options.state_dir.empty()) {
    return InvalidArgumentError("spool aggregator: state_dir is required (a local directory)")
        .WithReason("spool_bad_options");
  }
  EXPANSE_ASSIGN_OR_RETURN(fs::UniqueFd root,
                           OpenConfiguredDirectory(options.spool_root, /*create=*/false, 0));
  EXPANSE_ASSIGN_OR_RETURN(fs::UniqueFd state_dir,
                           OpenConfiguredDirectory(options.state_dir, /*create=*/true, 0700));
  std::unique_ptr<Aggregator> aggregator(
      new Aggregator(std::move(options), clock, std::move(root), std::move(state_dir)));
  const AggregatorOptions& opts = aggregator->options_;
  EXPANSE_ASSIGN_OR_RETURN(
      std::optional<std::string> text,
      ReadLocalFile(aggregator->state_dir_.get(), opts.state_dir, kDeliveryStateFileName,
                    DeliveryState::kMaxSerializedBytes));
  if (text.has_value()) {
    Result<DeliveryState> state = DeliveryState::Parse(*text);
    if (state.ok()) {
      aggregator->delivered_ = std::move(state).value();
    } else if (opts.log) {
      opts.log("spool aggregator: " + state.status().message() + " in " +
               fs::JoinPath(opts.state_dir, kDeliveryStateFileName) +
               "; starting afresh, so files still in the spool may be delivered again");
    }
  }
  return aggregator;
}

void Aggregator::LogOnce(const std::string& key, const std::string& line) {
  std::lock_guard lock(mu_);
  if (options_.log && logged_.size() < kMaxLoggedProblems && logged_.insert(key).second)
    options_.log(line + " (logged once)");
}

Result<std::vector<std::string>> Aggregator::ListHosts() {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<std::string> names,
                           ToSpoolError(fs::ListDirectoryAt(root_.get(), options_.spool_root)));
  std::vector<std::string> hosts;
  for (std::string& name : names) {
    // .quarantine and any other dot entry: never a host (IsValidHostName forbids the dot).
    if (name.starts_with('.'))
      continue;
    if (IsValidHostName(name)) {
      hosts.push_back(std::move(name));
    } else {
      LogOnce("root/" + name, "spool aggregator: ignoring " + QuoteForMessage(name) + " in " +
                                  options_.spool_root + ": not a host name");
    }
  }
  std::sort(hosts.begin(), hosts.end());
  return hosts;
}

fs::UniqueFd Aggregator::OpenHost(const std::string& host, bool dispose_refused,
                                  DrainStats& stats) {
  Result<fs::UniqueFd> dir =
      OpenHostileDirectory(root_.get(), options_.spool_root, host, options_.expected_uid);
  if (dir.ok())
    return std::move(dir).value();
  if (dir.status().code() == StatusCode::kNotFound)
    return fs::UniqueFd();
  const std::string reason = ReasonOf(dir.status());
  ++stats.bad;
  ++stats.bad_by_reason[reason];
  ++stats.per_host[host].bad;
  // A directory owned by someone else is left where it is: moving it would hide a setup
  // mistake the operator has to fix. Links and non-directories are moved out of the way.
  std::string disposal = "left in place";
  if (dispose_refused && dir.status().code() == StatusCode::kDataLoss &&
      reason != reason::kWrongOwner) {
    Quarantine::Outcome outcome;
    {
      std::lock_guard lock(mu_);
      outcome =
          quarantine_.Dispose(root_.get(), host, QuarantineEntryName(host, "hostdir", reason));
    }
    if (outcome == Quarantine::Outcome::kQuarantined) {
      ++stats.quarantined;
      disposal = "quarantined";
    } else if (outcome == Quarantine::Outcome::kDeleted) {
      ++stats.bad_deleted;
      disposal = "deleted";
    }
  }
  LogOnce("hostdir/" + host + "/" + reason,
          "spool aggregator: " + dir.status().message() + "; " + disposal);
  return fs::UniqueFd();
}

void Aggregator::Refuse(int dir_fd, const std::string& host, const std::string& name,
                        const std::string& reason, const Status& why, DrainStats& stats) {
  ++stats.bad;
  ++stats.bad_by_reason[reason];
  ++stats.per_host[host].bad;
  Quarantine::Outcome outcome;
  {
    std::lock_guard lock(mu_);
    outcome = quarantine_.Dispose(dir_fd, name, QuarantineEntryName(host, name, reason));
  }
  std::string disposal = "left in place";
  if (outcome == Quarantine::Outcome::kQuarantined) {
    ++stats.quarantined;
    disposal = "quarantined";
  } else if (outcome == Quarantine::Outcome::kDeleted) {
    ++stats.bad_deleted;
    disposal = "deleted";
  }
  LogOnce(host + "/" + reason, "spool aggregator: refused " +
                                   QuoteForMessage(fs::JoinPath(host, name), 200) + " (" + reason +
                                   "): " + why.message() + "; " + disposal);
}

void Aggregator::RemoveIfStaleTemp(int dir_fd, const std::string& name, DrainStats& stats) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return;
  if (clock_.NowMs() - MtimeMs(st) <= options_.stale_temp_age_ms)
    return;  // a writer may still be writing it
  // unlinkat removes a link or a file without following it; a non-empty directory stays.
  if (::unlinkat(dir_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0)
    ++stats.stale_temps_removed;
}

std::vector<Aggregator::Candidate> Aggregator::OrderCandidates(const std::string& host, int dir_fd,
                                                               std::vector<Candidate> candidates) {
  // Boots of a host are taken oldest first: boots this aggregator already delivered from in
  // the order it last did, then new ones by the oldest file's mtime. Usually there is one.
  std::map<std::string, std::tuple<int, int64_t>> boot_order;
  {
    std::lock_guard lock(mu_);
    for (const Candidate& c : candidates) {
      if (boot_order.contains(c.boot_id))
        continue;
      const std::optional<int64_t> last = delivered_.LastDeliveredMs(host, c.boot_id);
      boot_order[c.boot_id] = last ? std::make_tuple(0, *last) : std::make_tuple(1, INT64_MAX);
    }
  }
  if (boot_order.size() > 1) {
    for (const Candidate& c : candidates) {
      auto& [known, when] = boot_order[c.boot_id];
      struct stat st {};
      if (known == 1 && ::fstatat(dir_fd, c.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        when = std::min(when, MtimeMs(st));
    }
  }
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    return std::tie(boot_order[a.boot_id], a.boot_id, a.sequence) <
           std::tie(boot_order[b.boot_id], b.boot_id, b.sequence);
  });
  return candidates;
}

void Aggregator::DrainHost(const std::string& host, Round& round, Worker& worker) {
  DrainStats& stats = worker.stats;
  const fs::UniqueFd dir = OpenHost(host, /*dispose_refused=*/true, stats);
  if (!dir.valid())
    return;
  const std::string host_path = fs::JoinPath(options_.spool_root, host);
  Result<std::vector<std::string>> names = ToSpoolError(fs::ListDirectoryAt(dir.get(), host_path));
  if (!names.ok()) {
    ++stats.bad_by_reason[reason::kUnreadable];
    LogOnce("list/" + host, "spool aggregator: " + names.status().message());
    return;
  }
  std::vector<Candidate> candidates;
  for (std::string& name : *names) {
    switch (ClassifyHostEntry(name)) {
      case EntryKind::kTempFile:
        RemoveIfStaleTemp(dir.get(), name, stats);
        break;
      case EntryKind::kHealthFile:
        break;  // read by ReadWorkerHealth
      case EntryKind::kUnexpected:
        Refuse(dir.get(), host, name, reason::kUnexpectedName,
               InvalidArgumentError("not a spool, health or temporary file name"), stats);
        break;
      case EntryKind::kSpoolFile: {
        std::optional<SpoolFileNameParts> parts = ParseSpoolFileName(name);
        candidates.push_back({std::move(name), std::move(parts->boot_id), parts->sequence});
        break;
      }
    }
  }
  const HostileReadLimits limits{options_.expected_uid, options_.max_file_bytes};
  for (const Candidate& c : OrderCandidates(host, dir.get(), std::move(candidates))) {
    if (round.stop)
      return;
    Result<std::string_view> bytes =
        ReadHostileFile(dir.get(), host_path, c.name, limits, worker.buffer);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kNotFound)
        continue;
      if (bytes.status().code() == StatusCode::kDataLoss) {
        Refuse(dir.get(), host, c.name, ReasonOf(bytes.status()), bytes.status(), stats);
        continue;
      }
      // An I/O error: keep the order by leaving the rest of this host for the next round.
      ++stats.bad_by_reason[reason::kUnreadable];
      LogOnce("read/" + host, "spool aggregator: " + bytes.status().message());
      return;
    }
    Result<SpoolFile> file = DecodeSpoolFile(*bytes);
    if (!file.ok()) {
      Refuse(dir.get(), host, c.name, ReasonOf(file.status()), file.status(), stats);
      continue;
    }
    if (file->host != host) {
      Refuse(dir.get(), host, c.name, reason::kHostMismatch,
             DataLossError("file says host " + QuoteForMessage(file->host)), stats);
      continue;
    }
    if (file->boot_id != c.boot_id || file->sequence != c.sequence) {
      Refuse(dir.get(), host, c.name, reason::kNameMismatch,
             DataLossError("header says sequence " + std::to_string(file->sequence) + ", boot id " +
                           QuoteForMessage(file->boot_id)),
             stats);
      continue;
    }
    bool duplicate = false;
    Status refused;  // the sink's refusal of this file's content (kDataLoss)
    {
      std::lock_guard lock(mu_);
      if (round.stop)
        return;
      duplicate = delivered_.WasDelivered(host, file->boot_id, file->sequence);
      if (!duplicate) {
        Status answer = CallSink(round.sink, *file);
        if (answer.code() == StatusCode::kDataLoss) {
          refused = std::move(answer);  // quarantined below, outside the lock
        } else if (!answer.ok()) {
          // Logged when the sink starts failing, not every round while it keeps failing.
          if (options_.log && !sink_failing_) {
            options_.log("spool aggregator: sink refused " + fs::JoinPath(host, c.name) + ": " +
                         answer.ToString() + "; files stay in the spool until it accepts them");
          }
          sink_failing_ = true;
          round.sink_status = std::move(answer);
          round.stop = true;
          return;
        }
        if (refused.ok()) {
          if (sink_failing_ && options_.log)
            options_.log("spool aggregator: sink accepts files again");
          sink_failing_ = false;
          delivered_.MarkDelivered(host, file->boot_id, file->sequence, clock_.NowMs());
          if (++uncommitted_ >= options_.state_sync_every_files) {
            if (Status status = CommitDeliveredLocked(); !status.ok()) {
              round.failure = std::move(status);
              round.stop = true;  // this file is delivered: delete it below all the same
            }
          }
        }
      }
    }
    if (!refused.ok()) {
      Refuse(dir.get(), host, c.name, ReasonOf(refused), refused, stats);
      continue;
    }
    if (duplicate) {
      ++stats.duplicates;
    } else {
      HostDrainStats& per_host = stats.per_host[host];
      ++stats.files;
      ++per_host.files;
      stats.records += file->records.size();
      per_host.records += file->records.size();
      stats.bytes += bytes->size();
      per_host.bytes += bytes->size();
    }
    // Right after the sink's OK, outside the lock: a delete is a round trip to the file
    // server on NFS, and the other threads keep reading meanwhile. Should it fail, the
    // delivery state (written every state_sync_every_files and at the end of the round)
    // marks the file as a duplicate.
    if (::unlinkat(dir.get(), c.name.c_str(), 0) != 0 && errno != ENOENT) {
      const int err = errno;
      ++stats.delete_failures;
      LogOnce("delete/" + host, "spool aggregator: cannot delete delivered " +
                                    fs::JoinPath(host, c.name) + ": " + std::strerror(err) +
                                    "; it will be skipped as a duplicate");
    }
  }
}

Status Aggregator::CallSink(const Sink& sink, const SpoolFile& file) {
  // A sink that throws on what a worker wrote must cost that file, not the process (an
  // exception leaving a drain thread ends it with std::terminate).
  try {
    Status status = sink(file);
    if (status.code() == StatusCode::kDataLoss && status.reason().empty())
      return std::move(status).WithReason(reason::kRefusedBySink);
    return status;
  } catch (const std::exception& e) {
    return DataLossError(std::string("the sink failed on this file: ") + e.what())
        .WithReason(reason::kSinkException);
  } catch (...) {
    return DataLossError("the sink failed on this file").WithReason(reason::kSinkException);
  }
}

void Aggregator::DrainWorker(const std::vector<std::string>& hosts, Round& round, Worker& worker) {
  while (!round.stop) {
    const size_t index = round.next_host.fetch_add(1);
    if (index >= hosts.size())
      return;
    DrainHost(hosts[index], round, worker);
  }
}

Status Aggregator::CommitDeliveredLocked() {
  if (uncommitted_ == 0)
    return OkStatus();
  EXPANSE_RETURN_IF_ERROR(ReplaceFile(state_dir_.get(), options_.state_dir, kDeliveryStateFileName,
                                      delivered_.Serialize(), 0600));
  uncommitted_ = 0;
  return OkStatus();
}

Result<DrainStats> Aggregator::DrainOnce(const Sink& sink) {
  {
    std::lock_guard lock(mu_);
    quarantine_.BeginRound();
  }
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string> hosts, ListHosts());
  Round round(sink);
  const size_t thread_count = std::clamp<size_t>(
      options_.threads, 1, std::max<size_t>(1, std::min<size_t>(kMaxThreads, hosts.size())));
  std::vector<Worker> workers(thread_count);
  {
    std::vector<std::jthread> threads;
    for (size_t i = 1; i < thread_count; ++i) {
      try {
        threads.emplace_back([&, i] { DrainWorker(hosts, round, workers[i]); });
      } catch (const std::system_error&) {
        break;  // out of threads: the ones running (at least this one) share the hosts
      }
    }
    DrainWorker(hosts, round, workers[0]);
  }  // joins
  DrainStats stats;
  for (const Worker& worker : workers)
    MergeInto(stats, worker.stats);
  std::lock_guard lock(mu_);
  EXPANSE_RETURN_IF_ERROR(round.failure);
  EXPANSE_RETURN_IF_ERROR(CommitDeliveredLocked());
  stats.sink_status = round.sink_status;
  if (options_.log)
    options_.log(DrainLogLine(stats));
  return stats;
}

}  // namespace expanse::spool
