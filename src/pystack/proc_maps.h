// /proc/<pid>/maps and /proc/<pid>/stat as the native reader needs them. Pure parsers: the
// reader does the I/O (the text is the target's, so it is treated as untrusted: a file name
// in it is chosen by whoever created the file).
#ifndef EXPANSE_PYSTACK_PROC_MAPS_H_
#define EXPANSE_PYSTACK_PROC_MAPS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::pystack {

// One line of /proc/<pid>/maps:
//   "7f3a1c000000-7f3a1c021000 r-xp 00001000 08:01 1234   /usr/lib/libpython3.11.so.1.0"
struct MemoryMapping {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::string permissions;  // "r-xp"
  std::uint64_t file_offset = 0;
  std::uint32_t device_major = 0;  // the file's device, "08:01" in the line
  std::uint32_t device_minor = 0;
  std::uint64_t inode = 0;  // 0 for anonymous mappings
  std::string path;         // empty when anonymous; "[heap]", "[stack]" for the kernel's names
  bool deleted = false;     // the kernel appended " (deleted)": the file was removed or replaced
};

// Parses the whole file. kInvalidArgument, reason "proc_maps_malformed", naming the 1-based
// line, for a line that is not in the kernel's format; kResourceExhausted, reason
// "proc_maps_too_large", past `max_mappings` lines.
Result<std::vector<MemoryMapping>> ParseProcMaps(std::string_view text, std::size_t max_mappings);

// The fields of /proc/<pid>/stat (or /proc/<pid>/task/<tid>/stat) the reader uses.
struct ProcStat {
  char state = '?';              // 'R', 'S', 'D', 'Z', 'T', ...
  std::uint64_t start_time = 0;  // field 22, clock ticks after boot: tells a reused pid apart
};

// Parses one stat line. The command name (field 2) is skipped by its last ')', since it may
// itself hold spaces and parentheses. kInvalidArgument, reason "proc_stat_malformed".
Result<ProcStat> ParseProcStat(std::string_view text);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_PROC_MAPS_H_
