#include "pystack/pyspy_json.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::pystack {
namespace pyspy_json_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(EXPANSE_SOURCE_DIR) + "/tests/fixtures/pyspy/" + name,
                   std::ios::binary);
  EXPECT_TRUE(in.is_open()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Where(const Frame& frame) {
  return frame.file + ":" + frame.function + ":" + std::to_string(frame.line);
}

void ExpectRefused(std::string_view json, std::string_view message) {
  const Result<ProcessStacks> stacks = ParsePyspyDump(json, 1);
  ASSERT_FALSE(stacks.ok()) << json;
  EXPECT_EQ(stacks.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stacks.status().reason(), "pyspy_output");
  EXPECT_THAT(stacks.status().message(), HasSubstr(message)) << json;
}

TEST(PyspyJsonTest, ReadsA04DumpRootFirstWithThreadStates) {
  const Result<ProcessStacks> stacks = ParsePyspyDump(Fixture("dump_0.4_training.json"), 48213);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->pid, 48213);
  ASSERT_EQ(stacks->threads.size(), 3u);

  const ThreadStack& main = stacks->threads[0];
  EXPECT_EQ(main.tid, 48213);
  EXPECT_EQ(main.state, ThreadState::kHoldsGil);
  ASSERT_EQ(main.frames.size(), 6u);
  EXPECT_EQ(Where(main.frames.front()), "/home/alice/resnet/train.py:<module>:150");
  EXPECT_EQ(Where(main.frames.back()),
            "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/conv.py:_conv_forward:456");

  const ThreadStack& pin_memory = stacks->threads[1];
  EXPECT_EQ(pin_memory.tid, 48240);
  EXPECT_EQ(pin_memory.state, ThreadState::kIdle);
  EXPECT_EQ(pin_memory.frames.front().function, "_bootstrap");
  EXPECT_EQ(pin_memory.frames.back().function, "wait");

  const ThreadStack& sharer = stacks->threads[2];
  EXPECT_EQ(sharer.state, ThreadState::kRunning);
  EXPECT_EQ(sharer.frames.back().function, "_recv");
}

TEST(PyspyJsonTest, ReadsA03DumpWithUnmappedThreadAndNoFrames) {
  const Result<ProcessStacks> stacks = ParsePyspyDump(Fixture("dump_0.3_idle.json"), 7301);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  ASSERT_EQ(stacks->threads.size(), 2u);
  EXPECT_EQ(stacks->threads[0].state, ThreadState::kIdle);
  EXPECT_EQ(Where(stacks->threads[0].frames.front()), "/srv/jobs/serve.py:<module>:61");
  EXPECT_EQ(stacks->threads[1].tid, 0);  // os_thread_id null
  EXPECT_EQ(stacks->threads[1].state, ThreadState::kRunning);
  EXPECT_THAT(stacks->threads[1].frames, IsEmpty());
}

TEST(PyspyJsonTest, FoldedFixtureIsRootFirst) {
  const Result<ProcessStacks> stacks = ParsePyspyDump(Fixture("dump_0.3_idle.json"), 7301);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(FoldFrames(stacks->threads[0].frames),
            "/srv/jobs/serve.py:<module>:61;"
            "/usr/lib/python3.9/asyncio/base_events.py:run_forever:596;"
            "/usr/lib/python3.9/asyncio/base_events.py:_run_once:1854;"
            "/usr/lib/python3.9/selectors.py:poll:469");
}

TEST(PyspyJsonTest, EmptyDumpHasNoThreads) {
  const Result<ProcessStacks> stacks = ParsePyspyDump("[]\n", 5);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->pid, 5);
  EXPECT_THAT(stacks->threads, IsEmpty());
}

TEST(PyspyJsonTest, UnknownLineNumbersBecomeZeroAndExtraFieldsAreIgnored) {
  const Result<ProcessStacks> stacks = ParsePyspyDump(
      R"([{"owns_gil": false, "active": true, "future_field": {"x": [1]},
           "frames": [{"name": "f", "filename": "a.py", "line": -3},
                      {"name": "g", "filename": "a.py"},
                      {"name": "h", "filename": "a.py", "line": 4294967295, "locals": []}]}])",
      1);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  ASSERT_EQ(stacks->threads.size(), 1u);
  std::vector<int> lines;
  for (const Frame& frame : stacks->threads[0].frames)
    lines.push_back(frame.line);
  EXPECT_THAT(lines, ElementsAre(0, 0, 0));
  EXPECT_EQ(stacks->threads[0].frames.front().function, "h");
}

TEST(PyspyJsonTest, GilHolderThatLooksIdleCountsAsHoldingTheGil) {
  const Result<ProcessStacks> stacks =
      ParsePyspyDump(R"([{"owns_gil": true, "active": false, "frames": []}])", 1);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->threads[0].state, ThreadState::kHoldsGil);
}

TEST(PyspyJsonTest, RefusesWhatIsNotADumpNamingTheElement) {
  ExpectRefused("", "py-spy dump: not valid JSON");
  ExpectRefused("Error: Failed to find python version", "py-spy dump: not valid JSON at byte 1");
  ExpectRefused(R"({"threads": []})", "expected an array of thread stacks");
  ExpectRefused(R"([7])", "py-spy dump: [0] must be an object");
  ExpectRefused(R"([{"active": true}])", "[0].frames is required");
  ExpectRefused(R"([{"frames": {}}])", "[0].frames must be an array");
  ExpectRefused(R"([{"frames": [], "owns_gil": "yes"}])", "[0].owns_gil must be true or false");
  ExpectRefused(R"([{"frames": [], "active": 1}])", "[0].active must be true or false");
  ExpectRefused(R"([{"frames": [], "os_thread_id": -4}])",
                "[0].os_thread_id must be an integer from 0 to 2147483647");
  ExpectRefused(R"([{"frames": [], "os_thread_id": 99999999999}])",
                "[0].os_thread_id must be an integer from 0 to 2147483647");
  ExpectRefused(R"([{"frames": [], "os_thread_id": 1.5}])", "[0].os_thread_id");
  ExpectRefused(R"([{"frames": [{"filename": "a.py", "line": 1}]}])",
                "[0].frames[0].name is required");
  ExpectRefused(R"([{"frames": [{"name": "f", "filename": 3, "line": 1}]}])",
                "[0].frames[0].filename must be a string");
  ExpectRefused(R"([{"frames": [{"name": "f", "filename": "a.py", "line": "1"}]}])",
                "[0].frames[0].line must be an integer");
  ExpectRefused(R"([{"frames": []}, {"frames": [7]}])", "[1].frames[0] must be an object");
}

TEST(PyspyJsonTest, RefusesHugeOrDeepInput) {
  ExpectRefused(std::string(kMaxPyspyJsonBytes + 1, ' '), "bytes (at most 16777216)");
  ExpectRefused(std::string(100000, '[') + std::string(100000, ']'), "deeper than 32 levels");
  // Brackets inside strings are text, not nesting.
  const std::string deep_name = R"([{"frames": [{"name": ")" + std::string(1000, '[') +
                                R"(", "filename": "a.py", "line": 1}]}])";
  EXPECT_TRUE(ParsePyspyDump(deep_name, 1).ok());

  std::string many_threads = "[";
  for (std::size_t i = 0; i <= kMaxPyspyThreads; ++i)
    many_threads += i == 0 ? R"({"frames": []})" : R"(,{"frames": []})";
  many_threads += "]";
  ExpectRefused(many_threads, "4097 threads (at most 4096)");

  std::string many_frames = R"([{"frames": [)";
  for (std::size_t i = 0; i <= kMaxPyspyFramesPerThread; ++i) {
    many_frames += i == 0 ? "" : ",";
    many_frames += R"({"name": "f", "filename": "a.py", "line": 1})";
  }
  many_frames += "]}]";
  ExpectRefused(many_frames, "[0].frames has more than 4096 entries");
}

// The job names its own code: a function named with control characters, or a 10,000-byte file
// name, is kept (cut to 4,096 bytes) for FoldFrames to make printable, and the dump's other
// frames and threads are read as usual. One such frame used to refuse the whole dump.
TEST(PyspyJsonTest, OddFrameTextCostsOnlyItsFrame) {
  const std::string long_file(10000, 'x');
  const std::string dump = R"([{"frames": [{"name": "leaf", "filename": "a.py", "line": 3},
      {"name": "evil\u001b[2J\u0000;name", "filename": ")" +
                           long_file + R"(", "line": 2},
      {"name": "main", "filename": "a.py", "line": 1}]},
     {"frames": [{"name": "wait", "filename": "threading.py", "line": 9}]}])";
  const Result<ProcessStacks> stacks = ParsePyspyDump(dump, 1);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  ASSERT_EQ(stacks->threads.size(), 2u);
  ASSERT_EQ(stacks->threads[0].frames.size(), 3u);
  EXPECT_EQ(stacks->threads[0].frames[1].function, std::string("evil\x1b[2J\0;name", 14));
  EXPECT_EQ(stacks->threads[0].frames[1].file, std::string(4096, 'x'));
  EXPECT_EQ(FoldFrames(stacks->threads[0].frames, 1 << 20),
            "a.py:main:1;" + std::string(4096, 'x') + ":evil?[2J??name:2;a.py:leaf:3");
  EXPECT_EQ(stacks->threads[1].frames[0].function, "wait");
}

TEST(PyspyJsonTest, RefusesInvalidUtf8) {
  ExpectRefused("[{\"frames\": [{\"name\": \"\xff\", \"filename\": \"a.py\", \"line\": 1}]}]",
                "not valid JSON");
}

}  // namespace
}  // namespace pyspy_json_test
}  // namespace expanse::pystack
