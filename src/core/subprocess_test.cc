#include "core/subprocess.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse {
namespace {

using ::expanse::testing::TempDir;
using ::testing::IsEmpty;
using ::testing::Optional;

SubprocessResult RunOk(std::vector<std::string> argv, SubprocessOptions options = {}) {
  options.argv = std::move(argv);
  Result<SubprocessResult> result = RunSubprocess(options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : SubprocessResult{};
}

// The state letter from /proc/<pid>/stat ('Z' for a zombie), or 0 once the process is gone.
char ProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return 0;
  const size_t paren = line.rfind(')');  // the command name may hold spaces
  return paren + 2 < line.size() ? line[paren + 2] : '\0';
}

// Whether `pid` is dead (gone or a zombie) within a few seconds. A signalled process
// finishes dying asynchronously, so this polls rather than checking once.
bool DiesSoon(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    const char state = ProcessState(pid);
    if (state == 0 || state == 'Z' || state == 'X')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// No child of ours is left, reaped or not.
bool NoChildrenLeft() { return waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

TEST(SubprocessTest, CapturesStdout) {
  const SubprocessResult result = RunOk({"echo", "hello"});
  EXPECT_EQ(result.stdout_text, "hello\n");
  EXPECT_THAT(result.stderr_text, IsEmpty());
  EXPECT_THAT(result.exit_code, Optional(0));
  EXPECT_FALSE(result.term_signal.has_value());
  EXPECT_FALSE(result.timed_out);
  EXPECT_TRUE(result.Succeeded());
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, PassesArgumentsWithoutAShell) {
  EXPECT_EQ(RunOk({"echo", "a  b", "$HOME", "*"}).stdout_text, "a  b $HOME *\n");
}

TEST(SubprocessTest, ReportsExitCode) {
  const SubprocessResult result = RunOk({"sh", "-c", "exit 3"});
  EXPECT_THAT(result.exit_code, Optional(3));
  EXPECT_FALSE(result.Succeeded());
}

TEST(SubprocessTest, KeepsStderrSeparate) {
  const SubprocessResult result = RunOk({"sh", "-c", "echo out; echo err >&2; echo out2"});
  EXPECT_EQ(result.stdout_text, "out\nout2\n");
  EXPECT_EQ(result.stderr_text, "err\n");
}

TEST(SubprocessTest, StdinIsEmpty) { EXPECT_EQ(RunOk({"wc", "-c"}).stdout_text, "0\n"); }

TEST(SubprocessTest, ReportsSignal) {
  const SubprocessResult result = RunOk({"sh", "-c", "kill -USR1 $$"});
  EXPECT_FALSE(result.exit_code.has_value());
  EXPECT_THAT(result.term_signal, Optional(SIGUSR1));
  EXPECT_FALSE(result.timed_out);
}

TEST(SubprocessTest, TimeoutKillsTheWholeProcessGroup) {
  SubprocessOptions options;
  options.timeout = std::chrono::milliseconds(300);
  options.kill_grace = std::chrono::milliseconds(2000);
  // The background sleep's pid goes to stdout so the test can check it died too.
  const SubprocessResult result = RunOk({"sh", "-c", "sleep 100 & echo $!; sleep 100"}, options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_THAT(result.term_signal, Optional(SIGTERM));
  EXPECT_FALSE(result.exit_code.has_value());
  EXPECT_FALSE(result.Succeeded());
  const pid_t background = std::atoi(result.stdout_text.c_str());
  ASSERT_GT(background, 0) << result.stdout_text;
  EXPECT_TRUE(DiesSoon(background));
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, TimeoutEscalatesToSigkill) {
  SubprocessOptions options;
  options.timeout = std::chrono::milliseconds(200);
  options.kill_grace = std::chrono::milliseconds(200);
  // An ignored SIGTERM is inherited by the sleep as well.
  const SubprocessResult result =
      RunOk({"sh", "-c", "trap '' TERM; sleep 100 & echo $!; sleep 100"}, options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_THAT(result.term_signal, Optional(SIGKILL));
  const pid_t background = std::atoi(result.stdout_text.c_str());
  ASSERT_GT(background, 0) << result.stdout_text;
  EXPECT_TRUE(DiesSoon(background));
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, TimeoutAppliesAfterTheProgramClosesItsOutput) {
  SubprocessOptions options;
  options.timeout = std::chrono::milliseconds(200);
  const SubprocessResult result = RunOk({"sh", "-c", "exec >&- 2>&-; sleep 100"}, options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, EndlessTimeoutDoesNotOverflow) {
  SubprocessOptions options;
  options.timeout = std::chrono::milliseconds::max();
  EXPECT_EQ(RunOk({"echo", "x"}, options).stdout_text, "x\n");
}

TEST(SubprocessTest, CapsOutputAndKeepsReading) {
  SubprocessOptions options;
  options.max_output_bytes = 1000;
  const SubprocessResult result =
      RunOk({"sh", "-c", "head -c 200000 /dev/zero; echo small >&2"}, options);
  EXPECT_EQ(result.stdout_text, std::string(1000, '\0'));
  EXPECT_TRUE(result.stdout_truncated);
  EXPECT_EQ(result.stderr_text, "small\n");
  EXPECT_FALSE(result.stderr_truncated);
  EXPECT_THAT(result.exit_code, Optional(0));
}

TEST(SubprocessTest, ReplacesTheEnvironment) {
  SubprocessOptions options;
  options.env = std::vector<std::string>{"EXPANSE_TEST_VAR=value"};
  EXPECT_EQ(RunOk({"sh", "-c", "echo \"$EXPANSE_TEST_VAR:${HOME:-unset}\""}, options).stdout_text,
            "value:unset\n");
}

TEST(SubprocessTest, SearchesTheGivenPath) {
  SubprocessOptions options;
  options.search_path = "/nonexistent::/bin:/usr/bin";
  EXPECT_EQ(RunOk({"echo", "found"}, options).stdout_text, "found\n");
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  SubprocessOptions options;
  options.argv = {"expanse-no-such-program", "--flag"};
  const Result<SubprocessResult> result = RunSubprocess(options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(result.status().message(), "expanse-no-such-program: not found");
  EXPECT_EQ(result.status().reason(), "not_found");

  options.argv = {"/nonexistent/nvidia-smi"};
  EXPECT_EQ(RunSubprocess(options).status().message(), "/nonexistent/nvidia-smi: not found");
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, UnexecutableProgramIsPermissionDenied) {
  const TempDir dir;
  const std::string path = dir.path() + "/tool";
  std::ofstream(path) << "#!/bin/sh\necho hi\n";
  chmod(path.c_str(), 0644);
  SubprocessOptions options;
  options.argv = {"tool"};
  options.search_path = dir.path();
  Result<SubprocessResult> result = RunSubprocess(options);
  EXPECT_EQ(result.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(result.status().message(), "tool: found but not executable");

  options.argv = {path};
  result = RunSubprocess(options);
  EXPECT_EQ(result.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(result.status().reason(), "permission_denied");
}

TEST(SubprocessTest, RejectsEmptyArgv) {
  EXPECT_EQ(RunSubprocess({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace expanse
