#include "core/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

namespace expanse::fs {
namespace {

TEST(WriteFullyTest, WritesEveryByte) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string bytes(10000, 'x');
  ASSERT_TRUE(WriteFully(fds[1], bytes));
  close(fds[1]);
  std::string read_back;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;)
    read_back.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  EXPECT_EQ(read_back, bytes);
}

TEST(WriteFullyTest, FailsWithErrnoSet) {
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  errno = 0;
  EXPECT_FALSE(WriteFully(fd, "abc"));
  EXPECT_EQ(errno, EBADF);
  close(fd);
}

TEST(WriteFullyTest, EmptyWritesNothing) { EXPECT_TRUE(WriteFully(-1, "")); }

}  // namespace
}  // namespace expanse::fs
