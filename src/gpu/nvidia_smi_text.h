// Text helpers shared by the nvidia-smi output parsers. Internal to the gpu module.
#ifndef EXPANSE_GPU_NVIDIA_SMI_TEXT_H_
#define EXPANSE_GPU_NVIDIA_SMI_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace expanse::gpu::nvidia_smi_internal {

// One line of output; `number` counts from 1 and includes blank lines, as an editor would.
struct Line {
  int number = 0;
  std::string_view text;  // trimmed of surrounding blanks and a trailing '\r'
};
std::vector<Line> SplitLines(std::string_view text);

// `text` without leading and trailing spaces, tabs and carriage returns.
std::string_view Trim(std::string_view text);

// The blank-separated words of `text`.
std::vector<std::string_view> SplitWhitespace(std::string_view text);

// Whether a cell is nvidia-smi's way of saying it has no value: "N/A", or a note in
// brackets such as "[N/A]", "[Not Supported]", "[Unknown Error]".
bool IsAbsent(std::string_view cell);

// All of `digits` as an unsigned number in `base` (10 or 16), or nullopt: no sign, no
// blanks, no prefix, no overflow.
std::optional<uint64_t> ParseUint(std::string_view digits, int base = 10);

// kInvalidArgument with reason "nvidia_smi_output": the output was not what we expected.
Status OutputError(std::string message);

}  // namespace expanse::gpu::nvidia_smi_internal

#endif  // EXPANSE_GPU_NVIDIA_SMI_TEXT_H_
