#include "pystack/code_cache.h"

#include <algorithm>
#include <array>

#include "pystack/python_string.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::size_t kMaxCodeHeader = 4096;

// The bytes of the bytes object at `address`, or an empty table when it is larger than
// `max_bytes` (its line numbers then read as 0).
Result<std::vector<std::uint8_t>> ReadLineTable(RemoteMemory& memory, const InterpreterInfo& info,
                                                std::uint64_t address, std::size_t max_bytes) {
  const PythonLayout& layout = info.layout;
  if (!PlausiblePointer(address)) {
    return InconsistentRead(Format("line table pointer {:#x} is not plausible", address));
  }
  std::array<std::uint8_t, 64> header{};
  const std::size_t header_size = std::max(layout.bytes_size, layout.object_type) + 8;
  if (header_size > header.size()) {
    return InternalError("bytes header fields lie past the header");
  }
  const std::span<std::uint8_t> header_bytes(header.data(), header_size);
  EXPANSE_RETURN_IF_ERROR(memory.ReadInto(address, header_bytes));
  if (info.bytes_type != 0 && LoadU64(header_bytes, layout.object_type) != info.bytes_type) {
    return InconsistentRead(Format("line table at {:#x} is not a bytes object", address));
  }
  const auto size = static_cast<std::int64_t>(LoadU64(header_bytes, layout.bytes_size));
  if (size < 0) {
    return InconsistentRead(Format("bytes object at {:#x} has size {}", address, size));
  }
  if (static_cast<std::uint64_t>(size) > max_bytes) {
    return std::vector<std::uint8_t>();
  }
  std::vector<std::uint8_t> table(static_cast<std::size_t>(size));
  EXPANSE_RETURN_IF_ERROR(memory.ReadInto(address + layout.bytes_data, table));
  return table;
}

}  // namespace

Result<const CodeInfo*> CodeCache::Get(RemoteMemory& memory, const InterpreterInfo& info,
                                       const NativeReaderLimits& limits, std::uint64_t address) {
  const PythonLayout& layout = info.layout;
  if (!PlausiblePointer(address)) {
    return InconsistentRead(Format("code pointer {:#x} is not plausible", address));
  }
  const std::size_t header_size = layout.CodeReadSize();
  if (header_size > kMaxCodeHeader) {
    return InternalError("code object fields lie past 4096 bytes");
  }
  std::array<std::uint8_t, kMaxCodeHeader> buffer;
  const std::span<std::uint8_t> header(buffer.data(), header_size);
  EXPANSE_RETURN_IF_ERROR(memory.ReadInto(address, header));
  if (info.code_type != 0 && LoadU64(header, layout.object_type) != info.code_type) {
    return InconsistentRead(Format("object at {:#x} is not a code object", address));
  }
  const std::uint32_t function_field =
      layout.code_qualname != kNoField ? layout.code_qualname : layout.code_name;
  const Key key{LoadU64(header, layout.code_filename), LoadU64(header, function_field),
                LoadU64(header, layout.code_line_table), LoadU32(header, layout.code_first_line)};
  if (const auto it = entries_.find(address); it != entries_.end() && it->second.key == key) {
    return &it->second.info;
  }

  CodeInfo decoded;
  EXPANSE_ASSIGN_OR_RETURN(decoded.file, ReadPythonString(memory, layout, key.filename,
                                                          info.str_type, limits.max_string_bytes));
  EXPANSE_ASSIGN_OR_RETURN(
      decoded.function,
      ReadPythonString(memory, layout, key.name, info.str_type, limits.max_string_bytes));
  EXPANSE_ASSIGN_OR_RETURN(
      decoded.line_table, ReadLineTable(memory, info, key.line_table, limits.max_line_table_bytes));
  decoded.first_line = static_cast<int>(key.first_line);
  if (entries_.size() >= max_entries_) {
    // Dropping everything keeps this simple and bounded; a steady program refills it at once.
    entries_.clear();
  }
  Entry& entry = entries_[address];
  entry = Entry{key, std::move(decoded)};
  return &entry.info;
}

}  // namespace expanse::pystack
