#include "pystack/interpreter_locator.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/test_failing_syscalls.h"

namespace expanse::pystack {
namespace interpreter_locator_test {
namespace {

// A mapping of the file at `path` as /proc/<pid>/maps would show it, at an address with no
// /proc/self/map_files entry, so that OpenMappedFile goes by the path.
MemoryMapping MappingOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  MemoryMapping mapping;
  mapping.start = 0x1000;
  mapping.end = 0x2000;
  mapping.device_major = major(info.st_dev);
  mapping.device_minor = minor(info.st_dev);
  mapping.inode = info.st_ino;
  mapping.path = path;
  return mapping;
}

class OpenMappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::canonical(::testing::TempDir()) /
           ("open_mapped_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "libpython3.11.so") << "not really ELF";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(OpenMappedFileTest, OpensTheMappedRegularFile) {
  const std::string lib = Path("libpython3.11.so");
  const Result<std::unique_ptr<DiskFile>> file = OpenMappedFile(getpid(), lib, MappingOf(lib));
  ASSERT_TRUE(file.ok()) << file.status();
}

TEST_F(OpenMappedFileTest, RefusesASymlinkEvenToTheMappedFile) {
  const std::string lib = Path("libpython3.11.so");
  std::filesystem::create_symlink(lib, Path("link.so"));
  const Result<std::unique_ptr<DiskFile>> file =
      OpenMappedFile(getpid(), Path("link.so"), MappingOf(lib));
  EXPECT_EQ(file.status().reason(), "binary_unavailable") << file.status();
}

// Where openat2 is missing (kernels before 5.6) or refused (a seccomp profile), the path is
// opened inside the root by open(): the mapped file still opens, a symlink to it still does not.
TEST_F(OpenMappedFileTest, WithoutOpenat2TheMappedFileStillOpensAndALinkIsStillRefused) {
  const std::string lib = Path("libpython3.11.so");
  std::filesystem::create_symlink(lib, Path("libpython3.12.so"));
  const MemoryMapping mapping = MappingOf(lib);
  MemoryMapping linked = mapping;
  linked.path = Path("libpython3.12.so");
  for (const int error : {ENOSYS, EPERM}) {
    const int status = testing::InChild([&] {
      if (!testing::FailSyscalls({SYS_openat2}, error))
        return testing::kCannotInject;
      if (!OpenMappedFile(getpid(), lib, mapping).ok())
        return 1;
      return OpenMappedFile(getpid(), linked.path, linked).ok() ? 2 : 0;
    });
    ASSERT_NE(status, testing::kCannotInject) << "seccomp filters cannot be installed here";
    EXPECT_EQ(status, 0) << "errno " << error;
  }
}

TEST_F(OpenMappedFileTest, RefusesASymlinkInAParentDirectory) {
  const std::string lib = Path("libpython3.11.so");
  std::filesystem::create_directory_symlink(dir_, Path("up"));
  const Result<std::unique_ptr<DiskFile>> file =
      OpenMappedFile(getpid(), Path("up/libpython3.11.so"), MappingOf(lib));
  EXPECT_EQ(file.status().reason(), "binary_unavailable") << file.status();
}

TEST_F(OpenMappedFileTest, RefusesAFifoWithoutBlocking) {
  ASSERT_EQ(mkfifo(Path("fifo.so").c_str(), 0600), 0);
  // The mapping names the FIFO itself, so only its type can refuse it. Opening it for reading
  // without O_NONBLOCK would wait for a writer for ever.
  const Result<std::unique_ptr<DiskFile>> file =
      OpenMappedFile(getpid(), Path("fifo.so"), MappingOf(Path("fifo.so")));
  EXPECT_EQ(file.status().reason(), "binary_unavailable") << file.status();
}

TEST_F(OpenMappedFileTest, RefusesAFileOnAnotherDevice) {
  const std::string lib = Path("libpython3.11.so");
  MemoryMapping mapping = MappingOf(lib);
  mapping.device_minor += 1;  // same inode number, another filesystem
  const Result<std::unique_ptr<DiskFile>> file = OpenMappedFile(getpid(), lib, mapping);
  EXPECT_EQ(file.status().reason(), "binary_unavailable") << file.status();
}

TEST_F(OpenMappedFileTest, RefusesADeviceNode) {
  const Result<std::unique_ptr<DiskFile>> file =
      OpenMappedFile(getpid(), "/dev/null", MappingOf("/dev/null"));
  EXPECT_EQ(file.status().reason(), "binary_unavailable") << file.status();
}

}  // namespace
}  // namespace interpreter_locator_test
}  // namespace expanse::pystack
