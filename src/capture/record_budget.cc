#include "capture/record_budget.h"

#include <algorithm>
#include <cmath>

namespace expanse::capture {

void RecordBudget::Observe(uint64_t records, uint64_t on_ms) {
  if (on_ms == 0)
    return;  // nothing was recorded: the rate is what it was
  const double rate = static_cast<double>(records) * 1000.0 / static_cast<double>(on_ms);
  // A rising rate is taken at once (the job pays for it now); a falling one is believed by half
  // each cycle, so one quiet burst does not open the gate fully on a busy job.
  rate_ = rate_ < 0 || rate >= rate_ ? rate : (rate_ + rate) / 2;
}

double RecordBudget::Duty(bool tracing) const {
  const double budget = tracing ? options_.trace_fraction : options_.always_on_fraction;
  if (budget >= 1.0)
    return 1.0;  // no budget: everything is recorded
  if (rate_ < 0)
    return std::max(options_.first_duty, options_.min_duty);
  const double cost = rate_ * static_cast<double>(options_.record_cost_ns) * 1e-9;
  if (cost <= budget)
    return 1.0;
  return std::clamp(budget / cost, options_.min_duty, 1.0);
}

uint64_t RecordBudget::OnMs(uint64_t cycle_ms, bool tracing) const {
  const double duty = Duty(tracing);
  if (duty >= 1.0)
    return cycle_ms;
  const auto on = static_cast<uint64_t>(std::llround(duty * static_cast<double>(cycle_ms)));
  return std::clamp<uint64_t>(on, 1, cycle_ms);
}

}  // namespace expanse::capture
