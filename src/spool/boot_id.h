// The kernel's boot id, which tells one boot of a worker from the next: spool sequence
// numbers restart with each boot, so (host, boot id, sequence) names a spool file uniquely.
#ifndef EXPANSE_SPOOL_BOOT_ID_H_
#define EXPANSE_SPOOL_BOOT_ID_H_

#include <string>

#include "core/result.h"

namespace expanse::spool {

inline constexpr char kDefaultBootIdPath[] = "/proc/sys/kernel/random/boot_id";

// The boot id in `path` without its trailing newline. kInvalidArgument (reason
// "spool_bad_boot_id") when it is not IsValidBootId(); tests pass a file of their own.
Result<std::string> ReadBootId(const std::string& path = kDefaultBootIdPath);

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_BOOT_ID_H_
