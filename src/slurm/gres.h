// GPU indices in SLURM's GRES allocation strings, as `scontrol show job -d` prints them per host
// ("GRES=gpu:2(IDX:0-1)") and squeue --json in gres_detail (verified on 22.05.8 and seen in
// 23.02 output). With types: "gpu:a100:2(IDX:0-1)"; several kinds: "gpu:1(IDX:0),mps:100(0/100)".
#ifndef EXPANSE_SLURM_GRES_H_
#define EXPANSE_SLURM_GRES_H_

#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::slurm {

// Bounds ranges in hostile input; no node has this many GPUs.
inline constexpr int kMaxGpuIndex = 4095;

// "0-1,3" -> {0, 1, 3}: numbers and ranges, ascending and without duplicates in the result.
// "N/A" (SLURM's word for no index) and "" give none. Errors are kInvalidArgument.
Result<std::vector<int>> ParseGresIndexList(std::string_view text);

// The GPU indices of one host's GRES string: the IDX lists of its "gpu" items, merged; other
// GRES kinds are ignored. "" (a host without GRES) and "(null)" give none.
Result<std::vector<int>> GpuIndicesFromGres(std::string_view text);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_GRES_H_
