// `expanse-cupti-helper probe --json`: can this process sample each GPU's PM counters, and if
// not, why. It really enables, configures and starts the Light set on each GPU, then lets go,
// so "ok" means the service's own rights, driver and libraries work together.
#ifndef EXPANSE_CUPTI_CUDA_PROBE_H_
#define EXPANSE_CUPTI_CUDA_PROBE_H_

#include <string>

#include <nlohmann/json.hpp>

#include "cupti/call_watchdog.h"
#include "cupti/cuda/pm_device.h"

namespace expanse::cupti {

struct ProbeOptions {
  std::string libcuda;   // "" = the loader's libcuda.so.1
  std::string libcupti;  // "" = beside the helper, then the loader's path
  std::string proc_root = "/proc";
  PmOptions pm;
};

// docs/formats/cupti-helper.md, "Probe report".
nlohmann::json Probe(const ProbeOptions& options, CallWatchdog& watchdog);

// The variant this helper was built for ("cuda1300") and its toolkit's CUDA version.
std::string VariantName();

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_CUDA_PROBE_H_
