// Parser of `dcgmi health -c -j` (check the group's health watches, as JSON). Pure; fixtures and
// fuzz/fuzz_dcgmi_output.cc drive it directly.
//
// The document is dcgmi's generic output tree printed by jsoncpp (Health.cpp and DcgmiOutput.cpp
// in NVIDIA/DCGM; tests/fixtures/dcgm/README.md): every node is {"value": text, "overflow":
// [text...], "children": {name: node}}, the sections sit under "body":
//   {"body": {"Overall Health": {"value": "Failure"},
//             "GPU": {"children": {"1": {"value": "Failure",
//               "children": {"Errors": {"children": {"Memory system": {"value": "Failure",
//                 "overflow": ["Detected 2 volatile double-bit ECC error(s) in GPU 1."]}}}}}}}},
//    "header": ["Health Monitor Report"]}
// Health values are "Healthy", "Warning", "Failure" (and "Internal error"). dcgmi breaks a
// system's messages, joined with ", ", into pieces of about 54 characters in "overflow"; they
// are joined back with single blanks. An entity group's section is named as DCGM names the group
// ("GPU", "Switch", "GPU_I", "ConnectX", ...).
#ifndef EXPANSE_DCGM_HEALTH_PARSER_H_
#define EXPANSE_DCGM_HEALTH_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::dcgm {

inline constexpr size_t kMaxHealthOutputBytes = 1 << 20;
inline constexpr size_t kMaxHealthEntities = 1024;
inline constexpr size_t kMaxHealthIncidents = 64;  // systems with findings, per entity
inline constexpr size_t kMaxHealthMessageBytes = 4096;

enum class Health { kPass, kWarn, kFail, kUnknown };

// "pass", "warn", "fail", "unknown".
std::string_view HealthName(Health health);

struct HealthIncident {
  // A stable name: "pcie", "nvlink", "memory", "sm", "inforom", "thermal", "power", "driver",
  // "connectx", "pmu", "mcu"; "other" for a system this build does not know (4.6 prints
  // "Internal error" for the NvSwitch watches).
  std::string system;
  std::string system_label;  // as dcgmi printed it, e.g. "Memory system"
  Health health = Health::kUnknown;
  std::string message;  // every finding of the system, as dcgmi joined them
};

struct EntityHealth {
  std::string entity_group;  // "GPU" for GPUs
  uint32_t entity_id = 0;    // DCGM's id within the group (for GPUs: `discovery -l`'s GPU ID)
  Health health = Health::kUnknown;
  std::vector<HealthIncident> incidents;
};

struct HealthReport {
  Health overall = Health::kUnknown;
  std::vector<EntityHealth> entities;  // only entities with findings; a healthy one is absent
};

// The report, or:
// - kUnavailable, reason "engine_unreachable": no host engine at --host;
// - kFailedPrecondition, reason "health_watches_not_enabled": `dcgmi health -s` first;
// - kUnavailable, reason "health_check_failed" or "dcgmi_error": another error dcgmi printed;
// - kInvalidArgument, reason "dcgmi_health_output": not this format, with the JSON path of the
//   first thing wrong, e.g. `dcgmi health JSON: body.GPU.children."7".value must be a string`;
//   also for output past the limits above.
Result<HealthReport> ParseHealthCheck(std::string_view output);

}  // namespace expanse::dcgm

#endif  // EXPANSE_DCGM_HEALTH_PARSER_H_
