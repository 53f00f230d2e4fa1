#include "cupti/device_plan.h"

#include <algorithm>

#include "cupti/helper_records.h"

namespace expanse::cupti {

CounterSet DevicePlan::Wanted(SteadyTime now) const {
  return now < rich_until_ ? CounterSet::kRich : CounterSet::kLight;
}

bool DevicePlan::Escalate(SteadyTime now, std::chrono::seconds window) {
  if (!options_.escalation_enabled || window <= std::chrono::seconds(0))
    return false;
  rich_until_ = std::max(rich_until_, now + std::min(window, kMaxEscalation));
  return true;
}

void DevicePlan::Released(SteadyTime now) {
  backoff_ = backoff_ == std::chrono::milliseconds(0)
                 ? options_.initial_backoff
                 : std::min(backoff_ * 2, options_.max_backoff);
  retry_at_ = now + backoff_;
}

}  // namespace expanse::cupti
