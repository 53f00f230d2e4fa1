#include "pystack/pyspy_source.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::pystack {
namespace pyspy_source_test {
namespace {

using ::expanse::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr auto kExecutable = std::filesystem::perms::owner_all;

std::string FixturePath(const std::string& name) {
  return std::string(EXPANSE_SOURCE_DIR) + "/tests/fixtures/pyspy/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A stand-in for py-spy: a shell script the test writes, since Debian ships no py-spy.
class PyspySourceTest : public ::testing::Test {
 protected:
  // A py-spy that runs `body` (after recording its arguments) and a source that uses it.
  PyspySource SourceRunning(const std::string& body, bool process_exists = true,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    const std::string script =
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" + dir_ / "argv" + "'\n" + body + "\n";
    PyspyOptions options;
    options.binary = dir_.Write("py-spy", script, kExecutable);
    options.timeout = timeout;
    options.max_output_bytes = 64 * 1024;
    options.process_exists = [process_exists](pid_t) { return process_exists; };
    return PyspySource(options);
  }

  // The status of a sample of pid 42 from a py-spy that prints `fixture` to stderr and fails.
  Status FailureFor(const std::string& fixture, bool process_exists = true) {
    PyspySource source =
        SourceRunning("cat '" + FixturePath(fixture) + "' >&2\nexit 1", process_exists);
    Result<ProcessStacks> stacks = source.Sample(42);
    EXPECT_FALSE(stacks.ok());
    return stacks.status();
  }

  TempDir dir_{"pyspy_source_test"};
};

TEST_F(PyspySourceTest, RunsDumpAsJsonWithoutStoppingTheTarget) {
  PyspySource source = SourceRunning("cat '" + FixturePath("dump_0.4_training.json") + "'");
  EXPECT_STREQ(source.Name(), "py-spy");
  Result<ProcessStacks> stacks = source.Sample(48213);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->pid, 48213);
  ASSERT_EQ(stacks->threads.size(), 3u);
  EXPECT_EQ(stacks->threads[0].state, ThreadState::kHoldsGil);
  EXPECT_EQ(ReadFile(dir_ / "argv"), "dump\n--pid\n48213\n--json\n--nonblocking\n");
}

TEST_F(PyspySourceTest, DoesNotPassTheDaemonsRustLoggingOn) {
  ASSERT_EQ(setenv("RUST_LOG", "debug", 1), 0);
  PyspySource source = SourceRunning("[ -z \"$RUST_LOG\" ] || exit 9\necho '[]'");
  Result<ProcessStacks> stacks = source.Sample(7);
  unsetenv("RUST_LOG");
  EXPECT_TRUE(stacks.ok()) << stacks.status();
}

TEST_F(PyspySourceTest, PermissionDeniedAsNonRootIsPtraceDenied) {
  const Status status = FailureFor("stderr_permission_nonroot.txt");
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(status.reason(), "ptrace_denied");
  EXPECT_EQ(status.message(), "py_stacks: ptrace denied for pid 42: Permission Denied");
}

TEST_F(PyspySourceTest, PermissionDeniedAsRootNamesTheCause) {
  Status status = FailureFor("stderr_permission_root_0.4.txt");
  EXPECT_EQ(status.reason(), "ptrace_denied");
  EXPECT_EQ(status.message(), "py_stacks: ptrace denied for pid 42: Permission denied");

  status = FailureFor("stderr_permission_root_0.3.txt");
  EXPECT_EQ(status.reason(), "ptrace_denied");
  EXPECT_EQ(status.message(), "py_stacks: ptrace denied for pid 42: Operation not permitted");
}

TEST_F(PyspySourceTest, VanishedProcessIsProcessExited) {
  Status status = FailureFor("stderr_no_such_process_0.4.txt");
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.reason(), "process_exited");
  EXPECT_EQ(status.message(), "py_stacks: pid 42 exited before it was sampled");

  // Whatever py-spy says, a pid the kernel no longer has exited.
  status = FailureFor("stderr_permission_root_0.3.txt", /*process_exists=*/false);
  EXPECT_EQ(status.reason(), "process_exited");
}

TEST_F(PyspySourceTest, NotPythonAndUnsupportedVersion) {
  Status status = FailureFor("stderr_not_python_0.4.txt");
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.reason(), "not_python");
  EXPECT_EQ(status.message(),
            "py_stacks: pid 42: no Python interpreter found: Failed to find python version from "
            "target process");

  status = FailureFor("stderr_unsupported_0.3.txt");
  EXPECT_EQ(status.reason(), "unsupported_version");
  EXPECT_EQ(status.message(), "py_stacks: pid 42: Unsupported version of Python: 3.12.1");
}

TEST_F(PyspySourceTest, HangingPyspyTimesOut) {
  PyspySource source = SourceRunning("exec sleep 30", true, std::chrono::milliseconds(200));
  Result<ProcessStacks> stacks = source.Sample(42);
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stacks.status().reason(), "timeout");
  EXPECT_EQ(stacks.status().message(), "py_stacks: py-spy took longer than 200 ms on pid 42");
}

TEST_F(PyspySourceTest, OtherFailuresKeepExitStatusAndCause) {
  PyspySource source = SourceRunning("echo 'Error: Failed to suspend process' >&2\nexit 3");
  Result<ProcessStacks> stacks = source.Sample(42);
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(stacks.status().reason(), "pyspy_failed");
  EXPECT_EQ(stacks.status().message(),
            "py_stacks: py-spy failed on pid 42 (exit status 3): Failed to suspend process");
}

TEST_F(PyspySourceTest, UnreadableOutputIsRefused) {
  PyspySource source = SourceRunning("echo 'Process 42: python train.py'");
  Result<ProcessStacks> stacks = source.Sample(42);
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().reason(), "pyspy_output");
  EXPECT_THAT(stacks.status().message(), StartsWith("py_stacks: pid 42: py-spy dump: not valid"));

  // More than the output cap (64 KiB here) is refused, not parsed in part.
  source = SourceRunning("head -c 100000 /dev/zero");
  stacks = source.Sample(42);
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().reason(), "pyspy_output");
  EXPECT_THAT(stacks.status().message(), HasSubstr("more than 65536 bytes"));
}

TEST_F(PyspySourceTest, MissingBinaryOrBadPid) {
  PyspyOptions options;
  options.binary = dir_ / "no-such-py-spy";
  PyspySource source(options);
  Result<ProcessStacks> stacks = source.Sample(42);
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().reason(), "pyspy_unavailable");

  stacks = PyspySource(PyspyOptions{}).Sample(42);
  EXPECT_EQ(stacks.status().reason(), "pyspy_unavailable");

  stacks = source.Sample(0);
  EXPECT_EQ(stacks.status().reason(), "invalid_pid");
  stacks = source.Sample(-1);
  EXPECT_EQ(stacks.status().reason(), "invalid_pid");
}

TEST(PyspyErrorCauseTest, PicksTheInnermostCause) {
  EXPECT_EQ(PyspyErrorCause("Error: Failed to copy PyThreadState\n\nCaused by:\n"
                            "    0: Failed to read memory\n    1: Bad address (os error 14)\n"),
            "Bad address");
  EXPECT_EQ(PyspyErrorCause("Error: A\nReason: B (os error 5)\nReason: C\n"), "C");
  EXPECT_EQ(PyspyErrorCause("Error: Failed to suspend process\n"), "Failed to suspend process");
  EXPECT_EQ(PyspyErrorCause(""), "no message");
}

TEST(PyspyErrorCauseTest, SkipsLogLinesAndCleansText) {
  EXPECT_EQ(PyspyErrorCause("[2025-04-28T11:05:20.858941820Z WARN  py_spy] slow\n"
                            "Error: Failed to find python version from target process\n"),
            "Failed to find python version from target process");
  EXPECT_EQ(PyspyErrorCause("Error: bad\x1b[31m name\r\n"), "bad?[31m name");
  EXPECT_EQ(PyspyErrorCause("Error: " + std::string(1000, 'x')).size(), 200u);
}

class FindPyspyTest : public ::testing::Test {
 protected:
  TempDir dir_{"find_pyspy_test"};
};

TEST_F(FindPyspyTest, ConfiguredExecutableWins) {
  const std::string configured = dir_.Write("opt/py-spy", "#!/bin/sh\n", kExecutable);
  dir_.Write("prefix/bin/py-spy", "#!/bin/sh\n", kExecutable);
  const Result<std::string> found = FindPyspy(configured, dir_ / "prefix/bin", nullptr);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, configured);
}

TEST_F(FindPyspyTest, UnusableConfiguredValueIsAnErrorNamingIt) {
  const std::string missing = dir_ / "missing";
  Result<std::string> found = FindPyspy(missing, "", nullptr);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().reason(), "invalid_setting");
  EXPECT_EQ(found.status().message(),
            "EXPANSE_PYSPY=\"" + missing + "\": cannot use it: No such file or directory");

  const std::string not_executable = dir_.Write("plain", "data");
  found = FindPyspy(not_executable, "", nullptr);
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("not executable by the daemon"));

  found = FindPyspy(dir_.path(), "", nullptr);
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("not a regular file"));

  found = FindPyspy("bin/py-spy", "", nullptr);
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("expected an absolute path"));

  found = FindPyspy("py-spy", "", "/nonexistent");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().message(), "EXPANSE_PYSPY=\"py-spy\": not found on PATH");
}

TEST_F(FindPyspyTest, BareConfiguredNameIsLookedUpOnPath) {
  const std::string on_path = dir_.Write("path/my-py-spy", "#!/bin/sh\n", kExecutable);
  const std::string path_env = "/nonexistent:" + dir_ / "path";
  const Result<std::string> found = FindPyspy("my-py-spy", "", path_env.c_str());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, on_path);
}

TEST_F(FindPyspyTest, BundledCopyBeforePath) {
  const std::string bundled = dir_.Write("prefix/bin/py-spy", "#!/bin/sh\n", kExecutable);
  dir_.Write("path/py-spy", "#!/bin/sh\n", kExecutable);
  const std::string path_env = dir_ / "path";
  Result<std::string> found = FindPyspy("", dir_ / "prefix/bin", path_env.c_str());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, bundled);

  found = FindPyspy("", dir_ / "elsewhere/bin", path_env.c_str());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, dir_ / "path/py-spy");
}

TEST_F(FindPyspyTest, NoneFoundIsEmptyAndRelativePathEntriesAreSkipped) {
  dir_.Write("path/py-spy", "data");  // not executable
  // An executable in a relative PATH entry, reachable from the working directory.
  dir_.Write("relative/py-spy", "#!/bin/sh\n", kExecutable);
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  const std::string path_env = "::relative:" + dir_ / "path";
  Result<std::string> found = FindPyspy("", "", path_env.c_str());
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, "");
  found = FindPyspy("", "", nullptr);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, "");
}

}  // namespace
}  // namespace pyspy_source_test
}  // namespace expanse::pystack
