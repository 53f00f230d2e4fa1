// The bounds the native CPython reader keeps, so that a hostile or half-written target can
// never make it loop, allocate or read without limit.
#ifndef EXPANSE_PYSTACK_READER_LIMITS_H_
#define EXPANSE_PYSTACK_READER_LIMITS_H_

#include <cstddef>

namespace expanse::pystack {

struct NativeReaderLimits {
  std::size_t max_interpreters = 16;  // sub-interpreters followed per process
  std::size_t max_threads = 512;      // thread states per sample; the rest are left out
  // Frames per thread. A deeper stack keeps its leaf-most frames (where the time goes) under
  // a "<truncated>" root frame.
  std::size_t max_frames = 2048;
  std::size_t max_string_bytes = 1024;           // UTF-8 bytes of a file or function name
  std::size_t max_line_table_bytes = 256 << 10;  // a larger table gives line 0
  // Backstop for one sample, whatever the shape of the memory.
  std::size_t max_reads_per_sample = 200000;
  std::size_t max_bytes_per_sample = 64 << 20;
  std::size_t max_code_cache_entries = 16384;  // per process
  // Bytes of decoded names and line tables kept per process and by all processes together;
  // the least recently used code objects go first. Without them 16K code objects sharing one
  // 256 KiB line table would hold 4 GiB.
  std::size_t max_code_cache_bytes = 4 << 20;
  std::size_t max_code_cache_bytes_total = 256 << 20;
  // Line-table bytes decoded per sample; frames past it get line 0. A line found once is
  // remembered with its code object, so a steady program decodes little after its first sample.
  std::size_t max_line_table_bytes_per_sample = 16 << 20;
  std::size_t max_cached_processes = 4096;
  std::size_t max_maps_bytes = 64 << 20;  // /proc/<pid>/maps
  std::size_t max_mappings = 1 << 20;
  // A sample that finds inconsistent memory (the target changed it mid-read) is retried this
  // many times in all before the error is returned.
  int attempts = 3;
};

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_READER_LIMITS_H_
