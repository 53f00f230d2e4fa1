// Parser for `nvidia-smi pmon` (per-process GPU utilisation). Internal to the gpu module; pure,
// so fixtures and fuzz/fuzz_nvidia_smi_csv drive it directly.
//
// The format, as driver 580.159.04 prints `pmon -c 2` (tests/fixtures/gpu/h200/):
//   # gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command
//   # Idx           #    C/G      %      %      %      %      %      %    name
//       0        521     C     98     23      -      -      -      -    python3
// '#' lines hold the column names (the first that names "pid") and their units. Data lines are
// blank-separated, the command name last; "-" means no value (no sample in the window, or in the
// pid column, a GPU with no process). The gpu column is nvidia-smi's index, not a minor number.

#ifndef EXPANSE_GPU_NVIDIA_SMI_PMON_H_
#define EXPANSE_GPU_NVIDIA_SMI_PMON_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::gpu {

// One process line of pmon output.
struct PmonRow {
  uint32_t gpu_index = 0;
  uint32_t pid = 0;
  std::optional<uint32_t> sm_util;  // percent
  std::optional<uint32_t> mem_util;
};

// Every process line, in output order (`pmon -c N` prints N samples per process). Columns are
// found by name, so any -s selection that includes "u" parses. Lines whose pid is "-" are
// skipped. Errors are kInvalidArgument, reason "nvidia_smi_output", naming line and column:
//   nvidia-smi pmon line 3 column sm: expected a percentage or "-", got "x"
Result<std::vector<PmonRow>> ParsePmon(std::string_view text);

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_NVIDIA_SMI_PMON_H_
