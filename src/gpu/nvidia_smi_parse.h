// Parsers for nvidia-smi's csv queries. Internal to the gpu module: nvidia_smi_backend.h runs
// the command, nvidia_smi_pmon.h and nvidia_smi_minor.h parse its other outputs. Pure functions
// from bytes to a Result, so fixtures and fuzz/fuzz_nvidia_smi_csv drive them directly.
//
// Formats, as printed by driver 580.159.04 (fixtures in tests/fixtures/gpu/h200/):
//  - --query-gpu / --query-compute-apps with --format=csv[,noheader][,nounits]: one line per GPU
//    or process, cells separated by ", ". With a header, the header may print a field under
//    another name than the one queried ("clocks.sm" is printed "clocks.current.sm [MHz]",
//    "clocks_throttle_reasons.active" as "clocks_event_reasons.active"); without nounits,
//    numbers carry their unit ("143771 MiB", "694.77 W", "100 %", "1455 MHz").
//  - A value nvidia-smi cannot read is "N/A" or a bracketed note ("[N/A]", "[Not Supported]",
//    "[Unknown Error]"); it parses as absent, not as zero.
//  - Cells are not quoted, so a value holding ", " would split; none of the fields queried
//    here (numbers, UUIDs, bus ids, product names) does.

#ifndef EXPANSE_GPU_NVIDIA_SMI_PARSE_H_
#define EXPANSE_GPU_NVIDIA_SMI_PARSE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "gpu/backend.h"

namespace expanse::gpu {

// The --query-gpu fields the backend asks for, in this order. All are in the driver's field
// catalogue (nvidia-smi --help-query-gpu); none reports energy, which --query-gpu lacks.
inline constexpr std::array<std::string_view, 16> kGpuQueryFields = {
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "clocks.sm",
    "clocks.mem",
    "clocks_throttle_reasons.active",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total",
};

// The --query-compute-apps fields the backend asks for (nvidia-smi --help-query-compute-apps).
inline constexpr std::array<std::string_view, 3> kComputeAppsFields = {"pid", "gpu_uuid",
                                                                       "used_memory"};

// Whether the output begins with a header line (--format=csv prints one, csv,noheader not).
enum class CsvHeader { kAbsent, kPresent };

// One GPU's line of --query-gpu output.
struct GpuQueryRow {
  GpuInfo info;  // `minor` stays empty: --query-gpu has no minor number
  std::string driver_version;
  GpuReading reading;
};

// Parses --query-gpu output. Without a header, `fields` names the columns in order and their
// count must match. With one, columns are found by the names in the header, each of `fields`
// must be among them, and columns this parser does not know are skipped. Either way, fields
// it does not know are ignored, and index and uuid must be present in every line.
// Errors are kInvalidArgument, reason "nvidia_smi_output", naming line and column:
//   nvidia-smi line 2 column memory.used: expected a number, got "abc"
Result<std::vector<GpuQueryRow>> ParseGpuQueryCsv(std::string_view text,
                                                  std::span<const std::string_view> fields,
                                                  CsvHeader header);

// Parses --query-compute-apps output the same way; pid and gpu_uuid are required, memory is
// absent where the driver hides it. Empty output and nvidia-smi's "No running processes
// found" both mean no processes.
Result<std::vector<GpuProcess>> ParseComputeAppsCsv(std::string_view text,
                                                    std::span<const std::string_view> fields,
                                                    CsvHeader header);

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_NVIDIA_SMI_PARSE_H_
