// A fake libnvidia-ml.so.1 for tests and benchmarks on machines without NVIDIA GPUs.
//
// It exports the NVML entry points src/gpu/nvml_library.cc resolves and answers them from a
// scenario file (JSON, see README.md beside this file) named by $EXPANSE_FAKE_NVML_SCENARIO,
// else /etc/expanse/fake-nvml.json.
// The file is re-read when its modification time changes, so a test can change readings,
// processes or faults while the daemon runs. The real dlopen path of the NVML backend thus
// runs in CI; the real library is exercised by scripts/gpu-check on a GPU machine.
//
// Built three times (tests/fakes/nvml/CMakeLists.txt): complete; "minimal", without the
// optional entry points; and "broken", without nvmlDeviceGetUtilizationRates (required).

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/nvml_abi.h"

namespace {

struct FakeProcess {
  unsigned pid = 0;
  std::optional<unsigned long long> used_mib;
  unsigned sm_util = 0;
  unsigned mem_util = 0;
};

struct FakeGpu {
  std::string uuid, name, pci_bus_id;
  unsigned minor = 0;
  unsigned long long memory_total_mib = 81559, memory_used_mib = 0;
  unsigned sm_util = 0, mem_util = 0, power_mw = 60000, temp_c = 30;
  unsigned sm_clock_mhz = 345, mem_clock_mhz = 2619;
  unsigned long long clock_event_reasons = 1, ecc_corrected = 0, ecc_uncorrected = 0;
  unsigned long long energy_mj = 0;
  std::vector<std::string> unsupported;
  nvmlReturn_t error = kNvmlSuccess;  // every call on this GPU fails with it ("lost" GPU)
  std::vector<FakeProcess> processes;
  // MPS clients: what nvmlDeviceGetMPSComputeRunningProcesses_v3 lists (the MPS server itself
  // goes in `processes`, as the driver lists it there).
  std::vector<FakeProcess> mps_processes;
};

struct Scenario {
  std::string driver_version = "580.159.04";
  std::string nvml_version = "13.580.159.04";
  nvmlReturn_t init_error = kNvmlSuccess;
  std::vector<FakeGpu> gpus;
  std::map<std::string, unsigned> hang_ms;  // call name -> how long it blocks
};

std::mutex g_mu;
Scenario g_scenario;
timespec g_mtime{};
std::chrono::steady_clock::time_point g_checked{};
std::map<std::string, uint64_t> g_counts;  // under g_mu

Scenario Parse(const std::string& text) {
  Scenario s;
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object())
    return s;
  s.driver_version = doc.value("driver_version", s.driver_version);
  s.nvml_version = doc.value("nvml_version", s.nvml_version);
  s.init_error = doc.value("init_error", 0);
  if (doc.contains("hang_ms") && doc["hang_ms"].is_object()) {
    for (const auto& [call, ms] : doc["hang_ms"].items())
      s.hang_ms[call] = ms.get<unsigned>();
  }
  if (!doc.contains("gpus") || !doc["gpus"].is_array())
    return s;
  unsigned index = 0;
  for (const auto& g : doc["gpus"]) {
    FakeGpu gpu;
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-00000000-0000-0000-0000-%012u", index);
    gpu.uuid = g.value("uuid", std::string(uuid));
    gpu.name = g.value("name", std::string("NVIDIA H200"));
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x10 + index);
    gpu.pci_bus_id = g.value("pci_bus_id", std::string(bus));
    gpu.minor = g.value("minor", index);
    gpu.memory_total_mib = g.value("memory_total_mib", gpu.memory_total_mib);
    gpu.memory_used_mib = g.value("memory_used_mib", gpu.memory_used_mib);
    gpu.sm_util = g.value("sm_util", gpu.sm_util);
    gpu.mem_util = g.value("mem_util", gpu.mem_util);
    gpu.power_mw = g.value("power_mw", gpu.power_mw);
    gpu.temp_c = g.value("temp_c", gpu.temp_c);
    gpu.sm_clock_mhz = g.value("sm_clock_mhz", gpu.sm_clock_mhz);
    gpu.mem_clock_mhz = g.value("mem_clock_mhz", gpu.mem_clock_mhz);
    gpu.clock_event_reasons = g.value("clock_event_reasons", gpu.clock_event_reasons);
    gpu.ecc_corrected = g.value("ecc_corrected", gpu.ecc_corrected);
    gpu.ecc_uncorrected = g.value("ecc_uncorrected", gpu.ecc_uncorrected);
    gpu.energy_mj = g.value("energy_mj", gpu.energy_mj);
    gpu.error = g.value("error", 0);
    if (g.contains("unsupported") && g["unsupported"].is_array()) {
      for (const auto& u : g["unsupported"])
        gpu.unsupported.push_back(u.get<std::string>());
    }
    for (const char* list : {"processes", "mps_processes"}) {
      if (!g.contains(list) || !g[list].is_array())
        continue;
      for (const auto& p : g[list]) {
        FakeProcess process;
        process.pid = p.value("pid", 0u);
        if (p.contains("used_memory_mib") && p["used_memory_mib"].is_number()) {
          process.used_mib = p["used_memory_mib"].get<unsigned long long>();
        }
        process.sm_util = p.value("sm_util", 0u);
        process.mem_util = p.value("mem_util", 0u);
        (std::string_view(list) == "processes" ? gpu.processes : gpu.mps_processes)
            .push_back(process);
      }
    }
    s.gpus.push_back(std::move(gpu));
    ++index;
  }
  return s;
}

// Reloads the scenario if its file changed; checks at most every 20 ms so a benchmark of the
// caller measures the caller, not stat(2).
void Refresh(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - g_checked < std::chrono::milliseconds(20))
    return;
  g_checked = now;
  // Processes started by slurmd (hooks, a sampler they start) do not inherit a test's
  // environment, so the node's own /etc/expanse (private per host in the test cluster) is the
  // fallback.
  const char* path = std::getenv("EXPANSE_FAKE_NVML_SCENARIO");
  if (path == nullptr)
    path = "/etc/expanse/fake-nvml.json";
  struct stat st {};
  if (stat(path, &st) != 0)
    return;
  if (!force && st.st_mtim.tv_sec == g_mtime.tv_sec && st.st_mtim.tv_nsec == g_mtime.tv_nsec) {
    return;
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  g_scenario = Parse(text.str());
  g_mtime = st.st_mtim;
}

// Counts the call (for tests that check which calls the sampler makes), applies any
// configured hang, and returns the current scenario (under g_mu).
std::unique_lock<std::mutex> Enter(const char* call) {
  std::unique_lock lock(g_mu);
  ++g_counts[call];
  Refresh(false);
  auto hang = g_scenario.hang_ms.find(call);
  if (hang != g_scenario.hang_ms.end() && hang->second > 0) {
    const unsigned ms = hang->second;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    lock.lock();
  }
  return lock;
}

FakeGpu* Gpu(nvmlDevice_t device) {
  const auto index = reinterpret_cast<uintptr_t>(device);
  if (index == 0 || index > g_scenario.gpus.size())
    return nullptr;
  return &g_scenario.gpus[index - 1];
}

[[maybe_unused]] bool Unsupported(const FakeGpu& gpu, const char* what) {
  return std::find(gpu.unsupported.begin(), gpu.unsupported.end(), what) != gpu.unsupported.end();
}

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned length) {
  if (out == nullptr)
    return kNvmlErrorInvalidArgument;
  if (value.size() + 1 > length)
    return kNvmlErrorInsufficientSize;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return kNvmlSuccess;
}

bool g_initialised = false;

}  // namespace

// Every entry point checks in the same order: count, hang, initialised, device, fault.
#define FAKE_DEVICE(call)             \
  auto lock = Enter(call);            \
  if (!g_initialised)                 \
    return kNvmlErrorUninitialized;   \
  FakeGpu* gpu = Gpu(device);         \
  if (gpu == nullptr)                 \
    return kNvmlErrorInvalidArgument; \
  if (gpu->error != kNvmlSuccess)     \
  return gpu->error

// The exported functions are declared by NVIDIA's nvml.h, which does not exist here.
#pragma GCC diagnostic ignored "-Wmissing-declarations"

extern "C" {

// Test hook (not part of NVML): how often `call` was made since the library loaded.
__attribute__((visibility("default"))) uint64_t expanse_fake_nvml_call_count(const char* call) {
  std::lock_guard lock(g_mu);
  auto it = g_counts.find(call);
  return it == g_counts.end() ? 0 : it->second;
}

nvmlReturn_t nvmlInit_v2() {
  auto lock = Enter("nvmlInit_v2");
  Refresh(true);
  if (g_scenario.init_error != kNvmlSuccess)
    return g_scenario.init_error;
  g_initialised = true;
  return kNvmlSuccess;
}

nvmlReturn_t nvmlShutdown() {
  auto lock = Enter("nvmlShutdown");
  g_initialised = false;
  return kNvmlSuccess;
}

const char* nvmlErrorString(nvmlReturn_t code) {
  switch (code) {
    case kNvmlSuccess:
      return "Success";
    case kNvmlErrorUninitialized:
      return "Uninitialized";
    case kNvmlErrorNotSupported:
      return "Not Supported";
    case kNvmlErrorNotFound:
      return "Not Found";
    case kNvmlErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case kNvmlErrorGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned length) {
  auto lock = Enter("nvmlSystemGetDriverVersion");
  return CopyString(g_scenario.driver_version, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  auto lock = Enter("nvmlDeviceGetCount_v2");
  if (!g_initialised)
    return kNvmlErrorUninitialized;
  *count = static_cast<unsigned>(g_scenario.gpus.size());
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  auto lock = Enter("nvmlDeviceGetHandleByIndex_v2");
  if (!g_initialised)
    return kNvmlErrorUninitialized;
  if (index >= g_scenario.gpus.size())
    return kNvmlErrorInvalidArgument;
  *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(index + 1));
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  FAKE_DEVICE("nvmlDeviceGetUUID");
  return CopyString(gpu->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  FAKE_DEVICE("nvmlDeviceGetName");
  return CopyString(gpu->name, name, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_DEVICE("nvmlDeviceGetMemoryInfo");
  memory->total = gpu->memory_total_mib << 20;
  memory->used = std::min(gpu->memory_used_mib, gpu->memory_total_mib) << 20;
  memory->free = memory->total - memory->used;
  return kNvmlSuccess;
}

#ifndef EXPANSE_FAKE_NVML_BROKEN
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  FAKE_DEVICE("nvmlDeviceGetUtilizationRates");
  util->gpu = gpu->sm_util;
  util->memory = gpu->mem_util;
  return kNvmlSuccess;
}
#endif

#ifndef EXPANSE_FAKE_NVML_MINIMAL
nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned length) {
  auto lock = Enter("nvmlSystemGetNVMLVersion");
  return CopyString(g_scenario.nvml_version, version, length);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned* minor) {
  FAKE_DEVICE("nvmlDeviceGetMinorNumber");
  *minor = gpu->minor;
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_DEVICE("nvmlDeviceGetPciInfo_v3");
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", gpu->pci_bus_id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", gpu->pci_bus_id.c_str() + 4);
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned* milliwatts) {
  FAKE_DEVICE("nvmlDeviceGetPowerUsage");
  if (Unsupported(*gpu, "power"))
    return kNvmlErrorNotSupported;
  *milliwatts = gpu->power_mw;
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned* celsius) {
  FAKE_DEVICE("nvmlDeviceGetTemperature");
  if (sensor != kNvmlTemperatureGpu)
    return kNvmlErrorInvalidArgument;
  if (Unsupported(*gpu, "temperature"))
    return kNvmlErrorNotSupported;
  *celsius = gpu->temp_c;
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned* mhz) {
  FAKE_DEVICE("nvmlDeviceGetClockInfo");
  if (Unsupported(*gpu, "clocks"))
    return kNvmlErrorNotSupported;
  if (type == kNvmlClockSm) {
    *mhz = gpu->sm_clock_mhz;
  } else if (type == kNvmlClockMem) {
    *mhz = gpu->mem_clock_mhz;
  } else {
    return kNvmlErrorInvalidArgument;
  }
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* reasons) {
  FAKE_DEVICE("nvmlDeviceGetCurrentClocksEventReasons");
  if (Unsupported(*gpu, "clock_event_reasons"))
    return kNvmlErrorNotSupported;
  *reasons = gpu->clock_event_reasons;
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long* count) {
  FAKE_DEVICE("nvmlDeviceGetTotalEccErrors");
  if (Unsupported(*gpu, "ecc"))
    return kNvmlErrorNotSupported;
  if (counter_type != kNvmlVolatileEcc)
    return kNvmlErrorInvalidArgument;
  *count = error_type == kNvmlMemoryErrorCorrected ? gpu->ecc_corrected : gpu->ecc_uncorrected;
  return kNvmlSuccess;
}

nvmlReturn_t ListProcesses(const std::vector<FakeProcess>& list, unsigned* count,
                           nvmlProcessInfo_t* infos) {
  const auto needed = static_cast<unsigned>(list.size());
  if (infos == nullptr || *count < needed) {
    *count = needed;
    return needed == 0 ? kNvmlSuccess : kNvmlErrorInsufficientSize;
  }
  for (unsigned i = 0; i < needed; ++i) {
    const FakeProcess& p = list[i];
    infos[i] = nvmlProcessInfo_t{p.pid, p.used_mib ? (*p.used_mib << 20) : kNvmlValueNotAvailable,
                                 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  *count = needed;
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned* count,
                                                     nvmlProcessInfo_t* infos) {
  FAKE_DEVICE("nvmlDeviceGetComputeRunningProcesses_v3");
  if (Unsupported(*gpu, "processes"))
    return kNvmlErrorNotSupported;
  return ListProcesses(gpu->processes, count, infos);
}

nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned* count,
                                                        nvmlProcessInfo_t* infos) {
  FAKE_DEVICE("nvmlDeviceGetMPSComputeRunningProcesses_v3");
  if (Unsupported(*gpu, "mps_processes"))
    return kNvmlErrorNotSupported;
  return ListProcesses(gpu->mps_processes, count, infos);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* samples,
                                             unsigned* count, unsigned long long last_seen) {
  FAKE_DEVICE("nvmlDeviceGetProcessUtilization");
  if (Unsupported(*gpu, "process_utilization"))
    return kNvmlErrorNotSupported;
  const auto now_us =
      static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  std::vector<nvmlProcessUtilizationSample_t> active;
  for (const FakeProcess& p : gpu->processes) {
    if (now_us > last_seen)
      active.push_back({p.pid, now_us, p.sm_util, p.mem_util, 0, 0});
  }
  if (active.empty())
    return kNvmlErrorNotFound;  // as the real driver: no process in window
  if (samples == nullptr || *count < active.size()) {
    *count = static_cast<unsigned>(active.size());
    return kNvmlErrorInsufficientSize;
  }
  std::copy(active.begin(), active.end(), samples);
  *count = static_cast<unsigned>(active.size());
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* mj) {
  FAKE_DEVICE("nvmlDeviceGetTotalEnergyConsumption");
  if (Unsupported(*gpu, "energy"))
    return kNvmlErrorNotSupported;
  *mj = gpu->energy_mj;
  return kNvmlSuccess;
}
#endif  // EXPANSE_FAKE_NVML_MINIMAL

}  // extern "C"
