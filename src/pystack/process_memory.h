// Access to a live process: its memory through process_vm_readv(2), and its /proc files.
//
// RemoteMemory over a live process with process_vm_readv(2): read-only, and the target is
// never stopped, so what it changes while we read can be torn (the stack walker validates
// what it reads and the reader retries). Needs the same permission as ptrace attach
// (PTRACE_MODE_ATTACH: same user and not dumpable-restricted, or CAP_SYS_PTRACE).
#ifndef EXPANSE_PYSTACK_PROCESS_MEMORY_H_
#define EXPANSE_PYSTACK_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"
#include "pystack/remote_memory.h"

namespace expanse::pystack {

class ProcessMemory final : public RemoteMemory {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}

  // Errors: reason "ptrace_denied" (EPERM), "process_exited" (ESRCH), otherwise
  // "unreadable_address" (an unmapped address, or a short read at a mapping's end).
  Status ReadInto(std::uint64_t address, std::span<std::uint8_t> out) override;

 private:
  pid_t pid_;
};

// The status for a failed access to process `pid` with errno `error` while doing `what`
// ("read /proc/12/maps"): EPERM/EACCES give kPermissionDenied with reason "ptrace_denied"
// ("py_stacks: ptrace denied for pid 12: Operation not permitted"); ESRCH/ENOENT give
// kNotFound with reason "process_exited"; anything else kUnavailable, reason
// "proc_read_failed", naming `what`.
Status ProcessAccessStatus(pid_t pid, int error, std::string_view what);

// Reads a file under /proc/<pid> (at most `max_bytes`), mapping failures to the process
// access reasons of ProcessAccessStatus.
Result<std::string> ReadProcFile(pid_t pid, const std::string& path, std::size_t max_bytes);

// The same for a file the kernel produces whole in one read(2) of under 4 KiB (the stat
// files): one read instead of reading on to end-of-file, which matters once per thread per
// sample. kResourceExhausted if the file fills the buffer.
Result<std::string> ReadSmallProcFile(pid_t pid, const std::string& path);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_PROCESS_MEMORY_H_
