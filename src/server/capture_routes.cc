// The capture agent's evidence API: what a job's processes did on their GPUs, summed from the
// agent's per-process window aggregates (docs/capture-agent.md): the kernels that took the
// GPU time, copies by direction, time spent waiting in synchronisation, NVTX ranges, and a
// timeline of the windows.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "server/idle_ledger.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "wire/capture_records.h"

namespace expanse::server {
namespace {

using nlohmann::json;

// The windows a summary reads: a day of 8 processes at 10 s windows is 69,120. And the bytes
// of their documents: a real window is 2-6 KiB (80,000 of them ~300 MiB at most), but one the
// job's user filled with 40 names of 512 bytes is ~40 KiB, so a count alone let one request
// hold gigabytes.
constexpr int kSummaryWindows = 80'000;
constexpr size_t kSummaryDocBytes = 64 << 20;
// Distinct kernel and NVTX range names a summary keeps apart (each up to 512 bytes); the
// rest are summed in kernels.other and nvtx.other_ranges, so names a job makes up by the
// million cost no more than this.
constexpr size_t kMaxDistinctNames = 10'000;
constexpr size_t kTimelineEntries = 2000;
constexpr size_t kTopEntries = 20;
constexpr size_t kMaxProcesses = 1000;

// Sums saturate at INT64_MAX: each figure a worker sends is bounded (2^50 counts, 2^50 us), but
// a day of windows of such figures adds past int64.
struct Sum {
  int64_t count = 0;
  int64_t ns = 0;
  int64_t bytes = 0;
  void Add(const wire::CaptureTotal& t) {
    count = SaturatingAdd(count, t.count);
    ns = SaturatingAdd(ns, t.ns);
    bytes = SaturatingAdd(bytes, t.bytes);
  }
};

// Adds `t` to its name's sum, or to `rest` once `sums` holds kMaxDistinctNames other names.
void AddNamed(std::map<std::string, Sum>& sums, Sum& rest, const wire::CaptureTotal& t) {
  if (auto it = sums.find(t.name); it != sums.end())
    it->second.Add(t);
  else if (sums.size() < kMaxDistinctNames)
    sums[t.name].Add(t);
  else
    rest.Add(t);
}

// The names with the most time, longest first (ties by name), as {name, count, <ns_key>}.
json Top(const std::map<std::string, Sum>& sums, const char* ns_key) {
  std::vector<std::pair<std::string, Sum>> sorted(sums.begin(), sums.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
  });
  json out = json::array();
  for (size_t i = 0; i < sorted.size() && i < kTopEntries; ++i)
    out.push_back({{"name", sorted[i].first},
                   {"count", sorted[i].second.count},
                   {ns_key, sorted[i].second.ns}});
  return out;
}

json Summarise(const std::vector<store::CaptureWindow>& windows) {
  Sum kernels, other, memset, other_ranges;
  int64_t marks = 0, dropped = 0, unreadable = 0;
  std::map<std::string, Sum> by_kernel, by_direction, by_sync, by_range;
  struct Process {
    std::string rank;
    int64_t first_ms = 0, last_ms = 0, windows = 0, kernel_ns = 0;
  };
  std::map<std::pair<std::string, int64_t>, Process> processes;
  json timeline = json::array();
  const size_t timeline_from =
      windows.size() > kTimelineEntries ? windows.size() - kTimelineEntries : 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    const store::CaptureWindow& w = windows[i];
    // Stored by this server after the same decoding; one that no longer decodes (a newer
    // server wrote it) is counted and passed over.
    const json doc = json::parse(w.doc, nullptr, /*allow_exceptions=*/false);
    Result<wire::CaptureAggregateRecord> r = wire::DecodeCaptureAggregate(doc, "doc", "stored");
    if (!r.ok()) {
      ++unreadable;
      continue;
    }
    kernels.count = SaturatingAdd(kernels.count, r->kernel_count);
    kernels.ns = SaturatingAdd(kernels.ns, r->kernel_ns);
    for (const auto& k : r->top_kernels)
      AddNamed(by_kernel, other, k);
    other.Add(r->other_kernels);
    int64_t copied = 0, synced = 0;
    for (const auto& c : r->memcpy) {
      by_direction[c.name].Add(c);
      copied = SaturatingAdd(copied, c.bytes);
    }
    memset.Add(r->memset);
    for (const auto& s : r->sync) {
      by_sync[s.name].Add(s);
      synced = SaturatingAdd(synced, s.ns);
    }
    for (const auto& n : r->nvtx_ranges)
      AddNamed(by_range, other_ranges, n);
    marks = SaturatingAdd(marks, r->nvtx_marks);
    dropped = SaturatingAdd(dropped, r->dropped_records);
    Process& p = processes[{w.host, w.pid}];
    if (p.windows++ == 0)
      p.first_ms = w.window_start_ms;
    p.last_ms = std::max(p.last_ms, w.window_end_ms);
    p.rank = r->rank;
    p.kernel_ns = SaturatingAdd(p.kernel_ns, r->kernel_ns);
    if (i >= timeline_from) {
      // The window's own longest kernel: the agent lists them longest first, but the decoder does
      // not hold a job's file to that order, so it is found here (ties by name, as Top).
      json top_kernel = nullptr;
      const wire::CaptureTotal* longest = nullptr;
      for (const auto& k : r->top_kernels) {
        if (longest == nullptr || k.ns > longest->ns ||
            (k.ns == longest->ns && k.name < longest->name))
          longest = &k;
      }
      if (longest != nullptr)
        top_kernel = {{"name", longest->name}, {"count", longest->count}, {"gpu_ns", longest->ns}};
      timeline.push_back({{"host", w.host},
                          {"pid", w.pid},
                          {"start_ms", w.window_start_ms},
                          {"end_ms", w.window_end_ms},
                          {"kernel_count", r->kernel_count},
                          {"kernel_ns", r->kernel_ns},
                          {"top_kernel", std::move(top_kernel)},
                          {"memcpy_bytes", copied},
                          {"sync_ns", synced}});
    }
  }
  // Kernels outside each window's own top 20 are only in "other": the list is the job's top
  // kernels as the windows saw them.
  json directions = json::object();
  for (const auto& [name, s] : by_direction)
    directions[name] = {{"count", s.count}, {"bytes", s.bytes}, {"gpu_ns", s.ns}};
  json syncs = json::object();
  for (const auto& [name, s] : by_sync)
    syncs[name] = {{"count", s.count}, {"wall_ns", s.ns}};
  json procs = json::array();
  for (const auto& [key, p] : processes) {
    if (procs.size() >= kMaxProcesses)
      break;
    procs.push_back({{"host", key.first},
                     {"pid", key.second},
                     {"rank", p.rank},
                     {"first_ms", p.first_ms},
                     {"last_ms", p.last_ms},
                     {"windows", p.windows},
                     {"kernel_ns", p.kernel_ns}});
  }
  return {{"windows", windows.size()},
          {"unreadable_windows", unreadable},
          {"processes", std::move(procs)},
          {"kernels",
           {{"count", kernels.count},
            {"gpu_ns", kernels.ns},
            {"top", Top(by_kernel, "gpu_ns")},
            {"other", {{"count", other.count}, {"gpu_ns", other.ns}}}}},
          {"memcpy", std::move(directions)},
          {"memset", {{"count", memset.count}, {"bytes", memset.bytes}, {"gpu_ns", memset.ns}}},
          {"sync", std::move(syncs)},
          {"nvtx",
           {{"ranges", Top(by_range, "wall_ns")},
            {"other_ranges", {{"count", other_ranges.count}, {"wall_ns", other_ranges.ns}}},
            {"marks", marks}}},
          {"dropped_records", dropped},
          {"timeline", std::move(timeline)}};
}

}  // namespace

void RegisterCaptureRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;
  // An unknown job of a visible compute has no capture yet (ReadJobEvidenceQuery).
  listener.Get("/api/v1/computes/:id/jobs/:job/capture", [ctx](const http::Request& req) {
    return AnswerHeavyConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const JobEvidenceQuery q, ReadJobEvidenceQuery(*ctx, p, req));
      EXPANSE_ASSIGN_OR_RETURN(auto windows, ctx->jobs->JobCaptureWindows(
                                                 q.compute.id, req.PathParam("job"), q.from_ms,
                                                 q.to_ms, kSummaryWindows + 1, kSummaryDocBytes));
      size_t doc_bytes = 0;
      for (const store::CaptureWindow& w : windows)
        doc_bytes += w.doc.size();
      const bool truncated =
          windows.size() > static_cast<size_t>(kSummaryWindows) || doc_bytes > kSummaryDocBytes;
      if (truncated)
        windows.pop_back();
      json summary = Summarise(windows);
      summary["truncated"] = truncated;
      return summary;
    });
  });
}

}  // namespace expanse::server
