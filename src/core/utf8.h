// UTF-8 validation for text that crosses a trust boundary (files operators edit,
// spool records, HTTP bodies) before it is stored or echoed anywhere.

#ifndef EXPANSE_CORE_UTF8_H_
#define EXPANSE_CORE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace expanse {

// True when `text` is well-formed UTF-8 as RFC 3629 defines it: no overlong forms,
// no UTF-16 surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no truncated
// sequences. NUL bytes are valid UTF-8; callers that forbid them check separately.
bool IsValidUtf8(std::string_view text);

// `text` made fit for a record another program checks (a batch the server refuses whole when
// one field breaks its rules): control characters become '?'; it is cut to at most `max_bytes`
// at a character's start; and if what is left is still not valid UTF-8, every non-ASCII byte of
// it becomes '?'. SLURM job names, accounts and node lists are written by users and can be
// anything.
std::string CleanText(std::string text, std::size_t max_bytes);

}  // namespace expanse

#endif  // EXPANSE_CORE_UTF8_H_
