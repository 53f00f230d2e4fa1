// Durations as operators write them on command lines: "90s", "1m", "1h30m", "500ms", "2d".
#ifndef EXPANSE_CORE_DURATION_H_
#define EXPANSE_CORE_DURATION_H_

#include <chrono>
#include <string_view>

#include "core/result.h"

namespace expanse {

// One or more <integer><unit> parts, units ms, s, m, h, d. A bare "0" is zero. Anything else,
// or a total above 365 days, is kInvalidArgument with a message that shows the accepted form.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

}  // namespace expanse

#endif  // EXPANSE_CORE_DURATION_H_
