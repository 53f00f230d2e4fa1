// Little-endian fixed-width integers, LEB128 varints and zigzag mapping for our binary formats
// (spool files, the outbox, the telemetry WAL and chunks), with a bounds-checked reader for
// untrusted bytes. One copy for every format, so an encoding fix lands everywhere.
#ifndef EXPANSE_CORE_BYTES_H_
#define EXPANSE_CORE_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace expanse::bytes {

inline void PutU8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
inline void PutU16(std::string& out, uint16_t v) {
  for (int i = 0; i < 2; ++i)
    out.push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutU64(std::string& out, uint64_t v) {
  char bytes[8];  // one append instead of eight: the WAL writes two per sample
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(v >> (8 * i));
  out.append(bytes, 8);
}

// The `width`-byte little-endian integer at `p` (width 1..8); the caller checked the bounds.
inline uint64_t LoadLe(const char* p, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint32_t LoadU32(const char* p) { return static_cast<uint32_t>(LoadLe(p, 4)); }
inline uint64_t LoadU64(const char* p) { return LoadLe(p, 8); }

// Zigzag maps small magnitudes of either sign to small unsigned values. Works on the
// two's-complement bits, so it is defined for every int64 (no signed overflow).
inline uint64_t ZigZag(uint64_t v) { return (v << 1) ^ (0 - (v >> 63)); }
inline uint64_t UnZigZag(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }

inline void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads from a byte range it never leaves. A failed read leaves ok() false for good (and
// returns 0 or an empty view), so callers may check once after a sequence of reads.
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : rest_(bytes) {}

  bool ok() const { return ok_; }
  bool empty() const { return rest_.empty(); }
  size_t remaining() const { return rest_.size(); }

  uint8_t U8() { return static_cast<uint8_t>(Fixed(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Fixed(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Fixed(4)); }
  uint64_t U64() { return Fixed(8); }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty())
        return Fail();
      const auto byte = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      // The tenth byte may only carry the top bit of a 64-bit value.
      if (shift == 63 && byte > 1)
        return Fail();
      v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0)
        return v;
    }
    return Fail();
  }
  std::string_view Bytes(size_t n) {
    if (rest_.size() < n) {
      Fail();
      return {};
    }
    const std::string_view v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return v;
  }

 private:
  uint64_t Fixed(int width) {
    if (rest_.size() < static_cast<size_t>(width))
      return Fail();
    const uint64_t v = LoadLe(rest_.data(), width);
    rest_.remove_prefix(static_cast<size_t>(width));
    return v;
  }
  uint64_t Fail() {
    ok_ = false;
    rest_ = {};
    return 0;
  }

  std::string_view rest_;
  bool ok_ = true;
};

}  // namespace expanse::bytes

#endif  // EXPANSE_CORE_BYTES_H_
