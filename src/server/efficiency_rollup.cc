#include "server/efficiency_rollup.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace expanse::server {
namespace {

// JobFilter::limit's upper bound (job_store.h).
constexpr int kJobPage = 1'000;

const std::string& GroupKey(const store::JobRecord& job, LedgerGroupBy group_by) {
  switch (group_by) {
    case LedgerGroupBy::kUser:
      return job.user;
    case LedgerGroupBy::kAccount:
      return job.account;
    case LedgerGroupBy::kPartition:
      return job.partition;
  }
  return job.user;
}

// Adds the ledgers of one page of jobs to `groups`.
Status AddPage(store::JobStore& store, tsdb::TelemetryStore& tsdb, const RollupOptions& options,
               const std::vector<store::JobRecord>& page,
               std::map<std::string, RollupGroup, std::less<>>& groups, Rollup& rollup) {
  std::map<std::string, std::vector<std::string>, std::less<>> ids_by_compute;
  for (const store::JobRecord& job : page)
    ids_by_compute[job.compute_id].push_back(job.job_id);
  std::map<std::string, store::GpuAllocationsByJob, std::less<>> allocations;
  for (const auto& [compute_id, ids] : ids_by_compute) {
    EXPANSE_ASSIGN_OR_RETURN(allocations[compute_id], store.GpuAllocationsFor(compute_id, ids));
  }
  static const std::vector<store::GpuAllocation> kNone;
  std::vector<LedgerJobInput> inputs;
  inputs.reserve(page.size());
  for (const store::JobRecord& job : page) {
    const store::GpuAllocationsByJob& of_compute = allocations[job.compute_id];
    const auto it = of_compute.find(job.job_id);
    inputs.push_back({job, it == of_compute.end() ? kNone : it->second});
  }
  EXPANSE_ASSIGN_OR_RETURN(auto ledgers,
                           ComputeJobLedgers(tsdb, inputs, options.window, options.now_ms));
  for (size_t i = 0; i < page.size(); ++i) {
    const LedgerTotals& t = ledgers[i].totals;
    if (t.gpus == 0 && t.requested_ms == 0)
      continue;  // no GPU time inside the window: a CPU job, or GPUs held only outside it
    const std::string& key = GroupKey(page[i], options.group_by);
    auto it = groups.find(key);
    if (it == groups.end())
      it = groups.emplace(key, RollupGroup{.key = key, .jobs = 0, .totals = {}}).first;
    ++it->second.jobs;
    it->second.totals.Add(t);
    ++rollup.jobs;
    rollup.totals.Add(t);
  }
  return OkStatus();
}

}  // namespace

std::optional<LedgerGroupBy> ParseLedgerGroupBy(std::string_view text) {
  for (LedgerGroupBy g :
       {LedgerGroupBy::kUser, LedgerGroupBy::kAccount, LedgerGroupBy::kPartition}) {
    if (text == LedgerGroupByName(g))
      return g;
  }
  return std::nullopt;
}

std::string_view LedgerGroupByName(LedgerGroupBy group_by) {
  switch (group_by) {
    case LedgerGroupBy::kUser:
      return "user";
    case LedgerGroupBy::kAccount:
      return "account";
    case LedgerGroupBy::kPartition:
      return "partition";
  }
  return "user";
}

Result<Rollup> RollUpLedgers(store::JobStore& jobs, tsdb::TelemetryStore& tsdb,
                             const RollupOptions& options) {
  if (options.max_jobs < 1 || options.max_jobs > kMaxRollupJobs) {
    return InvalidArgumentError("a rollup reads 1 to " + std::to_string(kMaxRollupJobs) +
                                " jobs, not " + std::to_string(options.max_jobs));
  }
  if (options.window.from_ms >= options.window.to_ms) {
    return InvalidArgumentError("the rollup's window is empty: from " +
                                std::to_string(options.window.from_ms) + " ms is not before to " +
                                std::to_string(options.window.to_ms) + " ms");
  }
  store::JobFilter filter;
  filter.compute_ids = options.compute_ids;
  filter.from_ms = options.window.from_ms;
  filter.to_ms = options.window.to_ms;
  Rollup rollup;
  std::map<std::string, RollupGroup, std::less<>> groups;
  // Pages are cut by offset, so a job that starts during the scan moves the others down one
  // place: it would be read twice, were it not for this.
  std::set<std::pair<std::string, std::string>> seen;
  while (true) {
    // One job past the bound tells whether the bound cut anything.
    const int64_t wanted = options.max_jobs + 1 - rollup.jobs_scanned;
    filter.limit = static_cast<int>(std::min<int64_t>(kJobPage, wanted));
    EXPANSE_ASSIGN_OR_RETURN(std::vector<store::JobRecord> page, jobs.ListJobs(filter));
    const bool last_page = page.size() < static_cast<size_t>(filter.limit);
    filter.offset += static_cast<int>(page.size());
    std::erase_if(page, [&](const store::JobRecord& job) {
      return !seen.emplace(job.compute_id, job.job_id).second;
    });
    if (rollup.jobs_scanned + static_cast<int64_t>(page.size()) > options.max_jobs) {
      page.resize(static_cast<size_t>(options.max_jobs - rollup.jobs_scanned));
      rollup.truncated = true;
    }
    rollup.jobs_scanned += static_cast<int64_t>(page.size());
    EXPANSE_RETURN_IF_ERROR(AddPage(jobs, tsdb, options, page, groups, rollup));
    if (last_page || rollup.truncated)
      break;
  }
  for (auto& [key, group] : groups)
    rollup.groups.push_back(std::move(group));
  std::sort(rollup.groups.begin(), rollup.groups.end(),
            [](const RollupGroup& a, const RollupGroup& b) {
              if (a.totals.idle_ms() != b.totals.idle_ms())
                return a.totals.idle_ms() > b.totals.idle_ms();
              return a.key < b.key;
            });
  return rollup;
}

std::string CsvField(std::string_view text) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!text.empty() && (text.front() == ' ' || text.back() == ' ' ||
                                        text.front() == '\t' || text.back() == '\t'));
  if (!quote)
    return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"')
      out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string GpuSecondsText(int64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%" PRId64 ".%03" PRId64, ms / 1000, ms % 1000);
  return text;
}

std::string RollupCsv(const Rollup& rollup, LedgerGroupBy group_by) {
  std::string out(LedgerGroupByName(group_by));
  out +=
      ",jobs,gpus,never_used_gpus,requested_gpu_s,allocated_gpu_s,sampled_gpu_s,active_gpu_s,"
      "idle_gpu_s,idle_share\r\n";
  for (const RollupGroup& g : rollup.groups) {
    const LedgerTotals& t = g.totals;
    out += CsvField(g.key);
    for (int64_t count : {g.jobs, t.gpus, t.never_used_gpus})
      out += "," + std::to_string(count);
    for (int64_t ms : {t.requested_ms, t.allocated_ms, t.sampled_ms, t.active_ms, t.idle_ms()})
      out += "," + GpuSecondsText(ms);
    out += ",";
    if (t.allocated_ms > 0) {
      char share[32];
      std::snprintf(share, sizeof share, "%.6f",
                    static_cast<double>(t.idle_ms()) / static_cast<double>(t.allocated_ms));
      out += share;
    }
    out += "\r\n";
  }
  return out;
}

}  // namespace expanse::server
