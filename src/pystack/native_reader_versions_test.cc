// The native reader against real processes of every CPython version it supports, where this
// machine has an interpreter for it (see FindInterpreter); a version without one is skipped,
// and says so. Debian's 3.11 is covered on every machine by native_reader_test.cc.
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "pystack/native_reader.h"
#include "pystack/python_process_for_test.h"

namespace expanse::pystack {
namespace native_reader_versions_test {
namespace {

using test_util::ChildProcess;
using test_util::FindInterpreter;
using test_util::LineOf;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::FieldsAre;

constexpr const char* kScript = R"(import os, sys, threading, time
def report(name):
    os.write(3, f"{name} {threading.get_native_id()}\n".encode())
class Worker:
    def sleep_in_key(self):
        def key(item):
            if item == 3:
                report("worker")
                time.sleep(1000)  # @key-sleep
            return item
        return sorted([5, 3, 1], key=key)  # @sorted
def produce():
    yield 1
    yield Worker().sleep_in_key()  # @in-generator
def consume():
    for _ in produce():  # @consume
        pass
def spin():
    report("spinner")
    while True:  # @spin-loop
        pass  # @spin-body
threading.Thread(target=consume, daemon=True).start()
threading.Thread(target=spin, daemon=True).start()
os.write(3, ("version %d.%d.%d\n" % sys.version_info[:3]).encode())
report("main")
time.sleep(1000)  # @main
)";

const ThreadStack* WithLeaf(const ProcessStacks& stacks, std::string_view function) {
  for (const ThreadStack& thread : stacks.threads) {
    if (!thread.frames.empty() && thread.frames.back().function == function) {
      return &thread;
    }
  }
  return nullptr;
}

class NativeReaderVersionsTest : public ::testing::TestWithParam<int> {};

TEST_P(NativeReaderVersionsTest, ThreadsGeneratorsCallsFromCAndTheGil) {
  const int minor = GetParam();
  const std::string interpreter = FindInterpreter(minor);
  if (interpreter.empty()) {
    GTEST_SKIP() << "no CPython 3." << minor << " on this machine (set EXPANSE_TEST_PYTHON3"
                 << minor << ")";
  }
  expanse::testing::TempDir dir("expanse_pystack");
  const std::string path = dir.Write("versions.py", kScript);
  ChildProcess process;
  ASSERT_TRUE(process.Start({interpreter, path}));
  std::map<std::string, std::string> said;
  for (int i = 0; i < 4; ++i) {
    const std::optional<std::string> line = process.ReadLine();
    ASSERT_TRUE(line.has_value()) << interpreter << " never got ready";
    said[line->substr(0, line->find(' '))] = line->substr(line->find(' ') + 1);
  }

  // Qualified names from 3.11 on, plain co_name before.
  const bool qualified = minor >= 11;
  const std::string key = qualified ? "Worker.sleep_in_key.<locals>.key" : "key";
  const std::string sleep_in_key = qualified ? "Worker.sleep_in_key" : "sleep_in_key";
  NativeReader reader;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  Result<ProcessStacks> stacks = reader.Sample(process.pid());
  auto settled = [&](const ProcessStacks& sample) {
    const ThreadStack* worker = WithLeaf(sample, key);
    const ThreadStack* spinner = WithLeaf(sample, "spin");
    const ThreadStack* main_thread = WithLeaf(sample, "<module>");
    return sample.threads.size() == 3 && worker != nullptr &&
           worker->frames.back().line == LineOf(kScript, "@key-sleep") &&
           worker->state == ThreadState::kIdle && spinner != nullptr &&
           spinner->state == ThreadState::kHoldsGil && main_thread != nullptr &&
           main_thread->state == ThreadState::kIdle;
  };
  while ((!stacks.ok() || !settled(*stacks)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stacks = reader.Sample(process.pid());
  }
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  std::string described;
  for (const ThreadStack& thread : stacks->threads) {
    described += "\n  tid " + std::to_string(thread.tid) + " [" + ThreadStateName(thread.state) +
                 "] " + FoldFrames(thread.frames);
  }
  EXPECT_TRUE(settled(*stacks)) << "threads never reached the expected state:" << described;
  EXPECT_EQ(stacks->python_version, minor >= 11 ? said["version"] : "3." + std::to_string(minor));

  const ThreadStack* worker = WithLeaf(*stacks, key);
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(std::to_string(worker->tid), said["worker"]);
  ASSERT_GE(worker->frames.size(), 4u);
  const std::vector<Frame> tail(worker->frames.end() - 4, worker->frames.end());
  EXPECT_THAT(tail, ElementsAre(FieldsAre(path, "consume", LineOf(kScript, "@consume")),
                                FieldsAre(path, "produce", LineOf(kScript, "@in-generator")),
                                FieldsAre(path, sleep_in_key, LineOf(kScript, "@sorted")),
                                FieldsAre(path, key, LineOf(kScript, "@key-sleep"))))
      << described;
  EXPECT_THAT(worker->frames.front().file, ::testing::EndsWith("threading.py"));

  const ThreadStack* spinner = WithLeaf(*stacks, "spin");
  ASSERT_NE(spinner, nullptr);
  EXPECT_EQ(std::to_string(spinner->tid), said["spinner"]);
  EXPECT_THAT(spinner->frames.back().line,
              AnyOf(LineOf(kScript, "@spin-loop"), LineOf(kScript, "@spin-body")));

  const ThreadStack* main_thread = WithLeaf(*stacks, "<module>");
  ASSERT_NE(main_thread, nullptr);
  EXPECT_EQ(main_thread->tid, process.pid());
  EXPECT_THAT(main_thread->frames,
              ElementsAre(FieldsAre(path, "<module>", LineOf(kScript, "@main"))));
}

INSTANTIATE_TEST_SUITE_P(Versions, NativeReaderVersionsTest, ::testing::Values(9, 10, 11, 12, 13),
                         [](const auto& param_info) {
                           return "Py3_" + std::to_string(param_info.param);
                         });

TEST(NativeReaderOldVersionsTest, PythonThreeEightIsRefusedByName) {
  const std::string interpreter = FindInterpreter(8);
  if (interpreter.empty()) {
    GTEST_SKIP() << "no CPython 3.8 on this machine (set EXPANSE_TEST_PYTHON38)";
  }
  expanse::testing::TempDir dir("expanse_pystack");
  ChildProcess process;
  ASSERT_TRUE(process.Start(
      {interpreter,
       dir.Write("old.py", "import os, time\nos.write(3, b'ready\\n')\ntime.sleep(1000)\n")}));
  ASSERT_TRUE(process.ReadLine().has_value());
  const Result<ProcessStacks> stacks = NativeReader().Sample(process.pid());
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(stacks.status().reason(), "unsupported_version");
  EXPECT_THAT(stacks.status().message(), ::testing::HasSubstr("Python 3.8"));
}

}  // namespace
}  // namespace native_reader_versions_test
}  // namespace expanse::pystack
