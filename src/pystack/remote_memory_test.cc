#include "pystack/remote_memory.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pystack/memory_image.h"
#include "pystack/process_memory.h"

namespace expanse::pystack {
namespace remote_memory_test {
namespace {

std::span<std::uint8_t> Span(std::vector<std::uint8_t>& bytes) { return bytes; }

TEST(MemoryImageTest, ReadsInsideARegionOnly) {
  MemoryImage image;
  image.Map(0x1000, "abcdefgh");
  image.Map(0x2000, "XY");
  EXPECT_EQ(*image.Read(0x1002, 3), "cde");
  EXPECT_EQ(*image.Read(0x2000, 2), "XY");
  EXPECT_EQ(*image.Read(0x1008, 0), "");
  for (const auto& [address, length] : std::vector<std::pair<std::uint64_t, std::size_t>>{
           {0x0fff, 2}, {0x1006, 3}, {0x1009, 1}, {0x1800, 1}, {0x2001, 2}}) {
    const Result<std::string> read = image.Read(address, length);
    ASSERT_FALSE(read.ok()) << std::hex << address;
    EXPECT_EQ(read.status().reason(), "unreadable_address");
  }
  const std::array<std::uint8_t, 2> patch = {'Q', 'R'};
  EXPECT_TRUE(image.Write(0x1001, patch));
  EXPECT_FALSE(image.Write(0x1007, patch));
  EXPECT_EQ(*image.Read(0x1000, 4), "aQRd");
  EXPECT_GT(image.reads(), 5u);
}

TEST(RemoteMemoryTest, RefusesOversizedReads) {
  MemoryImage image;
  const Result<std::string> read = image.Read(0x1000, kMaxReadBytes + 1);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
}

TEST(BudgetedMemoryTest, StopsAtTheReadOrByteLimit) {
  MemoryImage image;
  image.Map(0x1000, std::string(100, 'x'));
  BudgetedMemory by_reads(image, 3, 1000);
  std::vector<std::uint8_t> buffer(10);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(by_reads.ReadInto(0x1000, Span(buffer)).ok());
  }
  const Status fourth = by_reads.ReadInto(0x1000, Span(buffer));
  EXPECT_EQ(fourth.reason(), "read_budget_exceeded");
  EXPECT_EQ(fourth.code(), StatusCode::kResourceExhausted);

  BudgetedMemory by_bytes(image, 100, 25);
  EXPECT_TRUE(by_bytes.ReadInto(0x1000, Span(buffer)).ok());
  EXPECT_TRUE(by_bytes.ReadInto(0x1000, Span(buffer)).ok());
  EXPECT_EQ(by_bytes.ReadInto(0x1000, Span(buffer)).reason(), "read_budget_exceeded");
  EXPECT_EQ(by_bytes.bytes(), 20u);
}

TEST(PageCachedMemoryTest, ServesReadsFromFetchedPages) {
  MemoryImage image;
  std::string pages(3 * 4096, '\0');
  for (std::size_t i = 0; i < pages.size(); ++i) {
    pages[i] = static_cast<char>(i * 7);
  }
  image.Map(0x10000, pages);
  PageCachedMemory cached(image, 8);
  for (const std::uint64_t address : {0x10000, 0x10010, 0x10ff8, 0x10ffc, 0x11500, 0x12ff0}) {
    std::vector<std::uint8_t> got(16);
    ASSERT_TRUE(cached.ReadInto(address, Span(got)).ok()) << std::hex << address;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], static_cast<std::uint8_t>(pages[address - 0x10000 + i]));
    }
  }
  // Three pages fetched, once each, for six reads (one of them across a page boundary).
  EXPECT_EQ(image.reads(), 3u);
}

TEST(PageCachedMemoryTest, FallsBackWhenAPageCannotBeReadWhole) {
  MemoryImage image;
  image.Map(0x10100, "hello, world");  // not a whole page
  PageCachedMemory cached(image, 8);
  EXPECT_EQ(*cached.Read(0x10107, 5), "world");
  EXPECT_EQ(*cached.Read(0x10100, 5), "hello");
  EXPECT_FALSE(cached.Read(0x10200, 4).ok());
}

TEST(PageCachedMemoryTest, StopsCachingAtItsLimit) {
  MemoryImage image;
  image.Map(0x10000, std::string(8 * 4096, 'z'));
  PageCachedMemory cached(image, 2);
  for (int page = 0; page < 8; ++page) {
    EXPECT_EQ(*cached.Read(0x10000 + page * 4096, 2), "zz");
    EXPECT_EQ(*cached.Read(0x10000 + page * 4096 + 8, 2), "zz");
  }
  EXPECT_EQ(image.reads(), 2u + 6u * 2u);
}

TEST(LoadTest, ReadsLittleEndianAndZeroOutOfRange) {
  const std::array<std::uint8_t, 10> bytes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(LoadU64(bytes, 0), 0x0807060504030201u);
  EXPECT_EQ(LoadU32(bytes, 6), 0x0a090807u);
  EXPECT_EQ(LoadU8(bytes, 9), 10u);
  EXPECT_EQ(LoadU64(bytes, 3), 0u);
  EXPECT_EQ(LoadU32(bytes, 7), 0u);
  EXPECT_EQ(LoadU8(bytes, 10), 0u);
  EXPECT_EQ(LoadU64(bytes, ~std::size_t{0}), 0u);
}

TEST(LoadTest, PlausiblePointers) {
  EXPECT_TRUE(PlausiblePointer(0x7f0000001000));
  EXPECT_FALSE(PlausiblePointer(0));
  EXPECT_FALSE(PlausiblePointer(0x10));
  EXPECT_FALSE(PlausiblePointer(0x7f0000001004));
  EXPECT_FALSE(PlausiblePointer(0xffff800000000000));
}

TEST(ProcessMemoryTest, ReadsItsOwnProcess) {
  static const char kSecret[] = "read me through process_vm_readv";
  ProcessMemory memory(getpid());
  const Result<std::string> read =
      memory.Read(reinterpret_cast<std::uintptr_t>(kSecret), sizeof(kSecret) - 1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, kSecret);
}

TEST(ProcessMemoryTest, UnmappedAddressIsUnreadable) {
  ProcessMemory memory(getpid());
  const Result<std::string> read = memory.Read(0x1000, 8);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().reason(), "unreadable_address");
}

TEST(ProcessMemoryTest, AReapedProcessHasExited) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ProcessMemory memory(child);
  const Result<std::string> read = memory.Read(0x400000, 8);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().reason(), "process_exited");
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound);
}

TEST(ProcessAccessStatusTest, MapsErrnoToReasons) {
  const Status denied = ProcessAccessStatus(12, EPERM, "x");
  EXPECT_EQ(denied.reason(), "ptrace_denied");
  EXPECT_EQ(denied.message(), "py_stacks: ptrace denied for pid 12: Operation not permitted");
  EXPECT_EQ(ProcessAccessStatus(12, EACCES, "x").reason(), "ptrace_denied");
  EXPECT_EQ(ProcessAccessStatus(12, ESRCH, "x").reason(), "process_exited");
  EXPECT_EQ(ProcessAccessStatus(12, ENOENT, "x").reason(), "process_exited");
  const Status other = ProcessAccessStatus(12, EIO, "read /proc/12/maps");
  EXPECT_EQ(other.reason(), "proc_read_failed");
  EXPECT_NE(other.message().find("read /proc/12/maps"), std::string::npos);
}

}  // namespace
}  // namespace remote_memory_test
}  // namespace expanse::pystack
