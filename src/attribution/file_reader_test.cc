#include "attribution/file_reader.h"

#include <string>

#include <gtest/gtest.h>

#include "attribution/attribution_test_util.h"

namespace expanse::attribution {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(FileReaderTest, ReadsWholeFileUnderTheCap) {
  const TempDir dir;
  WriteFile(dir.path() + "/f", "hello");
  const CappedFile file = SystemFileReader().Read(dir.path() + "/f", 5).value();
  EXPECT_EQ(file.bytes, "hello");
  EXPECT_FALSE(file.truncated);
}

TEST(FileReaderTest, CutsAtTheCap) {
  const TempDir dir;
  const std::string big(200 * 1024, 'x');  // several read chunks
  WriteFile(dir.path() + "/f", big);
  const CappedFile file = SystemFileReader().Read(dir.path() + "/f", 150 * 1024).value();
  EXPECT_EQ(file.bytes.size(), 150u * 1024);
  EXPECT_TRUE(file.truncated);
  EXPECT_EQ(SystemFileReader().Read(dir.path() + "/f", big.size()).value().bytes, big);
}

TEST(FileReaderTest, ReadsProcfsFilesThatReportSizeZero) {
  const CappedFile file = SystemFileReader().Read("/proc/self/cgroup", 64 * 1024).value();
  EXPECT_FALSE(file.bytes.empty());
}

TEST(FileReaderTest, MissingFileIsGone) {
  const TempDir dir;
  const Status status = SystemFileReader().Read(dir.path() + "/4242/environ", 10).status();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.reason(), "gone");
}

TEST(FileReaderTest, DirectoryIsUnavailable) {
  const TempDir dir;
  EXPECT_EQ(SystemFileReader().Read(dir.path(), 10).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace expanse::attribution
