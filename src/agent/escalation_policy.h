// EscalationPolicy: when a job's GPU deserves a closer look. The counter helper then samples
// that GPU's Rich set (stall reasons, pipes by precision, cache hit rates) for a bounded window,
// so the moment a GPU goes idle or slows down is recorded with the evidence that explains it.
//
// A GPU allocated to a job triggers when its NVML utilisation falls below the idle threshold
// from above it, or drops to less than half of its recent level (an exponential average over
// about ten samples) while that level was meaningful. A triggered GPU does not trigger again
// until its window has passed. Pure: the caller supplies readings and time.
#ifndef EXPANSE_AGENT_ESCALATION_POLICY_H_
#define EXPANSE_AGENT_ESCALATION_POLICY_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace expanse::agent {

struct EscalationPolicyOptions {
  double idle_percent = 5.0;         // below this a GPU is idle (the stack-burst threshold)
  double meaningful_percent = 20.0;  // a drop counts only from a level above this
  std::chrono::seconds window{60};   // how long the Rich set runs
};

struct Escalation {
  std::string uuid;
  std::string reason;  // "gpu_idle" or "throughput_drop"
};

class EscalationPolicy {
 public:
  explicit EscalationPolicy(EscalationPolicyOptions options) : options_(options) {}

  // One reading per GPU allocated to a job now (NVML utilisation, percent); GPUs not listed
  // are forgotten. Returns the GPUs to escalate, and why.
  std::vector<Escalation> Observe(int64_t now_ms, const std::map<std::string, double>& sm_util);

  std::chrono::seconds window() const { return options_.window; }

 private:
  struct Gpu {
    double average = -1;  // < 0: no reading yet
    double last = -1;
    int64_t quiet_until_ms = 0;
  };
  EscalationPolicyOptions options_;
  std::map<std::string, Gpu> gpus_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_ESCALATION_POLICY_H_
