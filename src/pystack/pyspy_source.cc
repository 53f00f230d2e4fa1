#include "pystack/pyspy_source.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/quote.h"

namespace expanse::pystack {
namespace {

constexpr std::size_t kMaxCauseBytes = 200;

bool DefaultProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

std::string Lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ContainsAny(const std::string& haystack, std::initializer_list<std::string_view> needles) {
  for (std::string_view needle : needles) {
    if (haystack.find(needle) != std::string::npos)
      return true;
  }
  return false;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

// "0: message" -> "message": anyhow numbers the causes when there are several.
std::string_view DropCauseNumber(std::string_view line) {
  std::size_t digits = 0;
  while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits])))
    ++digits;
  if (digits > 0 && line.substr(digits).starts_with(": "))
    return line.substr(digits + 2);
  return line;
}

// " (os error 13)" at the end says nothing the words before it do not.
std::string_view DropOsErrorSuffix(std::string_view text) {
  const std::size_t open = text.rfind(" (os error ");
  if (open != std::string_view::npos && text.ends_with(")"))
    return text.substr(0, open);
  return text;
}

std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxCauseBytes)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? '?' : c);
  }
  return out;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The first executable regular file `name` in the absolute directories of `path_env`. Relative
// entries (".", "bin") are skipped: the daemon runs this program with CAP_SYS_PTRACE, so it must
// not depend on its working directory.
std::string SearchPath(const std::string& name, const char* path_env) {
  if (path_env == nullptr)
    return "";
  std::string_view rest(path_env);
  while (true) {
    const std::size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate(dir);
      candidate += '/';
      candidate += name;
      if (IsExecutableFile(candidate))
        return candidate;
    }
    if (colon == std::string_view::npos)
      return "";
    rest.remove_prefix(colon + 1);
  }
}

Status BadSetting(const std::string& configured, std::string_view what) {
  return FailedPreconditionError("EXPANSE_PYSPY=" + QuoteForMessage(configured, 200) + ": " +
                                 std::string(what))
      .WithReason("invalid_setting");
}

std::string ExitDescription(const SubprocessResult& run) {
  if (run.exit_code.has_value())
    return "exit status " + std::to_string(*run.exit_code);
  if (run.term_signal.has_value())
    return "killed by signal " + std::to_string(*run.term_signal);
  return "no exit status";
}

}  // namespace

std::string PyspyErrorCause(std::string_view stderr_text) {
  std::vector<std::string_view> lines;
  while (!stderr_text.empty()) {
    const std::size_t end = stderr_text.find('\n');
    const std::string_view line = Trim(stderr_text.substr(0, end));
    // env_logger lines ("[2025-04-28T11:05:20Z WARN  py_spy] ...") are progress, not the error.
    if (!line.empty() && line.front() != '[')
      lines.push_back(line);
    if (end == std::string_view::npos)
      break;
    stderr_text.remove_prefix(end + 1);
  }
  std::string_view cause;
  bool in_causes = false;
  for (std::string_view line : lines) {
    if (line == "Caused by:") {
      in_causes = true;
    } else if (in_causes) {
      cause = DropCauseNumber(line);
    } else if (line.starts_with("Reason: ")) {
      cause = line.substr(8);
    }
  }
  if (cause.empty() && !lines.empty()) {
    cause = lines.front();
    if (cause.starts_with("Error: "))
      cause.remove_prefix(7);
  }
  if (cause.starts_with("Permission Denied: Try running again"))
    cause = "Permission Denied";
  cause = Trim(DropOsErrorSuffix(cause));
  if (cause.empty())
    return "no message";
  return Printable(cause);
}

Status ClassifyPyspyFailure(pid_t pid, const SubprocessResult& run, bool process_exists,
                            std::chrono::milliseconds timeout) {
  const std::string pid_text = std::to_string(pid);
  if (!process_exists) {
    return NotFoundError("py_stacks: pid " + pid_text + " exited before it was sampled")
        .WithReason("process_exited");
  }
  if (run.timed_out) {
    return DeadlineExceededError("py_stacks: py-spy took longer than " +
                                 std::to_string(timeout.count()) + " ms on pid " + pid_text)
        .WithReason("timeout");
  }
  const std::string cause = PyspyErrorCause(run.stderr_text);
  const std::string text = Lowercase(run.stderr_text);
  // Rust maps both EPERM and EACCES to ErrorKind::PermissionDenied, and py-spy's non-root
  // message says "Permission Denied" for either.
  if (ContainsAny(text, {"permission denied", "operation not permitted", "(os error 1)",
                         "(os error 13)"})) {
    return PermissionDeniedError("py_stacks: ptrace denied for pid " + pid_text + ": " + cause)
        .WithReason("ptrace_denied");
  }
  // A zombie passes the existence check but has no /proc/<pid>/exe.
  if (ContainsAny(text, {"no such process", "(os error 3)"}) ||
      (ContainsAny(text, {"check that the process is running", "check if it is running"}) &&
       ContainsAny(text, {"no such file or directory", "(os error 2)"}))) {
    return NotFoundError("py_stacks: pid " + pid_text + " exited before it was sampled")
        .WithReason("process_exited");
  }
  if (ContainsAny(text,
                  {"unsupported version of python", "cannot detect gil holding in version"})) {
    return FailedPreconditionError("py_stacks: pid " + pid_text + ": " + cause)
        .WithReason("unsupported_version");
  }
  if (ContainsAny(text, {"failed to find python version", "failed to find a python version",
                         "failed to find a python interpreter", "failed to find python interpreter",
                         "failed to find version string", "failed to find _pyruntime"})) {
    return FailedPreconditionError("py_stacks: pid " + pid_text +
                                   ": no Python interpreter found: " + cause)
        .WithReason("not_python");
  }
  return UnavailableError("py_stacks: py-spy failed on pid " + pid_text + " (" +
                          ExitDescription(run) + "): " + cause)
      .WithReason("pyspy_failed");
}

PyspySource::PyspySource(PyspyOptions options) : options_(std::move(options)) {
  if (!options_.process_exists)
    options_.process_exists = DefaultProcessExists;
}

Result<ProcessStacks> PyspySource::Sample(pid_t pid) {
  const std::string pid_text = std::to_string(pid);
  // kill(0 or negative, ...) would address process groups; never hand such a pid on.
  if (pid <= 0) {
    return InvalidArgumentError("py_stacks: " + pid_text + " is not a process id")
        .WithReason("invalid_pid");
  }
  if (options_.binary.empty()) {
    return FailedPreconditionError("py_stacks: py-spy not found").WithReason("pyspy_unavailable");
  }
  SubprocessOptions run_options;
  run_options.argv = {options_.binary, "dump", "--pid", pid_text, "--json", "--nonblocking"};
  // A fixed environment: RUST_LOG or RUST_BACKTRACE inherited from the daemon would bury the
  // error line in log output.
  run_options.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LC_ALL=C"};
  run_options.timeout = options_.timeout;
  run_options.max_output_bytes = options_.max_output_bytes;
  Result<SubprocessResult> run = RunSubprocess(run_options);
  if (!run.ok()) {
    return FailedPreconditionError("py_stacks: cannot run py-spy: " + run.status().message())
        .WithReason("pyspy_unavailable");
  }
  if (!run->Succeeded())
    return ClassifyPyspyFailure(pid, *run, options_.process_exists(pid), options_.timeout);
  if (run->stdout_truncated) {
    return InvalidArgumentError("py_stacks: py-spy printed more than " +
                                std::to_string(options_.max_output_bytes) + " bytes for pid " +
                                pid_text)
        .WithReason(std::string(kPyspyOutputReason));
  }
  Result<ProcessStacks> stacks = ParsePyspyDump(run->stdout_text, pid);
  if (!stacks.ok()) {
    return InvalidArgumentError("py_stacks: pid " + pid_text + ": " + stacks.status().message())
        .WithReason(std::string(kPyspyOutputReason));
  }
  return stacks;
}

Result<std::string> FindPyspy(const std::string& configured, const std::string& prefix_bin,
                              const char* path_env) {
  if (!configured.empty()) {
    if (configured.find('/') == std::string::npos) {
      std::string found = SearchPath(configured, path_env);
      if (found.empty())
        return BadSetting(configured, "not found on PATH");
      return found;
    }
    if (configured.front() != '/')
      return BadSetting(configured, "expected an absolute path or a program name on PATH");
    struct stat st {};
    if (stat(configured.c_str(), &st) != 0)
      return BadSetting(configured, std::string("cannot use it: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      return BadSetting(configured, "not a regular file");
    if (access(configured.c_str(), X_OK) != 0)
      return BadSetting(configured, "not executable by the daemon");
    return configured;
  }
  if (!prefix_bin.empty()) {
    const std::string bundled = prefix_bin + "/py-spy";
    if (IsExecutableFile(bundled))
      return bundled;
  }
  return SearchPath("py-spy", path_env);
}

}  // namespace expanse::pystack
