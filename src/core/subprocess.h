// Running an external program (nvidia-smi, dcgmi, scontrol) with a deadline.
//
// The program gets an argv vector and is never run through a shell, so no argument is ever
// re-split or expanded. It runs in a process group of its own, so a timeout can kill whatever
// it started as well; its stdin is /dev/null and it inherits no descriptor but its stdout and
// stderr pipes.
//
// The caller must not reap children behind our back: SIGCHLD set to SIG_IGN, or another
// thread calling waitpid(-1), would take the exit status this code waits for.

#ifndef EXPANSE_CORE_SUBPROCESS_H_
#define EXPANSE_CORE_SUBPROCESS_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace expanse {

struct SubprocessOptions {
  // argv[0] is the program: a path when it contains '/', otherwise a name looked up in
  // `search_path` the way execvp does (empty PATH entries are skipped, not read as ".").
  std::vector<std::string> argv;
  // The directories to search, ':'-separated; unset means this process's PATH, and
  // "/usr/bin:/bin" when that is unset too.
  std::optional<std::string> search_path;
  // "NAME=value" entries replacing the child's environment; unset inherits ours.
  std::optional<std::vector<std::string>> env;
  // Wall-clock limit from the start. When it runs out, the program's process group gets
  // SIGTERM, then SIGKILL once the program has exited or `kill_grace` has passed.
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds kill_grace{500};
  // At most this many bytes are kept of each of stdout and stderr; the rest is read and
  // dropped, so a chatty program never blocks on a full pipe.
  std::size_t max_output_bytes = 1 << 20;
};

struct SubprocessResult {
  std::optional<int> exit_code;    // set when the program exited by itself
  std::optional<int> term_signal;  // set when a signal ended it (ours after a timeout, too)
  bool timed_out = false;
  std::string stdout_text;
  std::string stderr_text;
  bool stdout_truncated = false;  // more than max_output_bytes were written
  bool stderr_truncated = false;

  bool Succeeded() const { return !timed_out && exit_code == 0; }
};

// Runs the program to completion (or to its timeout) and reaps it before returning, so no
// zombie is left behind. What the program did (exit code, signal, timeout) is in the result;
// an error status means it could not be run at all:
//   - kNotFound, reason "not_found": "<program>: not found" (no such file, or not on the path);
//   - kPermissionDenied, reason "permission_denied": it exists but is not executable;
//   - kInvalidArgument: empty argv;
//   - kInternal: pipe, spawn or wait failed for another reason (errno in the message).
Result<SubprocessResult> RunSubprocess(const SubprocessOptions& options);

}  // namespace expanse

#endif  // EXPANSE_CORE_SUBPROCESS_H_
