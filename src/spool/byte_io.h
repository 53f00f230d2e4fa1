// Internal to the spool module: little-endian fixed-width integers and a bounds-checked
// reader for untrusted bytes. (tsdb has its own copy; modules do not share internals.)
#ifndef EXPANSE_SPOOL_BYTE_IO_H_
#define EXPANSE_SPOOL_BYTE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace expanse::spool {

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
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(v >> (8 * i)));
}
inline uint64_t LoadLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Reads from a byte range it never leaves. A failed read leaves ok() false for good, so
// callers may check once after a sequence of reads.
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
  uint64_t Fixed(int bytes) {
    if (rest_.size() < static_cast<size_t>(bytes)) {
      Fail();
      return 0;
    }
    const uint64_t v = LoadLe(rest_.data(), bytes);
    rest_.remove_prefix(static_cast<size_t>(bytes));
    return v;
  }
  void Fail() {
    ok_ = false;
    rest_ = {};
  }

  std::string_view rest_;
  bool ok_ = true;
};

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_BYTE_IO_H_
