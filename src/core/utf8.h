// UTF-8 validation for text that crosses a trust boundary (files operators edit,
// spool records, HTTP bodies) before it is stored or echoed anywhere.

#ifndef EXPANSE_CORE_UTF8_H_
#define EXPANSE_CORE_UTF8_H_

#include <string_view>

namespace expanse {

// True when `text` is well-formed UTF-8 as RFC 3629 defines it: no overlong forms,
// no UTF-16 surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no truncated
// sequences. NUL bytes are valid UTF-8; callers that forbid them check separately.
bool IsValidUtf8(std::string_view text);

}  // namespace expanse

#endif  // EXPANSE_CORE_UTF8_H_
