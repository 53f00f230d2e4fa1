// Decoded code objects of one process, by address. A sample still reads each code object's
// header, and reuses the decoded names and line table only when the header is unchanged, so a
// freed and reused address is noticed. What it keeps is bounded by entries and by bytes, per
// process and (through a shared CodeCacheBudget) for all processes together; the least
// recently used code objects are evicted first.
#ifndef EXPANSE_PYSTACK_CODE_CACHE_H_
#define EXPANSE_PYSTACK_CODE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/result.h"
#include "pystack/interpreter_info.h"
#include "pystack/python_layout.h"
#include "pystack/reader_limits.h"
#include "pystack/remote_memory.h"

namespace expanse::pystack {

struct CodeInfo {
  std::string file;
  std::string function;
  int first_line = 0;
  std::vector<std::uint8_t> line_table;  // empty when missing or over the limit

  // Lines already decoded from the table, so that a frame seen again costs no decoding.
  std::optional<int> RememberedLine(std::int64_t byte_offset) const;
  void RememberLine(std::int64_t byte_offset, int line);

 private:
  static constexpr std::size_t kMaxRememberedLines = 16;
  std::vector<std::pair<std::int64_t, int>> lines_;  // at most kMaxRememberedLines
  std::size_t next_slot_ = 0;
};

// The bytes every process's cache holds together (one per reader). Caches take from it when
// they keep an entry and give back when they drop one.
class CodeCacheBudget {
 public:
  explicit CodeCacheBudget(std::size_t max_bytes) : max_bytes_(max_bytes) {}
  bool Take(std::size_t bytes);
  void Give(std::size_t bytes) { used_ -= bytes; }
  std::size_t used() const { return used_; }

 private:
  std::size_t max_bytes_;
  std::size_t used_ = 0;
};

class CodeCache {
 public:
  // `shared` may be null (no limit across processes); it must outlive the cache.
  explicit CodeCache(std::size_t max_entries, std::size_t max_bytes = 4 << 20,
                     CodeCacheBudget* shared = nullptr)
      : max_entries_(max_entries), max_bytes_(max_bytes), shared_(shared) {}
  CodeCache(CodeCache&& other) noexcept;
  CodeCache& operator=(CodeCache&& other) noexcept;
  CodeCache(const CodeCache&) = delete;
  CodeCache& operator=(const CodeCache&) = delete;
  ~CodeCache() { Clear(); }

  // The code object at `address`. Errors: "inconsistent_read" when it is not a code object
  // (its type is not PyCode_Type) or its strings are not strs, and the memory's errors. The
  // pointer is valid until the next Get: an entry that does not fit the budgets is decoded
  // but not kept.
  Result<CodeInfo*> Get(RemoteMemory& memory, const InterpreterInfo& info,
                        const NativeReaderLimits& limits, std::uint64_t address);

  void Clear();
  std::size_t size() const { return index_.size(); }
  std::size_t bytes() const { return bytes_; }
  std::size_t evictions() const { return evictions_; }  // entries dropped to make room
  std::size_t uncached() const { return uncached_; }    // decodes that did not fit at all

 private:
  // The header fields an entry was decoded from.
  struct Key {
    std::uint64_t filename = 0;
    std::uint64_t name = 0;
    std::uint64_t line_table = 0;
    std::uint32_t first_line = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct Entry {
    std::uint64_t address = 0;
    Key key;
    CodeInfo info;
    std::size_t bytes = 0;
  };
  using Lru = std::list<Entry>;  // most recently used first

  CodeInfo* Keep(Entry entry);
  void EvictOldest();
  void Drop(Lru::iterator it);

  std::size_t max_entries_;
  std::size_t max_bytes_;
  CodeCacheBudget* shared_;
  Lru lru_;
  std::unordered_map<std::uint64_t, Lru::iterator> index_;
  Entry scratch_;  // the last decode that did not fit
  std::size_t bytes_ = 0;
  std::size_t evictions_ = 0;
  std::size_t uncached_ = 0;
};

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_CODE_CACHE_H_
