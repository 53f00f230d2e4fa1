#include "core/test_temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace expanse::testing {
namespace {

namespace stdfs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Sets $TMPDIR for one scope and puts back what was there.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const std::string& value) {
    if (const char* old = std::getenv("TMPDIR"))
      old_ = old;
    setenv("TMPDIR", value.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (old_)
      setenv("TMPDIR", old_->c_str(), 1);
    else
      unsetenv("TMPDIR");
  }

 private:
  std::optional<std::string> old_;
};

TEST(TempDirTest, MakesAnEmptyDirectoryNamedAfterThePrefix) {
  TempDir dir("expanse_core_test");
  EXPECT_TRUE(stdfs::is_directory(dir.path()));
  EXPECT_TRUE(stdfs::is_empty(dir.path()));
  EXPECT_TRUE(stdfs::path(dir.path()).filename().string().starts_with("expanse_core_test."));
}

TEST(TempDirTest, TwoAreDistinct) {
  TempDir a;
  TempDir b;
  EXPECT_NE(a.path(), b.path());
}

TEST(TempDirTest, HonoursTmpdir) {
  TempDir outer;
  ScopedTmpdir tmpdir(outer.path());
  TempDir inner;
  EXPECT_EQ(stdfs::path(inner.path()).parent_path(), stdfs::path(outer.path()));
}

TEST(TempDirTest, ThrowsWhenTmpdirDoesNotExist) {
  TempDir outer;
  ScopedTmpdir tmpdir(outer.path() + "/missing");
  EXPECT_THROW(TempDir(), std::system_error);
}

TEST(TempDirTest, RemovesItsWholeTree) {
  std::string path;
  {
    TempDir dir;
    path = dir.path();
    dir.Write("a/b/c.txt", "deep");
    dir.Write("top.txt", "top");
  }
  EXPECT_FALSE(stdfs::exists(path));
}

TEST(TempDirTest, SlashJoinsWithoutCreating) {
  TempDir dir;
  EXPECT_EQ(dir / "x/y", dir.path() + "/x/y");
  EXPECT_FALSE(stdfs::exists(dir / "x"));
}

TEST(TempDirTest, WriteCreatesParentsAndSetsTheMode) {
  TempDir dir;
  const std::string path =
      dir.Write("sub/dir/script", std::string("#!/bin/sh\n\0tail", 15), stdfs::perms::owner_all);
  EXPECT_EQ(path, dir / "sub/dir/script");
  EXPECT_EQ(ReadAll(path), std::string("#!/bin/sh\n\0tail", 15));
  EXPECT_EQ(stdfs::status(path).permissions(), stdfs::perms::owner_all);
}

TEST(TempDirTest, WriteDefaultsToOwnerReadWriteAndReplaces) {
  TempDir dir;
  dir.Write("f", "first, longer");
  const std::string path = dir.Write("f", "second");
  EXPECT_EQ(ReadAll(path), "second");
  EXPECT_EQ(stdfs::status(path).permissions(),
            stdfs::perms::owner_read | stdfs::perms::owner_write);
}

}  // namespace
}  // namespace expanse::testing
