// The store's files are its owner's alone whatever the umask: they hold password and token
// hashes and sessions. Also the e-mail normalisation that lookups and rate limits share.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "store/sqlite_store.h"
#include "store/store.h"

namespace expanse::store {
namespace store_file_mode_test {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

class StoreFileModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/store_mode_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  mode_t old_umask_ = 0;
};

TEST_F(StoreFileModeTest, DatabaseAndItsWalAndShmAreOwnerOnlyUnderUmask022) {
  const std::string path = dir_ + "/db.sqlite";
  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->CreateOrganization("acme", "Acme", 1).ok());
  for (const char* suffix : {"", "-wal", "-shm"})
    EXPECT_EQ(ModeOf(path + suffix), 0600u) << suffix;
}

TEST_F(StoreFileModeTest, ReadableFilesOfAnOlderBuildAreTightened) {
  const std::string path = dir_ + "/db.sqlite";
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
    ASSERT_TRUE(store.ok()) << store.status();
  }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  Result<std::unique_ptr<Store>> store = OpenSqliteStore({.path = path});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->CreateOrganization("acme", "Acme", 1).ok());
  for (const char* suffix : {"", "-wal", "-shm"})
    EXPECT_EQ(ModeOf(path + suffix), 0600u) << suffix;
}

TEST(NormalizeEmailTest, TrimsBlanksAndLowersAsciiOnly) {
  EXPECT_EQ(NormalizeEmail("  OPS@Acme.Example\t\r\n"), "ops@acme.example");
  EXPECT_EQ(NormalizeEmail("ops@acme.example"), "ops@acme.example");
  EXPECT_EQ(NormalizeEmail("   "), "");
  EXPECT_EQ(NormalizeEmail("ÉMILE@X.ORG"), "Émile@x.org");  // non-ASCII left alone
}

}  // namespace
}  // namespace store_file_mode_test
}  // namespace expanse::store
