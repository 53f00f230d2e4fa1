#include "pystack/python_string.h"

#include <algorithm>
#include <array>
#include <vector>

#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::uint32_t kMaxHeaderBytes = 256;
constexpr std::string_view kCut = "...";

// Appends `code_point` as UTF-8 unless that would pass `max_bytes`; false when it did not fit.
bool AppendUtf8(std::uint32_t code_point, std::size_t max_bytes, std::string& out) {
  if ((code_point >= 0xd800 && code_point <= 0xdfff) || code_point > 0x10ffff) {
    code_point = '?';
  }
  char encoded[4];
  std::size_t length = 0;
  if (code_point < 0x80) {
    encoded[length++] = static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    encoded[length++] = static_cast<char>(0xc0 | (code_point >> 6));
    encoded[length++] = static_cast<char>(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    encoded[length++] = static_cast<char>(0xe0 | (code_point >> 12));
    encoded[length++] = static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    encoded[length++] = static_cast<char>(0x80 | (code_point & 0x3f));
  } else {
    encoded[length++] = static_cast<char>(0xf0 | (code_point >> 18));
    encoded[length++] = static_cast<char>(0x80 | ((code_point >> 12) & 0x3f));
    encoded[length++] = static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    encoded[length++] = static_cast<char>(0x80 | (code_point & 0x3f));
  }
  if (out.size() + length > max_bytes) {
    return false;
  }
  out.append(encoded, length);
  return true;
}

}  // namespace

Result<std::string> ReadPythonString(RemoteMemory& memory, const PythonLayout& layout,
                                     std::uint64_t address, std::uint64_t str_type,
                                     std::size_t max_bytes) {
  if (!PlausiblePointer(address)) {
    return InconsistentRead(Format("str pointer {:#x} is not plausible", address));
  }
  const std::uint32_t header_size =
      std::max({layout.unicode_state + 4, layout.unicode_length + 8, layout.object_type + 8});
  if (header_size > kMaxHeaderBytes) {
    return InternalError("str header fields lie past the header");
  }
  std::array<std::uint8_t, kMaxHeaderBytes> header{};
  const std::span<std::uint8_t> header_bytes(header.data(), header_size);
  EXPANSE_RETURN_IF_ERROR(memory.ReadInto(address, header_bytes));
  if (str_type != 0 && LoadU64(header_bytes, layout.object_type) != str_type) {
    return InconsistentRead(Format("object at {:#x} is not a str", address));
  }
  const std::uint32_t state = LoadU32(header_bytes, layout.unicode_state);
  const std::uint32_t kind = (state >> 2) & 7;
  const bool compact = ((state >> 5) & 1) != 0;
  const bool ascii = ((state >> 6) & 1) != 0;
  const auto length = static_cast<std::int64_t>(LoadU64(header_bytes, layout.unicode_length));
  if ((kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1) || length < 0) {
    return InconsistentRead(
        Format("str at {:#x} has kind {} and length {}", address, kind, length));
  }
  if (!compact) {
    return std::string();
  }
  // Every character takes at least one UTF-8 byte, so no more than max_bytes (plus one, to
  // see that the string goes on) are worth reading.
  const std::size_t characters =
      static_cast<std::size_t>(std::min<std::int64_t>(length, max_bytes + 1));
  std::vector<std::uint8_t> data(characters * kind);
  const std::uint64_t data_address =
      address + (ascii ? layout.unicode_ascii_data : layout.unicode_compact_data);
  EXPANSE_RETURN_IF_ERROR(memory.ReadInto(data_address, data));

  std::string out;
  out.reserve(std::min<std::size_t>(characters, max_bytes));
  bool cut = characters < static_cast<std::size_t>(length);
  for (std::size_t i = 0; i < characters; ++i) {
    std::uint32_t code_point = 0;
    if (kind == 1) {
      code_point = data[i];
    } else if (kind == 2) {
      code_point = data[2 * i] | (std::uint32_t{data[2 * i + 1]} << 8);
    } else {
      code_point = data[4 * i] | (std::uint32_t{data[4 * i + 1]} << 8) |
                   (std::uint32_t{data[4 * i + 2]} << 16) | (std::uint32_t{data[4 * i + 3]} << 24);
    }
    if (ascii && code_point >= 0x80) {
      code_point = '?';
    }
    if (!AppendUtf8(code_point, max_bytes, out)) {
      cut = true;
      break;
    }
  }
  if (cut) {
    out += kCut;
  }
  return out;
}

}  // namespace expanse::pystack
