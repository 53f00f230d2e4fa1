#include "pystack/code_cache.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pystack/memory_image.h"
#include "pystack/synthetic_image.h"

namespace expanse::pystack {
namespace code_cache_test {
namespace {

constexpr std::uint64_t kCopies = 0x10000000;    // where the copied code objects go
constexpr std::uint64_t kBigTable = 0x20000000;  // the one bytes object they all point at
constexpr std::uint64_t kCopyStride = 0x1000;

std::uint64_t Load(const std::string& bytes, std::uint64_t offset) {
  std::uint64_t value = 0;
  std::memcpy(&value, bytes.data() + offset, 8);
  return value;
}

void Store(std::string& bytes, std::uint64_t offset, std::uint64_t value) {
  std::memcpy(bytes.data() + offset, &value, 8);
}

// A process whose code objects all share one line table of `table_bytes` bytes: what a job
// gets by compiling thousands of functions whose co_linetable is the same big bytes object.
class SharedTableProcess {
 public:
  SharedTableProcess(std::size_t count, std::size_t table_bytes) {
    SyntheticProcess process;
    process.minor = 11;
    process.threads = {{101, false, {{"/app/main.py", "f", 1, 2}}}};
    Result<SyntheticImage> image = BuildSyntheticImage(process);
    EXPECT_TRUE(image.ok()) << image.status();
    info_ = image->info;
    memory_.Map(kSyntheticBase, image->bytes);
    const PythonLayout& layout = info_.layout;
    const std::uint64_t frame = image->frame_addresses[0][0];
    const std::uint64_t code = Load(image->bytes, frame - kSyntheticBase + layout.frame_code);
    std::string header = image->bytes.substr(code - kSyntheticBase, layout.CodeReadSize());
    const std::uint64_t table = Load(header, layout.code_line_table);

    std::string big(layout.bytes_data + table_bytes, '\0');
    std::memcpy(big.data(), image->bytes.data() + (table - kSyntheticBase), layout.bytes_data);
    Store(big, layout.bytes_size, table_bytes);
    memory_.Map(kBigTable, big);
    Store(header, layout.code_line_table, kBigTable);
    for (std::size_t i = 0; i < count; ++i) {
      memory_.Map(kCopies + i * kCopyStride, header);
    }
  }

  Result<CodeInfo*> Get(CodeCache& cache, std::size_t index) {
    return cache.Get(memory_, info_, limits_, kCopies + index * kCopyStride);
  }

 private:
  MemoryImage memory_;
  InterpreterInfo info_;
  NativeReaderLimits limits_;
};

TEST(CodeCacheTest, ABigSharedLineTableStaysWithinTheByteBudget) {
  constexpr std::size_t kTable = 256 << 10;
  SharedTableProcess process(64, kTable);
  CodeCache cache(16384, /*max_bytes=*/1 << 20);
  for (std::size_t i = 0; i < 64; ++i) {
    const Result<CodeInfo*> info = process.Get(cache, i);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ((*info)->line_table.size(), kTable);
  }
  EXPECT_LE(cache.bytes(), std::size_t{1} << 20);
  EXPECT_EQ(cache.size(), 3u);  // three tables of 256 KiB and their overhead fit in 1 MiB
  EXPECT_EQ(cache.evictions(), 61u);
}

TEST(CodeCacheTest, TheLeastRecentlyUsedIsEvictedFirst) {
  SharedTableProcess process(4, 200 << 10);  // three fit in 640 KiB, four do not
  CodeCache cache(16384, /*max_bytes=*/640 << 10);
  for (const std::size_t index : {0, 1, 2, 0}) {  // 0 is now used more recently than 1
    ASSERT_TRUE(process.Get(cache, index).ok());
  }
  EXPECT_EQ(cache.evictions(), 0u);
  ASSERT_TRUE(process.Get(cache, 3).ok());
  EXPECT_EQ(cache.evictions(), 1u);
  ASSERT_TRUE(process.Get(cache, 0).ok());  // still cached
  EXPECT_EQ(cache.evictions(), 1u);
  ASSERT_TRUE(process.Get(cache, 1).ok());  // was evicted: decoding it again evicts 2
  EXPECT_EQ(cache.evictions(), 2u);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(CodeCacheTest, AnEntryOverTheBudgetIsDecodedButNotKept) {
  SharedTableProcess process(2, 256 << 10);
  CodeCache cache(16384, /*max_bytes=*/64 << 10);
  const Result<CodeInfo*> info = process.Get(cache, 0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((*info)->line_table.size(), std::size_t{256} << 10);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.uncached(), 1u);
}

TEST(CodeCacheTest, ProcessesShareTheTotalBudget) {
  SharedTableProcess first(8, 256 << 10);
  SharedTableProcess second(8, 256 << 10);
  CodeCacheBudget total(1 << 20);
  CodeCache a(16384, 4 << 20, &total);
  CodeCache b(16384, 4 << 20, &total);
  for (std::size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(first.Get(a, i).ok());
    ASSERT_TRUE(second.Get(b, i).ok());
  }
  EXPECT_LE(total.used(), std::size_t{1} << 20);
  EXPECT_EQ(total.used(), a.bytes() + b.bytes());
  a.Clear();
  EXPECT_EQ(total.used(), b.bytes());
  {
    CodeCache moved = std::move(b);
    EXPECT_EQ(total.used(), moved.bytes());
  }
  EXPECT_EQ(total.used(), 0u);
}

}  // namespace
}  // namespace code_cache_test
}  // namespace expanse::pystack
