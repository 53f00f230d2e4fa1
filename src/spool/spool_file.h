// A spool file: one batch of records a worker hands to the controller, and its byte
// encoding (docs/formats/spool.md). Encode and Decode are pure; Decode treats its input as
// hostile: every length is bounded before it is used and decompression has a hard cap.
#ifndef EXPANSE_SPOOL_SPOOL_FILE_H_
#define EXPANSE_SPOOL_SPOOL_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::spool {

// One record. The payload is opaque here (typically JSON another module produced).
struct SpoolRecord {
  std::string kind;  // IsValidKind(), e.g. "gpu_series", "job_event"
  std::string payload;

  friend bool operator==(const SpoolRecord&, const SpoolRecord&) = default;
};

struct SpoolFile {
  std::string host;        // IsValidHostName(); must equal the host directory it sits in
  std::string boot_id;     // IsValidBootId()
  uint64_t sequence = 0;   // per (host, boot_id), increasing from 1
  int64_t created_ms = 0;  // the writer's wall clock, Unix epoch ms
  std::vector<SpoolRecord> records;

  friend bool operator==(const SpoolFile&, const SpoolFile&) = default;
};

struct EncodeOptions {
  // 0 stores the body uncompressed; otherwise the zstd level, and the body is stored
  // compressed only when that makes it smaller. On sampler JSON, level 1 is as small as 3
  // and faster to write and to read back.
  int zstd_level = 1;
};

// kInvalidArgument (reason "spool_invalid_file") when a name or kind is invalid, a payload
// exceeds kMaxRecordPayloadBytes, or the file would exceed the format's limits.
Result<std::string> EncodeSpoolFile(const SpoolFile& file, const EncodeOptions& options = {});

// kDataLoss with a reason from reasons.h (bad_magic, bad_version, truncated, trailing_bytes,
// bad_checksum, too_large, malformed) for anything that is not a whole, intact v1 file.
Result<SpoolFile> DecodeSpoolFile(std::string_view bytes);

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_SPOOL_FILE_H_
