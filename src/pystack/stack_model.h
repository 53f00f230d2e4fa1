// The Python stack model shared by every stack source (the native CPython reader and the
// py-spy adapter) and by the collector that folds samples per job.
#ifndef EXPANSE_PYSTACK_STACK_MODEL_H_
#define EXPANSE_PYSTACK_STACK_MODEL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace expanse::pystack {

// One Python frame. `line` is 0 when it cannot be decoded (never a guess).
struct Frame {
  std::string file;      // co_filename as the interpreter holds it
  std::string function;  // co_qualname on 3.11+, co_name before
  int line = 0;
};

// What a thread was doing when sampled.
enum class ThreadState {
  kUnknown,
  kHoldsGil,  // the thread that held the GIL
  kRunning,   // on CPU without the GIL (native code) or GIL unknown but running
  kIdle,      // blocked/sleeping (from /proc/<pid>/task/<tid>/stat state S/D)
};

// "gil", "running", "idle" or "" -- the ingest format's `thread_state` values.
const char* ThreadStateName(ThreadState state);

struct ThreadStack {
  pid_t tid = 0;  // native thread id (0 when the interpreter does not record it)
  ThreadState state = ThreadState::kUnknown;
  std::vector<Frame> frames;  // root first, leaf last
};

struct ProcessStacks {
  pid_t pid = 0;
  std::string python_version;  // "3.11.2" when known
  std::vector<ThreadStack> threads;
};

// A source of stack samples for one process. Implementations never stop the target unless
// configured to, bound their work, and fail with a specific Status (reason e.g.
// "ptrace_denied", "unsupported_version", "not_python", "process_exited") instead of returning
// a stack they are not sure of.
class StackSource {
 public:
  virtual ~StackSource() = default;
  virtual Result<ProcessStacks> Sample(pid_t pid) = 0;
  // "native" or "py-spy", for health and diagnostics.
  virtual const char* Name() const = 0;
};

// Folds a thread's frames as the ingest format wants them: `file:function:line` joined by
// ';', root first. Frames are truncated (oldest kept, leaf kept, a `...` frame between) so
// the result is at most `max_bytes` bytes; characters the ingest format refuses (control
// characters, ';' inside a frame, invalid UTF-8) are replaced.
std::string FoldFrames(const std::vector<Frame>& frames, std::size_t max_bytes = 16384);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_STACK_MODEL_H_
