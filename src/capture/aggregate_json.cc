#include "capture/aggregate_json.h"

#include <nlohmann/json.hpp>

namespace expanse::capture {
namespace {

nlohmann::json Named(const NamedTotal& t, const char* ns_field) {
  return {{"name", t.name}, {"count", t.count}, {ns_field, t.ns}};
}

}  // namespace

std::string AggregateJson(const ProcessIdentity& process, const WindowSummary& w) {
  nlohmann::json top = nlohmann::json::array();
  for (const NamedTotal& k : w.top_kernels)
    top.push_back(Named(k, "gpu_ns"));
  nlohmann::json memcpy = nlohmann::json::object();
  for (const auto& [direction, t] : w.memcpy)
    memcpy[direction] = {{"count", t.count}, {"bytes", t.bytes}, {"gpu_ns", t.ns}};
  nlohmann::json sync = nlohmann::json::object();
  for (const auto& [type, t] : w.sync)
    sync[type] = {{"count", t.count}, {"wall_ns", t.ns}};
  nlohmann::json ranges = nlohmann::json::array();
  for (const NamedTotal& r : w.nvtx_ranges)
    ranges.push_back(Named(r, "wall_ns"));
  nlohmann::json doc = {
      {"format", kAggregateFormat},
      {"job_id", process.job_id},
      {"step_id", process.step_id},
      {"rank", process.rank},
      {"host", process.host},
      {"pid", process.pid},
      {"process_start_ticks", process.start_ticks},
      {"uid", process.uid},
      {"window_start_ms", w.start_ms},
      {"window_end_ms", w.end_ms},
      {"observed_ms", w.observed_ms},
      {"devices", w.devices},
      {"kernels",
       {{"count", w.kernel_count},
        {"gpu_ns", w.kernel_ns},
        {"top", std::move(top)},
        {"other", {{"count", w.other_kernels.count}, {"gpu_ns", w.other_kernels.ns}}}}},
      {"memcpy", std::move(memcpy)},
      {"memset", {{"count", w.memset.count}, {"bytes", w.memset.bytes}, {"gpu_ns", w.memset.ns}}},
      {"sync", std::move(sync)},
      {"nvtx", {{"ranges", std::move(ranges)}, {"marks", w.nvtx_marks}}},
      {"dropped_records", w.dropped_records}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string AggregateFileName(const ProcessIdentity& process, const WindowSummary& window) {
  return "agg-" + process.job_id + "-" + process.host + "-" + std::to_string(process.pid) + "-" +
         std::to_string(window.end_ms) + ".json";
}

}  // namespace expanse::capture
