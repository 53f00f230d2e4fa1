// Finding the CPython interpreter in a process: which mapped file holds _PyRuntime (libpython
// or the executable), where it is loaded, which version it is and so which layout applies.
#ifndef EXPANSE_PYSTACK_INTERPRETER_LOCATOR_H_
#define EXPANSE_PYSTACK_INTERPRETER_LOCATOR_H_

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "pystack/elf_symbols.h"
#include "pystack/interpreter_info.h"
#include "pystack/proc_maps.h"
#include "pystack/python_version.h"
#include "pystack/reader_limits.h"
#include "pystack/remote_memory.h"

namespace expanse::pystack {

// The symbols looked up in a candidate binary.
inline constexpr std::string_view kRuntimeSymbol = "_PyRuntime";
inline constexpr std::string_view kVersionSymbol = "Py_Version";  // 3.11+
inline constexpr std::string_view kCodeTypeSymbol = "PyCode_Type";
inline constexpr std::string_view kStrTypeSymbol = "PyUnicode_Type";
inline constexpr std::string_view kBytesTypeSymbol = "PyBytes_Type";
inline constexpr std::string_view kNoneSymbol = "_Py_NoneStruct";

// At most this many libpython paths are looked into per process: a real one maps one or two,
// and each costs an open and an ELF parse.
inline constexpr std::size_t kMaxLibPythonCandidates = 8;

// The file-backed paths worth looking into, in the order they are tried: the first
// kMaxLibPythonCandidates libpython mappings, then the executable (`exe_path`, what
// /proc/<pid>/exe names; may be empty). Linear in the mappings.
std::vector<std::string> CandidateBinaries(std::span<const MemoryMapping> mappings,
                                           std::string_view exe_path);

// What is known about the version from each source.
struct VersionEvidence {
  std::optional<PythonVersion> debug_offsets;  // 3.13+: the table's version (cookie checked)
  std::optional<PythonVersion> py_version;     // 3.11+: the Py_Version constant
  std::optional<PythonVersion> file_name;      // "python3.10", "libpython3.9.so.1.0"
};

// The version to believe: the debug offsets, then Py_Version, then the file name. Errors,
// kFailedPrecondition with reason "unsupported_version": none of them known (named
// "unknown"), a version outside 3.9 to 3.13 or a free-threaded build (named), or sources
// that disagree on major.minor.
Result<PythonVersion> DecideVersion(const VersionEvidence& evidence);

// ELF symbol tables by file identity (device, inode, size, mtime), shared by every process
// running the same binary. Failures are kept too: a job's thousand pids mapping one crafted
// file cost one parse, not a thousand.
class ElfCache {
 public:
  explicit ElfCache(std::size_t max_entries) : max_entries_(max_entries) {}
  Result<ElfSymbols> Get(DiskFile& file);
  std::size_t parses() const { return parses_; }  // files actually read

 private:
  struct Entry {
    Status status;  // the parse's error, or OK
    ElfSymbols symbols;
  };
  std::size_t max_entries_;
  std::map<FileIdentity, Entry> entries_;
  std::size_t parses_ = 0;
};

// Opens the binary `mapping` maps, as the process sees it: /proc/<pid>/map_files/ (the
// mapped file itself, even deleted or replaced; needs CAP_SYS_ADMIN), else `path` resolved
// inside /proc/<pid>/root (the process's mount namespace) without following any symbolic
// link. The path is the job's to choose, so a symlink, a FIFO or a device there is refused,
// and a file is accepted only if its device and inode are the mapping's. Errors: reason
// "binary_unavailable".
Result<std::unique_ptr<DiskFile>> OpenMappedFile(pid_t pid, const std::string& path,
                                                 const MemoryMapping& mapping);

struct LocatedInterpreter {
  InterpreterInfo info;
  std::string binary;  // the path, as the process's maps name it, that defines _PyRuntime
};

// Reads /proc/<pid>/maps and /proc/<pid>/exe, opens the candidate binaries (OpenMappedFile),
// and reads
// the version and, on 3.13, the debug offsets from `memory`.
//
// Errors: reason "not_python" (kFailedPrecondition) when no candidate defines _PyRuntime,
// "unsupported_version" (see DecideVersion; also when a binary named for an old Python has no
// _PyRuntime), "ptrace_denied", "process_exited", "binary_unavailable" when the file holding
// the interpreter cannot be opened, "bad_debug_offsets".
Result<LocatedInterpreter> LocateInterpreter(pid_t pid, RemoteMemory& memory, ElfCache& elf_cache,
                                             const NativeReaderLimits& limits);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_INTERPRETER_LOCATOR_H_
