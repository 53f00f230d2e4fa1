// Fuzzes the tsdb chunk codec (src/tsdb/chunk_codec.h). Properties:
//  - decoding arbitrary bytes never crashes and fails only with kDataLoss;
//  - the input reinterpreted as samples (sorted by time) encodes, and decodes back
//    bit-exactly, with and without zstd, both as raw doubles and as short decimals.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "tsdb/chunk_codec.h"

namespace {

void Require(bool condition) {
  if (!condition)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto decoded = expanse::tsdb::DecodeChunk(bytes);
  Require(decoded.ok() || decoded.status().code() == expanse::StatusCode::kDataLoss);

  std::vector<expanse::tsdb::Sample> samples(size / 16);
  for (size_t i = 0; i < samples.size(); ++i) {
    uint64_t t = 0;
    uint64_t v = 0;
    std::memcpy(&t, data + 16 * i, 8);
    std::memcpy(&v, data + 16 * i + 8, 8);
    // Small values and deltas are the interesting cases; keep some of both.
    samples[i] = {static_cast<int64_t>(i % 2 ? t : t % 100000), std::bit_cast<double>(v)};
  }
  if (samples.empty())
    return 0;
  std::stable_sort(samples.begin(), samples.end(),
                   [](const auto& a, const auto& b) { return a.t_ms < b.t_ms; });
  auto round_trip = [](const std::vector<expanse::tsdb::Sample>& in) {
    for (int level : {0, 1}) {
      auto encoded = expanse::tsdb::EncodeChunk(in, {.zstd_level = level});
      Require(encoded.ok());
      auto back = expanse::tsdb::DecodeChunk(*encoded);
      Require(back.ok() && back->size() == in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        Require((*back)[i].t_ms == in[i].t_ms);
        Require(std::bit_cast<uint64_t>((*back)[i].v) == std::bit_cast<uint64_t>(in[i].v));
      }
    }
  };
  round_trip(samples);
  // The same bits as decimal mantissas within +-2^53, scaled down by a power of two picked
  // by the top bits and shown as hundredths: the decimal encodings and byte planes of the
  // widths their deltas need.
  for (auto& sample : samples) {
    const auto bits = std::bit_cast<uint64_t>(sample.v);
    const auto mantissa = static_cast<int64_t>(bits % (uint64_t{1} << 54)) - (int64_t{1} << 53);
    sample.v = static_cast<double>(mantissa >> (bits >> 58)) / 100;
  }
  round_trip(samples);
  return 0;
}
