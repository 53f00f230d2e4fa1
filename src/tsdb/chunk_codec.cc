#include "tsdb/chunk_codec.h"

#include <zlib.h>
#include <zstd.h>

#include <bit>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "tsdb/decimal.h"
#include "tsdb/varint.h"

namespace expanse::tsdb {
namespace {

Status Corrupt(std::string message) {
  return DataLossError("tsdb chunk: " + std::move(message)).WithReason("chunk_corrupt");
}

uint32_t Crc(std::string_view head, std::string_view body) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(head.data()), static_cast<uInt>(head.size()));
  crc = crc32(crc, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
  return static_cast<uint32_t>(crc);
}

// Delta-of-delta over wrapping uint64 arithmetic: defined for any int64 input, and the
// decoder's wrapping inverse restores the exact values. Every delta is divided by
// `divisor` first (it divides all of them exactly).
void PutDeltaOfDelta(std::string& out, std::span<const uint64_t> values, uint64_t divisor = 1) {
  int64_t prev_delta = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    const int64_t delta = static_cast<int64_t>(values[i] - values[i - 1]) / int64_t(divisor);
    PutVarint(out, ZigZag(static_cast<uint64_t>(delta) - static_cast<uint64_t>(prev_delta)));
    prev_delta = delta;
  }
}

void PutDelta(std::string& out, std::span<const uint64_t> values, uint64_t divisor = 1) {
  for (size_t i = 1; i < values.size(); ++i) {
    const int64_t delta = static_cast<int64_t>(values[i] - values[i - 1]) / int64_t(divisor);
    PutVarint(out, ZigZag(static_cast<uint64_t>(delta)));
  }
}

// The greatest common divisor of the mantissas' deltas (1 when they share none or are
// all zero). Mantissas are within +-2^53, so their deltas fit an int64.
uint64_t DeltaDivisor(std::span<const int64_t> mantissas) {
  uint64_t g = 0;
  for (size_t i = 1; i < mantissas.size() && g != 1; ++i) {
    const int64_t d = mantissas[i] - mantissas[i - 1];
    g = std::gcd(g, static_cast<uint64_t>(d < 0 ? -d : d));
  }
  return g == 0 ? 1 : g;
}

std::string EncodeHeader(const ChunkHeader& h) {
  std::string out(reinterpret_cast<const char*>(kChunkMagic), 4);
  out.push_back(static_cast<char>(kChunkVersion));
  out.push_back(static_cast<char>(h.timestamp_encoding));
  out.push_back(static_cast<char>(h.value_encoding));
  out.push_back(static_cast<char>(h.compression));
  out.push_back(static_cast<char>(h.decimal_scale));
  out.append(3, '\0');
  PutFixed32(out, h.count);
  PutFixed64(out, static_cast<uint64_t>(h.first_t_ms));
  PutFixed64(out, static_cast<uint64_t>(h.last_t_ms));
  PutFixed32(out, h.body_size);
  return out;  // kChunkCrcOffset bytes; the CRC follows
}

// Values section of the body for the chosen encoding; sets header fields.
std::string EncodeValues(std::span<const Sample> samples, ChunkHeader& header) {
  std::vector<double> values(samples.size());
  for (size_t i = 0; i < samples.size(); ++i)
    values[i] = samples[i].v;
  std::string out;
  if (std::optional<DecimalRun> run = ToDecimal(values)) {
    std::vector<uint64_t> bits(run->mantissas.begin(), run->mantissas.end());
    const uint64_t divisor = DeltaDivisor(run->mantissas);
    std::string delta;
    std::string delta_of_delta;
    PutVarint(delta, ZigZag(bits[0]));
    PutVarint(delta_of_delta, ZigZag(bits[0]));
    if (divisor > 1) {
      PutVarint(delta, divisor);
      PutVarint(delta_of_delta, divisor);
    }
    PutDelta(delta, bits, divisor);
    PutDeltaOfDelta(delta_of_delta, bits, divisor);
    header.decimal_scale = run->scale;
    const bool scaled = divisor > 1;
    if (delta_of_delta.size() < delta.size()) {
      header.value_encoding =
          scaled ? ValueEncoding::kDecimalDeltaOfDeltaScaled : ValueEncoding::kDecimalDeltaOfDelta;
      return delta_of_delta;
    }
    header.value_encoding =
        scaled ? ValueEncoding::kDecimalDeltaScaled : ValueEncoding::kDecimalDelta;
    return delta;
  }
  header.value_encoding = ValueEncoding::kXorVarint;
  uint64_t prev = std::bit_cast<uint64_t>(values[0]);
  PutFixed64(out, prev);
  for (size_t i = 1; i < values.size(); ++i) {
    const uint64_t bits = std::bit_cast<uint64_t>(values[i]);
    PutVarint(out, bits ^ prev);
    prev = bits;
  }
  return out;
}

// Reads the `count` values (the first given) of a delta or delta-of-delta sequence whose
// deltas were divided by `divisor`. Wrapping arithmetic: hostile input decodes to some
// values (range-checked by the caller), never to undefined behaviour.
bool ReadDeltas(ByteReader& in, uint64_t first, bool of_delta, uint32_t count,
                std::vector<uint64_t>& out, uint64_t divisor = 1) {
  out.push_back(first);
  uint64_t delta = 0;
  for (uint32_t i = 1; i < count && in.ok(); ++i) {
    const uint64_t d = UnZigZag(in.Varint());
    delta = of_delta ? delta + d : d;
    out.push_back(out.back() + delta * divisor);
  }
  return in.ok();
}

bool IsScaled(ValueEncoding e) {
  return e == ValueEncoding::kDecimalDeltaScaled || e == ValueEncoding::kDecimalDeltaOfDeltaScaled;
}

}  // namespace

Result<std::string> EncodeChunk(std::span<const Sample> samples,
                                const ChunkEncodeOptions& options) {
  if (samples.empty() || samples.size() > kMaxChunkSamples) {
    return InvalidArgumentError("tsdb chunk: " + std::to_string(samples.size()) +
                                " samples; a chunk holds 1 to " + std::to_string(kMaxChunkSamples));
  }
  std::vector<uint64_t> times(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i > 0 && samples[i].t_ms < samples[i - 1].t_ms) {
      return InvalidArgumentError("tsdb chunk: timestamps go backwards at sample " +
                                  std::to_string(i));
    }
    times[i] = static_cast<uint64_t>(samples[i].t_ms);
  }
  ChunkHeader header;
  header.count = static_cast<uint32_t>(samples.size());
  header.first_t_ms = samples.front().t_ms;
  header.last_t_ms = samples.back().t_ms;
  std::string body;
  PutDeltaOfDelta(body, times);
  body += EncodeValues(samples, header);

  if (options.zstd_level != 0) {
    std::string packed(ZSTD_compressBound(body.size()), '\0');
    const size_t n =
        ZSTD_compress(packed.data(), packed.size(), body.data(), body.size(), options.zstd_level);
    if (!ZSTD_isError(n) && n < body.size()) {
      packed.resize(n);
      body = std::move(packed);
      header.compression = Compression::kZstd;
    }
  }
  header.body_size = static_cast<uint32_t>(body.size());
  std::string out = EncodeHeader(header);
  PutFixed32(out, Crc(out, body));
  out += body;
  return out;
}

Result<ChunkHeader> ReadChunkHeader(std::string_view chunk) {
  if (chunk.size() < kChunkHeaderSize) {
    return Corrupt(std::to_string(chunk.size()) + " bytes is shorter than the " +
                   std::to_string(kChunkHeaderSize) + "-byte header");
  }
  if (chunk.substr(0, 4) != std::string_view(reinterpret_cast<const char*>(kChunkMagic), 4)) {
    return Corrupt("bad magic (not a chunk)");
  }
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(chunk[i]); };
  if (byte(4) != kChunkVersion) {
    return Corrupt("unsupported version " + std::to_string(byte(4)) + " (this build reads " +
                   std::to_string(kChunkVersion) + ")");
  }
  ChunkHeader h;
  h.timestamp_encoding = static_cast<TimestampEncoding>(byte(5));
  h.value_encoding = static_cast<ValueEncoding>(byte(6));
  h.compression = static_cast<Compression>(byte(7));
  h.decimal_scale = byte(8);
  h.count = LoadFixed32(chunk.data() + 12);
  h.first_t_ms = static_cast<int64_t>(LoadFixed64(chunk.data() + 16));
  h.last_t_ms = static_cast<int64_t>(LoadFixed64(chunk.data() + 24));
  h.body_size = LoadFixed32(chunk.data() + 32);
  if (chunk.size() - kChunkHeaderSize != h.body_size) {
    return Corrupt("body is " + std::to_string(chunk.size() - kChunkHeaderSize) +
                   " bytes, header says " + std::to_string(h.body_size) + " (truncated?)");
  }
  const uint32_t stored_crc = LoadFixed32(chunk.data() + kChunkCrcOffset);
  if (Crc(chunk.substr(0, kChunkCrcOffset), chunk.substr(kChunkHeaderSize)) != stored_crc) {
    return Corrupt("checksum mismatch");
  }
  if (h.timestamp_encoding != TimestampEncoding::kDeltaOfDelta ||
      (h.value_encoding != ValueEncoding::kDecimalDelta &&
       h.value_encoding != ValueEncoding::kDecimalDeltaOfDelta &&
       h.value_encoding != ValueEncoding::kXorVarint && !IsScaled(h.value_encoding)) ||
      (h.compression != Compression::kNone && h.compression != Compression::kZstd)) {
    return Corrupt("unknown encoding " + std::to_string(byte(5)) + "/" + std::to_string(byte(6)) +
                   "/" + std::to_string(byte(7)));
  }
  if (h.decimal_scale > kMaxDecimalScale || byte(9) != 0 || byte(10) != 0 || byte(11) != 0) {
    return Corrupt("bad decimal scale or reserved bytes");
  }
  if (h.count == 0 || h.count > kMaxChunkSamples || h.last_t_ms < h.first_t_ms) {
    return Corrupt("bad count " + std::to_string(h.count) + " or time range");
  }
  return h;
}

Result<std::vector<Sample>> DecodeChunk(std::string_view chunk) {
  EXPANSE_ASSIGN_OR_RETURN(const ChunkHeader h, ReadChunkHeader(chunk));
  std::string_view body = chunk.substr(kChunkHeaderSize);
  std::string unpacked;
  if (h.compression == Compression::kZstd) {
    const unsigned long long size = ZSTD_getFrameContentSize(body.data(), body.size());
    if (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR ||
        size > uint64_t{h.count} * kMaxBodyBytesPerSample + 8) {
      return Corrupt("bad zstd frame size");
    }
    unpacked.resize(size);
    const size_t n = ZSTD_decompress(unpacked.data(), unpacked.size(), body.data(), body.size());
    if (ZSTD_isError(n) || n != size)
      return Corrupt("zstd frame does not decompress");
    body = unpacked;
  }
  ByteReader in(body);
  std::vector<uint64_t> times;
  times.reserve(h.count);
  if (!ReadDeltas(in, static_cast<uint64_t>(h.first_t_ms), true, h.count, times)) {
    return Corrupt("timestamps truncated");
  }
  std::vector<uint64_t> values;
  values.reserve(h.count);
  bool values_ok = false;
  if (h.value_encoding == ValueEncoding::kXorVarint) {
    values.push_back(in.Fixed64());
    for (uint32_t i = 1; i < h.count && in.ok(); ++i) {
      values.push_back(values.back() ^ in.Varint());
    }
    values_ok = in.ok();
  } else {
    const uint64_t first = UnZigZag(in.Varint());
    uint64_t divisor = 1;
    if (IsScaled(h.value_encoding)) {
      divisor = in.Varint();
      if (in.ok() && (divisor < 2 || divisor > uint64_t{2} * kMaxDecimalMantissa))
        return Corrupt("bad delta divisor " + std::to_string(divisor));
    }
    const bool of_delta = h.value_encoding == ValueEncoding::kDecimalDeltaOfDelta ||
                          h.value_encoding == ValueEncoding::kDecimalDeltaOfDeltaScaled;
    values_ok = ReadDeltas(in, first, of_delta, h.count, values, divisor);
  }
  if (!values_ok)
    return Corrupt("values truncated");
  if (!in.empty())
    return Corrupt(std::to_string(in.remaining()) + " trailing body bytes");
  if (static_cast<int64_t>(times.back()) != h.last_t_ms) {
    return Corrupt("last timestamp does not match the header");
  }
  std::vector<Sample> samples(h.count);
  const double divisor = PowerOfTen(h.decimal_scale);
  for (uint32_t i = 0; i < h.count; ++i) {
    const auto t = static_cast<int64_t>(times[i]);
    if (i > 0 && t < samples[i - 1].t_ms)
      return Corrupt("timestamps go backwards");
    samples[i].t_ms = t;
    if (h.value_encoding == ValueEncoding::kXorVarint) {
      samples[i].v = std::bit_cast<double>(values[i]);
    } else {
      const auto mantissa = static_cast<int64_t>(values[i]);
      if (mantissa > kMaxDecimalMantissa || mantissa < -kMaxDecimalMantissa) {
        return Corrupt("decimal mantissa out of range");
      }
      samples[i].v = static_cast<double>(mantissa) / divisor;
    }
  }
  return samples;
}

}  // namespace expanse::tsdb
