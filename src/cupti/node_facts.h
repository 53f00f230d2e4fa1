// What the kernel says about this process's profiling rights and the NVIDIA driver, for the
// helper's probe report: the effective capabilities (CAP_PERFMON, CAP_SYS_ADMIN) from
// /proc/self/status, RmProfilingAdminOnly from /proc/driver/nvidia/params and the driver
// version from /proc/driver/nvidia/version. Parsers take the file text, so tests need no /proc.
#ifndef EXPANSE_CUPTI_NODE_FACTS_H_
#define EXPANSE_CUPTI_NODE_FACTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace expanse::cupti {

inline constexpr int kCapSysAdmin = 21;
inline constexpr int kCapPerfmon = 38;

// The CapEff mask of a /proc/<pid>/status text; nullopt when absent or malformed.
std::optional<uint64_t> ParseEffectiveCapabilities(std::string_view proc_status);
inline bool HasCapability(uint64_t mask, int capability) { return (mask >> capability) & 1U; }

// RmProfilingAdminOnly (0 or 1) from /proc/driver/nvidia/params; nullopt when absent.
std::optional<int> ParseRmProfilingAdminOnly(std::string_view params);

// "580.95.05" from /proc/driver/nvidia/version's NVRM line; "" when not found.
std::string ParseNvidiaDriverVersion(std::string_view version_file);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_NODE_FACTS_H_
