#include "attribution/cuda_visible_devices.h"

#include <optional>

#include "attribution/parse_util.h"
#include "core/quote.h"

namespace expanse::attribution {
namespace {

Status Malformed(std::string_view value, const std::string& why) {
  return InvalidArgumentError("CUDA_VISIBLE_DEVICES=" + QuoteForMessage(value) + ": " + why)
      .WithReason("cuda_visible_devices_malformed");
}

bool IsUuidText(std::string_view entry) {
  for (const std::string_view prefix : {"GPU-", "MIG-"}) {
    if (entry.size() > prefix.size() && entry.starts_with(prefix)) {
      return entry.find_first_not_of("0123456789abcdefABCDEF-/GPUMI") == std::string_view::npos;
    }
  }
  return false;
}

}  // namespace

Result<CudaVisibleDevices> ParseCudaVisibleDevices(std::string_view value) {
  CudaVisibleDevices devices;
  const std::string_view trimmed = internal::TrimBlank(value);
  if (trimmed.empty()) {
    return devices;
  }
  if (trimmed == "NoDevFiles") {
    return FailedPreconditionError(
               "CUDA_VISIBLE_DEVICES=\"NoDevFiles\": gres.conf gives the GPUs no File=, so SLURM "
               "could not name them")
        .WithReason("no_device_files");
  }
  for (const std::string_view raw : internal::Split(trimmed, ',')) {
    const std::string_view entry = internal::TrimBlank(raw);
    if (entry.empty()) {
      return Malformed(value, "empty entry");
    }
    if (const std::optional<uint32_t> index = internal::ParseDecimalU32(entry)) {
      devices.indices.push_back(*index);
    } else if (IsUuidText(entry)) {
      devices.uuids.emplace_back(entry);
    } else {
      return Malformed(value,
                       "entry " + QuoteForMessage(entry) + " is neither an index nor a UUID");
    }
  }
  if (!devices.indices.empty() && !devices.uuids.empty()) {
    return Malformed(value, "mixes indices and UUIDs");
  }
  return devices;
}

}  // namespace expanse::attribution
