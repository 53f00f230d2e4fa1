// RecordBudget: how much of each second the capture agent lets CUPTI record, so that what
// recording costs the job stays within a budget whatever the job launches.
//
// CUPTI's Activity API adds a fixed cost to every kernel launch, copy and synchronisation it
// records, in the job's own thread (about 2.3 us per record on an H200 with CUDA 13.0: a loop of
// tiny kernels ran 27 % slower with every kind recorded). A job launching 600 large kernels a
// second pays nothing measurable, one launching 160,000 tiny ones pays a quarter of its time.
// So the agent can record in bursts: each cycle (a second) it records for `duty` of the cycle and
// leaves CUPTI's kinds off for the rest, with `duty` chosen from the record rate it saw while
// on, so that rate x cost x duty stays within a budget (say 1 % of the job's time always-on,
// 4 % while a Phase B trace is kept: the ceilings are 2 % and 5 %). Aggregates of a
// sampled window are scaled to the whole window and say how much of it was observed.
//
// Off by default (a budget of 1: everything recorded): on the H200 the job paid the same with
// the kinds off, since the cost stays while CUPTI is attached to the process. The agent now
// detaches CUPTI between bursts (cuda/injection.cc); bursts become the default once the H200
// shows that lowering the cost (docs/capture-agent.md).
#ifndef EXPANSE_CAPTURE_RECORD_BUDGET_H_
#define EXPANSE_CAPTURE_RECORD_BUDGET_H_

#include <cstdint>

namespace expanse::capture {

struct BudgetOptions {
  double always_on_fraction = 1.0;  // of the job's time, always-on aggregates (1: no budget)
  double trace_fraction = 1.0;      // while a Phase B trace segment is being kept
  uint64_t record_cost_ns = 2300;   // CUPTI's cost per record in the launching thread (H200)
  double min_duty = 0.01;           // never less than 10 ms of each second
  double first_duty = 0.1;          // before any rate is known: a short look first
};

class RecordBudget {
 public:
  explicit RecordBudget(BudgetOptions options = {}) : options_(options) {}

  // `records` arrived for `on_ms` of recording (the cycle that just ended).
  void Observe(uint64_t records, uint64_t on_ms);

  // The share of the next cycle to record, in [min_duty, 1].
  double Duty(bool tracing) const;
  // Milliseconds of a `cycle_ms` cycle to record: at least 1, at most the cycle.
  uint64_t OnMs(uint64_t cycle_ms, bool tracing) const;

  // Records per second while recording, as last estimated (negative: none yet).
  double records_per_second() const { return rate_; }

 private:
  BudgetOptions options_;
  double rate_ = -1;
};

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_RECORD_BUDGET_H_
