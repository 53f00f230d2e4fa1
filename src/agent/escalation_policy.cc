#include "agent/escalation_policy.h"

namespace expanse::agent {

std::vector<Escalation> EscalationPolicy::Observe(int64_t now_ms,
                                                  const std::map<std::string, double>& sm_util) {
  std::vector<Escalation> escalate;
  std::map<std::string, Gpu> seen;
  for (const auto& [uuid, util] : sm_util) {
    Gpu gpu = gpus_.count(uuid) != 0 ? gpus_[uuid] : Gpu{};
    if (gpu.last >= 0 && now_ms >= gpu.quiet_until_ms) {
      const bool went_idle = gpu.last >= options_.idle_percent && util < options_.idle_percent;
      const bool slowed = gpu.average > options_.meaningful_percent && util < gpu.average / 2;
      if (went_idle || slowed) {
        escalate.push_back({uuid, went_idle ? "gpu_idle" : "throughput_drop"});
        gpu.quiet_until_ms =
            now_ms + std::chrono::duration_cast<std::chrono::milliseconds>(options_.window).count();
      }
    }
    gpu.average = gpu.average < 0 ? util : gpu.average + (util - gpu.average) / 10;
    gpu.last = util;
    seen[uuid] = gpu;
  }
  gpus_ = std::move(seen);
  return escalate;
}

}  // namespace expanse::agent
