#include "pystack/stack_walker.h"

#include <array>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pystack/memory_image.h"
#include "pystack/synthetic_image.h"

namespace expanse::pystack {
namespace stack_walker_test {
namespace {

std::span<const std::uint8_t> Bytes(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

SyntheticProcess ThreeThreads(int minor) {
  SyntheticProcess process;
  process.minor = minor;
  process.threads = {
      {101, false, {{"/app/main.py", "<module>", 1, 30}, {"/app/main.py", "serve", 10, 14}}},
      {102,
       true,
       {{"/usr/lib/python3/threading.py", "Thread.run", 950, 975},
        {"/app/work.py", "Model.train_step", 200, 520}}},
      {103, false, {{"/app/idle.py", "wait", 5, 4}}},  // a line before the first line
  };
  return process;
}

struct Sampled {
  Result<std::vector<ThreadStack>> threads;
  std::size_t reads = 0;
};

Sampled Walk(
    const SyntheticImage& image, const NativeReaderLimits& limits = {},
    const IsProcessThread& is_thread = [](pid_t) { return true; }) {
  MemoryImage memory;
  memory.Map(kSyntheticBase, image.bytes);
  CodeCache cache(limits.max_code_cache_entries);
  Sampled sampled{WalkThreads(memory, image.info, limits, cache, is_thread)};
  sampled.reads = memory.reads();
  return sampled;
}

class StackWalkerTest : public ::testing::TestWithParam<int> {};

TEST_P(StackWalkerTest, ReadsEveryThreadsFramesNamesAndLines) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  ASSERT_TRUE(image.ok()) << image.status();
  const Sampled sampled = Walk(*image);
  ASSERT_TRUE(sampled.threads.ok()) << sampled.threads.status();
  const std::vector<ThreadStack>& threads = *sampled.threads;
  ASSERT_EQ(threads.size(), 3u);
  EXPECT_EQ(threads[0].tid, 101);
  EXPECT_EQ(threads[0].state, ThreadState::kUnknown);
  ASSERT_EQ(threads[0].frames.size(), 2u);
  EXPECT_EQ(threads[0].frames[0].file, "/app/main.py");
  EXPECT_EQ(threads[0].frames[0].function, "<module>");
  EXPECT_EQ(threads[0].frames[0].line, 30);
  EXPECT_EQ(threads[0].frames[1].function, "serve");
  EXPECT_EQ(threads[0].frames[1].line, 14);
  EXPECT_EQ(threads[1].tid, 102);
  EXPECT_EQ(threads[1].state, ThreadState::kHoldsGil);
  EXPECT_EQ(threads[1].frames[1].function, "Model.train_step");
  EXPECT_EQ(threads[1].frames[1].line, 520);
  EXPECT_EQ(threads[2].frames[0].line, 4);
}

TEST_P(StackWalkerTest, SkipsShimFramesAndThreadsWithoutFrames) {
  SyntheticProcess process = ThreeThreads(GetParam());
  process.shim_frames = true;
  process.threads.push_back({104, false, {}});
  const Result<SyntheticImage> image = BuildSyntheticImage(process);
  ASSERT_TRUE(image.ok());
  const Sampled sampled = Walk(*image);
  ASSERT_TRUE(sampled.threads.ok()) << sampled.threads.status();
  ASSERT_EQ(sampled.threads->size(), 3u);
  EXPECT_EQ((*sampled.threads)[0].frames.size(), 2u);
}

TEST_P(StackWalkerTest, UnknownThreadIdsStayZero) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  const Sampled sampled = Walk(*image, {}, [](pid_t tid) { return tid == 102; });
  ASSERT_TRUE(sampled.threads.ok());
  // 3.11+ record the kernel's id themselves; 3.9/3.10 only through the pthread, checked.
  const bool native_ids = GetParam() >= 11;
  EXPECT_EQ((*sampled.threads)[0].tid, native_ids ? 101 : 0);
  EXPECT_EQ((*sampled.threads)[1].tid, 102);
}

TEST_P(StackWalkerTest, DeepStacksKeepTheirLeafUnderATruncatedRoot) {
  SyntheticProcess process;
  process.minor = GetParam();
  SyntheticThread thread{7, true, {}};
  for (int i = 0; i < 300; ++i) {
    thread.frames.push_back({"/app/r.py", "recurse", 3, 4 + (i == 299 ? 1 : 0)});
  }
  process.threads.push_back(thread);
  const Result<SyntheticImage> image = BuildSyntheticImage(process);
  NativeReaderLimits limits;
  limits.max_frames = 100;
  const Sampled sampled = Walk(*image, limits);
  ASSERT_TRUE(sampled.threads.ok()) << sampled.threads.status();
  const std::vector<Frame>& frames = (*sampled.threads)[0].frames;
  ASSERT_EQ(frames.size(), 101u);
  EXPECT_EQ(frames.front().function, "<truncated>");
  EXPECT_EQ(frames.back().function, "recurse");
  EXPECT_EQ(frames.back().line, 5);
}

TEST_P(StackWalkerTest, AFrameLoopIsInconsistentNotEndless) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  SyntheticImage looped = *image;
  const std::uint64_t leaf = looped.frame_addresses[1][0];
  const std::uint64_t root = looped.frame_addresses[1][1];
  const std::uint64_t offset = root + looped.info.layout.frame_previous - kSyntheticBase;
  std::memcpy(looped.bytes.data() + offset, &leaf, 8);
  const Sampled sampled = Walk(looped);
  ASSERT_FALSE(sampled.threads.ok());
  EXPECT_EQ(sampled.threads.status().reason(), "inconsistent_read");
}

TEST_P(StackWalkerTest, AThreadLoopIsInconsistentNotEndless) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  SyntheticImage looped = *image;
  const std::uint64_t first = looped.thread_addresses[0];
  const std::uint64_t offset =
      looped.thread_addresses[2] + looped.info.layout.thread_next - kSyntheticBase;
  std::memcpy(looped.bytes.data() + offset, &first, 8);
  EXPECT_EQ(Walk(looped).threads.status().reason(), "inconsistent_read");
}

TEST_P(StackWalkerTest, AThreadOfAnotherInterpreterIsInconsistent) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  SyntheticImage wrong = *image;
  const std::uint64_t elsewhere = 0x7000;
  std::memcpy(wrong.bytes.data() + wrong.thread_addresses[1] + wrong.info.layout.thread_interp -
                  kSyntheticBase,
              &elsewhere, 8);
  EXPECT_EQ(Walk(wrong).threads.status().reason(), "inconsistent_read");
}

TEST_P(StackWalkerTest, AFrameWhoseCodeIsNotCodeIsInconsistent) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  SyntheticImage wrong = *image;
  // Point the leaf frame's code at the thread state: readable, but not a code object.
  const std::uint64_t not_code = wrong.thread_addresses[0];
  std::memcpy(wrong.bytes.data() + wrong.frame_addresses[0][0] + wrong.info.layout.frame_code -
                  kSyntheticBase,
              &not_code, 8);
  EXPECT_EQ(Walk(wrong).threads.status().reason(), "inconsistent_read");
}

TEST_P(StackWalkerTest, ThreadCountIsBounded) {
  SyntheticProcess process;
  process.minor = GetParam();
  for (int i = 0; i < 40; ++i) {
    process.threads.push_back({100 + i, false, {{"/a.py", "f", 1, 2}}});
  }
  const Result<SyntheticImage> image = BuildSyntheticImage(process);
  NativeReaderLimits limits;
  limits.max_threads = 25;
  const Sampled sampled = Walk(*image, limits);
  ASSERT_TRUE(sampled.threads.ok());
  EXPECT_EQ(sampled.threads->size(), 25u);
}

TEST_P(StackWalkerTest, TheCodeCacheRereadsOnlyHeaders) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  MemoryImage memory;
  memory.Map(kSyntheticBase, image->bytes);
  NativeReaderLimits limits;
  CodeCache cache(limits.max_code_cache_entries);
  ASSERT_TRUE(WalkThreads(memory, image->info, limits, cache, nullptr).ok());
  const std::size_t first_reads = memory.reads();
  EXPECT_EQ(cache.size(), 5u);
  const Result<std::vector<ThreadStack>> again =
      WalkThreads(memory, image->info, limits, cache, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[1].frames[1].function, "Model.train_step");
  // Per code object the first walk read header, file, function and line table (at least two
  // reads each for the strings and bytes); the second only the header.
  EXPECT_LT(memory.reads() - first_reads, first_reads - 5 * 3);
}

TEST_P(StackWalkerTest, TheCodeCacheNoticesAReusedAddress) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  MemoryImage memory;
  memory.Map(kSyntheticBase, image->bytes);
  NativeReaderLimits limits;
  CodeCache cache(limits.max_code_cache_entries);
  ASSERT_TRUE(WalkThreads(memory, image->info, limits, cache, nullptr).ok());
  // Give thread 101's leaf code object thread 103's name: as if the code was freed and the
  // address reused for another function.
  const PythonLayout& layout = image->info.layout;
  const std::uint32_t function =
      layout.code_qualname != kNoField ? layout.code_qualname : layout.code_name;
  auto code_of = [&](std::uint64_t frame) {
    std::uint64_t code = 0;
    std::memcpy(&code, image->bytes.data() + frame + layout.frame_code - kSyntheticBase, 8);
    return code;
  };
  const std::uint64_t serve = code_of(image->frame_addresses[0][0]);
  const std::uint64_t wait = code_of(image->frame_addresses[2][0]);
  std::uint64_t wait_name = 0;
  std::memcpy(&wait_name, image->bytes.data() + wait + function - kSyntheticBase, 8);
  std::array<std::uint8_t, 8> patch;
  std::memcpy(patch.data(), &wait_name, 8);
  ASSERT_TRUE(memory.Write(serve + function, patch));
  const Result<std::vector<ThreadStack>> again =
      WalkThreads(memory, image->info, limits, cache, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].frames[1].function, "wait");
}

TEST_P(StackWalkerTest, LinesAreRememberedWithTheirCodeObject) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  MemoryImage memory;
  memory.Map(kSyntheticBase, image->bytes);
  NativeReaderLimits limits;
  CodeCache cache(limits.max_code_cache_entries);
  WalkStats first;
  const Result<std::vector<ThreadStack>> before =
      WalkThreads(memory, image->info, limits, cache, nullptr, &first);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(first.line_table_bytes_decoded, 0u);
  WalkStats second;
  const Result<std::vector<ThreadStack>> after =
      WalkThreads(memory, image->info, limits, cache, nullptr, &second);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(second.line_table_bytes_decoded, 0u);
  EXPECT_EQ(second.lines_remembered, 5u);
  EXPECT_EQ((*after)[1].frames[1].line, 520);
}

TEST_P(StackWalkerTest, LineDecodingIsBoundedPerSample) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  MemoryImage memory;
  memory.Map(kSyntheticBase, image->bytes);
  NativeReaderLimits limits;
  limits.max_line_table_bytes_per_sample = 0;
  CodeCache cache(limits.max_code_cache_entries);
  WalkStats stats;
  const Result<std::vector<ThreadStack>> threads =
      WalkThreads(memory, image->info, limits, cache, nullptr, &stats);
  ASSERT_TRUE(threads.ok()) << threads.status();
  EXPECT_EQ(stats.line_table_bytes_decoded, 0u);
  EXPECT_EQ(stats.lines_over_budget, 5u);
  EXPECT_EQ((*threads)[1].frames[1].function, "Model.train_step");
  EXPECT_EQ((*threads)[1].frames[1].line, 0);  // unknown, never a guess
}

TEST_P(StackWalkerTest, AnEmptyInterpreterHasNoThreads) {
  SyntheticProcess process;
  process.minor = GetParam();
  const Result<SyntheticImage> image = BuildSyntheticImage(process);
  const Sampled sampled = Walk(*image);
  ASSERT_TRUE(sampled.threads.ok());
  EXPECT_TRUE(sampled.threads->empty());
}

// Random bytes where the image should be, and random corruption of a real image: the walker
// must fail or succeed within its bounds, never crash or read without limit.
TEST_P(StackWalkerTest, GarbageMemoryIsBounded) {
  const Result<SyntheticImage> image = BuildSyntheticImage(ThreeThreads(GetParam()));
  std::mt19937_64 random(GetParam());
  NativeReaderLimits limits;
  limits.max_frames = 64;
  limits.max_threads = 16;
  limits.max_string_bytes = 64;
  limits.max_line_table_bytes = 256;
  for (int round = 0; round < 400; ++round) {
    SyntheticImage damaged = *image;
    const int flips = 1 + static_cast<int>(random() % 64);
    for (int i = 0; i < flips; ++i) {
      const std::size_t at = random() % damaged.bytes.size();
      if (random() % 2 == 0) {
        damaged.bytes[at] = static_cast<char>(random());
      } else if (at + 8 <= damaged.bytes.size()) {
        // A pointer into the image, as a corrupted list would hold.
        const std::uint64_t pointer = kSyntheticBase + (random() % damaged.bytes.size() & ~7u);
        std::memcpy(damaged.bytes.data() + (at & ~std::size_t{7}), &pointer, 8);
      }
    }
    MemoryImage memory;
    memory.Map(kSyntheticBase, damaged.bytes);
    BudgetedMemory budget(memory, 5000, 1 << 20);
    CodeCache cache(64);
    const Result<std::vector<ThreadStack>> threads =
        WalkThreads(budget, damaged.info, limits, cache, [](pid_t) { return true; });
    if (threads.ok()) {
      EXPECT_LE(threads->size(), limits.max_threads);
      for (const ThreadStack& thread : *threads) {
        EXPECT_LE(thread.frames.size(), limits.max_frames + 1);
        for (const Frame& frame : thread.frames) {
          EXPECT_LE(frame.file.size(), limits.max_string_bytes + 3);
          EXPECT_LE(frame.function.size(), limits.max_string_bytes + 3);
          EXPECT_GE(frame.line, 0);
        }
      }
    }
  }
  std::vector<char> noise(1 << 16);
  for (int round = 0; round < 50; ++round) {
    for (char& byte : noise) {
      byte = static_cast<char>(random());
    }
    const std::string bytes(noise.begin(), noise.end());
    const Result<InterpreterInfo> info = SyntheticInterpreterInfo(GetParam(), Bytes(bytes));
    if (!info.ok()) {
      continue;  // 3.13 refuses a table of noise
    }
    MemoryImage memory;
    memory.Map(kSyntheticBase, bytes);
    BudgetedMemory budget(memory, 5000, 1 << 20);
    CodeCache cache(64);
    (void)WalkThreads(budget, *info, limits, cache, nullptr);
    EXPECT_LE(budget.reads(), 5000u);
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, StackWalkerTest, ::testing::Values(9, 10, 11, 12, 13),
                         [](const auto& param_info) {
                           return "Py3_" + std::to_string(param_info.param);
                         });

TEST(SyntheticImageTest, RefusesUnknownVersions) {
  SyntheticProcess process;
  process.minor = 8;
  EXPECT_FALSE(BuildSyntheticImage(process).ok());
}

}  // namespace
}  // namespace stack_walker_test
}  // namespace expanse::pystack
