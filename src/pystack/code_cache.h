// Decoded code objects of one process, by address. A sample still reads each code object's
// header, and reuses the decoded names and line table only when the header is unchanged, so a
// freed and reused address is noticed.
#ifndef EXPANSE_PYSTACK_CODE_CACHE_H_
#define EXPANSE_PYSTACK_CODE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
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
};

class CodeCache {
 public:
  explicit CodeCache(std::size_t max_entries) : max_entries_(max_entries) {}

  // The code object at `address`. Errors: "inconsistent_read" when it is not a code object
  // (its type is not PyCode_Type) or its strings are not strs, and the memory's errors.
  Result<const CodeInfo*> Get(RemoteMemory& memory, const InterpreterInfo& info,
                              const NativeReaderLimits& limits, std::uint64_t address);

  std::size_t size() const { return entries_.size(); }

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
    Key key;
    CodeInfo info;
  };

  std::size_t max_entries_;
  std::unordered_map<std::uint64_t, Entry> entries_;
};

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_CODE_CACHE_H_
