// `expanse-cupti-helper plan --chip <name>|all`: which metric each counter series would use on
// a chip, and why a series would be absent, worked out by the libcupti's own profiler host
// calls, which need no GPU and no driver. Operators see what their GPUs will report before
// installing; the tests check the sets against the real libcupti for every chip it knows.
// What a running GPU then takes can only be less (another profiler holding some counters).
#ifndef EXPANSE_CUPTI_CUDA_PLAN_H_
#define EXPANSE_CUPTI_CUDA_PLAN_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cupti/call_watchdog.h"

namespace expanse::cupti {

struct PlanOptions {
  std::string libcupti;            // "" = beside the helper, then the loader's path
  std::vector<std::string> chips;  // CUPTI chip names ("GH100"); {"all"} = every chip listed
};

// docs/formats/cupti-helper.md, "Plan report". Fails (a "reason" key) only when libcupti cannot
// be opened or lists no chips; a chip it does not know gets its own "error".
nlohmann::json Plan(const PlanOptions& options, CallWatchdog& watchdog);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_CUDA_PLAN_H_
