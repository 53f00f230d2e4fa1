#include "pystack/remote_memory.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "pystack/text_format.h"

namespace expanse::pystack {

Result<std::string> RemoteMemory::Read(std::uint64_t address, std::size_t length) {
  if (length > kMaxReadBytes) {
    return InvalidArgumentError(Format("refusing to read {} bytes at {:#x}: the limit is {}",
                                       length, address, kMaxReadBytes));
  }
  std::string bytes(length, '\0');
  EXPANSE_RETURN_IF_ERROR(
      ReadInto(address, std::span(reinterpret_cast<std::uint8_t*>(bytes.data()), length)));
  return bytes;
}

Status BudgetedMemory::ReadInto(std::uint64_t address, std::span<std::uint8_t> out) {
  if (reads_ >= max_reads_ || out.size() > max_bytes_ - bytes_) {
    return ResourceExhaustedError(Format("read budget spent ({} reads, {} bytes; limits {} and {})",
                                         reads_, bytes_, max_reads_, max_bytes_))
        .WithReason("read_budget_exceeded");
  }
  ++reads_;
  bytes_ += out.size();
  return inner_.ReadInto(address, out);
}

const std::uint8_t* PageCachedMemory::Page(std::uint64_t page) {
  if (const auto it = pages_.find(page); it != pages_.end()) {
    return it->second.get();
  }
  if (pages_.size() >= max_pages_ || unreadable_pages_.contains(page)) {
    return nullptr;
  }
  auto bytes = std::make_unique<std::uint8_t[]>(kPageSize);
  if (!inner_.ReadInto(page, std::span(bytes.get(), kPageSize)).ok()) {
    unreadable_pages_.insert(page);
    return nullptr;
  }
  return pages_.emplace(page, std::move(bytes)).first->second.get();
}

Status PageCachedMemory::ReadInto(std::uint64_t address, std::span<std::uint8_t> out) {
  const std::uint64_t first_page = address & ~(kPageSize - 1);
  if (out.empty() || out.size() > kPageSize || address > UINT64_MAX - out.size()) {
    return inner_.ReadInto(address, out);
  }
  const std::uint64_t last_page = (address + out.size() - 1) & ~(kPageSize - 1);
  const std::uint8_t* first = Page(first_page);
  const std::uint8_t* last = last_page == first_page ? first : Page(last_page);
  if (first == nullptr || last == nullptr) {
    // Part of a page may be readable where the whole is not (an image in a test, the end of
    // a mapping): ask for exactly what is wanted.
    return inner_.ReadInto(address, out);
  }
  const std::size_t offset = address - first_page;
  const std::size_t in_first = std::min<std::size_t>(out.size(), kPageSize - offset);
  std::memcpy(out.data(), first + offset, in_first);
  if (in_first < out.size()) {
    std::memcpy(out.data() + in_first, last, out.size() - in_first);
  }
  return OkStatus();
}

Status UnreadableAddress(std::uint64_t address, std::size_t length, std::string_view detail) {
  return UnavailableError(Format("cannot read {} bytes at {:#x}: {}", length, address, detail))
      .WithReason("unreadable_address");
}

Status InconsistentRead(std::string what) {
  return UnavailableError(std::move(what)).WithReason("inconsistent_read");
}

namespace {

template <typename T>
T Load(std::span<const std::uint8_t> bytes, std::size_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) {
    return 0;
  }
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace

std::uint64_t LoadU64(std::span<const std::uint8_t> bytes, std::size_t offset) {
  return Load<std::uint64_t>(bytes, offset);
}

std::uint32_t LoadU32(std::span<const std::uint8_t> bytes, std::size_t offset) {
  return Load<std::uint32_t>(bytes, offset);
}

std::uint8_t LoadU8(std::span<const std::uint8_t> bytes, std::size_t offset) {
  return Load<std::uint8_t>(bytes, offset);
}

bool PlausiblePointer(std::uint64_t address) {
  constexpr std::uint64_t kFirstPage = 4096;
  constexpr std::uint64_t kUserLimit = 0x0000800000000000ULL;
  return address >= kFirstPage && address < kUserLimit && address % 8 == 0;
}

}  // namespace expanse::pystack
