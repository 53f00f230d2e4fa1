#include "pystack/native_reader.h"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "pystack/proc_maps.h"
#include "pystack/process_memory.h"
#include "pystack/stack_walker.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::size_t kElfCacheEntries = 64;
constexpr std::size_t kMaxTasks = 1 << 16;
constexpr std::size_t kMaxCachedPages = 256;  // 1 MiB per sample

// Failures a retry may cure: the target changed memory while we read it.
bool IsTransient(const Status& status) {
  return status.reason() == "inconsistent_read" || status.reason() == "unreadable_address" ||
         status.reason() == "read_budget_exceeded";
}

// Walker errors name addresses, not the process; say which process and Python they are about.
Status WithContext(pid_t pid, const PythonVersion& version, const Status& status) {
  if (status.message().starts_with("py_stacks: ")) {
    return status;
  }
  return Status(status.code(), Format("py_stacks: pid {} (Python {}): {}", pid, version.ToString(),
                                      status.message()))
      .WithReason(status.reason());
}

ThreadState StateFromProc(pid_t pid, pid_t tid) {
  const Result<std::string> text = ReadSmallProcFile(
      pid, "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  if (!text.ok()) {
    return ThreadState::kUnknown;  // the thread ended since the walk
  }
  const Result<ProcStat> stat = ParseProcStat(*text);
  if (!stat.ok()) {
    return ThreadState::kUnknown;
  }
  switch (stat->state) {
    case 'R':
      return ThreadState::kRunning;
    case 'S':
    case 'D':
      return ThreadState::kIdle;
    default:
      return ThreadState::kUnknown;
  }
}

// The kernel thread ids of `pid` (bounded).
std::set<pid_t> ListTasks(pid_t pid) {
  std::set<pid_t> tasks;
  const std::string path = Format("/proc/{}/task", pid);
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    return tasks;
  }
  while (const dirent* entry = readdir(dir)) {
    const std::string_view name(entry->d_name);
    pid_t tid = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (error == std::errc() && end == name.data() + name.size() && tid > 0) {
      tasks.insert(tid);
    }
    if (tasks.size() >= kMaxTasks) {
      break;
    }
  }
  closedir(dir);
  return tasks;
}

}  // namespace

NativeReader::NativeReader(NativeReaderLimits limits)
    : NativeReader(limits, [](pid_t pid) { return std::make_unique<ProcessMemory>(pid); }) {}

NativeReader::NativeReader(NativeReaderLimits limits, MemoryFactory memory_factory)
    : limits_(limits),
      memory_factory_(std::move(memory_factory)),
      code_budget_(limits.max_code_cache_bytes_total),
      elf_cache_(kElfCacheEntries) {}

CodeCache NativeReader::NewCodeCache() {
  return CodeCache(limits_.max_code_cache_entries, limits_.max_code_cache_bytes, &code_budget_);
}

std::size_t NativeReader::code_cache_bytes() const {
  const std::lock_guard lock(mutex_);
  return code_budget_.used();
}

void NativeReader::Forget(pid_t pid) {
  const std::lock_guard lock(mutex_);
  processes_.erase(pid);
}

std::size_t NativeReader::cached_processes() const {
  const std::lock_guard lock(mutex_);
  return processes_.size();
}

Result<NativeReader::Process*> NativeReader::FindOrLocate(pid_t pid, std::uint64_t start_time,
                                                          RemoteMemory& memory) {
  if (const auto it = processes_.find(pid); it != processes_.end()) {
    if (it->second->start_time == start_time) {
      return it->second.get();
    }
    processes_.erase(it);  // the pid was reused
  }
  EXPANSE_ASSIGN_OR_RETURN(LocatedInterpreter located,
                           LocateInterpreter(pid, memory, elf_cache_, limits_));
  if (processes_.size() >= limits_.max_cached_processes && !processes_.empty()) {
    processes_.erase(processes_.begin());
  }
  auto process = std::make_unique<Process>(Process{start_time, std::move(located), NewCodeCache()});
  Process* raw = process.get();
  processes_[pid] = std::move(process);
  return raw;
}

Result<ProcessStacks> NativeReader::SampleOnce(pid_t pid, Process& process, RemoteMemory& memory) {
  const InterpreterInfo& info = process.interpreter.info;
  PageCachedMemory pages(memory, kMaxCachedPages);
  BudgetedMemory budget(pages, limits_.max_reads_per_sample, limits_.max_bytes_per_sample);
  // 3.9 and 3.10 record only pthread_t; its tid is accepted only if it is one of the process's.
  std::optional<std::set<pid_t>> tasks;
  IsProcessThread is_process_thread;
  if (info.layout.thread_native_id == kNoField) {
    is_process_thread = [&tasks, pid](pid_t tid) {
      if (!tasks) {
        tasks = ListTasks(pid);
      }
      return tasks->contains(tid);
    };
  }
  EXPANSE_ASSIGN_OR_RETURN(std::vector<ThreadStack> threads,
                           WalkThreads(budget, info, limits_, process.codes, is_process_thread));
  for (ThreadStack& thread : threads) {
    if (thread.state != ThreadState::kHoldsGil && thread.tid != 0) {
      thread.state = StateFromProc(pid, thread.tid);
    }
  }
  ProcessStacks stacks;
  stacks.pid = pid;
  stacks.python_version = info.version.ToString();
  stacks.threads = std::move(threads);
  return stacks;
}

Result<ProcessStacks> NativeReader::Sample(pid_t pid) {
  const std::lock_guard lock(mutex_);
  EXPANSE_ASSIGN_OR_RETURN(const std::string stat_text,
                           ReadSmallProcFile(pid, "/proc/" + std::to_string(pid) + "/stat"));
  const Result<ProcStat> stat = ParseProcStat(stat_text);
  if (!stat.ok()) {
    return UnavailableError(Format("py_stacks: pid {}: {}", pid, stat.status().message()))
        .WithReason(stat.status().reason());
  }
  if (stat->state == 'Z' || stat->state == 'X') {
    processes_.erase(pid);
    return NotFoundError(Format("py_stacks: process {} exited", pid)).WithReason("process_exited");
  }
  const std::unique_ptr<RemoteMemory> memory = memory_factory_(pid);
  EXPANSE_ASSIGN_OR_RETURN(Process * process, FindOrLocate(pid, stat->start_time, *memory));

  Status last;
  const int attempts = std::max(1, limits_.attempts);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt == 1) {
      // What discovery cached may be stale (the process exec'd another program): look again.
      Result<LocatedInterpreter> again = LocateInterpreter(pid, *memory, elf_cache_, limits_);
      if (!again.ok()) {
        processes_.erase(pid);
        return std::move(again).status();
      }
      if (again->info.runtime_address != process->interpreter.info.runtime_address ||
          again->binary != process->interpreter.binary) {
        process->interpreter = std::move(*again);
        process->codes = NewCodeCache();
      }
    }
    Result<ProcessStacks> stacks = SampleOnce(pid, *process, *memory);
    if (stacks.ok()) {
      return stacks;
    }
    last = std::move(stacks).status();
    if (!IsTransient(last)) {
      break;
    }
  }
  const PythonVersion version = process->interpreter.info.version;
  if (!IsTransient(last)) {
    processes_.erase(pid);  // gone, or out of reach: nothing cached is worth keeping
  }
  return WithContext(pid, version, last);
}

std::unique_ptr<StackSource> MakeNativeReader(NativeReaderLimits limits) {
  return std::make_unique<NativeReader>(limits);
}

Result<ProcessStacks> ReadPythonStacks(pid_t pid) { return NativeReader().Sample(pid); }

}  // namespace expanse::pystack
