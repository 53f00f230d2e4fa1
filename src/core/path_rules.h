// The rule for absolute paths that the installer, its units and the console's install
// templates write into files a shell or systemd later reads.
#ifndef EXPANSE_CORE_PATH_RULES_H_
#define EXPANSE_CORE_PATH_RULES_H_

#include <string_view>

#include "core/status.h"

namespace expanse {

// kInvalidArgument (reason invalid_path) unless `path` is absolute, valid UTF-8, at most
// PATH_MAX - 1 bytes, free of control characters and of "." and ".." components. `field`
// names the value in the message (e.g. "--shared-prefix"); the value itself is quoted.
Status CheckAbsolutePath(std::string_view field, std::string_view path);

}  // namespace expanse

#endif  // EXPANSE_CORE_PATH_RULES_H_
