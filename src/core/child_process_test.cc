#include "core/child_process.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<ChildProcess> StartShell(const std::string& script,
                                         milliseconds grace = milliseconds(1000)) {
  auto child = ChildProcess::Start({{"/bin/sh", "-c", script}, std::nullopt, grace});
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? std::move(*child) : nullptr;
}

// Reads until `count` lines arrived or the child closed its output.
ChildProcess::Lines ReadAll(ChildProcess& child, size_t count, size_t max_line = 1024) {
  ChildProcess::Lines all;
  while (all.lines.size() < count && !all.closed) {
    auto some = child.ReadLines(milliseconds(5000), max_line);
    all.lines.insert(all.lines.end(), some.lines.begin(), some.lines.end());
    all.oversized += some.oversized;
    all.closed = some.closed;
  }
  return all;
}

TEST(ChildProcessTest, TalksLineByLineOverPipes) {
  auto child = StartShell("while read line; do echo \"got $line\"; done; echo bye");
  ASSERT_TRUE(child);
  EXPECT_TRUE(child->WriteLine("one"));
  EXPECT_TRUE(child->WriteLine("two"));
  auto lines = ReadAll(*child, 2);
  ASSERT_EQ(lines.lines.size(), 2u);
  EXPECT_EQ(lines.lines[0], "got one");
  EXPECT_EQ(lines.lines[1], "got two");
  child->CloseStdin();
  lines = ReadAll(*child, 100);
  ASSERT_EQ(lines.lines.size(), 1u);
  EXPECT_EQ(lines.lines[0], "bye");
  EXPECT_TRUE(lines.closed);
  EXPECT_EQ(child->Stop(), 0);
}

TEST(ChildProcessTest, DropsAndCountsOversizedLines) {
  auto child = StartShell("printf 'short\\n%0100d\\nafter\\n' 0");
  ASSERT_TRUE(child);
  auto lines = ReadAll(*child, 100, /*max_line=*/50);
  EXPECT_TRUE(lines.closed);
  ASSERT_EQ(lines.lines.size(), 2u);
  EXPECT_EQ(lines.lines[0], "short");
  EXPECT_EQ(lines.lines[1], "after");
  EXPECT_EQ(lines.oversized, 1u);
}

TEST(ChildProcessTest, MergesStderrIntoStdoutWhenAsked) {
  ChildProcessOptions options{{"/bin/sh", "-c", "echo out; echo err >&2; echo out2"},
                              std::nullopt,
                              milliseconds(1000),
                              true};
  auto child = ChildProcess::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  auto lines = ReadAll(**child, 100);
  EXPECT_TRUE(lines.closed);
  EXPECT_EQ(lines.lines, (std::vector<std::string>{"out", "err", "out2"}));
  EXPECT_EQ((*child)->Stop(), 0);
}

TEST(ChildProcessTest, ReportsExitStatusAndSignals) {
  auto exits = StartShell("exit 7");
  ASSERT_TRUE(exits);
  ReadAll(*exits, 1);
  EXPECT_EQ(exits->Stop(), 7);
  // A child that ignores SIGTERM is killed after the grace period.
  auto stubborn =
      StartShell("trap '' TERM; echo ready; while :; do sleep 1; done", milliseconds(50));
  ASSERT_TRUE(stubborn);
  ASSERT_EQ(ReadAll(*stubborn, 1).lines.size(), 1u);
  EXPECT_FALSE(stubborn->TryWait());
  EXPECT_EQ(stubborn->Stop(), 128 + 9);
}

TEST(ChildProcessTest, OneReadTakesAtMostItsBudget) {
  auto child = StartShell("yes | head -c 1000000; sleep 5");
  ASSERT_TRUE(child);
  size_t lines = 0;
  while (lines == 0)
    lines = child->ReadLines(milliseconds(5000), 16, /*budget_bytes=*/4096).lines.size();
  EXPECT_LE(lines, 2048u);  // "y\n" per line: the budget, not the megabyte waiting in the pipe
}

TEST(ChildProcessTest, TerminateAndPollNeverWait) {
  auto stubborn =
      StartShell("trap '' TERM; echo ready; while :; do sleep 1; done", milliseconds(100));
  ASSERT_TRUE(stubborn);
  ASSERT_EQ(ReadAll(*stubborn, 1).lines.size(), 1u);
  stubborn->Terminate();
  EXPECT_FALSE(stubborn->Poll());  // SIGTERM ignored, grace not over: still there, no waiting
  std::optional<int> status;
  for (int i = 0; i < 1000 && !status; ++i) {  // the grace period passes; SIGKILL; reaped
    status = stubborn->Poll();
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(status, 128 + 9);
}

// Whether `pid` has ended: gone, or a zombie left for init to reap (its process group then
// holds nothing that runs).
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text))
    return true;
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' ||
         text[paren + 2] == 'X';
}

TEST(ChildProcessTest, WhatTheChildLeftInItsGroupIsKilledOnceItIsReaped) {
  // A wrapper that prints, leaves a process behind holding its stdout, and exits: the process
  // left behind must not outlive it (one a minute would pile up under a health check).
  auto child = StartShell("(exec sleep 60) & echo $!; exit 0");
  ASSERT_TRUE(child);
  const ChildProcess::Lines lines = ReadAll(*child, 1);
  ASSERT_EQ(lines.lines.size(), 1u);
  const pid_t grandchild = std::stoi(lines.lines[0]);
  std::optional<int> status;
  for (int i = 0; i < 500 && !status; ++i) {  // its own exit, not Stop's SIGTERM
    status = child->TryWait();
    if (!status)
      std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(status, 0);
  EXPECT_EQ(child->Stop(), 0);
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {
    errno = 0;
    ended = (kill(-child->pid(), 0) != 0 && errno == ESRCH) || Ended(grandchild);
    if (!ended)
      std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(ended) << "pid " << grandchild << " still runs in the child's process group";
  if (!ended)
    kill(grandchild, SIGKILL);
}

// Set by the observer: whether each group kill found its leader still an unreaped zombie.
int group_kills = 0;
int group_kills_after_reaping = 0;

void CheckLeaderNotReaped(pid_t leader) {
  ++group_kills;
  siginfo_t info{};
  // WNOWAIT: looks without reaping. A leader already reaped is ECHILD here, and its pid (the
  // group's id) may by now belong to a stranger's group.
  if (waitid(P_PID, leader, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != leader)
    ++group_kills_after_reaping;
}

TEST(ChildProcessTest, TheGroupIsKilledWhileItsLeaderStillPinsItsId) {
  child_process_testing::SetGroupKillObserver(CheckLeaderNotReaped);
  group_kills = group_kills_after_reaping = 0;
  {  // reaped by TryWait after its own exit
    auto child = StartShell("(exec sleep 60) & exit 0");
    ASSERT_TRUE(child);
    std::optional<int> status;
    for (int i = 0; i < 500 && !status; ++i) {
      status = child->TryWait();
      if (!status)
        std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_EQ(status, 0);
  }
  {  // by Stop (Terminate, Poll)
    auto child = StartShell("echo ready; sleep 60");
    ASSERT_TRUE(child);
    ASSERT_EQ(ReadAll(*child, 1).lines.size(), 1u);
    EXPECT_EQ(child->Stop(), 128 + 15);
  }
  {  // by the destructor, of one still running
    auto child = StartShell("echo ready; sleep 60");
    ASSERT_TRUE(child);
    ASSERT_EQ(ReadAll(*child, 1).lines.size(), 1u);
  }
  child_process_testing::SetGroupKillObserver(nullptr);
  EXPECT_GE(group_kills, 2);
  EXPECT_EQ(group_kills_after_reaping, 0) << "of " << group_kills << " group kills";
}

// With SIGCHLD ignored (a daemon started so keeps it through exec) the kernel reaps the child
// itself: it counts as ended, with its status lost, and its pid, maybe another process's by now,
// is never signalled again. It used to stay "running" for ever, signalled by Stop.
TEST(ChildProcessTest, AChildTheKernelReapedIsEndedAndNeverSignalledAgain) {
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGCHLD, &ignore, &previous), 0);
  child_process_testing::SetGroupKillObserver(CheckLeaderNotReaped);
  group_kills = group_kills_after_reaping = 0;
  {
    auto child = StartShell("exit 3");
    ASSERT_TRUE(child);
    std::optional<int> status;
    for (int i = 0; i < 500 && !status; ++i) {
      status = child->TryWait();
      if (!status)
        std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_EQ(status, ChildProcess::kStatusLost);
    EXPECT_EQ(child->Stop(), ChildProcess::kStatusLost);
  }
  child_process_testing::SetGroupKillObserver(nullptr);
  sigaction(SIGCHLD, &previous, nullptr);
  EXPECT_EQ(group_kills, 0) << "a pid that may be another process's is not signalled";
}

TEST(ChildProcessTest, WritingToAChildThatStoppedReadingFailsWithoutSigpipe) {
  auto child = StartShell("exec 0<&-; echo closed; sleep 5");
  ASSERT_TRUE(child);
  ASSERT_EQ(ReadAll(*child, 1).lines.size(), 1u);
  EXPECT_FALSE(child->WriteLine("anyone?"));
}

TEST(ChildProcessTest, RefusesMissingAndNonExecutablePrograms) {
  auto missing = ChildProcess::Start({{"/nonexistent/helper"}, std::nullopt, milliseconds(10)});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  testing::TempDir dir;
  const std::string plain = dir.Write("helper", "#!/bin/sh\n");  // mode 0600
  auto not_exec = ChildProcess::Start({{plain}, std::nullopt, milliseconds(10)});
  ASSERT_FALSE(not_exec.ok());
  EXPECT_EQ(not_exec.status().code(), StatusCode::kPermissionDenied);
}

TEST(ChildProcessTest, ReplacesTheEnvironmentWhenGiven) {
  auto child = ChildProcess::Start(
      {{"/bin/sh", "-c", "echo \"[$HELPER_SETTING][$HOME]\""}, {{"HELPER_SETTING=7"}}});
  ASSERT_TRUE(child.ok());
  auto lines = ReadAll(**child, 1);
  ASSERT_EQ(lines.lines.size(), 1u);
  EXPECT_EQ(lines.lines[0], "[7][]");
}

}  // namespace
}  // namespace expanse
