// Finding named symbols and the load segments in an x86-64 ELF file (the python executable
// or libpython), read through a bounded random-access interface so that a hostile or huge
// file costs at most the limits. Pure apart from the file it is given.
#ifndef EXPANSE_PYSTACK_ELF_SYMBOLS_H_
#define EXPANSE_PYSTACK_ELF_SYMBOLS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "pystack/proc_maps.h"

namespace expanse::pystack {

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual std::uint64_t Size() const = 0;
  // Reads exactly `out.size()` bytes at `offset`; kInvalidArgument past the end.
  virtual Status ReadAt(std::uint64_t offset, std::span<std::uint8_t> out) = 0;
};

// A file held in memory (tests, the fuzzer).
class StringFile final : public RandomAccessFile {
 public:
  explicit StringFile(std::string bytes) : bytes_(std::move(bytes)) {}
  std::uint64_t Size() const override { return bytes_.size(); }
  Status ReadAt(std::uint64_t offset, std::span<std::uint8_t> out) override;

 private:
  std::string bytes_;
};

// Who a file on disk is: two opens with equal identities read the same bytes, unless the
// file was rewritten in place within the same second, which package managers do not do.
struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  friend auto operator<=>(const FileIdentity&, const FileIdentity&) = default;
};

// An open regular file read with pread(2).
class DiskFile final : public RandomAccessFile {
 public:
  // Opens `path` read-only. Errors carry errno's meaning (kNotFound, kPermissionDenied, ...);
  // kFailedPrecondition for something other than a regular file.
  static Result<std::unique_ptr<DiskFile>> Open(const std::string& path);
  // Opens `path` as if `root` (a directory) were "/", following no symbolic link at all
  // (openat2 with RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), without
  // blocking on a FIFO. For paths a process we do not trust controls. Errors as Open;
  // kUnavailable where the kernel lacks openat2.
  static Result<std::unique_ptr<DiskFile>> OpenInRoot(const std::string& root,
                                                      const std::string& path);
  ~DiskFile() override;
  DiskFile(const DiskFile&) = delete;
  DiskFile& operator=(const DiskFile&) = delete;

  std::uint64_t Size() const override { return identity_.size; }
  Status ReadAt(std::uint64_t offset, std::span<std::uint8_t> out) override;
  const FileIdentity& identity() const { return identity_; }
  // Whether the file is on overlayfs, whose /proc/<pid>/maps lines name the device of the
  // layer below (an Apptainer or Docker image), not the overlay's own.
  bool on_overlay() const { return on_overlay_; }

 private:
  DiskFile(int fd, FileIdentity identity, bool on_overlay)
      : fd_(fd), identity_(identity), on_overlay_(on_overlay) {}
  // Takes `fd` (open, or -1 with errno set) and keeps it only for a regular file.
  static Result<std::unique_ptr<DiskFile>> FromFd(int fd, const std::string& path);
  int fd_;
  FileIdentity identity_;
  bool on_overlay_ = false;
};

struct ElfLoadSegment {
  std::uint64_t file_offset = 0;
  std::uint64_t virtual_address = 0;
  std::uint64_t file_size = 0;
  std::uint64_t memory_size = 0;
};

struct ElfSymbols {
  std::vector<ElfLoadSegment> loads;  // PT_LOAD program headers in file order
  // The wanted symbols that the file defines: name -> st_value (an address relative to the
  // load bias). .dynsym is searched first, then .symtab for names still missing.
  std::map<std::string, std::uint64_t, std::less<>> values;
};

struct ElfLimits {
  std::size_t max_program_headers = 256;
  std::size_t max_sections = 4096;
  // A symbol or string table larger than this is skipped (.symtab) or refused (.dynsym).
  std::size_t max_table_bytes = 64 << 20;
  // Every byte read from the file, headers and tables together: "elf_too_large" past it.
  std::size_t max_file_bytes_read = 96 << 20;
};

// Reads `file`'s ELF header, program headers and the first .dynsym and first .symtab (a real
// binary has at most one of each; a crafted one with thousands must not cost thousands of
// table reads). kInvalidArgument with reason
// "not_elf" for a file that is not a 64-bit little-endian x86-64 ELF, "elf_malformed" for
// headers or tables that point outside the file or are inconsistent, "elf_too_large" past
// the limits.
Result<ElfSymbols> ReadElfSymbols(RandomAccessFile& file, std::span<const std::string_view> wanted,
                                  const ElfLimits& limits = {});

// Where the file's virtual address 0 lies in the process, from the first load segment and the
// process's mapping of the page holding its file offset; nullopt when no mapping of `mappings`
// (all of them of this file) matches.
std::optional<std::uint64_t> LoadBias(const ElfSymbols& elf,
                                      std::span<const MemoryMapping> mappings);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_ELF_SYMBOLS_H_
