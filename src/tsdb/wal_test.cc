// The write-ahead log under failing system calls: each case runs in a forked child that makes a
// call fail (a seccomp filter, a file-size limit), then the parent reads what the child left.
#include "tsdb/wal.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_failing_syscalls.h"

namespace expanse::tsdb {
namespace wal_test {
namespace {

using ::expanse::testing::FailSyscalls;
using ::expanse::testing::InChild;
using ::expanse::testing::kCannotInject;

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
