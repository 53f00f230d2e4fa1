// Reading what `py-spy dump --pid N --json --nonblocking` prints (py-spy 0.3.x and 0.4.x) into
// the shared stack model. The shape comes from py-spy's src/stack_trace.rs (serde of
// `Vec<StackTrace>`): an array with one object per Python thread,
//   {"pid", "thread_id", "thread_name", "os_thread_id", "active", "owns_gil",
//    "frames": [{"name", "filename", "module", "short_filename", "line", "locals",
//                "is_entry", "is_shim_entry"}, ...], "process_info"}
// with frames listed leaf first. Fields this code does not use may be absent or of any type;
// the ones it uses are checked. tests/fixtures/pyspy/README.md describes the fixtures.
#ifndef EXPANSE_PYSTACK_PYSPY_JSON_H_
#define EXPANSE_PYSTACK_PYSPY_JSON_H_

#include <sys/types.h>

#include <cstddef>
#include <string_view>

#include "core/result.h"
#include "pystack/stack_model.h"

namespace expanse::pystack {

// The reason every parse error carries (kInvalidArgument).
inline constexpr std::string_view kPyspyOutputReason = "pyspy_output";

// Bounds on what is accepted. py-spy itself gives up past 4096 threads or 4096 frames per
// thread (stack_trace.rs, python_spy.rs), so more means the output is not py-spy's.
inline constexpr std::size_t kMaxPyspyJsonBytes = 16 << 20;
inline constexpr std::size_t kMaxPyspyThreads = 4096;
inline constexpr std::size_t kMaxPyspyFramesPerThread = 4096;
// py-spy's JSON nests about 6 levels (locals are the deepest); anything far deeper is hostile.
inline constexpr int kMaxPyspyJsonDepth = 32;

// Parses one dump of process `pid`. Frames are returned root first; a negative or missing
// line number (py-spy's "unknown") becomes 0. Thread state: owns_gil -> kHoldsGil, otherwise
// active -> kRunning and not active -> kIdle. Errors are kInvalidArgument, reason
// "pyspy_output", naming the element: `py-spy dump: [1].frames[3].line: expected an integer`.
Result<ProcessStacks> ParsePyspyDump(std::string_view json, pid_t pid);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_PYSPY_JSON_H_
