// Chunk codec: one series' run of samples <-> a self-describing, checksummed byte
// string (layout and constants: docs/formats/tsdb-chunk.md, tsdb/chunk_format.h).
//
// Timestamps are delta-of-delta varints. Values become integer mantissas with a shared
// decimal scale when that is lossless (delta or delta-of-delta, whichever is smaller, as
// varints or as byte planes, whichever compresses smaller), else XORed double bits. The
// body is then zstd-compressed when that makes it smaller.
// Decoding is bit-exact and treats its input as hostile: anything malformed is
// kDataLoss with reason "chunk_corrupt", never undefined behaviour.
#ifndef EXPANSE_TSDB_CHUNK_CODEC_H_
#define EXPANSE_TSDB_CHUNK_CODEC_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tsdb/chunk_format.h"
#include "tsdb/sample.h"

namespace expanse::tsdb {

struct ChunkHeader {
  TimestampEncoding timestamp_encoding = TimestampEncoding::kDeltaOfDelta;
  ValueEncoding value_encoding = ValueEncoding::kXorVarint;
  Compression compression = Compression::kNone;
  int decimal_scale = 0;
  // Decimal encodings only: 0 when the deltas are zigzag varints, else the width in bytes of
  // the byte planes that hold them instead (docs/formats/tsdb-chunk.md).
  int value_width = 0;
  uint32_t count = 0;
  int64_t first_t_ms = 0;
  int64_t last_t_ms = 0;
  uint32_t body_size = 0;  // stored (possibly compressed) body bytes after the header
};

struct ChunkEncodeOptions {
  // zstd level for the body; 0 leaves the body uncompressed.
  int zstd_level = 3;
  // Whether decimal deltas may be stored as byte planes when that comes out smaller (off:
  // always varints, as builds before them wrote; for comparisons).
  bool byte_planes = true;
};

// Requires 1..kMaxChunkSamples samples with non-decreasing timestamps (kInvalidArgument
// otherwise).
Result<std::string> EncodeChunk(std::span<const Sample> samples,
                                const ChunkEncodeOptions& options = {});

// Checks magic, version, sizes and checksum; does not decode the body.
Result<ChunkHeader> ReadChunkHeader(std::string_view chunk);

Result<std::vector<Sample>> DecodeChunk(std::string_view chunk);

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_CHUNK_CODEC_H_
