#include "pystack/code_cache.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

#include "pystack/python_string.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::size_t kMaxCodeHeader = 4096;
// What an entry costs beyond its strings and table: the list node, the index slot and the
// remembered lines, roughly.
constexpr std::size_t kEntryOverhead = 512;

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

std::optional<int> CodeInfo::RememberedLine(std::int64_t byte_offset) const {
  for (const auto& [offset, line] : lines_) {
    if (offset == byte_offset) {
      return line;
    }
  }
  return std::nullopt;
}

void CodeInfo::RememberLine(std::int64_t byte_offset, int line) {
  if (lines_.size() < kMaxRememberedLines) {
    lines_.emplace_back(byte_offset, line);
    return;
  }
  // Full: overwrite in turn. A function busy at more places than this just decodes more.
  lines_[next_slot_] = {byte_offset, line};
  next_slot_ = (next_slot_ + 1) % kMaxRememberedLines;
}

bool CodeCacheBudget::Take(std::size_t bytes) {
  if (bytes > max_bytes_ - std::min(used_, max_bytes_)) {
    return false;
  }
  used_ += bytes;
  return true;
}

CodeCache::CodeCache(CodeCache&& other) noexcept
    : max_entries_(other.max_entries_),
      max_bytes_(other.max_bytes_),
      shared_(other.shared_),
      lru_(std::move(other.lru_)),
      index_(std::move(other.index_)),
      bytes_(std::exchange(other.bytes_, 0)),
      evictions_(other.evictions_),
      uncached_(other.uncached_) {
  other.lru_.clear();
  other.index_.clear();
}

CodeCache& CodeCache::operator=(CodeCache&& other) noexcept {
  if (this != &other) {
    Clear();
    max_entries_ = other.max_entries_;
    max_bytes_ = other.max_bytes_;
    shared_ = other.shared_;
    lru_ = std::move(other.lru_);
    index_ = std::move(other.index_);
    bytes_ = std::exchange(other.bytes_, 0);
    evictions_ = other.evictions_;
    uncached_ = other.uncached_;
    other.lru_.clear();
    other.index_.clear();
  }
  return *this;
}

void CodeCache::Clear() {
  if (shared_ != nullptr) {
    shared_->Give(bytes_);
  }
  bytes_ = 0;
  lru_.clear();
  index_.clear();
}

void CodeCache::Drop(Lru::iterator it) {
  bytes_ -= it->bytes;
  if (shared_ != nullptr) {
    shared_->Give(it->bytes);
  }
  index_.erase(it->address);
  lru_.erase(it);
}

void CodeCache::EvictOldest() {
  Drop(std::prev(lru_.end()));
  ++evictions_;
}

// Keeps `entry` as the most recently used, evicting the least recently used until it fits.
// An entry larger than the whole budget, or one the shared budget has no room for once this
// cache is empty (other processes hold it), is not kept.
CodeInfo* CodeCache::Keep(Entry entry) {
  if (const auto it = index_.find(entry.address); it != index_.end()) {
    Drop(it->second);
  }
  if (entry.bytes <= max_bytes_) {
    while (!lru_.empty() && (index_.size() >= max_entries_ || bytes_ + entry.bytes > max_bytes_)) {
      EvictOldest();
    }
    bool taken = shared_ == nullptr || shared_->Take(entry.bytes);
    while (!taken && !lru_.empty()) {
      EvictOldest();
      taken = shared_->Take(entry.bytes);
    }
    if (taken && index_.size() < max_entries_) {
      bytes_ += entry.bytes;
      lru_.push_front(std::move(entry));
      index_[lru_.front().address] = lru_.begin();
      return &lru_.front().info;
    }
    if (taken && shared_ != nullptr) {
      shared_->Give(entry.bytes);  // max_entries_ is 0
    }
  }
  ++uncached_;
  scratch_ = std::move(entry);
  return &scratch_.info;
}

Result<CodeInfo*> CodeCache::Get(RemoteMemory& memory, const InterpreterInfo& info,
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
  if (const auto it = index_.find(address); it != index_.end() && it->second->key == key) {
    lru_.splice(lru_.begin(), lru_, it->second);  // now the most recently used
    return &it->second->info;
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
  const std::size_t bytes =
      kEntryOverhead + decoded.file.size() + decoded.function.size() + decoded.line_table.size();
  return Keep(Entry{address, key, std::move(decoded), bytes});
}

}  // namespace expanse::pystack
