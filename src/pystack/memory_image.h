// RemoteMemory over byte regions held in this process: the stand-in for a target in the
// stack walker's tests and fuzzer. Reads are counted, so tests can check that garbage memory
// never makes the walker do unbounded work.
#ifndef EXPANSE_PYSTACK_MEMORY_IMAGE_H_
#define EXPANSE_PYSTACK_MEMORY_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "pystack/remote_memory.h"

namespace expanse::pystack {

class MemoryImage final : public RemoteMemory {
 public:
  // Maps `bytes` at `address`, replacing any region that starts there. Regions are meant
  // not to overlap; a read must lie inside one region.
  void Map(std::uint64_t address, std::string bytes);

  // Writes into mapped bytes (tests use it to corrupt an image); false when the range is not
  // inside one region.
  bool Write(std::uint64_t address, std::span<const std::uint8_t> bytes);

  Status ReadInto(std::uint64_t address, std::span<std::uint8_t> out) override;

  std::size_t reads() const { return reads_; }

 private:
  // The region holding [address, address + length) and the offset of `address` in it;
  // nullptr when there is none.
  std::string* Find(std::uint64_t address, std::size_t length, std::size_t& offset);

  std::map<std::uint64_t, std::string> regions_;
  std::size_t reads_ = 0;
};

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_MEMORY_IMAGE_H_
