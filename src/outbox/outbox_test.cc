// The outbox through its public interface; crashes are simulated by destroying it without
// acknowledging and by cutting or damaging its files before reopening.
#include "outbox/outbox.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "outbox/file_io.h"
#include "outbox/outbox_format.h"
#include "outbox/outbox_test_util.h"

namespace expanse::outbox {
namespace outbox_test {
namespace {

using ::testing::HasSubstr;
using testing::LogLines;
using testing::ReadFile;
using testing::SegmentFiles;
using testing::TempDir;
using testing::WriteFile;

constexpr int64_t kStart = 1'800'000'000'000;

// A payload that names its own sequence, as ingest batches do.
PayloadBuilder Doc(std::string text) {
  return [text](uint64_t sequence) -> Result<Payload> {
    return JsonPayload("{\"sequence\":" + std::to_string(sequence) + ",\"x\":\"" + text + "\"}");
  };
}

std::string ExpectedDoc(uint64_t sequence, const std::string& text) {
  return "{\"sequence\":" + std::to_string(sequence) + ",\"x\":\"" + text + "\"}";
}

class OutboxTest : public ::testing::Test {
 protected:
  OutboxOptions Options() {
    OutboxOptions options;
    options.directory = dir_.path() + "/outbox";
    options.log = log_.sink();
    return options;
  }

  std::unique_ptr<Outbox> Open(OutboxOptions options) {
    auto outbox = Outbox::Open(std::move(options), clock_);
    EXPECT_TRUE(outbox.ok()) << outbox.status();
    return outbox.ok() ? *std::move(outbox) : nullptr;
  }
  std::unique_ptr<Outbox> Open() { return Open(Options()); }

  uint64_t Enqueue(Outbox& outbox, const std::string& text,
                   const std::string& stream = "telemetry") {
    Result<uint64_t> sequence = outbox.Enqueue(stream, Doc(text));
    EXPECT_TRUE(sequence.ok()) << sequence.status();
    return sequence.ok() ? *sequence : 0;
  }

  OutboxEntry PeekEntry(Outbox& outbox) {
    auto entry = outbox.Peek();
    EXPECT_TRUE(entry.ok()) << entry.status();
    EXPECT_TRUE(entry.ok() && entry->has_value());
    return entry.ok() && entry->has_value() ? **entry : OutboxEntry();
  }

  bool Empty(Outbox& outbox) {
    auto entry = outbox.Peek();
    EXPECT_TRUE(entry.ok()) << entry.status();
    return entry.ok() && !entry->has_value();
  }

  TempDir dir_;
  LogLines log_;
  ManualClock clock_{kStart};
};

TEST_F(OutboxTest, RoundTripInOrderWithSequencesInsideThePayload) {
  auto outbox = Open();
  const uint64_t a = Enqueue(*outbox, "a");
  clock_.Advance(5);
  const uint64_t b = Enqueue(*outbox, "b", "jobs");
  const uint64_t c = Enqueue(*outbox, "c");
  // A fresh outbox starts at the clock's ms times 1000.
  EXPECT_EQ(a, static_cast<uint64_t>(kStart) * 1000);
  EXPECT_EQ(b, a + 1);
  EXPECT_EQ(c, a + 2);
  EXPECT_EQ(outbox->stats().depth_entries, 3u);

  OutboxEntry first = PeekEntry(*outbox);
  EXPECT_EQ(first.sequence, a);
  EXPECT_EQ(first.stream, "telemetry");
  EXPECT_EQ(first.content_type, "application/json");
  EXPECT_EQ(first.enqueued_ms, kStart);
  EXPECT_EQ(first.payload, ExpectedDoc(a, "a"));
  EXPECT_EQ(PeekEntry(*outbox).sequence, a);  // Peek does not consume
  ASSERT_TRUE(outbox->Ack(a).ok());
  OutboxEntry second = PeekEntry(*outbox);
  EXPECT_EQ(second.stream, "jobs");
  EXPECT_EQ(second.enqueued_ms, kStart + 5);
  EXPECT_EQ(second.payload, ExpectedDoc(b, "b"));
  ASSERT_TRUE(outbox->Ack(b).ok());
  EXPECT_EQ(PeekEntry(*outbox).payload, ExpectedDoc(c, "c"));
  ASSERT_TRUE(outbox->Ack(c).ok());
  EXPECT_TRUE(Empty(*outbox));
  EXPECT_EQ(outbox->stats().depth_entries, 0u);
  EXPECT_EQ(outbox->stats().depth_bytes, 0u);
  EXPECT_EQ(outbox->stats().enqueued_entries, 3u);
}

TEST_F(OutboxTest, ZstdPayloadIsStoredAsGiven) {
  auto outbox = Open();
  Result<uint64_t> sequence = outbox->Enqueue("telemetry", [](uint64_t seq) {
    return ZstdJsonPayload("{\"sequence\":" + std::to_string(seq) + "}");
  });
  ASSERT_TRUE(sequence.ok());
  OutboxEntry entry = PeekEntry(*outbox);
  EXPECT_EQ(entry.content_type, "application/zstd");
  EXPECT_EQ(entry.payload.substr(0, 4), std::string("\x28\xb5\x2f\xfd", 4));  // zstd magic
}

TEST_F(OutboxTest, CrashBeforeAckSendsTheSameSequenceAndBytesAgain) {
  uint64_t sequence = 0;
  std::string payload;
  {
    auto outbox = Open();
    sequence = Enqueue(*outbox, "batch");
    OutboxEntry sent = PeekEntry(*outbox);  // the uploader sends it ... and the daemon dies
    payload = sent.payload;
  }
  auto reopened = Open();
  OutboxEntry again = PeekEntry(*reopened);
  EXPECT_EQ(again.sequence, sequence);
  EXPECT_EQ(again.payload, payload);
}

TEST_F(OutboxTest, AckCursorSurvivesReopen) {
  std::vector<uint64_t> sequences;
  {
    auto outbox = Open();
    for (int i = 0; i < 5; ++i)
      sequences.push_back(Enqueue(*outbox, "e" + std::to_string(i)));
    ASSERT_TRUE(outbox->Ack(sequences[1]).ok());  // acknowledges 0 and 1
  }
  auto outbox = Open();
  EXPECT_EQ(outbox->stats().depth_entries, 3u);
  EXPECT_EQ(outbox->stats().acked_through, sequences[1]);
  EXPECT_EQ(PeekEntry(*outbox).sequence, sequences[2]);
  // Acknowledging again, or something older, is harmless.
  EXPECT_TRUE(outbox->Ack(sequences[0]).ok());
  EXPECT_EQ(PeekEntry(*outbox).sequence, sequences[2]);
  Status never = outbox->Ack(sequences[4] + 1);
  EXPECT_EQ(never.code(), StatusCode::kInvalidArgument);
}

TEST_F(OutboxTest, SequencesContinueAfterReopenAndNeverRepeat) {
  std::vector<uint64_t> seen;
  for (int round = 0; round < 4; ++round) {
    auto outbox = Open();
    for (int i = 0; i < 3; ++i)
      seen.push_back(Enqueue(*outbox, "r"));
    if (round % 2 == 1) {
      // Everything acknowledged: the segments go, yet the next sequence must still grow.
      ASSERT_TRUE(outbox->Ack(seen.back()).ok());
      EXPECT_TRUE(Empty(*outbox));
    }
  }
  for (size_t i = 1; i < seen.size(); ++i)
    EXPECT_GT(seen[i], seen[i - 1]);
  EXPECT_EQ(seen.back() - seen.front(), seen.size() - 1);  // and without gaps here
}

TEST_F(OutboxTest, GroupIsConsecutiveAndAllOrNothing) {
  auto outbox = Open();
  std::vector<EnqueueItem> items = {
      {"telemetry", Doc("1")}, {"jobs", Doc("2")}, {"telemetry", Doc("3")}};
  Result<std::vector<uint64_t>> sequences = outbox->EnqueueGroup(items);
  ASSERT_TRUE(sequences.ok()) << sequences.status();
  ASSERT_EQ(sequences->size(), 3u);
  EXPECT_EQ((*sequences)[2], (*sequences)[0] + 2);

  std::vector<EnqueueItem> failing = {
      {"telemetry", Doc("4")},
      {"telemetry", [](uint64_t) -> Result<Payload> { return InternalError("builder broke"); }}};
  Result<std::vector<uint64_t>> refused = outbox->EnqueueGroup(failing);
  EXPECT_EQ(refused.status().message(), "builder broke");
  EXPECT_EQ(outbox->stats().depth_entries, 3u);
  // The failed group consumed no sequence.
  EXPECT_EQ(Enqueue(*outbox, "5"), (*sequences)[2] + 1);
}

TEST_F(OutboxTest, RefusesBadStreamsAndOversizedEntries) {
  auto outbox = Open();
  for (const char* stream :
       {"", "Telemetry", "tele metry", "a/b", "0123456789012345678901234567890123"}) {
    Result<uint64_t> refused = outbox->Enqueue(stream, Doc("x"));
    EXPECT_EQ(refused.status().reason(), "invalid_stream") << stream;
  }
  OutboxOptions options = Options();
  options.directory = dir_.path() + "/small";
  options.max_bytes = 64 << 10;
  auto small = Open(options);
  Result<uint64_t> big = small->Enqueue("telemetry", [](uint64_t) -> Result<Payload> {
    return JsonPayload(std::string(70 << 10, 'x'));
  });
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(big.status().reason(), "outbox_entry_too_large");
  Result<uint64_t> untyped = small->Enqueue("telemetry", [](uint64_t) -> Result<Payload> {
    return Payload{.content_type = "", .bytes = "x"};
  });
  EXPECT_EQ(untyped.status().reason(), "invalid_payload");
}

TEST_F(OutboxTest, TornTailIsCutAndEarlierEntriesSurvive) {
  std::vector<uint64_t> sequences;
  {
    auto outbox = Open();
    for (int i = 0; i < 3; ++i)
      sequences.push_back(Enqueue(*outbox, "entry-" + std::to_string(i)));
  }
  std::vector<std::string> files = SegmentFiles(Options().directory);
  ASSERT_EQ(files.size(), 1u);
  // The third record loses its last 10 bytes, as if the machine died mid-write.
  const std::string bytes = ReadFile(files[0]);
  WriteFile(files[0], bytes.substr(0, bytes.size() - 10));

  auto outbox = Open();
  EXPECT_EQ(outbox->stats().depth_entries, 2u);
  EXPECT_EQ(PeekEntry(*outbox).payload, ExpectedDoc(sequences[0], "entry-0"));
  ASSERT_TRUE(outbox->Ack(sequences[0]).ok());
  EXPECT_EQ(PeekEntry(*outbox).payload, ExpectedDoc(sequences[1], "entry-1"));
  EXPECT_THAT(log_.joined(), HasSubstr("of torn tail at offset"));
  EXPECT_EQ(outbox->stats().corrupt_entries, 0u);
  EXPECT_GT(outbox->stats().corrupt_bytes, 0u);
  // The cut is persisted, and appending continues cleanly after it.
  const uint64_t next = Enqueue(*outbox, "after");
  EXPECT_GT(next, sequences[1]);
  ASSERT_TRUE(outbox->Ack(sequences[1]).ok());
  EXPECT_EQ(PeekEntry(*outbox).payload, ExpectedDoc(next, "after"));
}

TEST_F(OutboxTest, TornSegmentHeaderIsRemoved) {
  uint64_t sequence = 0;
  {
    auto outbox = Open();
    sequence = Enqueue(*outbox, "kept");
  }
  // A crash right after creating the next segment file leaves a few bytes of its header.
  WriteFile(Options().directory + "/" + SegmentFileName(sequence + 1), "EXO");
  auto outbox = Open();
  EXPECT_EQ(PeekEntry(*outbox).sequence, sequence);
  EXPECT_EQ(SegmentFiles(Options().directory).size(), 1u);
  EXPECT_GT(Enqueue(*outbox, "next"), sequence);
}

TEST_F(OutboxTest, CorruptChecksumIsDetectedOnOpen) {
  std::vector<uint64_t> sequences;
  {
    auto outbox = Open();
    for (int i = 0; i < 3; ++i)
      sequences.push_back(Enqueue(*outbox, "payload-" + std::to_string(i)));
  }
  const std::string file = SegmentFiles(Options().directory)[0];
  std::string bytes = ReadFile(file);
  // Damage the second record's payload: its text is unique in the file.
  const size_t at = bytes.find("payload-1");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'P';
  WriteFile(file, bytes);

  auto outbox = Open();
  // Only the damaged record is lost: a sound one follows it, so its length is trusted.
  EXPECT_EQ(outbox->stats().depth_entries, 2u);
  EXPECT_EQ(outbox->stats().corrupt_entries, 1u);
  EXPECT_EQ(PeekEntry(*outbox).sequence, sequences[0]);
  auto after = outbox->Peek(sequences[0]);
  ASSERT_TRUE(after.ok() && after->has_value());
  EXPECT_EQ((*after)->payload, ExpectedDoc(sequences[2], "payload-2"));
  EXPECT_THAT(log_.joined(), HasSubstr("skipped a damaged record"));
  EXPECT_THAT(log_.joined(), HasSubstr("damaged on disk"));
}

TEST_F(OutboxTest, DamagedMiddleRecordIsSkippedAndTheRecordsAfterItSurviveReopens) {
  std::vector<uint64_t> sequences;
  {
    auto outbox = Open();
    for (int i = 0; i < 5; ++i)
      sequences.push_back(Enqueue(*outbox, "record-" + std::to_string(i)));
  }
  const std::string file = SegmentFiles(Options().directory)[0];
  std::string bytes = ReadFile(file);
  bytes[bytes.find("record-1")] = 'R';
  WriteFile(file, bytes);

  for (int round = 0; round < 2; ++round) {  // the file is left as it is: the next Open agrees
    auto outbox = Open();
    EXPECT_EQ(outbox->stats().depth_entries, 4u);
    EXPECT_EQ(outbox->stats().corrupt_entries, 1u);
    EXPECT_GT(outbox->stats().corrupt_bytes, 0u);
    std::vector<uint64_t> peeked;
    for (uint64_t after = 0;;) {
      auto entry = outbox->Peek(after);
      ASSERT_TRUE(entry.ok()) << entry.status();
      if (!entry->has_value())
        break;
      after = (*entry)->sequence;
      peeked.push_back(after);
    }
    EXPECT_EQ(peeked,
              (std::vector<uint64_t>{sequences[0], sequences[2], sequences[3], sequences[4]}));
    EXPECT_EQ(ReadFile(file), bytes);
    EXPECT_FALSE(std::filesystem::exists(file + kCorruptSuffix));
  }
  auto outbox = Open();
  EXPECT_GT(Enqueue(*outbox, "after"), sequences[4]);
}

TEST_F(OutboxTest, DamagedTailIsCutAndKeptBesideItsSegment) {
  std::vector<uint64_t> sequences;
  {
    auto outbox = Open();
    for (int i = 0; i < 4; ++i)
      sequences.push_back(Enqueue(*outbox, "tail-" + std::to_string(i)));
  }
  const std::string file = SegmentFiles(Options().directory)[0];
  std::string bytes = ReadFile(file);
  // Two damaged records in a row: no sound record confirms the first one's length.
  const size_t cut = bytes.find("tail-2");
  bytes[cut] = 'T';
  bytes[bytes.find("tail-3")] = 'T';
  WriteFile(file, bytes);

  auto outbox = Open();
  EXPECT_EQ(outbox->stats().depth_entries, 2u);
  EXPECT_EQ(outbox->stats().corrupt_entries, 1u);
  EXPECT_THAT(log_.joined(), HasSubstr("corrupt tail at offset"));
  const std::string kept = ReadFile(file + kCorruptSuffix);
  EXPECT_EQ(ReadFile(file) + kept, bytes);  // the cut bytes, exactly
  EXPECT_EQ(outbox->stats().corrupt_bytes, kept.size());
  // The kept tail goes with its segment.
  ASSERT_TRUE(outbox->Ack(sequences[1]).ok());
  EXPECT_TRUE(SegmentFiles(Options().directory).empty());
  EXPECT_FALSE(std::filesystem::exists(file + kCorruptSuffix));
}

TEST_F(OutboxTest, DamageAfterOpenIsCaughtByPeek) {
  auto outbox = Open();
  const uint64_t first = Enqueue(*outbox, "first-entry");
  const uint64_t second = Enqueue(*outbox, "second-entry");
  const std::string file = SegmentFiles(Options().directory)[0];
  std::string bytes = ReadFile(file);
  bytes[bytes.find("first-entry")] = 'F';
  WriteFile(file, bytes);
  EXPECT_EQ(PeekEntry(*outbox).sequence, second);
  EXPECT_EQ(outbox->stats().corrupt_entries, 1u);
  EXPECT_THAT(log_.joined(), HasSubstr("entry " + std::to_string(first)));
}

TEST_F(OutboxTest, SegmentRemovedBehindItsBackIsSkippedNotFatal) {
  OutboxOptions options = Options();
  options.max_bytes = 1 << 20;
  options.segment_bytes = 1024;
  auto outbox = Open(options);
  Enqueue(*outbox, std::string(800, 'a'));
  const uint64_t second = Enqueue(*outbox, std::string(800, 'b'));  // starts a new segment
  std::vector<std::string> files = SegmentFiles(options.directory);
  ASSERT_EQ(files.size(), 2u);
  std::filesystem::remove(files[0]);
  EXPECT_EQ(PeekEntry(*outbox).sequence, second);
  EXPECT_EQ(outbox->stats().corrupt_entries, 1u);
}

TEST_F(OutboxTest, DropsOldestSegmentsWhenFullAndCountsThem) {
  OutboxOptions options = Options();
  options.max_bytes = 64 << 10;
  options.segment_bytes = 8 << 10;
  auto outbox = Open(options);
  const std::string filler(1000, 'f');
  std::vector<uint64_t> sequences;
  for (int i = 0; i < 200; ++i) {
    sequences.push_back(Enqueue(*outbox, filler));
    ASSERT_LE(outbox->stats().disk_bytes, options.max_bytes);
  }
  OutboxStats stats = outbox->stats();
  EXPECT_GT(stats.dropped_entries, 100u);
  EXPECT_EQ(stats.dropped_entries + stats.depth_entries, 200u);
  EXPECT_GT(stats.dropped_bytes, stats.dropped_entries * 1000);
  EXPECT_THAT(log_.joined(), HasSubstr("oldest unacknowledged entries"));
  // What is left is the newest entries, in order, and the files agree with the count.
  EXPECT_EQ(PeekEntry(*outbox).sequence, sequences[stats.dropped_entries]);
  uint64_t on_disk = 0;
  for (const std::string& file : SegmentFiles(options.directory))
    on_disk += std::filesystem::file_size(file);
  EXPECT_EQ(on_disk, stats.disk_bytes);

  // The bound and the drops hold across a reopen, and sequences still grow.
  outbox.reset();
  auto reopened = Open(options);
  EXPECT_EQ(reopened->stats().depth_entries, stats.depth_entries);
  EXPECT_GT(Enqueue(*reopened, filler), sequences.back());
}

TEST_F(OutboxTest, AcknowledgedSegmentsAreDeleted) {
  OutboxOptions options = Options();
  options.max_bytes = 1 << 20;
  options.segment_bytes = 4 << 10;
  auto outbox = Open(options);
  uint64_t last = 0;
  for (int i = 0; i < 50; ++i)
    last = Enqueue(*outbox, std::string(500, 'x'));
  EXPECT_GT(SegmentFiles(options.directory).size(), 5u);
  ASSERT_TRUE(outbox->Ack(last).ok());
  // Only the segment still being appended to stays.
  EXPECT_EQ(SegmentFiles(options.directory).size(), 1u);
  EXPECT_EQ(outbox->stats().depth_entries, 0u);
  outbox.reset();
  auto reopened = Open(options);
  EXPECT_EQ(SegmentFiles(options.directory).size(), 0u);
  EXPECT_EQ(reopened->stats().disk_bytes, 0u);
  EXPECT_GT(Enqueue(*reopened, "x"), last);
}

// A disk that holds `capacity` bytes of the outbox's files (sizes, not blocks): a write that
// would grow past it fails with ENOSPC, as on a controller whose daemon user has no reserved
// blocks. With `refuse_cursor` the cursor cannot be written even in place.
class SmallDisk {
 public:
  explicit SmallDisk(std::string directory) : directory_(std::move(directory)) {}
  std::function<int(std::string_view, uint64_t)> hook() {
    return [this](std::string_view name, uint64_t new_bytes) {
      if (refuse_cursor && name.starts_with("ack"))
        return ENOSPC;
      return Used() + new_bytes > capacity ? ENOSPC : 0;
    };
  }
  uint64_t Used() const {
    uint64_t used = 0;
    for (const auto& entry : std::filesystem::directory_iterator(directory_))
      used += entry.is_regular_file() ? entry.file_size() : 0;
    return used;
  }
  void Fill() { capacity = Used(); }

  uint64_t capacity = UINT64_MAX;
  bool refuse_cursor = false;

 private:
  std::string directory_;
};

class OutboxFullDiskTest : public OutboxTest {
 protected:
  // Six entries, one segment each, on a disk that is then full.
  void SetUp() override {
    options_ = Options();
    options_.max_bytes = 1 << 20;
    options_.segment_bytes = 1024;
    options_.write_error = disk_.hook();
    outbox_ = Open(options_);
    ASSERT_NE(outbox_, nullptr);
    for (int i = 0; i < 6; ++i)
      sequences_.push_back(Enqueue(*outbox_, std::string(800, static_cast<char>('a' + i))));
    ASSERT_EQ(SegmentFiles(options_.directory).size(), 6u);
    disk_.Fill();
    Result<uint64_t> refused = outbox_->Enqueue("telemetry", Doc("more"));
    ASSERT_EQ(refused.status().reason(), "outbox_disk_full") << refused.status();
  }

  SmallDisk disk_{dir_.path() + "/outbox"};
  OutboxOptions options_;
  std::unique_ptr<Outbox> outbox_;
  std::vector<uint64_t> sequences_;
};

TEST_F(OutboxFullDiskTest, AckOverwritesTheCursorInPlaceAndFreesSpace) {
  // No room for ack.tmp; the old cursor's place takes the new one.
  ASSERT_TRUE(outbox_->Ack(sequences_[4]).ok());
  EXPECT_EQ(SegmentFiles(options_.directory).size(), 1u);
  EXPECT_EQ(outbox_->stats().cursor_failures, 0u);
  const uint64_t more = Enqueue(*outbox_, "more");
  EXPECT_GT(more, sequences_[5]);

  outbox_.reset();
  disk_.Fill();
  auto reopened = Open(options_);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->stats().acked_through, sequences_[4]);
  EXPECT_EQ(PeekEntry(*reopened).sequence, sequences_[5]);
  EXPECT_EQ(reopened->stats().depth_entries, 2u);
}

TEST_F(OutboxFullDiskTest, AckWithoutAnyCursorWriteStillFreesSpaceAndOpenWorks) {
  disk_.refuse_cursor = true;
  ASSERT_TRUE(outbox_->Ack(sequences_[5]).ok());  // held in memory, logged
  EXPECT_EQ(outbox_->stats().cursor_failures, 1u);
  EXPECT_THAT(log_.joined(), HasSubstr("cannot record acknowledgements"));
  // The older segments go; the newest stays, as its name keeps next_sequence across a restart.
  EXPECT_EQ(SegmentFiles(options_.directory).size(), 1u);
  EXPECT_TRUE(Empty(*outbox_));
  const uint64_t more = Enqueue(*outbox_, "more");
  EXPECT_GT(more, sequences_[5]);

  // A restart before any cursor write: the acknowledged entry in the newest segment goes again
  // (the server answers it as a duplicate), the ones deleted do not, nothing unacknowledged is
  // lost, and no sequence is handed out twice.
  outbox_.reset();
  disk_.Fill();
  auto reopened = Open(options_);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(PeekEntry(*reopened).sequence, sequences_[5]);
  EXPECT_EQ(reopened->stats().depth_entries, 2u);
  EXPECT_EQ(reopened->stats().next_sequence, more + 1);
  // Once space is back the cursor catches up at the next Ack.
  disk_.refuse_cursor = false;
  disk_.capacity = UINT64_MAX;
  ASSERT_TRUE(reopened->Ack(more).ok());
  reopened.reset();
  auto again = Open(options_);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->stats().acked_through, more);
  EXPECT_TRUE(Empty(*again));
}

TEST_F(OutboxTest, DeadLetterKeepsTheEntryAndMovesOn) {
  auto outbox = Open();
  const uint64_t poison = Enqueue(*outbox, "poison");
  const uint64_t good = Enqueue(*outbox, "good");
  OutboxEntry entry = PeekEntry(*outbox);
  ASSERT_TRUE(outbox->DeadLetter(entry, "HTTP 400 invalid_batch: batch.sequence ...").ok());
  EXPECT_EQ(PeekEntry(*outbox).sequence, good);
  EXPECT_EQ(outbox->stats().dead_lettered_entries, 1u);
  EXPECT_EQ(outbox->stats().acked_through, poison);

  const std::string file = ReadFile(Options().directory + "/dead-letter.log");
  ASSERT_GT(file.size(), kSegmentHeaderSize);
  EXPECT_EQ(file.substr(0, kSegmentHeaderSize), std::string(kSegmentMagic, kSegmentHeaderSize));
  Result<Record> kept = DecodeFrame(std::string_view(file).substr(kSegmentHeaderSize));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->sequence, poison);
  EXPECT_EQ(kept->note, "HTTP 400 invalid_batch: batch.sequence ...");
  EXPECT_EQ(kept->payload, ExpectedDoc(poison, "poison"));
}

TEST_F(OutboxTest, DeadLetterFileIsBounded) {
  OutboxOptions options = Options();
  options.max_dead_letter_bytes = 4096;
  auto outbox = Open(options);
  for (int i = 0; i < 20; ++i) {
    Enqueue(*outbox, std::string(500, 'd'));
    ASSERT_TRUE(outbox->DeadLetter(PeekEntry(*outbox), "HTTP 400").ok());
  }
  EXPECT_LE(std::filesystem::file_size(options.directory + "/dead-letter.log"), 4096u);
  EXPECT_TRUE(std::filesystem::exists(options.directory + "/dead-letter.1.log"));
  EXPECT_EQ(outbox->stats().dead_lettered_entries, 20u);
}

TEST_F(OutboxTest, OneProcessPerDirectory) {
  auto outbox = Open();
  auto second = Outbox::Open(Options(), clock_);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().reason(), "outbox_locked");
  outbox.reset();
  EXPECT_TRUE(Outbox::Open(Options(), clock_).ok());
}

TEST_F(OutboxTest, DamagedCursorResendsRatherThanReusingSequences) {
  uint64_t last = 0;
  {
    auto outbox = Open();
    Enqueue(*outbox, "a");
    last = Enqueue(*outbox, "b");
    ASSERT_TRUE(outbox->Ack(last - 1).ok());
  }
  WriteFile(Options().directory + "/ack", "garbage");
  clock_.Advance(1000);
  auto outbox = Open();
  EXPECT_THAT(log_.joined(), HasSubstr("is damaged"));
  EXPECT_EQ(outbox->stats().depth_entries, 2u);  // "a" goes again; the server deduplicates
  EXPECT_GE(Enqueue(*outbox, "c"), static_cast<uint64_t>(kStart + 1000) * 1000);
}

TEST_F(OutboxTest, DirectoryIsPrivateAndForeignFilesAreLeftAlone) {
  WriteFile(dir_.path() + "/placeholder", "");
  auto outbox = Open();
  struct stat info {};
  ASSERT_EQ(::stat(Options().directory.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  WriteFile(Options().directory + "/README", "operator notes");
  outbox.reset();
  auto reopened = Open();
  EXPECT_EQ(ReadFile(Options().directory + "/README"), "operator notes");
}

TEST(NetworkFilesystemTest, KnowsTheSharedMountsOfAnHpcSite) {
  EXPECT_TRUE(IsNetworkFilesystem(0x6969));       // NFS
  EXPECT_TRUE(IsNetworkFilesystem(0x0BD00BD0));   // Lustre
  EXPECT_TRUE(IsNetworkFilesystem(0x47504653));   // GPFS
  EXPECT_TRUE(IsNetworkFilesystem(0xFF534D42));   // CIFS
  EXPECT_FALSE(IsNetworkFilesystem(0xEF53));      // ext4
  EXPECT_FALSE(IsNetworkFilesystem(0x58465342));  // XFS
  EXPECT_FALSE(IsNetworkFilesystem(0x01021994));  // tmpfs
}

}  // namespace
}  // namespace outbox_test
}  // namespace expanse::outbox
