// Reading another process's memory. The native CPython reader sees its target only through
// RemoteMemory: ProcessMemory (process_memory.h) reads a live process, MemoryImage
// (memory_image.h) serves tests and the fuzzer from bytes held here. Everything read through
// it is untrusted: the target may change it while we read, or be hostile.
#ifndef EXPANSE_PYSTACK_REMOTE_MEMORY_H_
#define EXPANSE_PYSTACK_REMOTE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/result.h"
#include "core/status.h"

namespace expanse::pystack {

// The most a single read may ask for; larger requests are refused before any I/O.
inline constexpr std::size_t kMaxReadBytes = 1 << 20;

class RemoteMemory {
 public:
  virtual ~RemoteMemory() = default;

  // Fills `out` with the bytes at [address, address + out.size()). Fails, with reason
  // "unreadable_address" unless the process is gone or access is denied, when any of them
  // could not be read; `out` is then unspecified.
  virtual Status ReadInto(std::uint64_t address, std::span<std::uint8_t> out) = 0;

  // The same into a new buffer. kInvalidArgument for more than kMaxReadBytes.
  Result<std::string> Read(std::uint64_t address, std::size_t length);
};

// Wraps another RemoteMemory and refuses, with kResourceExhausted and reason
// "read_budget_exceeded", once one sample has made `max_reads` reads or read `max_bytes`
// bytes. This is the backstop that keeps garbage memory from making a walk expensive even if
// some other bound were missed.
class BudgetedMemory final : public RemoteMemory {
 public:
  BudgetedMemory(RemoteMemory& inner, std::size_t max_reads, std::size_t max_bytes)
      : inner_(inner), max_reads_(max_reads), max_bytes_(max_bytes) {}

  Status ReadInto(std::uint64_t address, std::span<std::uint8_t> out) override;

  std::size_t reads() const { return reads_; }
  std::size_t bytes() const { return bytes_; }

 private:
  RemoteMemory& inner_;
  std::size_t max_reads_;
  std::size_t max_bytes_;
  std::size_t reads_ = 0;
  std::size_t bytes_ = 0;
};

// Wraps another RemoteMemory for the span of one sample and serves small reads from whole
// 4 KiB pages it fetched before: a thread's frames (3.11+ keeps them in one data stack chunk)
// and neighbouring code objects then cost one read of the target instead of one each. Larger
// reads, and pages that cannot be read whole, go straight through. At most `max_pages` pages
// are kept.
class PageCachedMemory final : public RemoteMemory {
 public:
  static constexpr std::uint64_t kPageSize = 4096;

  PageCachedMemory(RemoteMemory& inner, std::size_t max_pages)
      : inner_(inner), max_pages_(max_pages) {}

  Status ReadInto(std::uint64_t address, std::span<std::uint8_t> out) override;

 private:
  // The cached page at `page`, fetching it if there is room; nullptr when it cannot be had.
  const std::uint8_t* Page(std::uint64_t page);

  RemoteMemory& inner_;
  std::size_t max_pages_;
  std::unordered_map<std::uint64_t, std::unique_ptr<std::uint8_t[]>> pages_;
  std::unordered_set<std::uint64_t> unreadable_pages_;
};

// The status for an address that could not be read ("unreadable_address").
Status UnreadableAddress(std::uint64_t address, std::size_t length, std::string_view detail);

// The status for memory that does not hold what it should (a pointer to a non-code object, a
// loop in a list): kUnavailable with reason "inconsistent_read". A live target changes under
// the reader, so this is often transient; a retry may succeed.
Status InconsistentRead(std::string what);

// Little-endian loads from a buffer, as the target (x86-64) stores its fields. An offset whose
// field does not fit in `bytes` reads as 0, which every caller treats as a null or invalid
// value, so a layout bug can never read past a buffer.
std::uint64_t LoadU64(std::span<const std::uint8_t> bytes, std::size_t offset);
std::uint32_t LoadU32(std::span<const std::uint8_t> bytes, std::size_t offset);
std::uint8_t LoadU8(std::span<const std::uint8_t> bytes, std::size_t offset);

// Whether `address` could be an object pointer in an x86-64 user-space process: non-null,
// above the first page, below the canonical user limit, 8-byte aligned.
bool PlausiblePointer(std::uint64_t address);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_REMOTE_MEMORY_H_
