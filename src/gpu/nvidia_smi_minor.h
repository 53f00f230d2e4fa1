// Where the nvidia-smi backend finds a GPU's minor number (the N of /dev/nvidiaN), which
// --query-gpu does not report. Internal to the gpu module.
//
// First source: the driver's procfs file /proc/driver/nvidia/gpus/<bus id>/information, a
// line "Device Minor: \t 0". The directory is named by the kernel's PCI address, lower-case
// hex with a 4-digit domain ("0000:3b:00.0"), while nvidia-smi prints an 8-digit upper-case
// domain ("00000000:3B:00.0"); see ProcfsBusIdCandidates for the assumed mapping.
// Second source: `nvidia-smi -q -x`, whose <gpu id="<bus id>"> elements hold <minor_number>.

#ifndef EXPANSE_GPU_NVIDIA_SMI_MINOR_H_
#define EXPANSE_GPU_NVIDIA_SMI_MINOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::gpu {

// The "Device Minor:" value of a procfs information file. Pure.
Result<uint32_t> ParseProcfsDeviceMinor(std::string_view information);

// The procfs directory names to try for a bus id as nvidia-smi prints it: the id as given,
// then lower-cased with the domain rewritten the way Linux prints it ("%04x", so 0x0000 is
// "0000" and an 8-digit "00010000" becomes "10000"). Empty when `pci_bus_id` holds anything
// but hex digits, ':' and '.', so it can never name a path outside the directory.
std::vector<std::string> ProcfsBusIdCandidates(std::string_view pci_bus_id);

// Reads <proc_root>/driver/nvidia/gpus/<candidate>/information for each candidate; nullopt
// when none exists or none holds a readable "Device Minor:" line. `proc_root` is "/proc"
// outside tests.
std::optional<uint32_t> MinorFromProcfs(std::string_view proc_root, std::string_view pci_bus_id);

// <minor_number> per <gpu id="..."> in `nvidia-smi -q -x` output. A cheap scan, not an XML
// parser: it relies on nvidia-smi's layout, the id attribute first and <minor_number> inside
// the gpu element before the next one starts. GPUs whose minor number is "N/A" or missing are
// left out. Pure; errors are kInvalidArgument, reason "nvidia_smi_output".
struct XmlGpuMinor {
  std::string pci_bus_id;  // as nvidia-smi prints it: "00000000:00:06.0"
  uint32_t minor = 0;
};
Result<std::vector<XmlGpuMinor>> ParseXmlMinorNumbers(std::string_view xml);

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_NVIDIA_SMI_MINOR_H_
