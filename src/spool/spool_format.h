// Constants of the spool file format (docs/formats/spool.md). Every number the format fixes
// lives here and nowhere else; the encoder, the decoder and the fuzzer share them.
#ifndef EXPANSE_SPOOL_SPOOL_FORMAT_H_
#define EXPANSE_SPOOL_SPOOL_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace expanse::spool {

inline constexpr char kSpoolMagic[4] = {'E', 'X', 'S', 'P'};
inline constexpr uint8_t kSpoolVersion = 1;

// Header flag bits; a v1 reader refuses any other bit, so a later writer cannot slip a
// feature past an old controller.
inline constexpr uint8_t kFlagZstdBody = 0x01;
inline constexpr uint8_t kKnownFlags = kFlagZstdBody;

// magic 4, version 1, flags 1, reserved 2, sequence 8, created_ms 8, record count 4,
// stored body length 4, raw body length 4, host length 1, boot id length 1.
inline constexpr size_t kFixedHeaderSize = 38;
inline constexpr size_t kTrailerSize = 4;  // crc32 of every byte before it

// Per record in the raw body: kind length 1, payload length 4, crc32 4, plus the bytes.
inline constexpr size_t kRecordOverhead = 9;

// Limits. They bound every allocation the decoder makes from hostile lengths.
inline constexpr size_t kMaxHostBytes = 64;
inline constexpr size_t kMaxBootIdBytes = 64;
inline constexpr size_t kMaxKindBytes = 32;
inline constexpr uint32_t kMaxFileBytes = 32u << 20;     // whole file as stored
inline constexpr uint32_t kMaxRawBodyBytes = 64u << 20;  // hard decompression cap
inline constexpr uint32_t kMaxRecordPayloadBytes = 8u << 20;
inline constexpr uint32_t kMaxRecords = 1u << 20;

// Names inside a host directory (see spool_names.h for the patterns).
inline constexpr char kSpoolFileSuffix[] = ".spool";
inline constexpr char kTempPrefix[] = ".tmp-";
inline constexpr char kHealthFileName[] = "health.rec";
inline constexpr char kQuarantineDirName[] = ".quarantine";
// The one record kind a health file holds.
inline constexpr char kHealthRecordKind[] = "worker_health";

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_SPOOL_FORMAT_H_
