#include "install/install_lock.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace expanse::install {
namespace install_lock_test {
namespace {

class InstallLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/install_lock_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(InstallLockTest, AnEmptyLeftoverLockFileIsNotAnInstallInProgress) {
  std::ofstream(dir_ + "/install.lock");  // left behind by an earlier run
  auto lock = InstallLock::Acquire(dir_ + "/install.lock");
  EXPECT_TRUE(lock.ok()) << lock.status();
}

TEST_F(InstallLockTest, ASecondHolderIsRefusedUntilTheFirstEnds) {
  auto first = InstallLock::Acquire(dir_ + "/install.lock");
  ASSERT_TRUE(first.ok());
  // flock locks belong to the open file description, so another process must try.
  pid_t child = fork();
  if (child == 0) {
    auto second = InstallLock::Acquire(dir_ + "/install.lock");
    _exit(!second.ok() && second.status().reason() == "install_in_progress" ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  { InstallLock released = std::move(*first); }
  auto again = InstallLock::Acquire(dir_ + "/install.lock");
  EXPECT_TRUE(again.ok());
}

TEST_F(InstallLockTest, AnUnprivilegedRunSaysPermissionDeniedWithAdvice) {
  // As root, the test drops to `nobody` in a child, like an operator who forgot sudo; the
  // lock directory stays root-owned 0755.
  chmod(dir_.c_str(), 0755);
  const std::string path = dir_ + "/install.lock";
  pid_t child = fork();
  if (child == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
      _exit(2);
    auto lock = InstallLock::Acquire(path);
    if (lock.ok())
      _exit(3);
    const std::string& m = lock.status().message();
    bool good = lock.status().reason() == "install_lock_permission" &&
                m.rfind("open install lock " + path + ": permission denied", 0) == 0 &&
                m.find("sudo") != std::string::npos;
    _exit(good ? 0 : 4);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: could not drop privileges, 3: lock taken, 4: message";
}

}  // namespace
}  // namespace install_lock_test
}  // namespace expanse::install
