#include "dcgm/dcgmi_commands.h"

#include "dcgm/dcgm_fields.h"

namespace expanse::dcgm {

std::vector<std::string> DmonArgv(const DcgmiOptions& options,
                                  std::span<const uint16_t> field_ids) {
  return {options.dcgmi, "dmon",
          "--host",      options.host,
          "-e",          FieldIdList(field_ids),
          "-d",          std::to_string(options.interval.count())};
}

std::vector<std::string> HealthCheckArgv(const DcgmiOptions& options) {
  return {options.dcgmi, "health", "--host", options.host, "-c", "-j"};
}

std::vector<std::string> HealthSetArgv(const DcgmiOptions& options) {
  return {options.dcgmi, "health", "--host", options.host, "-s", "a"};
}

std::vector<std::string> DiscoveryArgv(const DcgmiOptions& options) {
  return {options.dcgmi, "discovery", "--host", options.host, "-l"};
}

}  // namespace expanse::dcgm
