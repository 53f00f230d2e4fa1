#include "spool/spool_writer.h"

#include <unistd.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "spool/spool_names.h"
#include "spool/spool_test_util.h"
#include "spool/writer_state.h"

namespace expanse::spool {
namespace {

using ::expanse::spool::testing::ListNames;
using ::expanse::spool::testing::ReadBytes;
using ::expanse::spool::testing::WriteBytes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SpoolWriterTest : public testing::SpoolTest {
 protected:
  // Flushes one file with `records` records and moves the clock past the flush interval.
  void FlushRecords(SpoolWriter& writer, int records) {
    for (int i = 0; i < records; ++i)
      ASSERT_TRUE(writer.Add("gpu_series", "{\"i\":" + std::to_string(i) + "}").ok());
    ASSERT_TRUE(writer.Flush().ok());
    clock_.Advance(10'000);
  }
};

TEST_F(SpoolWriterTest, FlushWritesOneCompleteFileAndNoTemporaries) {
  auto writer = OpenWriter("node01");
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Add("gpu_series", R"({"util":97})").ok());
  ASSERT_TRUE(writer->Add("job_event", R"({"job":42,"event":"start"})").ok());
  ASSERT_TRUE(writer->Flush().ok());

  const std::string name = SpoolFileName(1, "boot-a");
  EXPECT_THAT(ListNames(HostDir("node01")), ElementsAre(name));
  Result<SpoolFile> file = DecodeSpoolFile(ReadBytes(HostDir("node01") + "/" + name));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->host, "node01");
  EXPECT_EQ(file->boot_id, "boot-a");
  EXPECT_EQ(file->sequence, 1u);
  EXPECT_EQ(file->created_ms, clock_.NowMs());
  EXPECT_THAT(file->records,
              ElementsAre(SpoolRecord{"gpu_series", R"({"util":97})"},
                          SpoolRecord{"job_event", R"({"job":42,"event":"start"})"}));
  const SpoolWriterCounters counters = writer->counters();
  EXPECT_EQ(counters.files_written, 1u);
  EXPECT_EQ(counters.records_written, 2u);
  EXPECT_EQ(counters.bytes_written, ReadBytes(HostDir("node01") + "/" + name).size());
}

TEST_F(SpoolWriterTest, FlushWithNothingQueuedWritesNothing) {
  auto writer = OpenWriter("node01");
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_TRUE(ListNames(HostDir("node01")).empty());
}

TEST_F(SpoolWriterTest, AtMostOneFilePerFlushInterval) {
  auto writer = OpenWriter("node01");
  ASSERT_TRUE(writer->Add("gpu_series", "1").ok());
  ASSERT_TRUE(writer->Flush().ok());
  clock_.Advance(1'000);
  ASSERT_TRUE(writer->Add("gpu_series", "2").ok());
  ASSERT_TRUE(writer->Flush().ok());  // too soon: keeps batching
  EXPECT_EQ(ListNames(HostDir("node01")).size(), 1u);
  EXPECT_EQ(writer->counters().flushes_deferred, 1u);
  clock_.Advance(4'000);
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_EQ(ListNames(HostDir("node01")).size(), 2u);
}

TEST_F(SpoolWriterTest, SequenceContinuesAfterRestartEvenWhenFilesWereDrained) {
  {
    auto writer = OpenWriter("node01");
    FlushRecords(*writer, 1);
    FlushRecords(*writer, 1);
    EXPECT_EQ(writer->last_sequence(), 2u);
  }
  // The controller drained both files; only the local state knows where the writer was.
  for (const std::string& name : ListNames(HostDir("node01")))
    ASSERT_EQ(::unlink((HostDir("node01") + "/" + name).c_str()), 0);
  auto writer = OpenWriter("node01");
  EXPECT_EQ(writer->last_sequence(), 2u);
  FlushRecords(*writer, 1);
  EXPECT_THAT(ListNames(HostDir("node01")), ElementsAre(SpoolFileName(3, "boot-a")));
}

TEST_F(SpoolWriterTest, SequenceContinuesFromUndrainedFilesWhenTheStateIsLost) {
  {
    auto writer = OpenWriter("node01");
    FlushRecords(*writer, 1);
    FlushRecords(*writer, 1);
  }
  WriteBytes(writer_state_ + "-node01/" + kWriterStateFileName, "garbage");
  auto writer = OpenWriter("node01");
  EXPECT_EQ(writer->last_sequence(), 2u);
  EXPECT_THAT(log_, ElementsAre(HasSubstr("ignoring unreadable")));
}

TEST_F(SpoolWriterTest, ANewBootStartsAgainAtOne) {
  {
    auto writer = OpenWriter("node01", "boot-a");
    FlushRecords(*writer, 1);
  }
  auto writer = OpenWriter("node01", "boot-b");
  FlushRecords(*writer, 1);
  EXPECT_THAT(ListNames(HostDir("node01")),
              ElementsAre(SpoolFileName(1, "boot-a"), SpoolFileName(1, "boot-b")));
}

TEST_F(SpoolWriterTest, ReadsTheBootIdFromTheGivenFile) {
  const std::string boot_id_path = tmp_.path() + "/boot_id";
  WriteBytes(boot_id_path, "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab\n");
  SpoolWriterOptions options = WriterOptions("node01", "");
  options.boot_id_path = boot_id_path;
  auto writer = SpoolWriter::Open(options, clock_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->boot_id(), "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab");

  WriteBytes(boot_id_path, "../../etc\n");
  EXPECT_EQ(SpoolWriter::Open(options, clock_).status().reason(), "spool_bad_boot_id");
}

TEST_F(SpoolWriterTest, FileCountBudgetDropsAndCountsTheBatch) {
  SpoolWriterOptions options = WriterOptions("node01", "boot-a");
  options.max_dir_files = 2;
  auto writer = std::move(SpoolWriter::Open(options, clock_)).value();
  FlushRecords(*writer, 3);
  FlushRecords(*writer, 3);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(writer->Add("gpu_series", "x").ok());
  const Status status = writer->Flush();
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(status.reason(), "spool_full");
  EXPECT_THAT(status.message(), HasSubstr("is the controller draining the spool?"));
  EXPECT_EQ(ListNames(HostDir("node01")).size(), 2u);
  EXPECT_EQ(writer->counters().records_dropped_spool_full, 5u);
  // The dropped batch is gone: the next flush has nothing to write.
  clock_.Advance(10'000);
  EXPECT_TRUE(writer->Flush().ok());
  EXPECT_EQ(writer->counters().records_dropped_spool_full, 5u);
  EXPECT_THAT(log_, ElementsAre(HasSubstr("logged once")));
}

TEST_F(SpoolWriterTest, ByteBudgetDropsAndCountsTheBatch) {
  SpoolWriterOptions options = WriterOptions("node01", "boot-a");
  options.max_dir_bytes = 4096;
  options.zstd_level = 0;
  auto writer = std::move(SpoolWriter::Open(options, clock_)).value();
  ASSERT_TRUE(writer->Add("gpu_series", std::string(3000, 'a')).ok());
  ASSERT_TRUE(writer->Flush().ok());
  clock_.Advance(10'000);
  ASSERT_TRUE(writer->Add("gpu_series", std::string(3000, 'b')).ok());
  EXPECT_EQ(writer->Flush().reason(), "spool_full");
  EXPECT_EQ(writer->counters().records_dropped_spool_full, 1u);
  EXPECT_EQ(writer->counters().files_written, 1u);
}

TEST_F(SpoolWriterTest, BatchCapRefusesAndCountsRecords) {
  SpoolWriterOptions options = WriterOptions("node01", "boot-a");
  options.max_batch_records = 2;
  auto writer = std::move(SpoolWriter::Open(options, clock_)).value();
  ASSERT_TRUE(writer->Add("gpu_series", "1").ok());
  ASSERT_TRUE(writer->Add("gpu_series", "2").ok());
  EXPECT_EQ(writer->Add("gpu_series", "3").reason(), "spool_batch_full");
  EXPECT_EQ(writer->counters().records_dropped_batch_full, 1u);
  EXPECT_EQ(writer->counters().records_accepted, 2u);
}

// Records that travel together are queued all or none; a group larger than any batch says so
// (not counted as dropped: the caller then sends it a part at a time).
TEST_F(SpoolWriterTest, AGroupIsQueuedWholeOrNotAtAll) {
  using Records = std::vector<std::pair<std::string, std::string>>;
  SpoolWriterOptions options = WriterOptions("node01", "boot-a");
  options.max_batch_records = 3;
  auto writer = std::move(SpoolWriter::Open(options, clock_)).value();
  ASSERT_TRUE(writer->Add("gpu_series", "1").ok());
  const Records three = {{"job_event", "2"}, {"gpu_allocation", "3"}, {"job_event", "4"}};
  EXPECT_FALSE(writer->Fits(three));
  EXPECT_EQ(writer->AddAll(three).reason(), "spool_batch_full");
  EXPECT_EQ(writer->counters().records_accepted, 1u);  // none of the three
  EXPECT_EQ(writer->counters().records_dropped_batch_full, 3u);
  const Records two = {{"job_event", "2"}, {"gpu_allocation", "3"}};
  EXPECT_TRUE(writer->Fits(two));
  ASSERT_TRUE(writer->AddAll(two).ok());
  EXPECT_EQ(writer->counters().records_accepted, 3u);
  EXPECT_EQ(writer->AddAll(Records{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}}).reason(),
            "spool_group_too_large");
  EXPECT_EQ(writer->counters().records_dropped_batch_full, 3u);
  EXPECT_EQ(writer->AddAll(Records{{"Bad Kind", "1"}}).reason(), "spool_invalid_record");
}

TEST_F(SpoolWriterTest, RefusesInvalidRecords) {
  auto writer = OpenWriter("node01");
  const Status status = writer->Add("GPU Series", "x");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.reason(), "spool_invalid_record");
  EXPECT_THAT(status.message(), HasSubstr("\"GPU Series\""));
}

TEST_F(SpoolWriterTest, RefusesAHostDirectoryThatIsASymlink) {
  const std::string elsewhere = tmp_.path() + "/elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0750), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), HostDir("node01").c_str()), 0);
  auto writer = SpoolWriter::Open(WriterOptions("node01", "boot-a"), clock_);
  EXPECT_EQ(writer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer.status().reason(), "spool_host_dir_refused");
}

TEST_F(SpoolWriterTest, RefusesAnInvalidHostName) {
  auto writer = SpoolWriter::Open(WriterOptions("../x", "boot-a"), clock_);
  EXPECT_EQ(writer.status().code(), StatusCode::kInvalidArgument);
}

TEST(WriterStateTest, FormatsAndParsesBack) {
  const std::string text = FormatWriterState({"boot-a", 42});
  EXPECT_EQ(text, "expanse-spool-writer 1\nboot_id boot-a\nsequence 42\n");
  const auto state = ParseWriterState(text);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->boot_id, "boot-a");
  EXPECT_EQ(state->sequence, 42u);
  for (size_t cut = 0; cut < text.size(); ++cut)
    EXPECT_FALSE(ParseWriterState(text.substr(0, cut)).has_value()) << cut;
  EXPECT_FALSE(ParseWriterState(text + "x").has_value());
}

}  // namespace
}  // namespace expanse::spool
