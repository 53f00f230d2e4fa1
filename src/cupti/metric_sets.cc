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
      // Warp instructions executed against the SMs' sustained peak rate, named for that: Nsight
      // Compute's "SM Throughput" is sm__throughput (the busiest SM unit), a different measure
      // that takes 10-19 PM passes on every chip.
      {"gpu.sm_inst_executed",
       {"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
        "sm__inst_executed.avg.pct_of_peak_sustained_elapsed"},
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
  // Series are placed in order, each where it still fits the one pass, so the escalation's own
  // series come right after the three activity series and before the Light set's optional ones
  // (throughputs, PCIe, NVLink): on a chip where the pass is nearly full, escalating still adds
  // evidence. Candidates that are NVIDIA's own one-pass "TriageCompute" counters (Hopper,
  // Blackwell) come first where the plain name needs more passes there.
  //
  // No warp stall reasons: every smsp__warps_issue_stalled_* counter needs two PM passes on
  // every chip CUPTI 13.0 knows (`expanse-cupti-helper plan`), so they can never be sampled
  // this way; the capture agent's PC sampling gives stall reasons per instruction instead.
  // Nor FP16 instructions (sm__inst_executed_pipe_fma_type_fp16) or the L1 hit rate: `plan`
  // found no chip with room for either beside the series here.
  const std::vector<CounterSeries> light = MakeLightSet();
  std::vector<CounterSeries> rich(light.begin(), light.begin() + 3);
  const std::vector<CounterSeries> extra = {
      // How much of the FMA pipe's peak was used: FP32 add/multiply/FMA and integer multiply
      // (and FP16x2 on GA10x). Busy while the tensor pipes idle: matrix work done in FP32
      // rather than on tensor cores. Cycles the pipe was busy where the chip takes that in the
      // pass, else instructions issued to it against its peak rate (Hopper's one-pass form).
      {"gpu.fma_pipe_utilization",
       {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "TPC.TriageCompute.sm__inst_executed_pipe_fma_realtime.avg.pct_of_peak_sustained_elapsed",
        "sm__inst_executed_pipe_fma_realtime.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      // Share of the SMs' issue slots used (cycles in which a sub-partition issued an
      // instruction): low beside high sm_active means resident warps that could not issue
      // (waiting on memory, barriers, dependencies).
      {"gpu.issue_active", {"sm__issue_active.avg.pct_of_peak_sustained_elapsed"}, kPercent},
      // Resident warps against the most an SM holds, over its active cycles.
      {"gpu.achieved_occupancy", {"sm__warps_active.avg.pct_of_peak_sustained_active"}, kPercent},
      {"gpu.fp64_pipe_active",
       {"TPC.TriageCompute.sm__pipe_fp64_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"},
       kPercent},
      {"gpu.l2_hit_rate",
       {"LTS.TriageCompute.lts__average_t_sector_hit_rate_realtime.pct",
        "lts__t_sector_hit_rate.pct"},
       kPercent},
      // Bytes moved to and from DRAM each second, by direction.
      {"gpu.dram_read_bytes_per_s", {"dram__bytes_read.sum.per_second"}, 1.0},
      {"gpu.dram_write_bytes_per_s", {"dram__bytes_write.sum.per_second"}, 1.0},
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
