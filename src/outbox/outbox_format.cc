#include "outbox/outbox_format.h"

#include <cstdio>

#include "core/bytes.h"
#include "core/crc32.h"

namespace expanse::outbox {
namespace {

using bytes::PutU16;
using bytes::PutU32;
using bytes::PutU64;

uint64_t Load(std::string_view data, size_t offset, int width) {
  return bytes::LoadLe(data.data() + offset, width);
}

uint32_t Crc(std::string_view a, std::string_view b = {}) { return Crc32(b, Crc32(a)); }

Status Corrupt(const char* what) {
  return DataLossError(std::string("outbox: a record with a valid checksum is malformed: ") + what)
      .WithReason("outbox_corrupt");
}

}  // namespace

std::string EncodeFrame(const Record& record) {
  std::string body;
  body.reserve(kMinRecordBodySize + record.stream.size() + record.content_type.size() +
               record.note.size() + record.payload.size());
  body.push_back(static_cast<char>(kRecordKindEntry));
  PutU64(body, record.sequence);
  PutU64(body, static_cast<uint64_t>(record.enqueued_ms));
  body.push_back(static_cast<char>(record.stream.size()));
  body.append(record.stream);
  body.push_back(static_cast<char>(record.content_type.size()));
  body.append(record.content_type);
  PutU16(body, static_cast<uint16_t>(record.note.size()));
  body.append(record.note);
  body.append(record.payload);

  std::string frame;
  frame.reserve(kFrameHeaderSize + body.size());
  PutU32(frame, static_cast<uint32_t>(body.size()));
  PutU32(frame, Crc(std::string_view(frame).substr(0, 4), body));
  frame.append(body);
  return frame;
}

uint32_t FrameBodyLength(std::string_view header) {
  return static_cast<uint32_t>(Load(header, 0, 4));
}

FrameCheck CheckFrame(std::string_view bytes, size_t* frame_size) {
  if (bytes.size() < kFrameHeaderSize)
    return FrameCheck::kTruncated;
  const uint64_t length = FrameBodyLength(bytes);
  const auto crc = static_cast<uint32_t>(Load(bytes, 4, 4));
  if (length < kMinRecordBodySize || length > kMaxRecordBodySize)
    return FrameCheck::kCorrupt;
  if (bytes.size() - kFrameHeaderSize < length)
    return FrameCheck::kTruncated;
  if (Crc(bytes.substr(0, 4), bytes.substr(kFrameHeaderSize, length)) != crc)
    return FrameCheck::kCorrupt;
  *frame_size = kFrameHeaderSize + length;
  return FrameCheck::kOk;
}

Result<Record> DecodeFrame(std::string_view frame) {
  std::string_view body = frame.substr(kFrameHeaderSize);
  if (body.size() < kMinRecordBodySize)
    return Corrupt("body too short");
  if (static_cast<uint8_t>(body[0]) != kRecordKindEntry)
    return Corrupt("unknown record kind");
  Record record;
  record.sequence = Load(body, 1, 8);
  record.enqueued_ms = static_cast<int64_t>(Load(body, 9, 8));
  size_t at = 17;
  // Each length is checked against what is left before the bytes are taken.
  const auto take = [&](size_t length, std::string* out) {
    if (body.size() - at < length)
      return false;
    out->assign(body.substr(at, length));
    at += length;
    return true;
  };
  const size_t stream_length = static_cast<uint8_t>(body[at++]);
  if (!take(stream_length, &record.stream) || at >= body.size())
    return Corrupt("stream overruns the record");
  const size_t type_length = static_cast<uint8_t>(body[at++]);
  if (!take(type_length, &record.content_type) || body.size() - at < 2)
    return Corrupt("content type overruns the record");
  const auto note_length = static_cast<size_t>(Load(body, at, 2));
  at += 2;
  if (!take(note_length, &record.note))
    return Corrupt("note overruns the record");
  record.payload.assign(body.substr(at));
  return record;
}

std::string EncodeCursor(const Cursor& cursor) {
  std::string out(kCursorMagic, sizeof kCursorMagic);
  PutU64(out, cursor.acked_through);
  PutU64(out, cursor.next_sequence);
  PutU32(out, Crc(out));
  return out;
}

std::optional<Cursor> DecodeCursor(std::string_view bytes) {
  if (bytes.size() != kCursorSize || bytes.substr(0, 8) != std::string_view(kCursorMagic, 8))
    return std::nullopt;
  if (Crc(bytes.substr(0, 24)) != static_cast<uint32_t>(Load(bytes, 24, 4)))
    return std::nullopt;
  return Cursor{.acked_through = Load(bytes, 8, 8), .next_sequence = Load(bytes, 16, 8)};
}

std::string SegmentFileName(uint64_t first_sequence) {
  char name[64];
  std::snprintf(name, sizeof name, "seg-%020llu.log",
                static_cast<unsigned long long>(first_sequence));
  return name;
}

std::optional<uint64_t> ParseSegmentFileName(std::string_view name) {
  constexpr std::string_view kPrefix = "seg-", kSuffix = ".log";
  if (name.size() != kPrefix.size() + 20 + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix))
    return std::nullopt;
  uint64_t value = 0;
  for (char c : name.substr(kPrefix.size(), 20)) {
    if (c < '0' || c > '9')
      return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

}  // namespace expanse::outbox
