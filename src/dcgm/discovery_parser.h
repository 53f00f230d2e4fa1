// Parser of `dcgmi discovery -l`: DCGM's GPU ids with their UUIDs, so dmon rows ("GPU 0") and
// health findings (entity 0) can be keyed by the NVML UUID every other GPU series uses. DCGM
// numbers GPUs itself; the ids usually follow NVML's order but nothing promises it.
//
// The format (Query.cpp and DcgmiOutput.cpp in NVIDIA/DCGM; tests/fixtures/dcgm/README.md):
//   2 GPUs found (Active).                       <- "2 GPUs found." before 4.x
//   +--------+-------------------------...-+
//   | GPU ID | Device Information          |
//   +--------+-------------------------...-+
//   | 0      | Name: NVIDIA H200           |
//   |        | PCI Bus ID: 00000000:00:06.0|
//   |        | Device UUID: GPU-7271b7f6-...|
//   +--------+-------------------------...-+
//   0 NvSwitches found.                          <- then switch, ConnectX and CPU tables
#ifndef EXPANSE_DCGM_DISCOVERY_PARSER_H_
#define EXPANSE_DCGM_DISCOVERY_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::dcgm {

inline constexpr size_t kMaxDiscoveryOutputBytes = 1 << 20;
inline constexpr size_t kMaxDiscoveredGpus = 1024;

struct DiscoveredGpu {
  uint32_t gpu_id = 0;
  std::string name;        // "NVIDIA H200"
  std::string pci_bus_id;  // "00000000:00:06.0"
  std::string uuid;        // "GPU-…"; empty when dcgmi could not read the GPU's attributes
};

// The GPUs in the order listed, or:
// - kUnavailable, reason "engine_unreachable" (or another dcgmi failure reason) when dcgmi
//   printed an error instead of the table;
// - kInvalidArgument, reason "dcgmi_discovery_output", naming the line, when the output is not
//   this format (no "GPUs found" line, a row outside a GPU, a count that disagrees with the rows)
//   or cannot be mapped (a GPU id or a UUID listed twice).
Result<std::vector<DiscoveredGpu>> ParseDiscoveryList(std::string_view output);

}  // namespace expanse::dcgm

#endif  // EXPANSE_DCGM_DISCOVERY_PARSER_H_
