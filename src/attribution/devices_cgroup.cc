#include "attribution/devices_cgroup.h"

#include <cstddef>

#include "attribution/parse_util.h"
#include "core/quote.h"

namespace expanse::attribution {
namespace {

constexpr size_t kMaxDevicesListBytes = size_t{64} * 1024;

}  // namespace

std::string SlurmV1JobCgroup(std::string_view prefix, uint32_t uid, uint32_t job_id) {
  while (prefix.starts_with('/')) {
    prefix.remove_prefix(1);
  }
  while (prefix.ends_with('/')) {
    prefix.remove_suffix(1);
  }
  return "/" + std::string(prefix) + "/uid_" + std::to_string(uid) + "/job_" +
         std::to_string(job_id);
}

Result<std::string> ReadJobDevicesList(std::string_view cgroup_root, std::string_view job_cgroup,
                                       const FileReader& reader) {
  bool safe = job_cgroup.starts_with('/');
  if (safe) {
    for (const std::string_view component : internal::Split(job_cgroup.substr(1), '/')) {
      safe = safe && component != "." && component != "..";
    }
  }
  if (!safe) {
    return InvalidArgumentError("job cgroup " + QuoteForMessage(job_cgroup) +
                                " is not an absolute path without . or .. components");
  }
  const std::string path =
      std::string(cgroup_root) + "/devices" + std::string(job_cgroup) + "/devices.list";
  EXPANSE_ASSIGN_OR_RETURN(CappedFile file, reader.Read(path, kMaxDevicesListBytes));
  if (file.truncated) {
    return ResourceExhaustedError(QuoteForMessage(path, 200) + " is longer than " +
                                  std::to_string(kMaxDevicesListBytes) + " bytes");
  }
  return std::move(file.bytes);
}

}  // namespace expanse::attribution
