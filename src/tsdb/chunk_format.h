// Constants of the sealed-chunk byte layout (docs/formats/tsdb-chunk.md). Every
// number that the format fixes lives here and nowhere else.
#ifndef EXPANSE_TSDB_CHUNK_FORMAT_H_
#define EXPANSE_TSDB_CHUNK_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace expanse::tsdb {

// "EXTC" read as little-endian bytes 'E','X','T','C'.
inline constexpr uint8_t kChunkMagic[4] = {'E', 'X', 'T', 'C'};
inline constexpr uint8_t kChunkVersion = 1;
// magic 4, version 1, timestamp encoding 1, value encoding 1, compression 1,
// decimal scale 1, value width 1, reserved 2, count 4, first_t 8, last_t 8, body length 4, crc32 4.
inline constexpr size_t kChunkHeaderSize = 40;
inline constexpr size_t kChunkCrcOffset = 36;
// A chunk never holds more samples than this; it bounds the decoder's allocations.
inline constexpr uint32_t kMaxChunkSamples = 1u << 20;
// Largest decimal scale (digits after the point) the decimal encoding uses. 10^15 < 2^53,
// so every power of ten up to it is an exact double.
inline constexpr int kMaxDecimalScale = 15;
// Mantissas must stay within the doubles' exact-integer range.
inline constexpr int64_t kMaxDecimalMantissa = int64_t{1} << 53;
// Widest byte planes of a decimal chunk's deltas (a zigzag uint64).
inline constexpr int kMaxValueWidth = 8;
// Upper bound of one encoded sample in the body: two varints of at most 10 bytes (or a
// varint and a value of at most kMaxValueWidth bytes in planes).
inline constexpr size_t kMaxBodyBytesPerSample = 20;

enum class TimestampEncoding : uint8_t {
  // First delta, then delta-of-delta, all zigzag varints; 1 byte per sample at a fixed rate.
  kDeltaOfDelta = 1,
};

enum class ValueEncoding : uint8_t {
  // value = mantissa / 10^scale, exactly; mantissas as zigzag varint deltas.
  kDecimalDelta = 1,
  // As kDecimalDelta, but delta-of-delta: counters that grow at a steady rate.
  kDecimalDeltaOfDelta = 2,
  // Bit patterns XORed with the previous sample's, as varints: the lossless fallback
  // (-0.0, inf, NaN, values with more than 15 decimals or beyond 2^53).
  kXorVarint = 3,
  // As kDecimalDelta and kDecimalDeltaOfDelta, with every delta a multiple of a common
  // divisor stored once and divided out: counters that move in whole steps (energy in
  // 10 mJ, clocks in 15 MHz) spend no bits on the step.
  kDecimalDeltaScaled = 4,
  kDecimalDeltaOfDeltaScaled = 5,
};

enum class Compression : uint8_t {
  kNone = 0,
  kZstd = 1,  // the whole body is one zstd frame with its content size recorded
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_CHUNK_FORMAT_H_
