// The native reader against real Python processes: Debian's python3.11 (3.11.2), which every
// test machine has. native_reader_versions_test.cc covers the other versions where present.
#include "pystack/native_reader.h"

#include <grp.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "pystack/process_memory.h"
#include "pystack/python_process_for_test.h"
#include "pystack/remote_memory.h"

namespace expanse::pystack {
namespace native_reader_test {
namespace {

using ::expanse::testing::TempDir;
using test_util::ChildProcess;
using test_util::kDebianPython;
using test_util::LineOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr auto kSettleTimeout = std::chrono::seconds(120);

auto IsFrame(const std::string& file, const std::string& function, int line) {
  return ::testing::FieldsAre(file, function, line);
}

// A script in a temporary directory, run by `interpreter`, that has said "ready".
struct RunningScript {
  TempDir dir{"expanse_pystack"};
  std::string path;
  std::string text;
  ChildProcess process;
  std::vector<std::string> lines;  // what it wrote to fd 3, one entry per line
};

void StartScript(RunningScript& script, const std::string& interpreter, const std::string& text,
                 int ready_lines = 1) {
  script.text = text;
  script.path = script.dir.Write("target.py", text);
  ASSERT_TRUE(script.process.Start({interpreter, script.path})) << interpreter;
  for (int i = 0; i < ready_lines; ++i) {
    const std::optional<std::string> line = script.process.ReadLine();
    ASSERT_TRUE(line.has_value()) << "the script never said it was ready";
    script.lines.push_back(*line);
  }
}

// Samples until `done` accepts a sample (the target may need a moment to get from "ready" to
// the call under test); the last sample, or the last error.
Result<ProcessStacks> SampleUntil(NativeReader& reader, pid_t pid,
                                  const std::function<bool(const ProcessStacks&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSettleTimeout;
  Result<ProcessStacks> stacks = reader.Sample(pid);
  while ((!stacks.ok() || !done(*stacks)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stacks = reader.Sample(pid);
  }
  return stacks;
}

// The thread's frames folded, for failure messages.
std::string Describe(const ThreadStack* thread) {
  return thread == nullptr ? "(no such thread)" : FoldFrames(thread->frames);
}

std::string Describe(const ProcessStacks& stacks) {
  std::string text;
  for (const ThreadStack& thread : stacks.threads) {
    text += "\n  tid " + std::to_string(thread.tid) + " [" + ThreadStateName(thread.state) + "] " +
            FoldFrames(thread.frames);
  }
  return text;
}

// Samples until the sample fails, for a target that is going away.
Status SampleUntilError(NativeReader& reader, pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + kSettleTimeout;
  Result<ProcessStacks> stacks = reader.Sample(pid);
  while (stacks.ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stacks = reader.Sample(pid);
  }
  return stacks.ok() ? OkStatus() : stacks.status();
}

const ThreadStack* ThreadWithFunction(const ProcessStacks& stacks, std::string_view function) {
  for (const ThreadStack& thread : stacks.threads) {
    for (const Frame& frame : thread.frames) {
      if (frame.function == function) {
        return &thread;
      }
    }
  }
  return nullptr;
}

bool LeafIs(const ThreadStack* thread, std::string_view function, int line) {
  return thread != nullptr && !thread->frames.empty() &&
         thread->frames.back().function == function && thread->frames.back().line == line;
}

constexpr const char* kSleepingScript = R"(import os, time
def inner():
    os.write(3, b"ready\n")
    time.sleep(1000)  # @sleep
def outer():
    inner()  # @call-inner
outer()  # @call-outer
)";

TEST(NativeReaderTest, SleepingProcessExactFramesLinesAndState) {
  RunningScript script;
  StartScript(script, kDebianPython, kSleepingScript);
  NativeReader reader;
  const int sleep_line = LineOf(script.text, "@sleep");
  const Result<ProcessStacks> stacks =
      SampleUntil(reader, script.process.pid(), [&](const ProcessStacks& sample) {
        return sample.threads.size() == 1 && sample.threads[0].state == ThreadState::kIdle &&
               LeafIs(&sample.threads[0], "inner", sleep_line);
      });
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->pid, script.process.pid());
  EXPECT_EQ(stacks->python_version, "3.11.2");
  ASSERT_EQ(stacks->threads.size(), 1u);
  const ThreadStack& thread = stacks->threads[0];
  EXPECT_EQ(thread.tid, script.process.pid());
  EXPECT_EQ(thread.state, ThreadState::kIdle);
  EXPECT_THAT(thread.frames,
              ElementsAre(IsFrame(script.path, "<module>", LineOf(script.text, "@call-outer")),
                          IsFrame(script.path, "outer", LineOf(script.text, "@call-inner")),
                          IsFrame(script.path, "inner", sleep_line)))
      << Describe(&thread);
}

TEST(NativeReaderTest, BusyThreadHoldsTheGil) {
  RunningScript script;
  StartScript(script, kDebianPython, R"(import os
def spin():
    os.write(3, b"ready\n")
    x = 0
    while True:  # @loop
        x += 1  # @body
spin()
)");
  NativeReader reader;
  const std::vector<int> loop_lines = {LineOf(script.text, "@loop"), LineOf(script.text, "@body")};
  // Past "ready", the thread stays in the loop.
  const Result<ProcessStacks> settled =
      SampleUntil(reader, script.process.pid(), [&](const ProcessStacks& sample) {
        return sample.threads.size() == 1 && !sample.threads[0].frames.empty() &&
               std::find(loop_lines.begin(), loop_lines.end(),
                         sample.threads[0].frames.back().line) != loop_lines.end();
      });
  ASSERT_TRUE(settled.ok()) << settled.status();
  for (int i = 0; i < 20; ++i) {
    const Result<ProcessStacks> stacks = reader.Sample(script.process.pid());
    ASSERT_TRUE(stacks.ok()) << stacks.status();
    ASSERT_EQ(stacks->threads.size(), 1u);
    const ThreadStack& thread = stacks->threads[0];
    // The only thread never has to give the GIL up.
    EXPECT_EQ(thread.state, ThreadState::kHoldsGil);
    ASSERT_EQ(thread.frames.size(), 2u) << Describe(&thread);
    EXPECT_EQ(thread.frames.back().function, "spin");
    EXPECT_THAT(loop_lines, ::testing::Contains(thread.frames.back().line));
  }
}

TEST(NativeReaderTest, SeveralThreadsWithTheirOwnFunctionsAndIds) {
  RunningScript script;
  StartScript(script, kDebianPython, R"(import os, threading, time
def report(name):
    os.write(3, f"{name} {threading.get_native_id()}\n".encode())
def alpha():
    report("alpha")
    time.sleep(1000)  # @alpha
def beta():
    report("beta")
    threading.Event().wait()  # @beta
class Worker:
    def gamma(self):
        report("gamma")
        while True:  # @gamma-loop
            pass  # @gamma-body
for target in (alpha, beta, Worker().gamma):
    threading.Thread(target=target, daemon=True).start()
report("main")
time.sleep(1000)  # @main
)",
              4);
  std::map<std::string, pid_t> tids;
  for (const std::string& line : script.lines) {
    tids[line.substr(0, line.find(' '))] = std::stoi(line.substr(line.find(' ') + 1));
  }
  ASSERT_EQ(tids.size(), 4u);
  NativeReader reader;
  const int alpha_line = LineOf(script.text, "@alpha");
  const Result<ProcessStacks> stacks =
      SampleUntil(reader, script.process.pid(), [&](const ProcessStacks& sample) {
        const ThreadStack* alpha = ThreadWithFunction(sample, "alpha");
        const ThreadStack* beta = ThreadWithFunction(sample, "beta");
        const ThreadStack* main_thread = ThreadWithFunction(sample, "<module>");
        const ThreadStack* gamma = ThreadWithFunction(sample, "Worker.gamma");
        return sample.threads.size() == 4 && LeafIs(alpha, "alpha", alpha_line) &&
               gamma != nullptr && gamma->frames.back().function == "Worker.gamma" &&
               alpha->state == ThreadState::kIdle && beta != nullptr &&
               beta->frames.back().function == "Condition.wait" &&
               beta->state == ThreadState::kIdle &&
               LeafIs(main_thread, "<module>", LineOf(script.text, "@main")) &&
               main_thread->state == ThreadState::kIdle;
      });
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  ASSERT_EQ(stacks->threads.size(), 4u) << Describe(*stacks);

  const ThreadStack* alpha = ThreadWithFunction(*stacks, "alpha");
  ASSERT_NE(alpha, nullptr);
  EXPECT_EQ(alpha->tid, tids["alpha"]);
  EXPECT_EQ(alpha->frames.front().function, "Thread._bootstrap");
  EXPECT_THAT(alpha->frames.front().file, ::testing::EndsWith("threading.py"));

  const ThreadStack* beta = ThreadWithFunction(*stacks, "beta");
  ASSERT_NE(beta, nullptr);
  EXPECT_EQ(beta->tid, tids["beta"]);
  bool beta_frame = false;
  for (const Frame& frame : beta->frames) {
    beta_frame = beta_frame || (frame.function == "beta" && frame.file == script.path &&
                                frame.line == LineOf(script.text, "@beta"));
  }
  EXPECT_TRUE(beta_frame);
  EXPECT_EQ(beta->frames.back().function, "Condition.wait");

  const ThreadStack* gamma = ThreadWithFunction(*stacks, "Worker.gamma");
  ASSERT_NE(gamma, nullptr);
  EXPECT_EQ(gamma->tid, tids["gamma"]);
  EXPECT_EQ(gamma->frames.back().function, "Worker.gamma");
  EXPECT_THAT(gamma->state, ::testing::AnyOf(ThreadState::kHoldsGil, ThreadState::kRunning));

  const ThreadStack* main_thread = ThreadWithFunction(*stacks, "<module>");
  ASSERT_NE(main_thread, nullptr);
  EXPECT_EQ(main_thread->tid, tids["main"]);
  EXPECT_EQ(main_thread->tid, script.process.pid());
  EXPECT_THAT(main_thread->frames,
              ElementsAre(IsFrame(script.path, "<module>", LineOf(script.text, "@main"))))
      << Describe(main_thread);

  int holders = 0;
  for (const ThreadStack& thread : stacks->threads) {
    holders += thread.state == ThreadState::kHoldsGil ? 1 : 0;
  }
  EXPECT_LE(holders, 1);
}

TEST(NativeReaderTest, DeepRecursionKeepsEveryFrameAndFoldingKeepsTheLeaf) {
  RunningScript script;
  StartScript(script, kDebianPython, R"(import os, sys, time
sys.setrecursionlimit(5000)
def recurse(n):
    if n == 0:
        os.write(3, b"ready\n")
        time.sleep(1000)  # @sleep
    recurse(n - 1)  # @recurse
recurse(500)  # @start
)");
  NativeReader reader;
  const int sleep_line = LineOf(script.text, "@sleep");
  const Result<ProcessStacks> stacks =
      SampleUntil(reader, script.process.pid(), [&](const ProcessStacks& sample) {
        return sample.threads.size() == 1 && LeafIs(&sample.threads[0], "recurse", sleep_line);
      });
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  const std::vector<Frame>& frames = stacks->threads[0].frames;
  ASSERT_EQ(frames.size(), 502u);
  EXPECT_THAT(frames[0], IsFrame(script.path, "<module>", LineOf(script.text, "@start")));
  for (std::size_t i = 1; i < 501; ++i) {
    ASSERT_THAT(frames[i], IsFrame(script.path, "recurse", LineOf(script.text, "@recurse"))) << i;
  }
  const std::string folded = FoldFrames(frames, 4096);
  EXPECT_LE(folded.size(), 4096u);
  EXPECT_THAT(folded, StartsWith(script.path + ":<module>:"));
  EXPECT_THAT(folded, HasSubstr(";...:...:0;"));
  EXPECT_THAT(folded, ::testing::EndsWith(":recurse:" + std::to_string(sleep_line)));
}

TEST(NativeReaderTest, PythonCalledFromCKeepsBothSidesOfTheCall) {
  RunningScript script;
  StartScript(script, kDebianPython, R"(import os, time
def key(item):
    if item == 3:
        os.write(3, b"ready\n")
        time.sleep(1000)  # @sleep
    return item
def sort_them():
    return sorted([5, 3, 1], key=key)  # @sorted
sort_them()  # @call
)");
  NativeReader reader;
  const int sleep_line = LineOf(script.text, "@sleep");
  const Result<ProcessStacks> stacks =
      SampleUntil(reader, script.process.pid(), [&](const ProcessStacks& sample) {
        return sample.threads.size() == 1 && LeafIs(&sample.threads[0], "key", sleep_line);
      });
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_THAT(stacks->threads[0].frames,
              ElementsAre(IsFrame(script.path, "<module>", LineOf(script.text, "@call")),
                          IsFrame(script.path, "sort_them", LineOf(script.text, "@sorted")),
                          IsFrame(script.path, "key", sleep_line)))
      << Describe(&stacks->threads[0]);
}

TEST(NativeReaderTest, ThreadInNativeCodeWithoutTheGilIsRunning) {
  RunningScript script;
  StartScript(script, kDebianPython, R"(import hashlib, os, threading, time
data = b"x" * (32 << 20)
def hash_forever():
    os.write(3, b"ready\n")
    while True:
        hashlib.sha256(data).digest()  # @hash
threading.Thread(target=hash_forever, daemon=True).start()
time.sleep(1000)  # @main
)");
  NativeReader reader;
  const int hash_line = LineOf(script.text, "@hash");
  // hashlib lets go of the GIL while it hashes a large buffer, and the main thread sleeps, so
  // most samples catch the hashing thread on the CPU without the GIL.
  const Result<ProcessStacks> stacks =
      SampleUntil(reader, script.process.pid(), [&](const ProcessStacks& sample) {
        const ThreadStack* hashing = ThreadWithFunction(sample, "hash_forever");
        return LeafIs(hashing, "hash_forever", hash_line) &&
               hashing->state == ThreadState::kRunning;
      });
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  const ThreadStack* hashing = ThreadWithFunction(*stacks, "hash_forever");
  ASSERT_TRUE(LeafIs(hashing, "hash_forever", hash_line));
  EXPECT_EQ(hashing->state, ThreadState::kRunning);
}

TEST(NativeReaderTest, NotPython) {
  ChildProcess sleep;
  ASSERT_TRUE(sleep.Start({"/bin/sleep", "1000"}));
  NativeReader reader;
  const Result<ProcessStacks> stacks = reader.Sample(sleep.pid());
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().reason(), "not_python");
  EXPECT_THAT(stacks.status().message(),
              StartsWith("py_stacks: pid " + std::to_string(sleep.pid()) + " is not a Python"));
  EXPECT_EQ(reader.cached_processes(), 0u);
}

TEST(NativeReaderTest, ABinaryNamedForAnOldPythonIsUnsupported) {
  TempDir dir("expanse_pystack");
  const std::string fake = dir / "python3.8";
  std::filesystem::copy_file("/bin/sleep", fake);
  ChildProcess process;
  ASSERT_TRUE(process.Start({fake, "1000"}));
  const Result<ProcessStacks> stacks = NativeReader().Sample(process.pid());
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().reason(), "unsupported_version");
  EXPECT_THAT(stacks.status().message(), HasSubstr("Python 3.8 is not supported"));
}

TEST(NativeReaderTest, AnInterpreterDeletedOnDiskIsReadThroughMapFiles) {
  // As after a package upgrade replaced the binary under a running process.
  TempDir dir("expanse_pystack");
  const std::string copy = dir / "python3.11";
  std::filesystem::copy_file(kDebianPython, copy);
  RunningScript script;
  StartScript(script, copy, kSleepingScript);
  std::filesystem::remove(copy);
  const Result<ProcessStacks> stacks = NativeReader().Sample(script.process.pid());
  if (!stacks.ok() && stacks.status().reason() == "binary_unavailable" && geteuid() != 0) {
    GTEST_SKIP() << "/proc/<pid>/map_files needs CAP_SYS_ADMIN: " << stacks.status();
  }
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->python_version, "3.11.2");
  ASSERT_EQ(stacks->threads.size(), 1u);
  EXPECT_EQ(stacks->threads[0].frames.front().function, "<module>");
}

TEST(NativeReaderTest, AnExitedProcess) {
  RunningScript script;
  StartScript(script, kDebianPython, kSleepingScript);
  NativeReader reader;
  const pid_t pid = script.process.pid();
  ASSERT_TRUE(reader.Sample(pid).ok());
  EXPECT_EQ(reader.cached_processes(), 1u);

  script.process.Kill();  // a zombie first: its memory is gone, its pid not yet
  const Status zombie = SampleUntilError(reader, pid);
  EXPECT_EQ(zombie.reason(), "process_exited");
  EXPECT_EQ(zombie.message(), "py_stacks: process " + std::to_string(pid) + " exited");
  EXPECT_EQ(reader.cached_processes(), 0u);

  script.process.Stop();
  const Result<ProcessStacks> stacks = reader.Sample(pid);
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().reason(), "process_exited");
}

// Passes reads through to the process, and kills and reaps it at read number `kill_at`.
class KillingMemory final : public RemoteMemory {
 public:
  KillingMemory(ChildProcess& target, int kill_at)
      : inner_(target.pid()), target_(target), kill_at_(kill_at) {}
  Status ReadInto(std::uint64_t address, std::span<std::uint8_t> out) override {
    if (++reads_ == kill_at_) {
      target_.Stop();
    }
    return inner_.ReadInto(address, out);
  }

 private:
  ProcessMemory inner_;
  ChildProcess& target_;
  int kill_at_;
  int reads_ = 0;
};

TEST(NativeReaderTest, AProcessThatExitsMidReadIsReportedAsExited) {
  for (const int kill_at : {1, 2, 4, 7}) {
    RunningScript script;
    StartScript(script, kDebianPython, kSleepingScript);
    const pid_t pid = script.process.pid();
    NativeReader reader({}, [&script, kill_at](pid_t) {
      return std::make_unique<KillingMemory>(script.process, kill_at);
    });
    const Result<ProcessStacks> stacks = reader.Sample(pid);
    ASSERT_FALSE(stacks.ok()) << "killed at read " << kill_at << " but the sample succeeded";
    EXPECT_EQ(stacks.status().reason(), "process_exited") << stacks.status();
    EXPECT_EQ(reader.cached_processes(), 0u);
  }
}

// Passes reads through to the process, except those numbered [first_bad, last_bad], which
// fail as reads of unmapped memory do.
class FlakyMemory final : public RemoteMemory {
 public:
  FlakyMemory(pid_t pid, int first_bad, int last_bad)
      : inner_(pid), first_bad_(first_bad), last_bad_(last_bad) {}
  Status ReadInto(std::uint64_t address, std::span<std::uint8_t> out) override {
    ++reads_;
    if (reads_ >= first_bad_ && reads_ <= last_bad_) {
      return UnreadableAddress(address, out.size(), "made to fail by the test");
    }
    return inner_.ReadInto(address, out);
  }

 private:
  ProcessMemory inner_;
  int first_bad_;
  int last_bad_;
  int reads_ = 0;
};

TEST(NativeReaderTest, ATornReadIsRetried) {
  RunningScript script;
  StartScript(script, kDebianPython, kSleepingScript);
  // Discovery reads Py_Version and the start of _PyRuntime; the walk's first page fetch and
  // the direct read it falls back to then fail, so the first attempt fails.
  NativeReader reader({}, [](pid_t pid) { return std::make_unique<FlakyMemory>(pid, 3, 4); });
  const Result<ProcessStacks> stacks = reader.Sample(script.process.pid());
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->threads.size(), 1u);
}

TEST(NativeReaderTest, APersistentlyUnreadableTargetFailsAfterItsAttempts) {
  RunningScript script;
  StartScript(script, kDebianPython, kSleepingScript);
  const pid_t pid = script.process.pid();
  NativeReader reader(
      {}, [](pid_t target) { return std::make_unique<FlakyMemory>(target, 3, 1 << 30); });
  const Result<ProcessStacks> stacks = reader.Sample(pid);
  ASSERT_FALSE(stacks.ok());
  // The second attempt finds the interpreter again, whose reads fail too.
  EXPECT_EQ(stacks.status().reason(), "unreadable_address");
  EXPECT_THAT(stacks.status().message(), StartsWith("py_stacks: pid " + std::to_string(pid)));
}

TEST(NativeReaderTest, PtraceDeniedForAnotherUsersProcess) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to drop to another user";
  }
  RunningScript script;
  StartScript(script, kDebianPython, kSleepingScript);
  const pid_t target = script.process.pid();
  int result_pipe[2];
  ASSERT_EQ(pipe(result_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // As nobody, a root process's memory and maps are out of reach.
    close(result_pipe[0]);
    constexpr uid_t kNobody = 65534;
    std::string report = "could not become nobody";
    if (setgroups(0, nullptr) == 0 && setgid(kNobody) == 0 && setuid(kNobody) == 0) {
      const Result<ProcessStacks> stacks = NativeReader().Sample(target);
      report =
          stacks.ok() ? "sampled" : stacks.status().reason() + "\n" + stacks.status().message();
    }
    (void)!write(result_pipe[1], report.data(), report.size());
    _exit(0);
  }
  close(result_pipe[1]);
  std::string report;
  char chunk[512];
  ssize_t got = 0;
  while ((got = read(result_pipe[0], chunk, sizeof(chunk))) > 0) {
    report.append(chunk, static_cast<std::size_t>(got));
  }
  close(result_pipe[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_THAT(report, StartsWith("ptrace_denied\npy_stacks: ptrace denied for pid " +
                                 std::to_string(target) + ": "));
}

TEST(NativeReaderTest, CachesPerProcessUntilForgotten) {
  RunningScript script;
  StartScript(script, kDebianPython, kSleepingScript);
  NativeReader reader;
  ASSERT_TRUE(reader.Sample(script.process.pid()).ok());
  ASSERT_TRUE(reader.Sample(script.process.pid()).ok());
  EXPECT_EQ(reader.cached_processes(), 1u);
  reader.Forget(script.process.pid());
  EXPECT_EQ(reader.cached_processes(), 0u);
  ASSERT_TRUE(reader.Sample(script.process.pid()).ok());
  EXPECT_EQ(reader.cached_processes(), 1u);
}

TEST(NativeReaderTest, TheHooksForTheDaemon) {
  RunningScript script;
  StartScript(script, kDebianPython, kSleepingScript);
  const std::unique_ptr<StackSource> source = MakeNativeReader({});
  EXPECT_STREQ(source->Name(), "native");
  const Result<ProcessStacks> sampled = source->Sample(script.process.pid());
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  const Result<ProcessStacks> once = ReadPythonStacks(script.process.pid());
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_EQ(once->python_version, "3.11.2");
  ASSERT_EQ(once->threads.size(), 1u);
  EXPECT_EQ(once->threads[0].frames.front().function, "<module>");
}

}  // namespace
}  // namespace native_reader_test
}  // namespace expanse::pystack
