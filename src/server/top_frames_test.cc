#include "server/top_frames.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::server {
namespace top_frames_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// "frame self/total" of each frame.
std::vector<std::string> Describe(const std::vector<FrameCount>& frames) {
  std::vector<std::string> out;
  for (const FrameCount& f : frames) {
    out.push_back(f.frame + " " + std::to_string(f.self_count) + "/" +
                  std::to_string(f.total_count));
  }
  return out;
}

store::StackTotal Stack(const std::string& folded, int64_t count) {
  return {.folded = folded, .thread_state = "gil", .count = count, .gpu_idle_count = 0};
}

TEST(TopFramesTest, SelfIsTheLeafTotalIsAnywhereOncePerStack) {
  const std::vector<store::StackTotal> stacks = {
      Stack("main;step;matmul", 10),
      Stack("main;load", 4),
      Stack("main;rec;rec;rec", 3),  // recursion counts once per stack
      Stack("main;step", 2),
  };
  EXPECT_THAT(Describe(TopFrames(stacks, 50)),
              ElementsAre("matmul 10/10", "load 4/4", "rec 3/3", "step 2/12", "main 0/19"));
  EXPECT_THAT(Describe(TopFrames(stacks, 2)), ElementsAre("matmul 10/10", "load 4/4"));
  EXPECT_THAT(TopFrames({}, 50), IsEmpty());
}

TEST(TopFramesTest, StatesOfOneStackAddUp) {
  std::vector<store::StackTotal> stacks = {Stack("main;wait", 5), Stack("main;wait", 7)};
  stacks[1].thread_state = "idle";
  EXPECT_THAT(Describe(TopFrames(stacks, 50)), ElementsAre("wait 12/12", "main 0/12"));
}

TEST(TopFramesTest, TiesAreBrokenByTotalThenName) {
  const std::vector<store::StackTotal> stacks = {Stack("b", 1), Stack("a", 1), Stack("x;c", 1)};
  EXPECT_THAT(Describe(TopFrames(stacks, 50)), ElementsAre("a 1/1", "b 1/1", "c 1/1", "x 0/1"));
}

// Frames first met past the distinct bound are not counted; those met before keep counting.
TEST(TopFramesTest, FramesPastTheDistinctBoundAreNotCounted) {
  const std::vector<store::StackTotal> stacks = {Stack("main;a", 5), Stack("main;b", 3),
                                                 Stack("main;a;c", 2)};
  EXPECT_THAT(Describe(TopFrames(stacks, 50, 2)), ElementsAre("a 5/7", "main 0/10"));
  EXPECT_THAT(Describe(TopFrames(stacks, 50, 3)), ElementsAre("a 5/7", "b 3/3", "main 0/10"));
}

}  // namespace
}  // namespace top_frames_test
}  // namespace expanse::server
