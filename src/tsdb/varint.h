// Internal to the tsdb module: little-endian fixed-width integers, LEB128 varints and
// zigzag mapping, with a bounds-checked reader for untrusted bytes.
#ifndef EXPANSE_TSDB_VARINT_H_
#define EXPANSE_TSDB_VARINT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace expanse::tsdb {

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

inline void PutFixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutFixed64(std::string& out, uint64_t v) {
  char bytes[8];  // one append instead of eight: the WAL writes two per sample
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(v >> (8 * i));
  out.append(bytes, 8);
}
inline uint32_t LoadFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint64_t LoadFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Reads from a byte range it never leaves. A failed read leaves ok() false for good,
// so callers may check once after a sequence of reads.
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : rest_(bytes) {}

  bool ok() const { return ok_; }
  bool empty() const { return rest_.empty(); }
  size_t remaining() const { return rest_.size(); }

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
  uint32_t Fixed32() {
    if (rest_.size() < 4)
      return static_cast<uint32_t>(Fail());
    const uint32_t v = LoadFixed32(rest_.data());
    rest_.remove_prefix(4);
    return v;
  }
  uint64_t Fixed64() {
    if (rest_.size() < 8)
      return Fail();
    const uint64_t v = LoadFixed64(rest_.data());
    rest_.remove_prefix(8);
    return v;
  }
  std::string_view Bytes(size_t n) {
    if (rest_.size() < n) {
      Fail();
      return {};
    }
    std::string_view v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return v;
  }

 private:
  uint64_t Fail() {
    ok_ = false;
    rest_ = {};
    return 0;
  }

  std::string_view rest_;
  bool ok_ = true;
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_VARINT_H_
