// Checks of user-supplied strings at the API edge. Each returns kInvalidArgument with a message
// that names the field and what is wrong, and reason "invalid_argument".
#ifndef EXPANSE_SERVER_VALIDATE_H_
#define EXPANSE_SERVER_VALIDATE_H_

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace expanse::server {

// Valid UTF-8, 1..max_bytes bytes, no control characters.
Status ValidateText(std::string_view field, std::string_view value, size_t max_bytes);
// Like ValidateText, but an empty value is allowed.
Status ValidateOptionalText(std::string_view field, std::string_view value, size_t max_bytes);
// [a-z0-9] and inner '-', 1..63 bytes.
Status ValidateSlug(std::string_view field, std::string_view value);
// One '@' with text on both sides, no spaces, at most 254 bytes.
Status ValidateEmail(std::string_view value);
// A hostname or host label: [A-Za-z0-9._-], 1..253 bytes.
Status ValidateHostname(std::string_view field, std::string_view value);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_VALIDATE_H_
