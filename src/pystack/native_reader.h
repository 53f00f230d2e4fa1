// The native CPython stack reader: a StackSource that reads a Python process's thread and
// frame lists with process_vm_readv, without stopping it and without py-spy. See
// docs/pystacks.md for how it finds the interpreter, the versions it knows and its limits.
//
//   NativeReader reader;                       // keep one: it caches per process
//   Result<ProcessStacks> stacks = reader.Sample(pid);
//
// Per process it caches what discovery found (binary, version, _PyRuntime, layout) and the
// decoded code objects, keyed by the process's start time so a reused pid starts afresh. A
// sample of a process it knows reads /proc/<pid>/stat, the thread and frame lists, each code
// object's header, and /proc/<pid>/task/<tid>/stat of threads not holding the GIL.
#ifndef EXPANSE_PYSTACK_NATIVE_READER_H_
#define EXPANSE_PYSTACK_NATIVE_READER_H_

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/result.h"
#include "pystack/code_cache.h"
#include "pystack/interpreter_locator.h"
#include "pystack/reader_limits.h"
#include "pystack/remote_memory.h"
#include "pystack/stack_model.h"

namespace expanse::pystack {

class NativeReader final : public StackSource {
 public:
  // How the reader reaches a process's memory: ProcessMemory by default; tests wrap it.
  using MemoryFactory = std::function<std::unique_ptr<RemoteMemory>(pid_t pid)>;

  explicit NativeReader(NativeReaderLimits limits = {});
  NativeReader(NativeReaderLimits limits, MemoryFactory memory_factory);

  // Every Python thread with at least one frame. Errors (reason): "not_python",
  // "unsupported_version", "ptrace_denied", "process_exited", "binary_unavailable",
  // "bad_debug_offsets"; after `limits.attempts` tries, "inconsistent_read",
  // "unreadable_address" or "read_budget_exceeded". Messages start "py_stacks: " and name
  // the pid. Thread-safe (samples are serialised).
  Result<ProcessStacks> Sample(pid_t pid) override;
  const char* Name() const override { return "native"; }

  // Drops what is cached for `pid` (the daemon calls it when a process leaves its job).
  void Forget(pid_t pid);
  std::size_t cached_processes() const;
  // Bytes held by every process's code cache together (at most max_code_cache_bytes_total).
  std::size_t code_cache_bytes() const;

 private:
  struct Process {
    std::uint64_t start_time = 0;
    LocatedInterpreter interpreter;
    CodeCache codes;
  };

  CodeCache NewCodeCache();
  Result<Process*> FindOrLocate(pid_t pid, std::uint64_t start_time, RemoteMemory& memory);
  Result<ProcessStacks> SampleOnce(pid_t pid, Process& process, RemoteMemory& memory);

  NativeReaderLimits limits_;
  MemoryFactory memory_factory_;
  mutable std::mutex mutex_;
  // Declared before processes_ so that it outlives their caches, which give back to it.
  CodeCacheBudget code_budget_;
  std::unordered_map<pid_t, std::unique_ptr<Process>> processes_;
  ElfCache elf_cache_;
};

// A NativeReader as a StackSource.
std::unique_ptr<StackSource> MakeNativeReader(NativeReaderLimits limits = {});

// One sample with a fresh reader and the default limits (for `pystack dump`).
Result<ProcessStacks> ReadPythonStacks(pid_t pid);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_NATIVE_READER_H_
