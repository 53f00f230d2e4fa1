// Quoting text for a POSIX shell script we generate (SLURM hook wrappers, install scripts).
#ifndef EXPANSE_CORE_SHELL_QUOTE_H_
#define EXPANSE_CORE_SHELL_QUOTE_H_

#include <string>
#include <string_view>

namespace expanse {

// `text` as exactly one shell word: in single quotes, each ' written as '\''. Inside single
// quotes nothing is special ($, `, \, newlines), so any bytes come through unchanged, except
// NUL, which no shell word can hold: callers must refuse it first.
std::string ShellQuote(std::string_view text);

}  // namespace expanse

#endif  // EXPANSE_CORE_SHELL_QUOTE_H_
