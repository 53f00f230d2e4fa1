#include "capture/spool_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace expanse::capture {
namespace {

class SpoolFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/capture_spool_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  size_t Entries() {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir_),
                                             std::filesystem::directory_iterator()));
  }
  std::string dir_;
};

TEST_F(SpoolFilesTest, WritesTheWholeFileReadableByTheSampler) {
  const mode_t old = umask(077);
  EXPECT_EQ(WriteSpoolFile(dir_, "agg-1.json", "{\"a\":1}\n", 0), "");
  umask(old);
  EXPECT_EQ(Read("agg-1.json"), "{\"a\":1}\n");
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/agg-1.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(Entries(), 1u);  // no temporary left behind
}

TEST_F(SpoolFilesTest, AMissingDirectoryIsAnErrorNamingIt) {
  const std::string error = WriteSpoolFile(dir_ + "/nope", "x.json", "x", 0);
  EXPECT_NE(error.find(dir_ + "/nope"), std::string::npos) << error;
}

TEST_F(SpoolFilesTest, ANearlyFullFileSystemIsLeftAlone) {
  const std::string error = WriteSpoolFile(dir_, "x.json", "x", ~uint64_t{0} >> 4);
  EXPECT_NE(error.find("MiB free, not writing"), std::string::npos) << error;
  EXPECT_EQ(Entries(), 0u);
}

TEST_F(SpoolFilesTest, ATemporaryPlantedByAnotherIsNotFollowed) {
  ASSERT_EQ(symlink("/etc/passwd", (dir_ + "/.x.json.tmp").c_str()), 0);
  const std::string error = WriteSpoolFile(dir_, "x.json", "x", 0);
  EXPECT_NE(error.find(".x.json.tmp"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.json"));
}

TEST_F(SpoolFilesTest, AppendsLogLines) {
  AppendSpoolLine(dir_, "agent.log", "one");
  AppendSpoolLine(dir_, "agent.log", "two");
  EXPECT_EQ(Read("agent.log"), "one\ntwo\n");
  AppendSpoolLine(dir_ + "/nope", "agent.log", "lost quietly");
}

}  // namespace
}  // namespace expanse::capture
