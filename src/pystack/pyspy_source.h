// The py-spy backend: a StackSource that runs `py-spy dump --pid N --json --nonblocking` (argv,
// no shell, a deadline, an output cap) and turns its failures into the Status reasons every
// stack source uses. py-spy's messages are read from its source (src/main.rs prints
// "Permission Denied: ..." when not root, otherwise "Error: <context>" followed by its causes:
// "Caused by:" in 0.4.x, "Reason: ..." lines in 0.3.x); tests/fixtures/pyspy/ holds examples.
#ifndef EXPANSE_PYSTACK_PYSPY_SOURCE_H_
#define EXPANSE_PYSTACK_PYSPY_SOURCE_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/subprocess.h"
#include "pystack/pyspy_json.h"
#include "pystack/stack_model.h"

namespace expanse::pystack {

struct PyspyOptions {
  std::string binary;  // absolute path of py-spy (see FindPyspy)
  std::chrono::milliseconds timeout{2000};
  std::size_t max_output_bytes = kMaxPyspyJsonBytes;
  // Whether `pid` still exists (a zombie counts). Unset: kill(pid, 0). py-spy's messages for a
  // process that vanished mid-dump vary (ENOENT, EPERM, ESRCH, failed reads), so the source
  // asks the kernel before blaming permissions.
  std::function<bool(pid_t)> process_exists;
};

// Failures, all starting with "py_stacks: " so they read as capability lines:
//   kPermissionDenied   "ptrace_denied"        py_stacks: ptrace denied for pid N: <cause>
//   kNotFound           "process_exited"       py_stacks: pid N exited before it was sampled
//   kFailedPrecondition "not_python"           py_stacks: pid N: no Python interpreter found:
//   <cause> kFailedPrecondition "unsupported_version"  py_stacks: pid N: <cause> kDeadlineExceeded
//   "timeout"              py_stacks: py-spy took longer than T ms on pid N kFailedPrecondition
//   "pyspy_unavailable"    py-spy could not be started at all kUnavailable        "pyspy_failed"
//   any other failure, with py-spy's exit and cause kInvalidArgument    "pyspy_output"         its
//   output was not a dump we can read
// <cause> is the most specific line py-spy printed (see PyspyErrorCause).
class PyspySource final : public StackSource {
 public:
  explicit PyspySource(PyspyOptions options);

  Result<ProcessStacks> Sample(pid_t pid) override;
  const char* Name() const override { return "py-spy"; }

 private:
  PyspyOptions options_;
};

// The failure a finished py-spy run means (run did not succeed with exit 0); pure, for tests.
Status ClassifyPyspyFailure(pid_t pid, const SubprocessResult& run, bool process_exists,
                            std::chrono::milliseconds timeout);

// The line of py-spy's stderr that says what went wrong: the innermost cause when it lists
// causes ("Caused by:" block or "Reason:" lines), else its first line without the "Error: "
// prefix. A trailing " (os error N)" is dropped, "Permission Denied: Try running again ..."
// (advice for an interactive user) becomes "Permission Denied", control characters become
// '?', and the result is at most 200 bytes. Log lines ("[<time> WARN ...") are skipped.
std::string PyspyErrorCause(std::string_view stderr_text);

// The py-spy to run, in the order the operator guide gives: `configured` (EXPANSE_PYSPY) when
// set, which must name an executable file (a bare name is looked up in `path_env`; a relative
// path is refused); else `<prefix_bin>/py-spy` (prefix_bin is the install's bin directory,
// e.g. /srv/expanse/bin; skipped when empty); else the first executable `py-spy` in the
// absolute directories of `path_env` (nullptr: none). OK("") when there is none; an error,
// reason "invalid_setting", naming EXPANSE_PYSPY when the configured one is unusable.
Result<std::string> FindPyspy(const std::string& configured, const std::string& prefix_bin,
                              const char* path_env);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_PYSPY_SOURCE_H_
