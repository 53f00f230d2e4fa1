#include "core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::fs {
namespace {

using ::expanse::testing::TempDir;

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

void WriteTestFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

std::vector<std::string> Sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(UniqueFdTest, ClosesWhenDestroyed) {
  int raw = -1;
  {
    const UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, MovesOwnership) {
  UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): a moved-from fd is empty
  EXPECT_EQ(b.get(), raw);
  UniqueFd c(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int replaced = c.get();
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_FALSE(IsOpen(replaced));
  EXPECT_TRUE(IsOpen(raw));
}

TEST(UniqueFdTest, ReleaseHandsOverTheDescriptor) {
  int raw = -1;
  {
    UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw = fd.release();
    EXPECT_FALSE(fd.valid());
    EXPECT_EQ(fd.get(), -1);
  }
  EXPECT_TRUE(IsOpen(raw));
  close(raw);
  EXPECT_FALSE(UniqueFd().valid());
}

TEST(ErrnoStatusTest, MapsErrnoToCodes) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(ENOTDIR, "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(EPERM, "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(EROFS, "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(EEXIST, "x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(EDQUOT, "x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(EIO, "x").code(), StatusCode::kInternal);
  EXPECT_EQ(ErrnoStatus(ELOOP, "x").code(), StatusCode::kInternal);
}

TEST(ErrnoStatusTest, MessageIsWhatAndStrerrorWithoutReason) {
  const Status status = ErrnoStatus(ENOENT, "open /etc/x");
  EXPECT_EQ(status.message(), std::string("open /etc/x: ") + std::strerror(ENOENT));
  EXPECT_EQ(status.reason(), "");
}

TEST(SplitPathTest, SplitsAtTheLastSlash) {
  EXPECT_EQ(SplitPath("/etc/slurm/slurm.conf"),
            std::make_pair(std::string("/etc/slurm"), std::string("slurm.conf")));
  EXPECT_EQ(SplitPath("dir/name"), std::make_pair(std::string("dir"), std::string("name")));
  EXPECT_EQ(SplitPath("/name"), std::make_pair(std::string("/"), std::string("name")));
  EXPECT_EQ(SplitPath("name"), std::make_pair(std::string("."), std::string("name")));
  EXPECT_EQ(SplitPath("dir/"), std::make_pair(std::string("dir"), std::string("")));
}

TEST(JoinPathTest, PutsOneSlashBetween) {
  EXPECT_EQ(JoinPath("/a", "b"), "/a/b");
  EXPECT_EQ(JoinPath("/a/", "b"), "/a/b");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
}

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

TEST(ReadAllTest, ReadsToEndOfFileAfterWhatOutHolds) {
  TempDir dir;
  std::string bytes;
  for (int i = 0; i < 100000; ++i)
    bytes += static_cast<char>('a' + i % 26);
  WriteTestFile(dir / "f", bytes);
  const UniqueFd fd(open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
  std::string out = "prefix";
  ASSERT_TRUE(ReadAll(fd.get(), out));
  EXPECT_EQ(out, "prefix" + bytes);
}

TEST(ReadAllTest, StopsAtTheLimit) {
  TempDir dir;
  WriteTestFile(dir / "f", std::string(1000, 'x'));
  const UniqueFd fd(open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
  std::string out = "ab";
  ASSERT_TRUE(ReadAll(fd.get(), out, 12));
  EXPECT_EQ(out, "ab" + std::string(10, 'x'));
  // The rest is still there to read.
  ASSERT_TRUE(ReadAll(fd.get(), out));
  EXPECT_EQ(out.size(), 1002u);
}

TEST(ReadAllTest, FailsWithErrnoSetAndKeepsWhatItHad) {
  const int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string out = "kept";
  errno = 0;
  EXPECT_FALSE(ReadAll(fd, out));
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(out, "kept");
  close(fd);
}

TEST(ReadSmallFileTest, ReadsMissingAndTooLargeFiles) {
  TempDir dir;
  WriteTestFile(dir / "f", "hello");
  EXPECT_EQ(*ReadSmallFile(dir / "f", 5), std::optional<std::string>("hello"));
  EXPECT_EQ(*ReadSmallFile(dir / "missing", 5), std::nullopt);
  const Result<std::optional<std::string>> big = ReadSmallFile(dir / "f", 4);
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(big.status().reason(), kFileTooLargeReason);
  EXPECT_EQ(big.status().message(), dir / "f" + " is larger than 4 bytes");
  EXPECT_EQ(ReadSmallFile(dir.path(), 5).status().code(), StatusCode::kInternal);  // EISDIR
}

// A FIFO where a file was expected (no writer will ever come) is refused at once: waiting on
// it would hang whoever reads (the doctor reading a worker's health report, say).
TEST(ReadSmallFileTest, RefusesAFifoWithoutWaiting) {
  TempDir dir;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  const Result<std::optional<std::string>> read = ReadSmallFile(dir / "fifo", 100);
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().reason(), "not_regular");
  const UniqueFd dir_fd(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(ReadSmallFileAt(dir_fd.get(), dir.path(), "fifo", 100).status().reason(),
            "not_regular");
}

// A pipe an operator hands over on purpose (a key from <(vault read ...)) is read to its end.
TEST(ReadSmallFileTest, ReadsAPipeWhenAsked) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "key", 3), 3);
  close(fds[1]);
  const std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
  EXPECT_EQ(ReadSmallFile(path, 100).status().reason(), "not_regular");
  const Result<std::optional<std::string>> read =
      ReadSmallFile(path, 100, Symlinks::kFollow, Pipes::kRead);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->value_or(""), "key");
  close(fds[0]);
}

TEST(ReadSmallFileTest, RefusesASymlinkWhenAsked) {
  TempDir dir;
  WriteTestFile(dir / "target", "secret");
  ASSERT_EQ(symlink((dir / "target").c_str(), (dir / "link").c_str()), 0);
  EXPECT_EQ(*ReadSmallFile(dir / "link", 100), std::optional<std::string>("secret"));
  const Result<std::optional<std::string>> refused =
      ReadSmallFile(dir / "link", 100, Symlinks::kRefuse);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("cannot open " + dir / "link", 0), 0u);
}

TEST(ReadSmallFileAtTest, ReadsRelativeToTheDirectoryAndNeverFollowsALink) {
  TempDir dir;
  WriteTestFile(dir / "state", "1234");
  ASSERT_EQ(symlink((dir / "state").c_str(), (dir / "link").c_str()), 0);
  const UniqueFd dir_fd(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(*ReadSmallFileAt(dir_fd.get(), dir.path(), "state", 4),
            std::optional<std::string>("1234"));
  EXPECT_EQ(*ReadSmallFileAt(dir_fd.get(), dir.path(), "missing", 4), std::nullopt);
  EXPECT_EQ(ReadSmallFileAt(dir_fd.get(), dir.path(), "state", 3).status().reason(),
            kFileTooLargeReason);
  const Result<std::optional<std::string>> link =
      ReadSmallFileAt(dir_fd.get(), dir.path(), "link", 4);
  EXPECT_FALSE(link.ok());
  EXPECT_EQ(link.status().message().rfind("cannot open " + dir / "link", 0), 0u);
}

TEST(WriteFileAtomicallyTest, ReplacesTheFileWithExactModeAndLeavesNoTemporary) {
  TempDir dir;
  WriteTestFile(dir / "config", "old");
  const mode_t old_umask = umask(077);
  const Status status = WriteFileAtomically(dir.path(), "config", "new", 0644);
  umask(old_umask);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(*ReadSmallFile(dir / "config", 100), std::optional<std::string>("new"));
  EXPECT_EQ(ModeOf(dir / "config"), 0644u);
  EXPECT_EQ(*ListDirectory(dir.path()), std::vector<std::string>{"config"});
}

TEST(WriteFileAtomicallyTest, FailsInAMissingDirectory) {
  TempDir dir;
  const Status status = WriteFileAtomically(dir / "missing", "config", "new", 0644);
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message().rfind("cannot create a temporary file in " + dir / "missing", 0), 0u);
}

TEST(CopyFileAtomicallyTest, ReplacesTheFileWithTheSourcesBytesAndExactMode) {
  TempDir dir;
  // Larger than one copy chunk, so the copy loops; every byte position distinct enough to
  // show an offset mistake.
  std::string big;
  for (size_t i = 0; i < (size_t{9} << 20) + 5; ++i)
    big.push_back(static_cast<char>((i * 31 + i / 4096) & 0xff));
  WriteTestFile(dir / "staged", big);
  ASSERT_EQ(mkdir((dir / "prefix").c_str(), 0755), 0);
  WriteTestFile(dir / "prefix/daemon", "old");
  const Status status = CopyFileAtomically(dir / "staged", dir / "prefix", "daemon", big.size(),
                                           0755, static_cast<uid_t>(-1), static_cast<gid_t>(-1));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(*ReadSmallFile(dir / "prefix/daemon", big.size()), std::optional<std::string>(big));
  EXPECT_EQ(ModeOf(dir / "prefix/daemon"), 0755u);
  EXPECT_EQ(*ListDirectory(dir / "prefix"), std::vector<std::string>{"daemon"});
}

TEST(CopyFileAtomicallyTest, RefusesASourcePastTheCapAndLeavesTheTargetAsItWas) {
  TempDir dir;
  WriteTestFile(dir / "staged", "0123456789");
  WriteTestFile(dir / "daemon", "old");
  const Status status = CopyFileAtomically(dir / "staged", dir.path(), "daemon", 9, 0755,
                                           static_cast<uid_t>(-1), static_cast<gid_t>(-1));
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(status.reason(), kFileTooLargeReason);
  EXPECT_EQ(*ReadSmallFile(dir / "daemon", 100), std::optional<std::string>("old"));
  EXPECT_EQ(Sorted(*ListDirectory(dir.path())), (std::vector<std::string>{"daemon", "staged"}));
}

TEST(CopyFileAtomicallyTest, SaysWhenTheSourceIsMissingOrNotAFile) {
  TempDir dir;
  Status status = CopyFileAtomically(dir / "gone", dir.path(), "daemon", 100, 0755,
                                     static_cast<uid_t>(-1), static_cast<gid_t>(-1));
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_NE(status.message().find(dir / "gone"), std::string::npos) << status;
  status = CopyFileAtomically(dir.path(), dir.path(), "daemon", 100, 0755, static_cast<uid_t>(-1),
                              static_cast<gid_t>(-1));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ListDirectory(dir.path())->empty());
}

TEST(WriteFileAtomicallyAtTest, ReplacesThroughTheNamedTemporary) {
  TempDir dir;
  WriteTestFile(dir / "ack", "old");
  const UniqueFd dir_fd(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const mode_t old_umask = umask(077);
  const Status status =
      WriteFileAtomicallyAt(dir_fd.get(), dir.path(), "ack", "ack.tmp", "new", 0640);
  umask(old_umask);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(*ReadSmallFile(dir / "ack", 100), std::optional<std::string>("new"));
  EXPECT_EQ(ModeOf(dir / "ack"), 0640u);
  EXPECT_EQ(*ListDirectory(dir.path()), std::vector<std::string>{"ack"});
}

TEST(WriteFileAtomicallyAtTest, ReplacesATemporaryLeftByACrashButNeverFollowsIt) {
  TempDir dir;
  WriteTestFile(dir / "elsewhere", "untouched");
  // A leftover temporary that is a symlink: removed, not written through.
  ASSERT_EQ(symlink((dir / "elsewhere").c_str(), (dir / "f.tmp").c_str()), 0);
  const UniqueFd dir_fd(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(WriteFileAtomicallyAt(dir_fd.get(), dir.path(), "f", "f.tmp", "new", 0600).ok());
  EXPECT_EQ(*ReadSmallFile(dir / "f", 100), std::optional<std::string>("new"));
  EXPECT_EQ(*ReadSmallFile(dir / "elsewhere", 100), std::optional<std::string>("untouched"));
  EXPECT_EQ(Sorted(*ListDirectory(dir.path())), (std::vector<std::string>{"elsewhere", "f"}));
}

TEST(WriteFileAtomicallyAtTest, RemovesTheTemporaryWhenTheRenameFails) {
  TempDir dir;
  // rename(2) cannot replace a non-empty directory.
  ASSERT_EQ(mkdir((dir / "target").c_str(), 0700), 0);
  WriteTestFile(dir / "target/inside", "x");
  const UniqueFd dir_fd(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const Status status =
      WriteFileAtomicallyAt(dir_fd.get(), dir.path(), "target", "target.tmp", "new", 0600);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(
      status.message().rfind("cannot rename " + dir / "target.tmp" + " to " + dir / "target", 0),
      0u);
  EXPECT_EQ(*ListDirectory(dir.path()), std::vector<std::string>{"target"});
}

TEST(ListDirectoryTest, ListsNamesWithoutDots) {
  TempDir dir;
  WriteTestFile(dir / "a", "");
  WriteTestFile(dir / "b", "");
  ASSERT_EQ(mkdir((dir / "c").c_str(), 0700), 0);
  EXPECT_EQ(Sorted(*ListDirectory(dir.path())), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ListDirectory(dir / "missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ListDirectory(dir / "a").status().code(), StatusCode::kNotFound);  // ENOTDIR
}

TEST(ListDirectoryAtTest, ListsAgainAndAgainFromTheSameDescriptor) {
  TempDir dir;
  WriteTestFile(dir / "a", "");
  WriteTestFile(dir / "b", "");
  const UniqueFd dir_fd(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(Sorted(*ListDirectoryAt(dir_fd.get(), dir.path())),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Sorted(*ListDirectoryAt(dir_fd.get(), dir.path())),
            (std::vector<std::string>{"a", "b"}));
  const Result<std::vector<std::string>> bad = ListDirectoryAt(-1, "/nowhere");
  EXPECT_EQ(bad.status().message(),
            std::string("cannot open directory /nowhere: ") + std::strerror(EBADF));
}

TEST(SyncDirectoryTest, SyncsAnExistingDirectory) {
  TempDir dir;
  EXPECT_TRUE(SyncDirectory(dir.path()).ok());
  EXPECT_EQ(SyncDirectory(dir / "missing").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace expanse::fs
