#include "spool/spool_file.h"

#include <zstd.h>

#include <algorithm>
#include <utility>

#include "core/bytes.h"
#include "core/crc32.h"
#include "spool/reasons.h"
#include "spool/spool_format.h"
#include "spool/spool_names.h"

namespace expanse::spool {

using bytes::ByteReader;
using bytes::LoadLe;
using bytes::PutU16;
using bytes::PutU32;
using bytes::PutU64;
using bytes::PutU8;
namespace {

Status Invalid(std::string message) {
  return InvalidArgumentError("spool: cannot encode file: " + std::move(message))
      .WithReason("spool_invalid_file");
}

Status Bad(const char* reason, const std::string& detail) {
  return DataLossError(std::string("spool file refused (") + reason + "): " + detail)
      .WithReason(reason);
}

// The record's crc32 covers its kind length, kind, payload length and payload, so a flipped
// length is caught as surely as a flipped payload byte.
uint32_t RecordCrc(std::string_view kind_and_length, std::string_view payload) {
  return Crc32(payload, Crc32(kind_and_length));
}

Result<std::string> EncodeBody(const std::vector<SpoolRecord>& records) {
  std::string body;
  size_t raw_size = 0;
  for (const SpoolRecord& record : records)
    raw_size += kRecordOverhead + record.kind.size() + record.payload.size();
  if (raw_size > kMaxRawBodyBytes) {
    return Invalid(std::to_string(raw_size) + " bytes of records exceed the " +
                   std::to_string(kMaxRawBodyBytes) + "-byte body limit");
  }
  body.reserve(raw_size);
  for (const SpoolRecord& record : records) {
    if (!IsValidKind(record.kind))
      return Invalid("record kind is not [a-z0-9_]{1,32}");
    if (record.payload.size() > kMaxRecordPayloadBytes) {
      return Invalid("record of " + std::to_string(record.payload.size()) + " bytes exceeds the " +
                     std::to_string(kMaxRecordPayloadBytes) + "-byte record limit");
    }
    const size_t start = body.size();
    PutU8(body, static_cast<uint8_t>(record.kind.size()));
    body += record.kind;
    PutU32(body, static_cast<uint32_t>(record.payload.size()));
    const uint32_t crc = RecordCrc(std::string_view(body).substr(start), record.payload);
    body += record.payload;
    PutU32(body, crc);
  }
  return body;
}

Status DecodeRecords(std::string_view body, uint32_t count, std::vector<SpoolRecord>& out) {
  // Every record takes at least kRecordOverhead + 1 bytes, which bounds the reservation by
  // the input size whatever the count field claims.
  if (count > body.size() / (kRecordOverhead + 1))
    return Bad(reason::kMalformed, "record count exceeds what the body can hold");
  out.reserve(count);
  ByteReader in(body);
  for (uint32_t i = 0; i < count; ++i) {
    const std::string_view record_start = body.substr(body.size() - in.remaining());
    const uint8_t kind_size = in.U8();
    const std::string_view kind = in.Bytes(kind_size);
    const uint32_t payload_size = in.U32();
    if (!in.ok() || payload_size > kMaxRecordPayloadBytes || payload_size > in.remaining())
      return Bad(reason::kMalformed, "record " + std::to_string(i) + " overruns the body");
    const std::string_view payload = in.Bytes(payload_size);
    const uint32_t crc = in.U32();
    if (!in.ok())
      return Bad(reason::kMalformed, "record " + std::to_string(i) + " overruns the body");
    if (RecordCrc(record_start.substr(0, 1 + kind_size + 4), payload) != crc)
      return Bad(reason::kBadChecksum, "record " + std::to_string(i) + " fails its crc32");
    if (!IsValidKind(kind))
      return Bad(reason::kMalformed, "record " + std::to_string(i) + " has an invalid kind");
    out.push_back({std::string(kind), std::string(payload)});
  }
  if (!in.empty())
    return Bad(reason::kMalformed, "bytes follow the last record");
  return OkStatus();
}

// Decompression scratch, kept per thread: a drain decodes thousands of files in a row, and a
// fresh context and a fresh zero-filled buffer per file cost more than the decompression.
struct DecodeScratch {
  // Beyond this, a buffer grown by an unusually large file is given back after use.
  static constexpr size_t kKeepBytes = 4u << 20;

  DecodeScratch() : context(ZSTD_createDCtx()) {}
  ~DecodeScratch() { ZSTD_freeDCtx(context); }
  DecodeScratch(const DecodeScratch&) = delete;
  DecodeScratch& operator=(const DecodeScratch&) = delete;

  ZSTD_DCtx* context;
  std::string buffer;  // only ever grows (resize zero-fills), so reuse costs nothing
};

// Decompresses exactly `raw_size` bytes (already capped at kMaxRawBodyBytes) into the start
// of scratch.buffer, or fails.
Status Decompress(std::string_view stored, uint32_t raw_size, DecodeScratch& scratch) {
  const unsigned long long frame_size = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (frame_size != raw_size)
    return Bad(reason::kMalformed, "zstd frame size does not match the header");
  if (ZSTD_findFrameCompressedSize(stored.data(), stored.size()) != stored.size())
    return Bad(reason::kMalformed, "body is not exactly one zstd frame");
  if (scratch.context == nullptr)
    return ResourceExhaustedError("spool: cannot allocate a zstd context");
  if (scratch.buffer.size() < raw_size)
    scratch.buffer.resize(raw_size);
  const size_t n = ZSTD_decompressDCtx(scratch.context, scratch.buffer.data(), raw_size,
                                       stored.data(), stored.size());
  if (ZSTD_isError(n) || n != raw_size)
    return Bad(reason::kMalformed, "zstd body does not decompress");
  return OkStatus();
}

}  // namespace

Result<std::string> EncodeSpoolFile(const SpoolFile& file, const EncodeOptions& options) {
  if (!IsValidHostName(file.host))
    return Invalid("host name is not [A-Za-z0-9._-]{1,64}");
  if (!IsValidBootId(file.boot_id))
    return Invalid("boot id is not [A-Za-z0-9-]{1,64}");
  if (file.records.size() > kMaxRecords)
    return Invalid(std::to_string(file.records.size()) + " records exceed the limit");
  EXPANSE_ASSIGN_OR_RETURN(std::string raw, EncodeBody(file.records));

  uint8_t flags = 0;
  std::string stored;
  if (options.zstd_level != 0 && !raw.empty()) {
    stored.resize(ZSTD_compressBound(raw.size()));
    const size_t n =
        ZSTD_compress(stored.data(), stored.size(), raw.data(), raw.size(), options.zstd_level);
    if (!ZSTD_isError(n) && n < raw.size()) {
      stored.resize(n);
      flags |= kFlagZstdBody;
    }
  }
  if ((flags & kFlagZstdBody) == 0)
    stored = std::move(raw);
  const size_t total =
      kFixedHeaderSize + file.host.size() + file.boot_id.size() + stored.size() + kTrailerSize;
  if (total > kMaxFileBytes)
    return Invalid(std::to_string(total) + "-byte file exceeds the limit; flush more often");

  std::string out;
  out.reserve(total);
  out.append(kSpoolMagic, sizeof kSpoolMagic);
  PutU8(out, kSpoolVersion);
  PutU8(out, flags);
  PutU16(out, 0);
  PutU64(out, file.sequence);
  PutU64(out, static_cast<uint64_t>(file.created_ms));
  PutU32(out, static_cast<uint32_t>(file.records.size()));
  PutU32(out, static_cast<uint32_t>(stored.size()));
  PutU32(out, static_cast<uint32_t>((flags & kFlagZstdBody) ? raw.size() : stored.size()));
  PutU8(out, static_cast<uint8_t>(file.host.size()));
  PutU8(out, static_cast<uint8_t>(file.boot_id.size()));
  out += file.host;
  out += file.boot_id;
  out += stored;
  PutU32(out, Crc32(out));
  return out;
}

Result<SpoolFile> DecodeSpoolFile(std::string_view bytes) {
  const std::string_view magic(kSpoolMagic, sizeof kSpoolMagic);
  // A prefix of the magic is a truncated file (a crash can leave one); anything else is not
  // a spool file at all.
  const size_t magic_seen = std::min(bytes.size(), magic.size());
  if (bytes.substr(0, magic_seen) != magic.substr(0, magic_seen))
    return Bad(reason::kBadMagic, "does not start with \"EXSP\"");
  if (bytes.size() < kFixedHeaderSize)
    return Bad(reason::kTruncated, "shorter than the fixed header");
  ByteReader in(bytes.substr(magic.size()));
  const uint8_t version = in.U8();
  const uint8_t flags = in.U8();
  const uint16_t reserved = in.U16();
  SpoolFile file;
  file.sequence = in.U64();
  file.created_ms = static_cast<int64_t>(in.U64());
  const uint32_t count = in.U32();
  const uint32_t stored_size = in.U32();
  const uint32_t raw_size = in.U32();
  const uint8_t host_size = in.U8();
  const uint8_t boot_id_size = in.U8();
  if (version != kSpoolVersion)
    return Bad(reason::kBadVersion, "version " + std::to_string(version) + ", expected 1");
  if ((flags & ~kKnownFlags) != 0)
    return Bad(reason::kBadVersion, "unknown flag bits " + std::to_string(flags));
  if (reserved != 0)
    return Bad(reason::kMalformed, "reserved header bytes are not zero");
  if (stored_size > kMaxFileBytes || raw_size > kMaxRawBodyBytes || count > kMaxRecords)
    return Bad(reason::kTooLarge, "header declares a body over the format's limits");
  if ((flags & kFlagZstdBody) == 0 && stored_size != raw_size)
    return Bad(reason::kMalformed, "uncompressed body with differing stored and raw sizes");
  if (host_size == 0 || host_size > kMaxHostBytes || boot_id_size == 0 ||
      boot_id_size > kMaxBootIdBytes) {
    return Bad(reason::kMalformed, "host or boot id length out of range");
  }
  // All terms are bounded far below 2^63 above, so the sum cannot overflow.
  const uint64_t total =
      uint64_t{kFixedHeaderSize} + host_size + boot_id_size + stored_size + kTrailerSize;
  if (bytes.size() < total) {
    return Bad(reason::kTruncated,
               std::to_string(bytes.size()) + " of " + std::to_string(total) + " bytes present");
  }
  if (bytes.size() > total) {
    return Bad(reason::kTrailingBytes,
               std::to_string(bytes.size() - total) + " bytes after the checksum");
  }
  const std::string_view covered = bytes.substr(0, total - kTrailerSize);
  if (Crc32(covered) != LoadLe(bytes.data() + covered.size(), 4))
    return Bad(reason::kBadChecksum, "whole-file crc32 mismatch");

  file.host = std::string(in.Bytes(host_size));
  file.boot_id = std::string(in.Bytes(boot_id_size));
  if (!IsValidHostName(file.host) || !IsValidBootId(file.boot_id))
    return Bad(reason::kMalformed, "host or boot id has characters outside the alphabet");
  const std::string_view stored = in.Bytes(stored_size);
  if (!in.ok())
    return Bad(reason::kMalformed, "header overruns the file");  // unreachable after total
  if ((flags & kFlagZstdBody) == 0) {
    EXPANSE_RETURN_IF_ERROR(DecodeRecords(stored, count, file.records));
    return file;
  }
  thread_local DecodeScratch scratch;
  Status status = Decompress(stored, raw_size, scratch);
  if (status.ok())
    status =
        DecodeRecords(std::string_view(scratch.buffer).substr(0, raw_size), count, file.records);
  if (scratch.buffer.size() > DecodeScratch::kKeepBytes)
    std::string().swap(scratch.buffer);
  EXPANSE_RETURN_IF_ERROR(status);
  return file;
}

}  // namespace expanse::spool
