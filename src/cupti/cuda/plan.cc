#include "cupti/cuda/plan.h"

#include "cupti/cuda/libraries.h"
#include "cupti/cuda/pm_device.h"
#include "cupti/cuda/probe.h"

namespace expanse::cupti {
namespace {

// The chips this libcupti's profiler host knows, or an error text.
std::vector<std::string> SupportedChips(const CuptiLibrary& cupti, CallWatchdog& watchdog,
                                        std::string* error) {
  std::vector<std::string> chips;
  if (cupti.fn().ProfilerHostGetSupportedChips == nullptr) {
    *error = "this libcupti has no cuptiProfilerHostGetSupportedChips: name the chips";
    return chips;
  }
  CUpti_Profiler_Host_GetSupportedChips_Params params{};
  params.structSize = CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE;
  CUptiResult result;
  {
    CallWatchdog::Scope scope(watchdog, "cuptiProfilerHostGetSupportedChips");
    result = cupti.fn().ProfilerHostGetSupportedChips(&params);
  }
  if (result != CUPTI_SUCCESS) {
    *error = CuptiResultName(result) + " in cuptiProfilerHostGetSupportedChips";
    return chips;
  }
  constexpr size_t kMaxChips = 256;  // CUPTI 13.0 lists 30
  for (size_t i = 0; params.ppChipNames != nullptr && i < std::min(params.numChips, kMaxChips);
       ++i) {
    if (params.ppChipNames[i] != nullptr)
      chips.emplace_back(params.ppChipNames[i]);
  }
  if (chips.empty())
    *error = "cuptiProfilerHostGetSupportedChips listed no chips";
  return chips;
}

nlohmann::json PlanSet(PmDevice& pm, CounterSet set) {
  const ResolvedSet* resolved = nullptr;
  if (auto error = pm.Resolve(set, &resolved))
    return {{"error", error->name() + " in " + error->call}};
  nlohmann::json series = nlohmann::json::object();
  for (size_t i = 0; i < resolved->series.size(); ++i)
    series[resolved->series[i]->series] = resolved->metrics[i];
  return {{"passes", resolved->passes}, {"series", series}, {"absent", resolved->why_absent}};
}

}  // namespace

nlohmann::json Plan(const PlanOptions& options, CallWatchdog& watchdog) {
  nlohmann::json report;
  report["variant"] = VariantName();
  auto opened = CuptiLibrary::Open(options.libcupti, /*host_only=*/true);
  if (!opened.ok()) {
    report["reason"] = opened.status().message();
    return report;
  }
  const CuptiLibrary& cupti = **opened;
  report["libcupti"] = cupti.loaded_path();
  std::vector<std::string> chips = options.chips;
  if (chips.size() == 1 && chips[0] == "all") {
    std::string error;
    chips = SupportedChips(cupti, watchdog, &error);
    if (chips.empty()) {
      report["reason"] = error;
      return report;
    }
  }
  report["chips"] = nlohmann::json::array();
  for (const std::string& chip : chips) {
    // A fresh planner per chip: a set resolved for one chip is cached in its PmDevice.
    PmDevice pm(cupti, watchdog, /*device_index=*/0, PmOptions{});
    pm.PlanForChip(chip);
    nlohmann::json entry = {{"chip", chip}};
    for (CounterSet set : {CounterSet::kLight, CounterSet::kRich})
      entry[std::string(CounterSetName(set))] = PlanSet(pm, set);
    report["chips"].push_back(std::move(entry));
  }
  report["libnvperf_host"] = cupti.perf_host_path();
  return report;
}

}  // namespace expanse::cupti
