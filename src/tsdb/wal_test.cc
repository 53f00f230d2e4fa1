// The write-ahead log under failing system calls: each case runs in a forked child that makes a
// call fail (a seccomp filter, a file-size limit), then the parent reads what the child left.
#include "tsdb/wal.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::tsdb {
namespace wal_test {
namespace {

// What a child exits with when this kernel or sandbox does not let it install the filter.
constexpr int kCannotInject = 77;

// From now on, in this (single-threaded, forked) process, each of `calls` fails with `error`.
bool FailSyscalls(std::initializer_list<long> calls, int error) {
  std::vector<sock_filter> filter;
  filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  for (const long call : calls) {
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(call), 0, 1));
    filter.push_back(BPF_STMT(
        BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) & SECCOMP_RET_DATA)));
  }
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  const sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// Runs `child` in a forked process; its return value is the exit status.
template <typename Fn>
int InChild(Fn child) {
  const pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(child());
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class WalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/wal_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/wal.log";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static Result<std::unique_ptr<Wal>> OpenWal(const std::string& path,
                                              std::vector<std::string>* records = nullptr,
                                              std::vector<std::string>* log = nullptr) {
    return Wal::Open(
        path,
        [records](std::string_view payload) {
          if (records)
            records->emplace_back(payload);
          return OkStatus();
        },
        [log](std::string_view line) {
          if (log)
            log->emplace_back(line);
        });
  }

  std::string dir_, path_;
};

// A write that fails partway, where the file cannot be cut back either (out of space, an I/O
// error), must not leave its partial record in front of the records acknowledged after it:
// replay stops at the first damaged record and would drop them all.
TEST_F(WalTest, RecordsAfterAPartialWriteThatCannotBeCutSurvive) {
  const std::string path = path_;
  const int status = InChild([&path]() -> int {
    std::signal(SIGXFSZ, SIG_IGN);
    Result<std::unique_ptr<Wal>> wal = OpenWal(path);
    if (!wal.ok() || !(*wal)->Append("first").ok())
      return 1;
    if (!FailSyscalls({SYS_ftruncate}, EIO))
      return kCannotInject;
    // The file may grow to 100 bytes past the end of the first record: the next record's
    // write stops there.
    rlimit limit{};
    if (::getrlimit(RLIMIT_FSIZE, &limit) != 0)
      return 2;
    const rlimit unlimited = limit;
    limit.rlim_cur = (*wal)->size() + 100;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0)
      return kCannotInject;
    if ((*wal)->Append(std::string(1000, 'x')).ok())
      return 3;
    if (::setrlimit(RLIMIT_FSIZE, &unlimited) != 0)
      return 4;
    if (!(*wal)->Append("third").ok())
      return 5;
    return 0;
  });
  if (status == kCannotInject)
    FAIL() << "cannot make ftruncate fail or limit the file size here (seccomp, setrlimit)";
  ASSERT_EQ(status, 0);
  std::vector<std::string> records;
  Result<std::unique_ptr<Wal>> wal = OpenWal(path_, &records);
  ASSERT_TRUE(wal.ok()) << wal.status();
  EXPECT_EQ(records, (std::vector<std::string>{"first", "third"}));
}

// wal.log's name must be durable before its first append is acknowledged: Open syncs the
// directory (fsync; the log's own syncs are fdatasync) and fails when it cannot. Every Open,
// not only the one that creates the file: one whose sync failed may have left the file.
TEST_F(WalTest, ANewLogIsSyncedWithItsDirectory) {
  const std::string path = path_;
  const int status = InChild([&path]() -> int {
    if (!FailSyscalls({SYS_fsync}, EIO))
      return kCannotInject;
    Result<std::unique_ptr<Wal>> wal = OpenWal(path);
    if (wal.ok())
      return 1;
    return wal.status().message().find("directory") == std::string::npos ? 2 : 0;
  });
  if (status == kCannotInject)
    FAIL() << "cannot make fsync fail here (seccomp)";
  EXPECT_EQ(status, 0);
}

// A record that fails its checksum with an intact record after it is damage, not a torn tail:
// it is skipped and the records after it replay. A torn last record is still cut.
TEST_F(WalTest, ADamagedRecordInTheMiddleIsSkipped) {
  {
    Result<std::unique_ptr<Wal>> wal = OpenWal(path_);
    ASSERT_TRUE(wal.ok());
    for (const char* record : {"one", "two", "three"})
      ASSERT_TRUE((*wal)->Append(record).ok());
  }
  {
    std::FILE* f = std::fopen(path_.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    // "two" starts after the magic and "one"'s frame: its payload's first byte.
    ASSERT_EQ(
        std::fseek(f, sizeof kWalMagic + kWalRecordHeaderSize + 3 + kWalRecordHeaderSize, SEEK_SET),
        0);
    std::fputc('T', f);
    std::fclose(f);
  }
  std::vector<std::string> records, log;
  {
    Result<std::unique_ptr<Wal>> wal = OpenWal(path_, &records, &log);
    ASSERT_TRUE(wal.ok()) << wal.status();
    EXPECT_EQ(records, (std::vector<std::string>{"one", "three"}));
    EXPECT_EQ((*wal)->skipped_records(), 1u);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_NE(log[0].find("skipped a damaged record"), std::string::npos) << log[0];
    ASSERT_TRUE((*wal)->Append("four").ok());
  }
  // The last record torn: cut, and nothing else lost.
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) - 2);
  records.clear();
  log.clear();
  Result<std::unique_ptr<Wal>> wal = OpenWal(path_, &records, &log);
  ASSERT_TRUE(wal.ok()) << wal.status();
  EXPECT_EQ(records, (std::vector<std::string>{"one", "three"}));
  ASSERT_EQ(log.size(), 2u);
  EXPECT_NE(log[1].find("torn or corrupt tail"), std::string::npos) << log[1];
}

}  // namespace
}  // namespace wal_test
}  // namespace expanse::tsdb
