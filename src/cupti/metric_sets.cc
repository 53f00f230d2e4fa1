#include "cupti/metric_sets.h"

namespace expanse::cupti {
namespace {

// CUPTI reports "pct_of_peak" metrics in percent; the series are ratios 0..1 like DCGM's.
constexpr double kPercent = 0.01;

std::vector<CounterSeries> MakeLightSet() {
  return {
      // Share of cycles an SM had at least one warp resident (DCGM's SM_ACTIVE).
      // (One scale per series: every candidate of a series must be in the same unit.)
      {"gpu.sm_active", {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}, kPercent},
      // Share of cycles the tensor pipes were busy (DCGM's PIPE_TENSOR_ACTIVE).
      {"gpu.tensor_active",
       {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      // Share of cycles the DRAM interface was busy (DCGM's DRAM_ACTIVE).
      {"gpu.dram_active", {"dram__cycles_active.avg.pct_of_peak_sustained_elapsed"}, kPercent},
      // Instruction throughput against the SMs' sustained peak.
      {"gpu.sm_throughput",
       {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      // DRAM bandwidth used against its peak.
      {"gpu.dram_throughput",
       {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      {"gpu.pcie_rx_bytes_per_s", {"pcie__read_bytes.sum.per_second"}, 1.0},
      {"gpu.pcie_tx_bytes_per_s", {"pcie__write_bytes.sum.per_second"}, 1.0},
      {"gpu.nvlink_rx_bytes_per_s", {"nvlrx__bytes.sum.per_second"}, 1.0},
      {"gpu.nvlink_tx_bytes_per_s", {"nvltx__bytes.sum.per_second"}, 1.0},
  };
}

std::vector<CounterSeries> MakeRichSet() {
  // The one-pass cut drops series from the end, so the escalation's own series come right after
  // the three activity series and before the Light set's optional ones (throughputs, PCIe,
  // NVLink): on a chip where the Light set nearly fills a pass, escalating still adds evidence.
  const std::vector<CounterSeries> light = MakeLightSet();
  std::vector<CounterSeries> rich(light.begin(), light.begin() + 3);
  const std::vector<CounterSeries> extra = {
      {"gpu.fp32_active",
       {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      {"gpu.fp16_active",
       {"sm__pipe_fp16_cycles_active.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      {"gpu.fp64_active",
       {"sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      {"gpu.l2_hit_rate", {"lts__t_sector_hit_rate.pct"}, kPercent},
      {"gpu.l1_hit_rate", {"l1tex__t_sector_hit_rate.pct"}, kPercent},
      // Warps stalled per active cycle, by reason: memory latency, barriers, pipe and MIO
      // pressure. Per cycle, so the value does not grow with the sample's length.
      {"gpu.stall_long_scoreboard",
       {"smsp__warps_issue_stalled_long_scoreboard.avg.per_cycle_active"},
       1.0},
      {"gpu.stall_barrier", {"smsp__warps_issue_stalled_barrier.avg.per_cycle_active"}, 1.0},
      {"gpu.stall_math_pipe_throttle",
       {"smsp__warps_issue_stalled_math_pipe_throttle.avg.per_cycle_active"},
       1.0},
      {"gpu.stall_mio_throttle",
       {"smsp__warps_issue_stalled_mio_throttle.avg.per_cycle_active"},
       1.0},
      {"gpu.stall_membar", {"smsp__warps_issue_stalled_membar.avg.per_cycle_active"}, 1.0},
  };
  rich.insert(rich.end(), extra.begin(), extra.end());
  rich.insert(rich.end(), light.begin() + 3, light.end());
  return rich;
}

}  // namespace

std::string_view CounterSetName(CounterSet set) {
  return set == CounterSet::kLight ? "light" : "rich";
}

const std::vector<CounterSeries>& LightSet() {
  static const auto* set = new std::vector<CounterSeries>(MakeLightSet());
  return *set;
}

const std::vector<CounterSeries>& RichSet() {
  static const auto* set = new std::vector<CounterSeries>(MakeRichSet());
  return *set;
}

const std::vector<CounterSeries>& SeriesOf(CounterSet set) {
  return set == CounterSet::kLight ? LightSet() : RichSet();
}

}  // namespace expanse::cupti
