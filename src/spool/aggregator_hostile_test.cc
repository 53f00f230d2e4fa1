// The hostile-file suite: whatever lands in the shared spool, the aggregator refuses it
// without blocking, following a link or delivering it, moves it to .quarantine and counts it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "spool/aggregator.h"
#include "spool/reasons.h"
#include "spool/spool_names.h"
#include "spool/spool_test_util.h"

namespace expanse::spool {
namespace {

using ::expanse::spool::testing::EncodeOrDie;
using ::expanse::spool::testing::ListNames;
using ::expanse::spool::testing::MakeSpoolFile;
using ::expanse::spool::testing::ReadBytes;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class HostileSpoolTest : public testing::SpoolTest {
 protected:
  const std::string kName = SpoolFileName(1, "boot-a");

  std::string ValidFile(const std::string& host = "node01", uint64_t sequence = 1) {
    return EncodeOrDie(MakeSpoolFile(host, "boot-a", sequence));
  }

  // Drains once, expects exactly one refusal for `reason` and nothing delivered, and that
  // the entry now sits in the quarantine as <host>-<name>-<reason>.
  DrainStats ExpectRefused(const std::string& reason, const std::string& host = "node01",
                           const std::string& name = "") {
    const std::string entry = name.empty() ? kName : name;
    auto aggregator = OpenAggregator(options_);
    Result<DrainStats> stats = aggregator->DrainOnce(CollectingSink());
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok())
      return {};
    EXPECT_EQ(stats->bad, 1u);
    EXPECT_EQ(stats->bad_by_reason[reason], 1u) << ::testing::PrintToString(stats->bad_by_reason);
    EXPECT_EQ(stats->quarantined, 1u);
    EXPECT_EQ(stats->files, 0u);
    EXPECT_THAT(delivered_, IsEmpty());
    EXPECT_THAT(Quarantined(), ElementsAre(host + "-" + entry + "-" + reason));
    EXPECT_THAT(log_, Contains(HasSubstr("(" + reason + ")")));
    return *stats;
  }

  AggregatorOptions options_ = DefaultAggregatorOptions();
};

TEST_F(HostileSpoolTest, Symlink) {
  const std::string target = tmp_.path() + "/target";
  testing::WriteBytes(target, ValidFile());
  ::mkdir(HostDir("node01").c_str(), 0750);
  ASSERT_EQ(::symlink(target.c_str(), (HostDir("node01") + "/" + kName).c_str()), 0);
  ExpectRefused(reason::kSymlink);
  EXPECT_EQ(ReadBytes(target), ValidFile());  // the link's target is untouched
}

TEST_F(HostileSpoolTest, Hardlink) {
  const std::string path = Place("node01", kName, ValidFile());
  const std::string other = tmp_.path() + "/second-name";
  ASSERT_EQ(::link(path.c_str(), other.c_str()), 0);
  ExpectRefused(reason::kHardlink);
  EXPECT_EQ(ReadBytes(other), ValidFile());
}

TEST_F(HostileSpoolTest, FifoDoesNotBlock) {
  ::mkdir(HostDir("node01").c_str(), 0750);
  ASSERT_EQ(::mkfifo((HostDir("node01") + "/" + kName).c_str(), 0640), 0);
  ExpectRefused(reason::kNotRegular);
}

TEST_F(HostileSpoolTest, DirectoryNamedLikeASpoolFile) {
  ::mkdir(HostDir("node01").c_str(), 0750);
  ASSERT_EQ(::mkdir((HostDir("node01") + "/" + kName).c_str(), 0750), 0);
  ExpectRefused(reason::kNotRegular);
}

TEST_F(HostileSpoolTest, HugeFile) {
  options_.max_file_bytes = 1 << 20;
  const std::string path = Place("node01", kName, "");
  ASSERT_EQ(::truncate(path.c_str(), (1 << 20) + 1), 0);  // sparse: costs no disk
  ExpectRefused(reason::kTooLarge);
}

TEST_F(HostileSpoolTest, WrongOwner) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to chown a file to another user";
  const std::string path = Place("node01", kName, ValidFile());
  ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
  options_.expected_uid = 0;
  ExpectRefused(reason::kWrongOwner);
}

TEST_F(HostileSpoolTest, GarbageBytes) {
  Place("node01", kName,
        std::string("\x7f"
                    "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0",
                    16));
  ExpectRefused(reason::kBadMagic);
}

TEST_F(HostileSpoolTest, TruncatedValidFile) {
  const std::string bytes = ValidFile();
  Place("node01", kName, bytes.substr(0, bytes.size() - 3));
  ExpectRefused(reason::kTruncated);
}

TEST_F(HostileSpoolTest, BitFlip) {
  std::string bytes = ValidFile();
  bytes[bytes.size() / 2] ^= 0x10;
  Place("node01", kName, bytes);
  ExpectRefused(reason::kBadChecksum);
}

TEST_F(HostileSpoolTest, HostMismatch) {
  Place("node01", kName, ValidFile("node02"));
  ExpectRefused(reason::kHostMismatch);
}

TEST_F(HostileSpoolTest, NameMismatch) {
  Place("node01", kName, ValidFile("node01", 9));
  ExpectRefused(reason::kNameMismatch);
}

TEST_F(HostileSpoolTest, UnexpectedName) {
  Place("node01", "notes.txt", "hello");
  ExpectRefused(reason::kUnexpectedName, "node01", "notes.txt");
}

TEST_F(HostileSpoolTest, SymlinkedHostDirectory) {
  const std::string elsewhere = tmp_.path() + "/elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0750), 0);
  testing::WriteBytes(elsewhere + "/" + kName, ValidFile("node09"));
  ASSERT_EQ(::symlink(elsewhere.c_str(), HostDir("node09").c_str()), 0);
  ExpectRefused(reason::kSymlink, "node09", "hostdir");
  EXPECT_THAT(ListNames(elsewhere), ElementsAre(kName));  // nothing read or deleted there
}

TEST_F(HostileSpoolTest, HostEntryThatIsNotADirectory) {
  testing::WriteBytes(HostDir("node07"), ValidFile("node07"));
  ExpectRefused(reason::kNotDirectory, "node07", "hostdir");
}

TEST_F(HostileSpoolTest, HostDirectoryWithTheWrongOwnerIsLeftInPlace) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to chown a directory to another user";
  Place("node01", kName, ValidFile());
  ASSERT_EQ(::chown(HostDir("node01").c_str(), 12345, 12345), 0);
  Result<DrainStats> stats = OpenAggregator()->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bad_by_reason[reason::kWrongOwner], 1u);
  EXPECT_THAT(delivered_, IsEmpty());
  EXPECT_THAT(ListNames(HostDir("node01")), ElementsAre(kName));
}

TEST_F(HostileSpoolTest, GoodFilesBesideBadOnesAreStillDelivered) {
  Place("node01", SpoolFileName(1, "boot-a"), "garbage");
  Place("node01", SpoolFileName(2, "boot-a"), ValidFile("node01", 2));
  Result<DrainStats> stats = OpenAggregator()->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bad, 1u);
  EXPECT_EQ(stats->files, 1u);
  ASSERT_EQ(delivered_.size(), 1u);
  EXPECT_EQ(delivered_[0].sequence, 2u);
  EXPECT_THAT(log_, Contains("sampler aggregator drained files=1 records=3 bytes=" +
                             std::to_string(ValidFile("node01", 2).size()) + " bad=1"));
}

TEST_F(HostileSpoolTest, AFullQuarantineDeletesInstead) {
  options_.quarantine.max_entries = 1;
  Place("node01", SpoolFileName(1, "boot-a"), "garbage one");
  Place("node01", SpoolFileName(2, "boot-a"), "garbage two");
  Result<DrainStats> stats = OpenAggregator(options_)->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bad_by_reason[reason::kBadMagic], 2u);
  EXPECT_EQ(stats->quarantined, 1u);
  EXPECT_EQ(stats->bad_deleted, 1u);
  EXPECT_EQ(Quarantined().size(), 1u);
  EXPECT_THAT(ListNames(HostDir("node01")), IsEmpty());
}

TEST_F(HostileSpoolTest, AQuarantineReplacedByASymlinkIsNotUsed) {
  const std::string elsewhere = tmp_.path() + "/elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0750), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), (root_ + "/.quarantine").c_str()), 0);
  Place("node01", kName, "garbage");
  Result<DrainStats> stats = OpenAggregator()->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bad_deleted, 1u);
  EXPECT_THAT(ListNames(elsewhere), IsEmpty());
  EXPECT_THAT(ListNames(HostDir("node01")), IsEmpty());
  EXPECT_THAT(log_, Contains(HasSubstr("unusable")));
}

TEST_F(HostileSpoolTest, NamesInTheRootThatAreNoHostAreIgnored) {
  testing::WriteBytes(root_ + "/#operator notes", "hello");
  Result<DrainStats> stats = OpenAggregator()->DrainOnce(CollectingSink());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bad, 0u);
  EXPECT_THAT(log_, Contains(HasSubstr("not a host name")));
  EXPECT_EQ(ReadBytes(root_ + "/#operator notes"), "hello");
}

}  // namespace
}  // namespace expanse::spool

namespace expanse::spool {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SinkRefusalTest : public testing::SpoolTest {
 protected:
  std::string Valid(uint64_t sequence) {
    return testing::EncodeOrDie(testing::MakeSpoolFile("node01", "boot-a", sequence));
  }
};

// The sink decides a file's records are unusable (a worker wrote nothing the controller can
// take): the file is quarantined with the sink's reason and the round goes on to the next.
TEST_F(SinkRefusalTest, ADataLossAnswerQuarantinesTheFileAndTheRoundGoesOn) {
  Place("node01", SpoolFileName(1, "boot-a"), Valid(1));
  Place("node01", SpoolFileName(2, "boot-a"), Valid(2));
  std::vector<uint64_t> delivered;
  Result<DrainStats> stats = OpenAggregator()->DrainOnce([&](const SpoolFile& file) {
    if (file.sequence == 1)
      return DataLossError("no record could be taken").WithReason("bad_records");
    delivered.push_back(file.sequence);
    return OkStatus();
  });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_THAT(delivered, ElementsAre(2u));
  EXPECT_EQ(stats->files, 1u);
  EXPECT_EQ(stats->bad_by_reason["bad_records"], 1u);
  EXPECT_TRUE(stats->sink_status.ok());
  EXPECT_THAT(Quarantined(), ElementsAre("node01-" + SpoolFileName(1, "boot-a") + "-bad_records"));
  EXPECT_THAT(log_, Contains(HasSubstr("no record could be taken")));
}

// A sink that throws (a bug on some worker's input) costs that file, never the process: an
// exception leaving a drain thread would end the controller, and its restart would meet the
// same file again.
TEST_F(SinkRefusalTest, ASinkThatThrowsHasItsFileQuarantined) {
  Place("node01", SpoolFileName(1, "boot-a"), Valid(1));
  Place("node01", SpoolFileName(2, "boot-a"), Valid(2));
  Place("node02", SpoolFileName(1, "boot-a"),
        testing::EncodeOrDie(testing::MakeSpoolFile("node02", "boot-a", 1)));
  AggregatorOptions options = DefaultAggregatorOptions();
  options.threads = 4;  // the sink then runs on drain threads, where a throw would terminate
  std::vector<std::string> delivered;
  Result<DrainStats> stats = OpenAggregator(options)->DrainOnce([&](const SpoolFile& file) {
    if (file.host == "node01" && file.sequence == 1)
      throw std::runtime_error("type_error: cannot use value() with number");
    delivered.push_back(file.host + "/" + std::to_string(file.sequence));
    return OkStatus();
  });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_THAT(delivered, ::testing::UnorderedElementsAre("node01/2", "node02/1"));
  EXPECT_EQ(stats->bad_by_reason[reason::kSinkException], 1u);
  EXPECT_THAT(Quarantined(),
              ElementsAre("node01-" + SpoolFileName(1, "boot-a") + "-sink_exception"));
  EXPECT_THAT(log_, Contains(HasSubstr("cannot use value() with number")));
}

}  // namespace
}  // namespace expanse::spool
