#include "pystack/line_table.h"

#include <algorithm>
#include <cstdint>

namespace expanse::pystack {
namespace {

// Lines are positive ints; anything else came from a garbage table and means "unknown".
int AsLine(std::int64_t line) { return line > 0 && line <= INT32_MAX ? static_cast<int>(line) : 0; }

// 3.9: pairs of (unsigned byte increment, signed line increment); the line of an offset is
// the first line plus every line increment whose pair starts at or before it.
int LnotabLine(std::span<const std::uint8_t> table, int first_line, std::int64_t offset) {
  std::int64_t address = 0;
  std::int64_t line = first_line;
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    address += table[i];
    if (address > offset) {
      break;
    }
    line += static_cast<std::int8_t>(table[i + 1]);
  }
  return AsLine(line);
}

// 3.10: pairs of (byte length of a range, signed line delta), the delta -128 meaning "no
// line"; ranges of length 0 only move the line.
int LineTable310Line(std::span<const std::uint8_t> table, int first_line, std::int64_t offset) {
  std::int64_t range_end = 0;
  std::int64_t line = first_line;
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    const std::int64_t range_start = range_end;
    range_end += table[i];
    const auto delta = static_cast<std::int8_t>(table[i + 1]);
    const bool has_line = delta != -128;
    if (has_line) {
      line += delta;
    }
    if (range_end > range_start && offset < range_end) {
      return has_line ? AsLine(line) : 0;
    }
  }
  return 0;
}

// 3.11+ location table: each entry starts with a byte whose top bit is set, holding a code
// (bits 3-6) and the length of its range in code units minus one (bits 0-2); further bytes
// (top bit clear) hold varints whose meaning depends on the code.
class LocationReader {
 public:
  explicit LocationReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  // 6-bit little-endian groups, bit 6 set on all but the last.
  std::uint64_t Varint() {
    std::uint64_t value = 0;
    int shift = 0;
    while (position_ < bytes_.size()) {
      const std::uint8_t byte = bytes_[position_++];
      if (shift < 64) {
        value |= std::uint64_t{byte & 63u} << shift;
      }
      shift += 6;
      if ((byte & 64) == 0) {
        break;
      }
    }
    return value;
  }

  // Clamped so that adding many of them to a line cannot overflow; real deltas are tiny.
  std::int64_t SignedVarint() {
    constexpr std::uint64_t kMaxMagnitude = std::uint64_t{1} << 40;
    const std::uint64_t raw = Varint();
    const auto magnitude = static_cast<std::int64_t>(std::min(raw >> 1, kMaxMagnitude));
    return (raw & 1) != 0 ? -magnitude : magnitude;
  }

  bool AtEnd() const { return position_ >= bytes_.size(); }
  std::uint8_t Next() { return bytes_[position_++]; }

  // Moves to the next entry's first byte, skipping what an entry's code did not consume.
  void SkipToEntry() {
    while (position_ < bytes_.size() && (bytes_[position_] & 128) == 0) {
      ++position_;
    }
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t position_ = 0;
};

int LocationTableLine(std::span<const std::uint8_t> table, int first_line, std::int64_t offset) {
  constexpr int kNoColumns = 13;
  constexpr int kLong = 14;
  constexpr int kNoLocation = 15;
  constexpr int kOneLineFirst = 10;
  constexpr int kOneLineLast = 12;
  constexpr std::int64_t kCodeUnitBytes = 2;

  LocationReader reader(table);
  std::int64_t range_end = 0;
  std::int64_t line = first_line;
  reader.SkipToEntry();
  while (!reader.AtEnd()) {
    const std::uint8_t head = reader.Next();
    const int code = (head >> 3) & 15;
    range_end += ((head & 7) + 1) * kCodeUnitBytes;
    if (code == kNoColumns || code == kLong) {
      line += reader.SignedVarint();
      if (line > INT32_MAX || line < -std::int64_t{INT32_MAX}) {
        return 0;  // no real table gets here; stop before the sum could overflow
      }
    } else if (code >= kOneLineFirst && code <= kOneLineLast) {
      line += code - kOneLineFirst;
    }
    if (offset < range_end) {
      return code == kNoLocation ? 0 : AsLine(line);
    }
    reader.SkipToEntry();
  }
  return 0;
}

}  // namespace

int LineForOffset(LineTableKind kind, std::span<const std::uint8_t> table, int first_line,
                  std::int64_t byte_offset) {
  if (byte_offset < 0) {
    return AsLine(first_line);
  }
  switch (kind) {
    case LineTableKind::kLnotab:
      return LnotabLine(table, first_line, byte_offset);
    case LineTableKind::kLineTable310:
      return LineTable310Line(table, first_line, byte_offset);
    case LineTableKind::kLocationTable:
      return LocationTableLine(table, first_line, byte_offset);
  }
  return 0;
}

}  // namespace expanse::pystack
