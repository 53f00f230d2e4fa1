#include "report/report_render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <string_view>
#include <utility>

#include "core/quote.h"
#include "wire/field_reader.h"

namespace expanse::report {
namespace {

using nlohmann::json;

constexpr const char* kLevels[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
constexpr const char* kUnsampled = "·";
constexpr double kMibPerGib = 1024;
// Evidence is shown, not dumped: at most this many elements of a list and bytes of a line.
constexpr size_t kMaxEvidenceElements = 8;
constexpr size_t kMaxLineBytes = 240;

// `value` with `decimals` digits after the point.
std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// Text from the server on its way to a terminal: clean UTF-8 without C0 or C1 controls (an
// escape sequence in a job name must not reach the terminal raw), else quoted with escapes.
std::string Safe(std::string_view text) {
  return wire::IsTerminalText(text) ? std::string(text) : QuoteForMessage(text, 200);
}

// A line cut to kMaxLineBytes at a UTF-8 boundary.
std::string Cut(std::string line) {
  if (line.size() <= kMaxLineBytes)
    return line;
  size_t end = kMaxLineBytes;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xc0) == 0x80)
    --end;
  line.resize(end);
  return line + "…";
}

// A figure without trailing zeros: 2, 0.5, 47.25.
std::string Number(double v) {
  if (!std::isfinite(v))
    return "?";
  std::string s = Fixed(v, 2);
  while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
    const bool dot = s.back() == '.';
    s.pop_back();
    if (dot)
      break;
  }
  return s == "-0" ? "0" : s;
}

std::string Percent(double ratio) { return Fixed(ratio * 100, 0) + " %"; }

std::string Memory(double mib) {
  return mib >= kMibPerGib ? Fixed(mib / kMibPerGib, 1) + " GiB" : Fixed(mib, 0) + " MiB";
}

// 45s, 10m 05s, 2h 03m, 3d 04h.
std::string Duration(int64_t ms) {
  const int64_t s = std::max<int64_t>(ms, 0) / 1000;
  char buffer[64];
  if (s < 60)
    std::snprintf(buffer, sizeof buffer, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buffer, sizeof buffer, "%lldm %02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else if (s < 86400)
    std::snprintf(buffer, sizeof buffer, "%lldh %02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  else
    std::snprintf(buffer, sizeof buffer, "%lldd %02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s / 3600 % 24));
  return buffer;
}

// A requested time limit in ms, at most kMaxTimeMs: the decoder lets time_limit_s reach
// INT64_MAX / 2, which times 1000 would overflow.
int64_t LimitMs(int64_t time_limit_s) {
  return time_limit_s > wire::kMaxTimeMs / 1000 ? wire::kMaxTimeMs : time_limit_s * 1000;
}

// "2026-12-02 17:00:00 UTC" (seconds dropped with `minutes_only`).
std::string UtcTime(int64_t ms, bool minutes_only = false) {
  if (ms <= 0)
    return "-";
  const time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  if (gmtime_r(&t, &tm) == nullptr)
    return "?";
  char buffer[64];
  std::strftime(buffer, sizeof buffer, minutes_only ? "%Y-%m-%d %H:%M" : "%Y-%m-%d %H:%M:%S UTC",
                &tm);
  return buffer;
}

int64_t EndOrAsOf(const Job& job, int64_t as_of_ms) {
  return job.end_ms != 0 ? job.end_ms : std::max(as_of_ms, job.start_ms);
}

int64_t ElapsedMs(const Job& job, int64_t as_of_ms) {
  return job.start_ms == 0 ? 0 : EndOrAsOf(job, as_of_ms) - job.start_ms;
}

// The GPU memory of the job's GPUs when the server said it (memory_oversized's evidence).
std::optional<double> GpuMemoryTotalMib(const Verdicts& verdicts) {
  for (const Verdict& v : verdicts.verdicts) {
    const auto it = v.evidence.find("gpu_memory_total_mib");
    if (it != v.evidence.end() && it->is_number() && it->get<double>() > 0)
      return it->get<double>();
  }
  return std::nullopt;
}

// --- evidence ---------------------------------------------------------------------------

std::string Scalar(const json& v) {
  if (v.is_string())
    return Safe(v.get_ref<const std::string&>());
  if (v.is_boolean())
    return v.get<bool>() ? "yes" : "no";
  if (v.is_number())
    return Number(v.get<double>());
  return v.is_null() ? "-" : "…";
}

// A folded stack "main;train;__next__" as "__next__ ← train ← main", leaf first, at most four
// frames.
std::string Frames(const std::string& folded) {
  std::vector<std::string_view> frames;
  std::string_view rest = folded;
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    frames.push_back(rest.substr(0, semi));
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
  }
  std::string out;
  size_t shown = 0;
  for (auto it = frames.rbegin(); it != frames.rend() && shown < 4; ++it, ++shown)
    out += (out.empty() ? "" : " ← ") + Safe(*it);
  if (frames.size() > 4)
    out += " ← …";
  return out;
}

// A label for one element of an evidence list: the GPU or host it is about ("gpus GPU-a"), a
// stack ("stack"), else its place ("top[2]").
std::string ElementLabel(const json& element, const std::string& key, size_t index) {
  if (element.contains("folded"))
    return "stack";
  for (const char* name : {"gpu_uuid", "host"}) {
    const auto it = element.find(name);
    if (it != element.end() && it->is_string())
      return key + " " + Safe(it->get_ref<const std::string&>());
  }
  return key + "[" + std::to_string(index) + "]";
}

void EvidenceLines(const json& object, const std::string& label, int depth,
                   std::vector<std::string>& lines) {
  std::string scalars;
  std::vector<std::pair<std::string, const json*>> nested;
  for (const auto& [key, value] : object.items()) {
    if (key == "gpu_uuid" || key == "host" || key == "folded")
      continue;  // already the label
    if (value.is_object() || (value.is_array() && !value.empty() && value.front().is_object())) {
      nested.emplace_back(key, &value);
      continue;
    }
    std::string text;
    if (value.is_array()) {
      for (size_t i = 0; i < value.size() && i < kMaxEvidenceElements; ++i)
        text += (i == 0 ? "" : ", ") + Scalar(value[i]);
      if (value.size() > kMaxEvidenceElements)
        text += ", …";
      text = "[" + text + "]";
    } else {
      text = Scalar(value);
    }
    scalars += (scalars.empty() ? "" : ", ") + Safe(key) + " " + text;
  }
  if (const auto folded = object.find("folded"); folded != object.end() && folded->is_string())
    scalars =
        Frames(folded->get_ref<const std::string&>()) + (scalars.empty() ? "" : "; ") + scalars;
  if (!scalars.empty())
    lines.push_back(Cut(label.empty() ? scalars : label + ": " + scalars));
  if (depth >= 3)
    return;
  for (const auto& [key, value] : nested) {
    if (value->is_object()) {
      EvidenceLines(*value, Safe(key), depth + 1, lines);
      continue;
    }
    for (size_t i = 0; i < value->size() && i < kMaxEvidenceElements; ++i) {
      const json& element = (*value)[i];
      if (element.is_object())
        EvidenceLines(element, ElementLabel(element, Safe(key), i), depth + 1, lines);
    }
    if (value->size() > kMaxEvidenceElements) {
      lines.push_back(Safe(key) + ": " + std::to_string(value->size() - kMaxEvidenceElements) +
                      " more not shown");
    }
  }
}

// A suggestion for a verdict the server sent without one (an older server, a new code).
std::string FallbackSuggestion(const std::string& code) {
  static const std::map<std::string, std::string, std::less<>> kByCode = {
      {"no_process", "release GPUs the job does not use: ask only for those it runs on"},
      {"stuck", "the job looks hung: check its collectives and cancel it if it does not move"},
      {"communication_wait", "ranks wait on each other: check the balance of work between them"},
      {"input_bound", "the GPU waits for input: raise the data loader's num_workers"},
      {"sync_bound", "avoid synchronising with the device every step"},
      {"host_bound", "the CPU side limits the job: ask for more CPUs or move work to the GPU"},
      {"over_allocated", "ask for as many GPUs as the job uses"},
      {"memory_oversized", "a smaller GPU or a MIG slice would do"},
      {"cpu_only", "the job did not use its GPUs: submit it without --gres=gpu"},
      {"io_wait", "the job waits on file I/O: stage its data on local disk"}};
  const auto it = kByCode.find(code);
  return it == kByCode.end() ? "" : it->second;
}

std::string Suggestion(const Verdict& v) {
  return v.suggestion.empty() ? FallbackSuggestion(v.code) : v.suggestion;
}

// --- the report -------------------------------------------------------------------------

std::string GpuLabel(const Job& job, const std::string& host, const std::string& uuid) {
  for (const JobGpu& g : job.gpus) {
    if (g.host == host && g.gpu_uuid == uuid)
      return Safe(host) + " GPU " + std::to_string(g.gpu_index);
  }
  return Safe(host);
}

const LedgerGpu* LedgerOf(const Ledger& ledger, const std::string& host, const std::string& uuid) {
  for (const LedgerGpu& g : ledger.gpus) {
    if (g.host == host && g.gpu_uuid == uuid)
      return &g;
  }
  return nullptr;
}

std::optional<double> MeanOfMeans(const std::vector<TimelinePoint>& points) {
  if (points.empty())
    return std::nullopt;
  double sum = 0;
  for (const TimelinePoint& p : points)
    sum += p.mean;
  return sum / static_cast<double>(points.size());
}

void AddRow(std::string& out, const std::string& resource, const std::string& requested,
            const std::string& used) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "  %-12s %-18s %s\n", resource.c_str(), requested.c_str(),
                used.c_str());
  out += buffer;
}

void RenderRequestedVsUsed(const JobReport& r, std::string& out) {
  const Job& job = r.job;
  const Used& u = job.used;
  out += "Requested vs used\n";
  AddRow(out, "resource", "requested", "used");
  std::string gpus =
      std::to_string(u.gpus_allocated) + " allocated, " + std::to_string(u.gpus_active) + " active";
  if (u.has_gpu_samples)
    gpus +=
        "; utilisation mean " + Fixed(u.sm_mean, 1) + " %" + ", peak " + Fixed(u.sm_peak, 0) + " %";
  else
    gpus += "; no GPU samples";
  AddRow(out, "GPUs", job.requested.gpus > 0 ? std::to_string(job.requested.gpus) : "-", gpus);
  if (u.sm_active_mean) {
    AddRow(out, "SM activity", "",
           Percent(*u.sm_active_mean) + " mean (" + Safe(u.counters_source) + " counters)" +
               (u.tensor_active_mean ? ", tensor cores " + Percent(*u.tensor_active_mean) : ""));
  }
  std::string gpu_memory = "peak " + Memory(u.gpu_mem_peak_mib);
  if (const auto total = GpuMemoryTotalMib(r.verdicts))
    gpu_memory += " of " + Memory(*total) + " per GPU";
  AddRow(out, "GPU memory", "-", u.has_gpu_samples ? gpu_memory : "not sampled");
  AddRow(out, "CPU",
         job.requested.cpus > 0
             ? std::to_string(job.requested.cpus) + (job.requested.cpus == 1 ? " core" : " cores")
             : "-",
         u.cpu_efficiency && job.requested.cpus > 0
             ? Number(*u.cpu_efficiency * static_cast<double>(job.requested.cpus)) +
                   " cores on average (" + Percent(*u.cpu_efficiency) + ")"
             : "not measured");
  AddRow(out, "Memory", job.requested.mem_mib > 0 ? Memory(job.requested.mem_mib) : "-",
         u.mem_efficiency && job.requested.mem_mib > 0
             ? "peak " + Memory(*u.mem_efficiency * static_cast<double>(job.requested.mem_mib)) +
                   " (" + Percent(*u.mem_efficiency) + ")"
             : "not measured");
  const int64_t elapsed = ElapsedMs(job, r.verdicts.as_of_ms);
  std::string time = Duration(elapsed);
  if (job.requested.time_limit_s > 0)
    time += " (" +
            Percent(static_cast<double>(elapsed) /
                    (static_cast<double>(job.requested.time_limit_s) * 1000)) +
            ")";
  AddRow(out, "Time",
         job.requested.time_limit_s > 0 ? Duration(LimitMs(job.requested.time_limit_s)) : "-",
         job.start_ms == 0 ? "not started" : time);
}

void RenderSparklines(const JobReport& r, std::string& out) {
  const Timeline& t = r.timeline;
  out += "\nGPU utilisation over the job (" + Safe(t.metric) + "; ▁ 0 % … █ 100 %, · unsampled)\n";
  if (t.series.empty()) {
    out += "  no GPUs allocated\n";
    return;
  }
  size_t label_width = 0;
  for (const GpuSeries& s : t.series)
    label_width = std::max(label_width, GpuLabel(r.job, s.host, s.gpu_uuid).size());
  for (const GpuSeries& s : t.series) {
    std::string label = GpuLabel(r.job, s.host, s.gpu_uuid);
    label.resize(label_width, ' ');
    std::string line = "  " + label + "  " + Sparkline(s.points, t.from_ms, t.to_ms) + "  ";
    const std::optional<double> mean = MeanOfMeans(s.points);
    line += mean ? "mean " + Fixed(*mean, 0) + " %" : "no samples";
    if (const LedgerGpu* g = LedgerOf(r.ledger, s.host, s.gpu_uuid)) {
      if (g->never_used)
        line += ", never used";
      else if (g->allocated_gpu_s > 0)
        line += ", idle " + Percent(g->idle_gpu_s / g->allocated_gpu_s);
    }
    out += line + "  " + Safe(s.gpu_uuid) + "\n";
  }
}

void RenderLedger(const Ledger& l, std::string& out) {
  const LedgerTotals& t = l.totals;
  out += "\nIdle ledger (each GPU from its allocation's start)\n";
  out += "  allocated " + Number(t.allocated_gpu_s) + " GPU-s (" +
         Number(t.allocated_gpu_s / 3600) + " GPU-h), active " + Number(t.active_gpu_s) +
         " GPU-s, idle " + Number(t.idle_gpu_s) + " GPU-s" +
         (t.idle_share ? " (" + Percent(*t.idle_share) + ")" : "") + "\n";
  out += "  sampled " + Number(t.sampled_gpu_s) + " GPU-s; " + std::to_string(t.gpus) +
         " GPU(s), " + std::to_string(t.never_used_gpus) + " never used; requested " +
         std::to_string(l.requested_gpus) + " GPU(s), " + Number(t.requested_gpu_s) + " GPU-s\n";
}

std::string Interval(const Verdict& v, const Job& job, int64_t job_start_ms) {
  const int64_t start = job_start_ms != 0 ? job_start_ms : v.from_ms;
  std::string text = "+" + Duration(v.from_ms - start) + " to +" + Duration(v.to_ms - start);
  if (job.end_ms != 0 && v.from_ms <= start && v.to_ms >= job.end_ms)
    text = "whole job, " + text;
  return text;
}

void RenderVerdicts(const JobReport& r, std::string& out) {
  out += "\nVerdicts (why the GPUs were idle or not doing useful work)\n";
  if (r.verdicts.verdicts.empty()) {
    out += r.job.start_ms == 0 ? "  none: the job has not started\n"
                               : "  none: no rule found idle or wasted GPUs in this job\n";
    return;
  }
  // Intervals read from the start of the verdicts' grid: the allocation's start, which may be
  // before SLURM's start.
  const int64_t start = r.verdicts.from_ms != 0 ? r.verdicts.from_ms : r.job.start_ms;
  for (const Verdict& v : r.verdicts.verdicts) {
    std::string gpus;
    for (size_t i = 0; i < v.gpus.size() && i < kMaxEvidenceElements; ++i)
      gpus += (i == 0 ? "" : ", ") + Safe(v.gpus[i]);
    if (v.gpus.size() > kMaxEvidenceElements)
      gpus += " and " + std::to_string(v.gpus.size() - kMaxEvidenceElements) + " more";
    std::string hosts;
    for (size_t i = 0; i < v.hosts.size() && i < kMaxEvidenceElements; ++i)
      hosts += (i == 0 ? "" : ", ") + Safe(v.hosts[i]);
    out += Cut("  " + v.code + "  " + Interval(v, r.job, start) + ", confidence " +
               Fixed(v.confidence, 2) + (gpus.empty() ? "" : ", GPUs " + gpus) +
               (hosts.empty() ? "" : " on " + hosts)) +
           "\n";
    std::vector<std::string> lines;
    EvidenceLines(v.evidence, "", 0, lines);
    for (size_t i = 0; i < lines.size(); ++i)
      out += (i == 0 ? "    evidence: " : "              ") + lines[i] + "\n";
    const std::string suggestion = Suggestion(v);
    if (!suggestion.empty())
      out += "    suggestion: " + Safe(suggestion) + "\n";
  }
}

json Nullable(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json TimelinePoints(const std::vector<TimelinePoint>& points) {
  json out = json::array();
  for (const TimelinePoint& p : points)
    out.push_back({p.t_ms, p.min, p.max, p.mean});
  return out;
}

json JobSummary(const Job& job) {
  return {{"compute_id", job.compute_id},
          {"job_id", job.job_id},
          {"name", job.name},
          {"user", job.user},
          {"account", job.account},
          {"partition", job.partition},
          {"state", job.state},
          {"nodes", job.nodes},
          {"hosts", job.hosts},
          {"submit_ms", job.submit_ms},
          {"start_ms", job.start_ms},
          {"end_ms", job.end_ms}};
}

}  // namespace

std::string Sparkline(const std::vector<TimelinePoint>& points, int64_t from_ms, int64_t to_ms,
                      int columns) {
  columns = std::clamp(columns, 1, 1000);
  std::vector<double> sum(static_cast<size_t>(columns), 0);
  std::vector<int> count(static_cast<size_t>(columns), 0);
  if (to_ms > from_ms) {
    const double span = static_cast<double>(to_ms - from_ms);
    for (const TimelinePoint& p : points) {
      if (p.t_ms < from_ms || p.t_ms >= to_ms)
        continue;
      const auto c = static_cast<size_t>(
          std::clamp(static_cast<double>(p.t_ms - from_ms) * columns / span, 0.0, columns - 1.0));
      sum[c] += p.mean;
      ++count[c];
    }
  }
  std::string out;
  for (size_t c = 0; c < sum.size(); ++c) {
    if (count[c] == 0) {
      out += kUnsampled;
      continue;
    }
    const double mean = sum[c] / count[c];
    out += kLevels[static_cast<size_t>(std::clamp(mean / 12.5, 0.0, 7.0))];
  }
  return out;
}

std::vector<Note> ResourceNotes(const Job& job) {
  std::vector<Note> notes;
  const Used& u = job.used;
  if (u.cpu_efficiency && job.requested.cpus > 1 && *u.cpu_efficiency < 0.5) {
    const auto cores = static_cast<int64_t>(
        std::ceil(*u.cpu_efficiency * static_cast<double>(job.requested.cpus) + 0.001));
    notes.push_back({"cpu", "ask for " + std::to_string(std::max<int64_t>(cores, 1)) +
                                " CPUs, not " + std::to_string(job.requested.cpus) + ": " +
                                Percent(*u.cpu_efficiency) + " of them were used on average"});
  }
  if (u.mem_efficiency && job.requested.mem_mib > 0 && *u.mem_efficiency < 0.25 &&
      job.requested.mem_mib >= 4096) {
    // Twice the peak, in whole GiB, leaves room for a larger input.
    const double peak = *u.mem_efficiency * static_cast<double>(job.requested.mem_mib);
    const auto gib = static_cast<int64_t>(std::ceil(2 * peak / kMibPerGib));
    notes.push_back({"memory", "ask for --mem=" + std::to_string(std::max<int64_t>(gib, 1)) +
                                   "G, not " + Memory(job.requested.mem_mib) + ": the peak was " +
                                   Memory(peak)});
  }
  if (job.end_ms != 0 && job.start_ms != 0 && job.requested.time_limit_s >= 3600) {
    const double used_s = static_cast<double>(job.end_ms - job.start_ms) / 1000;
    if (used_s < 0.25 * static_cast<double>(job.requested.time_limit_s)) {
      notes.push_back({"time", "a shorter --time starts sooner: the job ran " +
                                   Duration(job.end_ms - job.start_ms) + " of its " +
                                   Duration(LimitMs(job.requested.time_limit_s)) + " limit"});
    }
  }
  return notes;
}

std::string RenderJobReport(const JobReport& r) {
  const Job& job = r.job;
  std::string out = "Job " + Safe(job.job_id) +
                    (job.name.empty() ? "" : " (" + Safe(job.name) + ")") + " on compute " +
                    Safe(job.compute_id) + "\n";
  out += "  user " + (job.user.empty() ? "-" : Safe(job.user)) + ", account " +
         (job.account.empty() ? "-" : Safe(job.account)) + ", partition " +
         (job.partition.empty() ? "-" : Safe(job.partition)) + ", state " +
         (job.state.empty() ? "-" : Safe(job.state)) + "\n";
  out += "  started " + UtcTime(job.start_ms) + ", " +
         (job.end_ms != 0 ? "ended " + UtcTime(job.end_ms) : std::string("still running")) + "\n";
  std::string hosts;
  for (size_t i = 0; i < job.hosts.size() && i < kMaxEvidenceElements; ++i)
    hosts += (i == 0 ? "" : ", ") + Safe(job.hosts[i]);
  if (job.hosts.size() > kMaxEvidenceElements)
    hosts += " and " + std::to_string(job.hosts.size() - kMaxEvidenceElements) + " more";
  out += Cut("  hosts " + (hosts.empty() ? "-" : hosts)) + "\n\n";
  RenderRequestedVsUsed(r, out);
  RenderSparklines(r, out);
  RenderLedger(r.ledger, out);
  RenderVerdicts(r, out);
  const std::vector<Note> notes = ResourceNotes(job);
  if (!notes.empty()) {
    out += "\nRequests above use\n";
    for (const Note& n : notes)
      out += "  " + n.resource + ": " + n.text + "\n";
  }
  return out;
}

json JobReportDocument(const JobReport& r) {
  const Job& job = r.job;
  const Used& u = job.used;
  json gpus = json::array();
  for (const GpuSeries& s : r.timeline.series) {
    json gpu = {{"host", s.host}, {"gpu_uuid", s.gpu_uuid}, {"gpu_index", nullptr}};
    for (const JobGpu& g : job.gpus) {
      if (g.host == s.host && g.gpu_uuid == s.gpu_uuid)
        gpu["gpu_index"] = g.gpu_index;
    }
    gpu["sm_util"] = {{"mean", Nullable(MeanOfMeans(s.points))},
                      {"sparkline", Sparkline(s.points, r.timeline.from_ms, r.timeline.to_ms)},
                      {"points", TimelinePoints(s.points)}};
    gpu["ledger"] = nullptr;
    if (const LedgerGpu* l = LedgerOf(r.ledger, s.host, s.gpu_uuid)) {
      gpu["ledger"] = {{"allocated_gpu_s", l->allocated_gpu_s},
                       {"sampled_gpu_s", l->sampled_gpu_s},
                       {"active_gpu_s", l->active_gpu_s},
                       {"idle_gpu_s", l->idle_gpu_s},
                       {"never_used", l->never_used}};
    }
    gpus.push_back(std::move(gpu));
  }
  json verdicts = json::array();
  for (const Verdict& v : r.verdicts.verdicts) {
    verdicts.push_back({{"code", v.code},
                        {"from_ms", v.from_ms},
                        {"to_ms", v.to_ms},
                        {"confidence", v.confidence},
                        {"gpus", v.gpus},
                        {"hosts", v.hosts},
                        {"evidence", v.evidence},
                        {"suggestion", Suggestion(v)}});
  }
  json notes = json::array();
  for (const Note& n : ResourceNotes(job))
    notes.push_back({{"resource", n.resource}, {"text", n.text}});
  const LedgerTotals& t = r.ledger.totals;
  const auto total = GpuMemoryTotalMib(r.verdicts);
  const int64_t elapsed = ElapsedMs(job, r.verdicts.as_of_ms);
  return {
      {"version", 1},
      {"kind", "expanse.job_report"},
      {"as_of_ms", r.verdicts.as_of_ms},
      {"job", JobSummary(job)},
      {"requested",
       {{"nodes", job.requested.nodes},
        {"cpus", job.requested.cpus},
        {"gpus", job.requested.gpus},
        {"mem_mib", job.requested.mem_mib},
        {"time_limit_s", job.requested.time_limit_s}}},
      {"used",
       {{"gpus_allocated", u.gpus_allocated},
        {"gpus_active", u.gpus_active},
        {"has_gpu_samples", u.has_gpu_samples},
        {"sm_mean", u.sm_mean},
        {"sm_peak", u.sm_peak},
        {"sm_active_mean", Nullable(u.sm_active_mean)},
        {"tensor_active_mean", Nullable(u.tensor_active_mean)},
        {"counters_source", u.counters_source.empty() ? json(nullptr) : json(u.counters_source)},
        {"gpu_mem_peak_mib", u.gpu_mem_peak_mib},
        {"gpu_mem_total_mib", Nullable(total)},
        {"cpu_efficiency", Nullable(u.cpu_efficiency)},
        {"cpu_cores_mean", u.cpu_efficiency && job.requested.cpus > 0
                               ? json(*u.cpu_efficiency * static_cast<double>(job.requested.cpus))
                               : json(nullptr)},
        {"mem_efficiency", Nullable(u.mem_efficiency)},
        {"mem_peak_mib", u.mem_efficiency && job.requested.mem_mib > 0
                             ? json(*u.mem_efficiency * static_cast<double>(job.requested.mem_mib))
                             : json(nullptr)},
        {"elapsed_s", elapsed / 1000},
        {"allocated_gpu_hours", u.allocated_gpu_hours},
        {"idle_gpu_hours", u.idle_gpu_hours}}},
      {"gpus", gpus},
      {"timeline",
       {{"metric", r.timeline.metric},
        {"from_ms", r.timeline.from_ms},
        {"to_ms", r.timeline.to_ms},
        {"columns", kSparklineColumns}}},
      {"ledger",
       {{"requested_gpus", r.ledger.requested_gpus},
        {"gpus", t.gpus},
        {"never_used_gpus", t.never_used_gpus},
        {"requested_gpu_s", t.requested_gpu_s},
        {"allocated_gpu_s", t.allocated_gpu_s},
        {"sampled_gpu_s", t.sampled_gpu_s},
        {"active_gpu_s", t.active_gpu_s},
        {"idle_gpu_s", t.idle_gpu_s},
        {"idle_share", Nullable(t.idle_share)}}},
      {"verdicts", verdicts},
      {"notes", notes}};
}

namespace {

std::optional<double> IdleShare(const Used& u) {
  if (u.allocated_gpu_hours <= 0)
    return std::nullopt;
  return u.idle_gpu_hours / u.allocated_gpu_hours;
}

// Jobs whose usage the server left out of its page (Used::omitted).
size_t OmittedCount(const JobList& list) {
  return static_cast<size_t>(std::count_if(list.jobs.begin(), list.jobs.end(),
                                           [](const Job& j) { return j.used.omitted; }));
}

}  // namespace

std::string RenderJobList(const JobList& list) {
  const size_t omitted = OmittedCount(list);
  std::string out = "Jobs of " + Safe(list.user) + " since " + UtcTime(list.since_ms) + ": " +
                    std::to_string(list.jobs.size()) + (list.jobs.size() == 1 ? " job" : " jobs") +
                    (list.truncated ? " (more matched; only these were read)" : "") +
                    (omitted > 0 ? "; usage not computed for " + std::to_string(omitted) +
                                       " of them (the server's page held too many GPUs; "
                                       "`expanse job <id>` shows one)"
                                 : "") +
                    "\n";
  if (list.jobs.empty())
    return out;
  bool many_computes = false;
  for (const Job& j : list.jobs)
    many_computes |= j.compute_id != list.jobs.front().compute_id;
  char row[1024];
  const auto add = [&](const std::string& id, const std::string& state, const std::string& start,
                       const std::string& elapsed, const std::string& gpus,
                       const std::string& gpu_h, const std::string& idle_h, const std::string& idle,
                       const std::string& sm, const std::string& mem, const std::string& cpu,
                       const std::string& name) {
    std::snprintf(row, sizeof row, "%-14s %-11s %-16s %8s %4s %8s %10s %6s %7s %12s %7s  %s",
                  id.c_str(), state.c_str(), start.c_str(), elapsed.c_str(), gpus.c_str(),
                  gpu_h.c_str(), idle_h.c_str(), idle.c_str(), sm.c_str(), mem.c_str(), cpu.c_str(),
                  name.c_str());
    std::string line = row;
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out += line + "\n";
  };
  add("JOB", "STATE", "START (UTC)", "ELAPSED", "GPUS", "GPU-H", "IDLE GPU-H", "IDLE", "SM MEAN",
      "GPU MEM PEAK", "CPU EFF", many_computes ? "COMPUTE / NAME" : "NAME");
  double allocated = 0, idle = 0;
  for (const Job& j : list.jobs) {
    const Used& u = j.used;
    if (u.omitted) {
      add(Safe(j.job_id), Safe(j.state), UtcTime(j.start_ms, true),
          j.start_ms == 0 ? "-" : Duration(ElapsedMs(j, list.as_of_ms)), "-", "-", "-", "-", "-",
          "-", "-", Cut((many_computes ? Safe(j.compute_id) + " / " : "") + Safe(j.name)));
      continue;
    }
    allocated += u.allocated_gpu_hours;
    idle += u.idle_gpu_hours;
    const std::optional<double> share = IdleShare(u);
    add(Safe(j.job_id), Safe(j.state), UtcTime(j.start_ms, true),
        j.start_ms == 0 ? "-" : Duration(ElapsedMs(j, list.as_of_ms)),
        std::to_string(u.gpus_allocated), Fixed(u.allocated_gpu_hours, 2),
        Fixed(u.idle_gpu_hours, 2), share ? Percent(*share) : "-",
        u.has_gpu_samples ? Fixed(u.sm_mean, 1) + " %" : "-",
        u.has_gpu_samples ? Memory(u.gpu_mem_peak_mib) : "-",
        u.cpu_efficiency ? Percent(*u.cpu_efficiency) : "-",
        Cut((many_computes ? Safe(j.compute_id) + " / " : "") + Safe(j.name)));
  }
  add("total", "", "", "", "", Fixed(allocated, 2), Fixed(idle, 2),
      allocated > 0 ? Percent(idle / allocated) : "-", "", "", "", "");
  return out;
}

json JobListDocument(const JobList& list) {
  json jobs = json::array();
  double allocated = 0, idle = 0;
  for (const Job& j : list.jobs) {
    const Used& u = j.used;
    json job = JobSummary(j);
    job["requested"] = {{"gpus", j.requested.gpus},
                        {"cpus", j.requested.cpus},
                        {"mem_mib", j.requested.mem_mib},
                        {"time_limit_s", j.requested.time_limit_s}};
    if (u.omitted) {
      // The server did not compute it: no figure rather than a zero that would read as one.
      job["usage_omitted"] = true;
      job["elapsed_s"] = ElapsedMs(j, list.as_of_ms) / 1000;
      jobs.push_back(std::move(job));
      continue;
    }
    allocated += u.allocated_gpu_hours;
    idle += u.idle_gpu_hours;
    job["elapsed_s"] = ElapsedMs(j, list.as_of_ms) / 1000;
    job["gpus_allocated"] = u.gpus_allocated;
    job["gpus_active"] = u.gpus_active;
    job["allocated_gpu_hours"] = u.allocated_gpu_hours;
    job["idle_gpu_hours"] = u.idle_gpu_hours;
    job["idle_share"] = Nullable(IdleShare(u));
    job["sm_mean"] = u.has_gpu_samples ? json(u.sm_mean) : json(nullptr);
    job["gpu_mem_peak_mib"] = u.has_gpu_samples ? json(u.gpu_mem_peak_mib) : json(nullptr);
    job["cpu_efficiency"] = Nullable(u.cpu_efficiency);
    job["mem_efficiency"] = Nullable(u.mem_efficiency);
    jobs.push_back(std::move(job));
  }
  return {{"version", 1},
          {"kind", "expanse.job_list"},
          {"user", list.user},
          {"since_ms", list.since_ms},
          {"as_of_ms", list.as_of_ms},
          {"truncated", list.truncated},
          {"usage_omitted_jobs", OmittedCount(list)},
          {"jobs", jobs},
          {"totals",
           {{"jobs", list.jobs.size()},
            {"allocated_gpu_hours", allocated},
            {"idle_gpu_hours", idle},
            {"idle_share", allocated > 0 ? json(idle / allocated) : json(nullptr)}}}};
}

}  // namespace expanse::report
