// The counter sets expanse-cupti-helper samples, named for what they measure.
//
// Each series lists CUPTI metric names in order of preference: PM sampling exposes different
// names per chip and CUPTI release, so the helper keeps the first one the chip accepts and
// leaves the series absent when none is. A set that does not fit one PM pass loses series from
// its end, so the order within a set is also the order of importance.
#ifndef EXPANSE_CUPTI_METRIC_SETS_H_
#define EXPANSE_CUPTI_METRIC_SETS_H_

#include <string>
#include <string_view>
#include <vector>

namespace expanse::cupti {

struct CounterSeries {
  std::string series;                   // docs/formats/metrics.md, e.g. "gpu.sm_active"
  std::vector<std::string> candidates;  // CUPTI metric names, preferred first
  double scale = 1.0;                   // CUPTI value × scale = series value (percent → ratio)
};

enum class CounterSet { kLight, kRich };

std::string_view CounterSetName(CounterSet set);

// Always on: SM activity and throughput, tensor-pipe activity, DRAM activity and throughput,
// then PCIe and NVLink traffic where one pass still allows them.
const std::vector<CounterSeries>& LightSet();

// During an escalation window: every Light series, ordered SM/tensor/DRAM activity, then pipe
// activity by precision, cache hit rates and the main warp stall reasons, then the rest of the
// Light set (so the one-pass cut takes the optional Light series first).
const std::vector<CounterSeries>& RichSet();

const std::vector<CounterSeries>& SeriesOf(CounterSet set);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_METRIC_SETS_H_
