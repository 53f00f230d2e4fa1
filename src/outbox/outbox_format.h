// The outbox's on-disk encoding (docs/formats/outbox.md): segment and dead-letter files of
// framed, checksummed records, and the acknowledgement cursor. Pure functions of bytes, so
// replay, tests and fuzzers drive them without a file system. Little-endian throughout.
#ifndef EXPANSE_OUTBOX_OUTBOX_FORMAT_H_
#define EXPANSE_OUTBOX_OUTBOX_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::outbox {

// Segment and dead-letter files start with this; the last two characters are the version.
inline constexpr char kSegmentMagic[8] = {'E', 'X', 'O', 'U', 'T', 'B', '0', '1'};
inline constexpr size_t kSegmentHeaderSize = sizeof kSegmentMagic;
// Frame: u32 body length, u32 CRC-32 (zlib) of those 4 length bytes and the body.
inline constexpr size_t kFrameHeaderSize = 8;
inline constexpr uint8_t kRecordKindEntry = 1;
// kind, sequence, enqueued_ms, stream length, content-type length, note length
inline constexpr size_t kMinRecordBodySize = 1 + 8 + 8 + 1 + 1 + 2;
// The ingest limit is 64 MiB of JSON after decompression; a payload is at most that.
inline constexpr size_t kMaxPayloadBytes = 64u << 20;
inline constexpr size_t kMaxRecordBodySize =
    kMinRecordBodySize + 255 + 255 + 65535 + kMaxPayloadBytes;

// The acknowledgement cursor file: magic, u64 acked_through, u64 next_sequence, u32 CRC-32 of
// the 24 bytes before it.
inline constexpr char kCursorMagic[8] = {'E', 'X', 'O', 'B', 'A', 'C', 'K', '1'};
inline constexpr size_t kCursorSize = 8 + 8 + 8 + 4;

struct Record {
  uint64_t sequence = 0;
  int64_t enqueued_ms = 0;  // Unix ms, the outbox's clock at Enqueue
  std::string stream{};
  std::string content_type{};
  std::string note{};  // empty in the queue; the refusal reason in the dead-letter file
  std::string payload{};
};

// One frame (header and body). The caller keeps the field sizes within the limits above.
std::string EncodeFrame(const Record& record);

enum class FrameCheck {
  kOk,
  kTruncated,  // fewer bytes than the frame header or its length promise: a torn write
  kCorrupt,    // an impossible length or a CRC mismatch
};

// Checks the frame at the start of `bytes`. On kOk, *frame_size is its total size.
FrameCheck CheckFrame(std::string_view bytes, size_t* frame_size);
// The body length a frame header announces; `header` holds kFrameHeaderSize bytes.
uint32_t FrameBodyLength(std::string_view header);

// Decodes the body of a frame that passed CheckFrame. kDataLoss ("outbox_corrupt") for a
// body that does not parse (a checksum-valid but foreign or buggy record).
Result<Record> DecodeFrame(std::string_view frame);

struct Cursor {
  uint64_t acked_through = 0;  // every entry with a sequence <= this is done
  uint64_t next_sequence = 0;  // no sequence below this is ever assigned again
};

std::string EncodeCursor(const Cursor& cursor);
// nullopt for a file of the wrong size, magic or checksum.
std::optional<Cursor> DecodeCursor(std::string_view bytes);

// Replay keeps a segment's cut damaged tail in "<segment file name>.corrupt" beside it.
inline constexpr char kCorruptSuffix[] = ".corrupt";

// "seg-<sequence, 20 digits>.log", so names sort like the sequences they start with.
std::string SegmentFileName(uint64_t first_sequence);
// The first sequence named by a segment file name; nullopt for any other name.
std::optional<uint64_t> ParseSegmentFileName(std::string_view name);

}  // namespace expanse::outbox

#endif  // EXPANSE_OUTBOX_OUTBOX_FORMAT_H_
