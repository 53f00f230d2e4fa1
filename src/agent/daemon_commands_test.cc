#include "agent/daemon_commands.h"

#include <signal.h>
#include <sys/time.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_host.h"
#include "core/test_temp_dir.h"

namespace expanse::agent {
namespace daemon_commands_test {
namespace {

// RunHookCommand arms a real SIGALRM deadline whose handler ends the process with status 0 (a
// hook must never fail its job); left armed, it would end this test binary as if it passed.
void DisarmHookDeadline() {
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  signal(SIGALRM, SIG_DFL);
}

// TaskProlog runs as the job's user on every task launch, under a 2 s deadline: it prints its
// export lines and never looks up the daemon's account (a slow sssd or LDAP used to spend the
// deadline before the lines were out, and the job's user could not hand the events directory
// over anyway). Prolog, run as root, does look it up to hand the events directory over.
TEST(RunHookCommandTest, TaskPrologPrintsItsLinesAndLooksUpNoAccount) {
  testing::TempDir dir;
  const std::string agent = dir.Write("lib/libexpanse-agent.so", "");
  std::filesystem::create_directories(dir.path() + "/control");
  MemoryHost host;
  host.AddUser({"slurm", 64030, 64030});
  DaemonOptions flags;
  flags.hostname = "n1";
  flags.user = "slurm";
  flags.events_dir = dir.path() + "/events";
  flags.control_dir = dir.path() + "/control";
  HookCommandOptions hook;
  hook.kind = "taskprolog";
  hook.agent_library = agent;
  hook.timeout = std::chrono::seconds(30);

  ::testing::internal::CaptureStdout();
  const int status = RunHookCommand(hook, flags, host);
  DisarmHookDeadline();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "export CUDA_INJECTION64_PATH=" + agent +
                     "\nexport EXPANSE_CONTROL_DIR=" + flags.control_dir + "\n");
  EXPECT_TRUE(host.looked_up_users().empty());

  hook.kind = "prolog";
  ::testing::internal::CaptureStderr();  // no job in this environment: it says so
  EXPECT_EQ(RunHookCommand(hook, flags, host), 0);
  DisarmHookDeadline();
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(host.looked_up_users(), std::vector<std::string>{"slurm"});
}

}  // namespace
}  // namespace daemon_commands_test
}  // namespace expanse::agent
