// Test helpers for the fake libnvidia-ml.so.1 (tests/fakes/nvml): scenario files and paths.
#ifndef EXPANSE_GPU_FAKE_NVML_TEST_UTIL_H_
#define EXPANSE_GPU_FAKE_NVML_TEST_UTIL_H_

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace expanse::gpu::testing {

inline std::string FakeNvmlPath(const std::string& variant = "nvml") {
  return std::string(EXPANSE_FAKES_DIR) + "/" + variant + "/libnvidia-ml.so.1";
}

// Owns a scenario file and points $EXPANSE_FAKE_NVML_SCENARIO at it.
class FakeNvmlScenario {
 public:
  explicit FakeNvmlScenario(const nlohmann::json& scenario) {
    char dir[] = "/tmp/expanse-fake-nvml-XXXXXX";
    dir_ = mkdtemp(dir);
    path_ = dir_ + "/scenario.json";
    Write(scenario);
    setenv("EXPANSE_FAKE_NVML_SCENARIO", path_.c_str(), 1);
  }
  ~FakeNvmlScenario() {
    unsetenv("EXPANSE_FAKE_NVML_SCENARIO");
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  // Replaces the scenario; the fake notices within its 20 ms re-check period.
  void Write(const nlohmann::json& scenario) {
    const std::string temp = path_ + ".tmp";
    std::ofstream(temp) << scenario.dump();
    rename(temp.c_str(), path_.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }

 private:
  std::string dir_;
  std::string path_;
};

// How often the loaded fake saw `call` (its test-only export); -1 if the fake is not loaded.
inline int64_t FakeNvmlCallCount(const std::string& variant, const char* call) {
  void* handle = dlopen(FakeNvmlPath(variant).c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr)
    return -1;
  auto count =
      reinterpret_cast<uint64_t (*)(const char*)>(dlsym(handle, "expanse_fake_nvml_call_count"));
  const int64_t result = count ? static_cast<int64_t>(count(call)) : -1;
  dlclose(handle);
  return result;
}

// Two H200s whose minor numbers differ from their NVML indices, as on many real nodes.
inline nlohmann::json TwoGpuScenario() {
  return {{"driver_version", "580.159.04"},
          {"nvml_version", "13.580.159.04"},
          {"gpus",
           {{{"uuid", "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0"},
             {"pci_bus_id", "00000000:00:06.0"},
             {"minor", 3},
             {"memory_total_mib", 143771},
             {"memory_used_mib", 31859},
             {"sm_util", 100},
             {"mem_util", 24},
             {"power_mw", 694770},
             {"temp_c", 53},
             {"sm_clock_mhz", 1455},
             {"mem_clock_mhz", 3201},
             {"clock_event_reasons", 4},
             {"ecc_corrected", 2},
             {"ecc_uncorrected", 0},
             {"energy_mj", 123456789},
             {"processes",
              {{{"pid", 521}, {"used_memory_mib", 31850}, {"sm_util", 98}, {"mem_util", 23}}}}},
            {{"uuid", "GPU-11111111-2222-3333-4444-555555555555"},
             {"pci_bus_id", "00000000:00:07.0"},
             {"minor", 0},
             {"memory_total_mib", 143771},
             {"unsupported", {"power", "ecc"}}}}}};
}

}  // namespace expanse::gpu::testing

#endif  // EXPANSE_GPU_FAKE_NVML_TEST_UTIL_H_
