#include "cupti/cuda/probe.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cupti/cuda/devices.h"
#include "cupti/node_facts.h"
#include "cupti/pm_reasons.h"

namespace expanse::cupti {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void AddNodeFacts(const ProbeOptions& options, nlohmann::json& report) {
  const auto caps = ParseEffectiveCapabilities(ReadText(options.proc_root + "/self/status"));
  report["effective_capabilities"] = {
      {"cap_perfmon", caps ? nlohmann::json(HasCapability(*caps, kCapPerfmon)) : nullptr},
      {"cap_sys_admin", caps ? nlohmann::json(HasCapability(*caps, kCapSysAdmin)) : nullptr}};
  const auto admin_only =
      ParseRmProfilingAdminOnly(ReadText(options.proc_root + "/driver/nvidia/params"));
  report["rm_profiling_admin_only"] = admin_only ? nlohmann::json(*admin_only) : nullptr;
  report["driver_version"] =
      ParseNvidiaDriverVersion(ReadText(options.proc_root + "/driver/nvidia/version"));
}

// Splits "libcupti_not_found: why" into the reason code and the detail.
void SetReason(nlohmann::json& target, const char* key, const std::string& message) {
  const size_t colon = message.find(':');
  const std::string reason = message.substr(0, colon);
  target[key] = reason;
  if (colon != std::string::npos)
    target["detail"] = message.substr(colon + 2);
}

void Unavailable(nlohmann::json& device, const std::string& reason, const std::string& detail) {
  device["pm_sampling"] = "unavailable";
  device["pm_sampling_reason"] = reason;
  device["pm_sampling_fix"] = FixFor(reason);
  if (!detail.empty())
    device["pm_sampling_detail"] = detail;
}

std::string SupportLevel(CUpti_Profiler_Support_Level level) {
  switch (level) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:
      return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:
      return "disabled";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED:
      return "unsupported";
    default:
      return "unknown";
  }
}

// Which of CUPTI's support flags keep PM sampling off this GPU ("vgpu: disabled").
std::string WhyUnsupported(const CUpti_Profiler_DeviceSupported_Params& support) {
  const std::pair<const char*, CUpti_Profiler_Support_Level> flags[] = {
      {"architecture", support.architecture},
      {"sli", support.sli},
      {"vgpu", support.vGpu},
      {"confidential_compute", support.confidentialCompute},
      {"cmp", support.cmp},
      {"wsl", support.wsl}};
  std::string why;
  for (const auto& [name, level] : flags) {
    if (level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
      why += (why.empty() ? "" : ", ") + std::string(name) + ": " + SupportLevel(level);
  }
  return why;
}

// Plain counters NVIDIA's PM sampling sample and OpenXLA's PM sampler configure: tried alone
// when the Light set was refused for something other than unknown names, so that a refused
// rollup and a refused host setup look different.
const std::vector<std::string>& PlainCounters() {
  static const std::vector<std::string> kPlain = {
      "sm__cycles_active.avg",  "gr__cycles_active.avg",
      "gpu__time_duration.sum", "gr__cycles_elapsed.max",
      "sm__cycles_elapsed.avg", "sm__inst_executed_realtime.avg.per_cycle_active",
      "sm__cycles_active.sum",  "pcie__read_bytes.sum"};
  return kPlain;
}

// The base names (without rollup or submetric) of every candidate of both sets and of the
// plain counters, in order, once each.
std::vector<std::string> BaseMetrics() {
  std::vector<std::string> bases;
  const auto add = [&](const std::string& name) {
    std::string base = name.substr(0, name.find('.'));
    if (std::find(bases.begin(), bases.end(), base) == bases.end())
      bases.push_back(std::move(base));
  };
  for (const CounterSet set : {CounterSet::kLight, CounterSet::kRich}) {
    for (const CounterSeries& series : SeriesOf(set)) {
      for (const std::string& candidate : series.candidates)
        add(candidate);
    }
  }
  for (const std::string& plain : PlainCounters())
    add(plain);
  return bases;
}

// metric_catalogue: each base name's type and submetrics on a host object made with the counter
// availability image, and for a base that failed there, on one made without it (CUPTI 13.0
// documents device-level metrics, such as PCIe and NVLink ones, as needing no image).
nlohmann::json MetricCatalogue(PmDevice& pm) {
  const auto describe = [](const PmDevice::MetricListing& listing) {
    if (!listing.error.empty())
      return nlohmann::json{{"error", listing.error}};
    return nlohmann::json{{"type", listing.type}, {"submetrics", listing.submetrics}};
  };
  const std::vector<std::string> bases = BaseMetrics();
  std::vector<std::string> failed;
  nlohmann::json catalogue = nlohmann::json::array();
  for (const auto& listing : pm.ListSubMetrics(bases, /*with_availability=*/true)) {
    nlohmann::json item = describe(listing);
    item["metric"] = listing.metric;
    if (!listing.error.empty())
      failed.push_back(listing.metric);
    catalogue.push_back(std::move(item));
  }
  if (failed.empty())
    return catalogue;
  const auto bare = pm.ListSubMetrics(failed, /*with_availability=*/false);
  for (nlohmann::json& item : catalogue) {
    for (const auto& listing : bare) {
      if (listing.metric == item["metric"])
        item["without_availability_image"] = describe(listing);
    }
  }
  return catalogue;
}

void ProbeDevice(const CudaLibrary& cuda, const CuptiLibrary& cupti, CallWatchdog& watchdog,
                 const ProbeOptions& options, const CudaDevice& device, nlohmann::json& entry) {
  CUdevice handle = 0;
  (void)cuda.fn().DeviceGet(&handle, device.index);
  CUpti_Profiler_DeviceSupported_Params support{};
  support.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
  support.cuDevice = handle;
  support.api = CUPTI_PROFILER_PM_SAMPLING;
  CUptiResult result;
  {
    CallWatchdog::Scope scope(watchdog, "cuptiProfilerDeviceSupported");
    result = cupti.fn().ProfilerDeviceSupported(&support);
  }
  if (result != CUPTI_SUCCESS)
    return Unavailable(entry, CuptiResultName(result), "in cuptiProfilerDeviceSupported");
  if (support.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
    return Unavailable(entry, kReasonUnsupportedDevice, WhyUnsupported(support));

  PmDevice pm(cupti, watchdog, static_cast<size_t>(device.index), options.pm);
  if (auto error = pm.Prepare())
    return Unavailable(entry, error->name(), "in " + error->call);
  entry["chip"] = pm.chip();
  entry["counter_availability_bytes"] = pm.availability_bytes();
  const ResolvedSet* light = nullptr;
  const CuptiStatus resolved = pm.Resolve(CounterSet::kLight, &light);
  // A refusal other than "no such name" (of one metric, or of metrics together): how the plain
  // counters fare tells a refused rollup from a refused host setup.
  if (resolved &&
      (!pm.metric_checks().empty() || resolved->code != CUPTI_ERROR_INVALID_METRIC_NAME))
    pm.CheckMetrics(PlainCounters());
  // Whatever the refusal: which names the chip takes is what the next attempt needs.
  if (resolved)
    entry["metric_catalogue"] = MetricCatalogue(pm);
  if (!pm.metric_checks().empty()) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& check : pm.metric_checks())
      checks.push_back({{"metric", check.metric},
                        {"result", check.result},
                        {"without_availability_image", check.without_image}});
    entry["metric_checks"] = std::move(checks);
  }
  if (!pm.last_why_absent().empty())
    entry["light_set_why_absent"] = pm.last_why_absent();
  if (const CuptiStatus& refusal = pm.availability_refusal())
    entry["counter_availability_image"] = "refused (" + refusal->name() + " in " + refusal->call +
                                          " for every metric); configured without it";
  if (const auto& error = resolved) {
    const bool none = error->code == CUPTI_ERROR_INVALID_METRIC_NAME;
    return Unavailable(entry, none ? kReasonNoMetrics : error->name(), "in " + error->call);
  }
  nlohmann::json series = nlohmann::json::object();
  for (size_t i = 0; i < light->series.size(); ++i)
    series[light->series[i]->series] = light->metrics[i];
  entry["light_set"] = series;
  entry["light_set_absent"] = light->absent;
  if (auto error = pm.Start(CounterSet::kLight))
    return Unavailable(entry, error->name(), "in " + error->call);
  pm.Release();
  entry["pm_sampling"] = "ok";
}

}  // namespace

std::string VariantName() {
  return "cuda" + std::to_string(CUDA_VERSION / 1000) + std::to_string(CUDA_VERSION % 1000 / 10) +
         "0";
}

nlohmann::json Probe(const ProbeOptions& options, CallWatchdog& watchdog) {
  nlohmann::json report;
  report["variant"] = VariantName();
  report["variant_cuda_version"] = CudaVersionText(CUDA_VERSION);
  AddNodeFacts(options, report);
  report["devices"] = nlohmann::json::array();

  auto cuda = CudaLibrary::Open(options.libcuda);
  if (!cuda.ok()) {
    SetReason(report, "reason", cuda.status().message());
    report["fix"] = FixFor(report["reason"].get<std::string>());
    return report;
  }
  report["libcuda"] = (*cuda)->loaded_path();
  const CudaInventory inventory = ListDevices(**cuda, watchdog);
  if (inventory.driver_api_version != 0)
    report["cuda_driver_api_version"] = CudaVersionText(inventory.driver_api_version);
  if (!inventory.error.empty()) {
    report["reason"] = inventory.error;
    report["detail"] = "in " + inventory.error_call;
    report["fix"] = FixFor(inventory.error);
    return report;
  }

  std::string shared_reason, shared_detail;  // one cause for every device
  if (inventory.driver_api_version < CUDA_VERSION) {
    shared_reason = kReasonDriverTooOld;
    shared_detail = "the driver serves CUDA " + CudaVersionText(inventory.driver_api_version) +
                    ", variant " + VariantName() + " needs " + CudaVersionText(CUDA_VERSION);
  }
  std::unique_ptr<CuptiLibrary> cupti;
  if (shared_reason.empty()) {
    auto opened = CuptiLibrary::Open(options.libcupti);
    if (opened.ok()) {
      cupti = std::move(*opened);
      report["libcupti"] = cupti->loaded_path();
      uint32_t version = 0;
      if (cupti->fn().GetVersion(&version) == CUPTI_SUCCESS)
        report["cupti_api_version"] = version;
    } else {
      const std::string& message = opened.status().message();
      const size_t colon = message.find(':');
      shared_reason = message.substr(0, colon);
      if (shared_reason == "libcupti_symbol_missing")
        shared_reason = kReasonSymbolMissing;
      shared_detail = colon == std::string::npos ? "" : message.substr(colon + 2);
    }
  }
  bool initialized = false;
  if (cupti) {
    CUpti_Profiler_Initialize_Params init{};
    init.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    CUptiResult result;
    {
      CallWatchdog::Scope scope(watchdog, "cuptiProfilerInitialize");
      result = cupti->fn().ProfilerInitialize(&init);
    }
    if (result == CUPTI_SUCCESS) {
      initialized = true;
    } else {
      shared_reason = CuptiResultName(result);
      shared_detail = "in cuptiProfilerInitialize";
    }
  }

  for (const CudaDevice& device : inventory.devices) {
    nlohmann::json entry = {{"index", device.index},
                            {"uuid", device.uuid},
                            {"name", device.name},
                            {"compute_capability", std::to_string(device.cc_major) + "." +
                                                       std::to_string(device.cc_minor)}};
    if (!shared_reason.empty())
      Unavailable(entry, shared_reason, shared_detail);
    else
      ProbeDevice(**cuda, *cupti, watchdog, options, device, entry);
    report["devices"].push_back(std::move(entry));
  }
  if (cupti)
    report["libnvperf_host"] = cupti->perf_host_path();  // "" when no host call loaded one
  if (initialized) {
    CUpti_Profiler_DeInitialize_Params deinit{};
    deinit.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
    CallWatchdog::Scope scope(watchdog, "cuptiProfilerDeInitialize");
    (void)cupti->fn().ProfilerDeInitialize(&deinit);
  }
  return report;
}

}  // namespace expanse::cupti
