#include "pystack/stack_model.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/utf8.h"

namespace expanse::pystack {
namespace stack_model_test {
namespace {

TEST(StackModelTest, ThreadStateNames) {
  EXPECT_STREQ(ThreadStateName(ThreadState::kHoldsGil), "gil");
  EXPECT_STREQ(ThreadStateName(ThreadState::kRunning), "running");
  EXPECT_STREQ(ThreadStateName(ThreadState::kIdle), "idle");
  EXPECT_STREQ(ThreadStateName(ThreadState::kUnknown), "");
}

TEST(StackModelTest, FoldsRootFirst) {
  EXPECT_EQ(FoldFrames({{"/a.py", "<module>", 3}, {"/a.py", "K.run", 10}}),
            "/a.py:<module>:3;/a.py:K.run:10");
  EXPECT_EQ(FoldFrames({{"", "", 0}}), "<unknown>:<unknown>:0");
  EXPECT_EQ(FoldFrames({}), "");
}

TEST(StackModelTest, ReplacesSeparatorsControlsAndBadUtf8) {
  EXPECT_EQ(FoldFrames({{"a;b.py", "f\n", 1}}), "a?b.py:f?:1");
  const std::string folded = FoldFrames({{"caf\xc3\xa9.py", "bad\xff", 2}});
  EXPECT_TRUE(IsValidUtf8(folded));
  EXPECT_EQ(folded, "caf\xc3\xa9.py:bad?:2");
}

TEST(StackModelTest, DeepStacksKeepRootsAndLeafWithinTheLimit) {
  std::vector<Frame> frames;
  frames.push_back({"/app/main.py", "<module>", 1});
  for (int i = 0; i < 1000; ++i) {
    frames.push_back({"/app/recursive.py", "recurse", 7});
  }
  frames.push_back({"/app/recursive.py", "leaf", 42});
  const std::string folded = FoldFrames(frames, 4096);
  EXPECT_LE(folded.size(), 4096u);
  EXPECT_TRUE(folded.starts_with("/app/main.py:<module>:1;"));
  EXPECT_TRUE(folded.ends_with(";...:...:0;/app/recursive.py:leaf:42")) << folded.substr(4000);
}

TEST(StackModelTest, AHugeLeafIsCutToValidUtf8) {
  std::string long_name;
  for (int i = 0; i < 5000; ++i) {
    long_name += "\xce\xb1";
  }
  const std::string folded = FoldFrames({{"/a.py", "root", 1}, {"/a.py", long_name, 2}}, 1000);
  EXPECT_LE(folded.size(), 1000u);
  EXPECT_TRUE(IsValidUtf8(folded));
}

}  // namespace
}  // namespace stack_model_test
}  // namespace expanse::pystack
