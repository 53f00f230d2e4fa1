// Internal to env_file.cc: the tokenizer behind ParseEnvFile and MergeEnvFile.
// It reports every assignment with its byte span so that MergeEnvFile can rewrite
// one assignment and copy all other bytes of the operator's file unchanged.

#ifndef EXPANSE_CORE_ENV_FILE_PARSER_H_
#define EXPANSE_CORE_ENV_FILE_PARSER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/quote.h"
#include "core/result.h"

namespace expanse::env_file_internal {

// One KEY=VALUE assignment as written in the text, duplicates included.
// Invariant: begin <= line_end <= end <= text.size().
struct Assignment {
  std::string key;
  std::string value;         // after unquoting and unescaping
  int line = 0;              // 1-based line of the key
  std::size_t begin = 0;     // offset of the key's first byte
  std::size_t line_end = 0;  // offset of the line terminator ("\n", "\r\n", "\r")
  std::size_t end = 0;       // offset just past the terminator; == line_end at EOF
};

// All assignments in file order. Fails with kInvalidArgument on the first error,
// the message starting "line N: ". Enforces kMaxEnvFileBytes.
Result<std::vector<Assignment>> ParseAssignments(std::string_view text);

using ::expanse::QuoteForMessage;

}  // namespace expanse::env_file_internal

#endif  // EXPANSE_CORE_ENV_FILE_PARSER_H_
