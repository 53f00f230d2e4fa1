// Internal to src/slurm: the line syntax of slurm.conf-format files exactly as SLURM 22.05 reads
// it (src/common/parse_config.c: _get_next_line, _strip_comments, _strip_continuation,
// _strip_escapes, keyvalue_pattern, _parse_include_directive). Pure; shared by the reader
// (slurm_conf.cc), the hook wiring and the fuzzer. docs/formats/slurm-conf-patch.md explains the
// rules and where each comes from.
#ifndef EXPANSE_SLURM_SLURM_CONF_SYNTAX_H_
#define EXPANSE_SLURM_SLURM_CONF_SYNTAX_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expanse::slurm::conf_syntax {

// One line as SLURM's parser sees it: one or more physical lines joined by trailing-backslash
// continuations. Invariant: begin < end <= contents.size(); [begin, end) covers whole physical
// lines, including the newline of the last one when the file has it.
struct LogicalLine {
  int first_line = 0;  // 1-based physical line numbers
  int last_line = 0;
  std::size_t begin = 0;
  std::size_t end = 0;
  // Comments cut at the first '#' not escaped by an odd run of backslashes, continuations
  // joined (the backslash and everything after it on that physical line dropped), then every
  // "\x" turned into "x". Keeps the final newline, as fgets(3) does.
  std::string text;
};

// Every logical line of `contents`, in order; every byte sequence has a reading.
std::vector<LogicalLine> SplitLogicalLines(std::string_view contents);

// SLURM's character classes in the C locale (slurmctld and slurmd never call setlocale).
bool IsConfSpace(char c);
bool IsBlank(std::string_view text);

struct KeyValue {
  std::string key;    // as written
  std::string value;  // without the surrounding quotes of a quoted value
  std::string rest;   // the text after the value, verbatim (whitespace only for a plain key)
};

// The first `key=value` of a logical line (keyvalue_pattern in parse_config.c):
//   ^[[:space:]]*([[:alnum:]_.]+)[[:space:]]*([-*+/]?)=[[:space:]]*
//   (("([^"]*)")|([^[:space:]]+))([[:space:]]|$)
// with POSIX leftmost-longest semantics (a quoted value wins a tie). nullopt when it does not
// match; SLURM then reports a parse error for any line that is not blank.
std::optional<KeyValue> MatchKeyValue(std::string_view text);

struct IncludeDirective {
  std::string file;  // as written: may hold %c, may be relative
  std::string rest;  // after the file name; SLURM refuses anything but whitespace
};

// "Include <file>": the word include in any case at the very start of the line, then
// whitespace. nullopt when the line is not an include directive.
std::optional<IncludeDirective> MatchInclude(std::string_view text);

}  // namespace expanse::slurm::conf_syntax

#endif  // EXPANSE_SLURM_SLURM_CONF_SYNTAX_H_
