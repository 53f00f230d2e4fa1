// Walking CPython's interpreter, thread and frame lists in another process's memory. Pure
// apart from the RemoteMemory it is given, so tests and the fuzzer drive it with a
// MemoryImage. Every list it follows is bounded and checked for loops, and every object it
// reads is checked for its type where the layout allows, so garbage memory gives an error or
// a bounded result, never a hang or a guessed stack.
#ifndef EXPANSE_PYSTACK_STACK_WALKER_H_
#define EXPANSE_PYSTACK_STACK_WALKER_H_

#include <sys/types.h>

#include <functional>
#include <vector>

#include "core/result.h"
#include "pystack/code_cache.h"
#include "pystack/reader_limits.h"
#include "pystack/remote_memory.h"
#include "pystack/stack_model.h"

namespace expanse::pystack {

// Where glibc (2.x, x86-64; checked on 2.36) keeps the kernel thread id inside struct pthread,
// which is what a pthread_t points at. Python 3.9 and 3.10 record only the pthread_t.
inline constexpr std::uint64_t kGlibcPthreadTidOffset = 0x2d0;

// What one walk cost, for tests and the reader's counters.
struct WalkStats {
  std::size_t line_table_bytes_decoded = 0;
  std::size_t lines_remembered = 0;   // frames whose line was found without decoding
  std::size_t lines_over_budget = 0;  // frames given line 0 for want of decode budget
};

// Tells whether a kernel thread id belongs to the target process.
using IsProcessThread = std::function<bool(pid_t tid)>;

// The Python stacks of every thread of every interpreter, frames root first. A thread's state
// is kHoldsGil for the GIL holder and kUnknown otherwise (the reader asks /proc for the rest).
// Its tid is the one the interpreter records (3.11+), or on 3.9/3.10 the one found through the
// pthread_t, kept only when `is_process_thread` accepts it (it may be empty: tid 0). Threads
// without a Python frame are left out.
//
// Line tables are decoded at most `limits.max_line_table_bytes_per_sample` bytes in all;
// frames past that get line 0, and `stats` (may be null) says how much was decoded.
//
// Errors: "inconsistent_read" (a list loops, a pointer is implausible or points at the wrong
// type: the target changed the memory mid-read, or the layout does not match),
// "unreadable_address", "read_budget_exceeded", and the memory's access errors.
Result<std::vector<ThreadStack>> WalkThreads(RemoteMemory& memory, const InterpreterInfo& info,
                                             const NativeReaderLimits& limits, CodeCache& cache,
                                             const IsProcessThread& is_process_thread,
                                             WalkStats* stats = nullptr);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_STACK_WALKER_H_
