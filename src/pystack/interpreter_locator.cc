#include "pystack/interpreter_locator.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/quote.h"
#include "pystack/process_memory.h"
#include "pystack/python_layout.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::string_view kDeletedSuffix = " (deleted)";

std::string_view BaseName(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

constexpr std::string_view kSupported = "the native reader reads CPython 3.9 to 3.13 with the GIL";

Status Unsupported(pid_t pid, const std::string& version) {
  return FailedPreconditionError(
             Format("py_stacks: pid {}: Python {} is not supported ({})", pid, version, kSupported))
      .WithReason("unsupported_version");
}

// Whether `file` is the file `mapping` maps: the same device and inode. The inode alone
// could match a file on another filesystem that the job planted. On overlayfs (a container
// image) the maps line names the device of the layer below, which the overlay's own file never
// has: there the inode (overlayfs keeps the layer's inode numbers) has to do.
bool IsMappedFile(const DiskFile& file, const MemoryMapping& mapping) {
  const dev_t device = makedev(mapping.device_major, mapping.device_minor);
  return (file.identity().device == static_cast<std::uint64_t>(device) || file.on_overlay()) &&
         file.identity().inode == mapping.inode;
}

}  // namespace

Result<std::unique_ptr<DiskFile>> OpenMappedFile(pid_t pid, const std::string& path,
                                                 const MemoryMapping& mapping) {
  Result<std::unique_ptr<DiskFile>> mapped =
      DiskFile::Open(Format("/proc/{}/map_files/{:x}-{:x}", pid, mapping.start, mapping.end));
  if (mapped.ok() && IsMappedFile(**mapped, mapping)) {
    return mapped;
  }
  Status why = mapped.ok() ? FailedPreconditionError("the mapped file changed") : mapped.status();
  if (!mapping.deleted) {
    Result<std::unique_ptr<DiskFile>> file =
        DiskFile::OpenInRoot(Format("/proc/{}/root", pid), path);
    if (file.ok() && IsMappedFile(**file, mapping)) {
      return file;
    }
    why = file.ok() ? FailedPreconditionError(Format("{} is not the file mapped (another device "
                                                     "or inode)",
                                                     QuoteForMessage(path, 200)))
                    : file.status();
  }
  return UnavailableError(
             Format("py_stacks: pid {}: cannot open {} as mapped (replaced on disk, or "
                    "outside our reach): {}",
                    pid, QuoteForMessage(path, 200), why.message()))
      .WithReason("binary_unavailable");
}

namespace {

Result<std::uint64_t> ReadU64(RemoteMemory& memory, std::uint64_t address) {
  std::array<std::uint8_t, 8> bytes{};
  EXPANSE_RETURN_IF_ERROR(memory.ReadInto(address, bytes));
  return LoadU64(bytes, 0);
}

}  // namespace

std::vector<std::string> CandidateBinaries(std::span<const MemoryMapping> mappings,
                                           std::string_view exe_path) {
  std::vector<std::string> candidates;
  std::unordered_set<std::string_view> seen;  // views of the mappings' paths
  for (const MemoryMapping& mapping : mappings) {
    if (candidates.size() >= kMaxLibPythonCandidates) {
      break;
    }
    if (mapping.inode != 0 && mapping.path.starts_with('/') &&
        IsLibPythonName(BaseName(mapping.path)) && seen.insert(mapping.path).second) {
      candidates.push_back(mapping.path);
    }
  }
  if (!exe_path.empty() && !seen.contains(exe_path)) {
    for (const MemoryMapping& mapping : mappings) {
      if (mapping.path == exe_path) {
        candidates.emplace_back(exe_path);
        break;
      }
    }
  }
  return candidates;
}

Result<PythonVersion> DecideVersion(const VersionEvidence& evidence) {
  const std::optional<PythonVersion>& chosen =
      evidence.debug_offsets ? evidence.debug_offsets
                             : (evidence.py_version ? evidence.py_version : evidence.file_name);
  if (!chosen) {
    return FailedPreconditionError(
               "the Python version is unknown (no Py_Version, no debug "
               "offsets, and the binary's name does not say)")
        .WithReason("unsupported_version");
  }
  PythonVersion version = *chosen;
  for (const std::optional<PythonVersion>& other :
       {evidence.debug_offsets, evidence.py_version, evidence.file_name}) {
    if (other && (other->major != version.major || other->minor != version.minor)) {
      return FailedPreconditionError(Format("the Python version is unclear: {} and {} disagree",
                                            version.ToString(), other->ToString()))
          .WithReason("unsupported_version");
    }
    if (other && other->free_threaded) {
      version.free_threaded = true;
    }
  }
  if (!IsSupportedVersion(version)) {
    return FailedPreconditionError(
               Format("Python {} is not supported ({})", version.ToString(), kSupported))
        .WithReason("unsupported_version");
  }
  return version;
}

Result<ElfSymbols> ElfCache::Get(DiskFile& file) {
  auto it = entries_.find(file.identity());
  if (it == entries_.end()) {
    static constexpr std::array<std::string_view, 6> kWanted = {kRuntimeSymbol,   kVersionSymbol,
                                                                kCodeTypeSymbol,  kStrTypeSymbol,
                                                                kBytesTypeSymbol, kNoneSymbol};
    ++parses_;
    Result<ElfSymbols> parsed = ReadElfSymbols(file, kWanted);
    // A read that failed for now (an NFS hiccup: kUnavailable) is not the file's answer: only
    // what the bytes themselves say is remembered.
    if (!parsed.ok() && parsed.status().code() == StatusCode::kUnavailable)
      return parsed.status();
    if (entries_.size() >= max_entries_) {
      entries_.clear();  // bounded and simple; the binaries in use are parsed again once
    }
    Entry entry;
    if (parsed.ok()) {
      entry.symbols = std::move(*parsed);
    } else {
      entry.status = parsed.status();
    }
    it = entries_.emplace(file.identity(), std::move(entry)).first;
  }
  if (!it->second.status.ok()) {
    return it->second.status;
  }
  return it->second.symbols;
}

namespace {

Result<LocatedInterpreter> Locate(pid_t pid, RemoteMemory& memory, ElfCache& elf_cache,
                                  const NativeReaderLimits& limits) {
  EXPANSE_ASSIGN_OR_RETURN(const std::string maps_text,
                           ReadProcFile(pid, Format("/proc/{}/maps", pid), limits.max_maps_bytes));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<MemoryMapping> mappings,
                           ParseProcMaps(maps_text, limits.max_mappings));
  std::string exe_path;
  {
    std::array<char, 4096> target{};
    const std::string link = Format("/proc/{}/exe", pid);
    const ssize_t length = readlink(link.c_str(), target.data(), target.size() - 1);
    // Kernel threads have no executable; a failure here leaves only libpython to find.
    if (length > 0) {
      exe_path.assign(target.data(), static_cast<std::size_t>(length));
      if (std::string_view(exe_path).ends_with(kDeletedSuffix)) {
        exe_path.resize(exe_path.size() - kDeletedSuffix.size());
      }
    }
  }

  const std::vector<std::string> candidates = CandidateBinaries(mappings, exe_path);
  // Each candidate's mappings, gathered in one pass rather than one pass per candidate.
  std::unordered_map<std::string_view, std::vector<MemoryMapping>> of_candidate;
  for (const std::string& path : candidates) {
    of_candidate[path];
  }
  for (const MemoryMapping& mapping : mappings) {
    if (const auto it = of_candidate.find(mapping.path); it != of_candidate.end()) {
      it->second.push_back(mapping);
    }
  }

  std::optional<PythonVersion> named_version;
  for (const std::string& path : candidates) {
    const std::optional<PythonVersion> from_name = VersionFromFileName(BaseName(path));
    if (from_name && !named_version) {
      named_version = from_name;
    }
    const std::vector<MemoryMapping>& of_file = of_candidate.at(path);
    Result<std::unique_ptr<DiskFile>> file = OpenMappedFile(pid, path, of_file.front());
    if (!file.ok()) {
      // An executable we cannot open says nothing unless its name says Python.
      if (IsLibPythonName(BaseName(path)) || from_name) {
        return std::move(file).status();
      }
      continue;
    }
    Result<ElfSymbols> symbols = elf_cache.Get(**file);
    if (!symbols.ok()) {
      continue;  // not an ELF we can read: not the interpreter
    }
    const auto runtime = symbols->values.find(kRuntimeSymbol);
    if (runtime == symbols->values.end()) {
      continue;
    }
    const std::optional<std::uint64_t> bias = LoadBias(*symbols, of_file);
    if (!bias) {
      return UnavailableError(Format("py_stacks: pid {}: no mapping of {} matches its first "
                                     "load segment",
                                     pid, QuoteForMessage(path, 200)))
          .WithReason("binary_unavailable");
    }
    auto address_of = [&](std::string_view name) -> std::uint64_t {
      const auto it = symbols->values.find(name);
      return it == symbols->values.end() ? 0 : *bias + it->second;
    };

    VersionEvidence evidence;
    evidence.file_name = from_name;
    if (const std::uint64_t py_version = address_of(kVersionSymbol); py_version != 0) {
      EXPANSE_ASSIGN_OR_RETURN(const std::uint64_t hex, ReadU64(memory, py_version));
      evidence.py_version = VersionFromHex(hex);
    }
    LocatedInterpreter located;
    located.binary = path;
    located.info.runtime_address = *bias + runtime->second;
    EXPANSE_ASSIGN_OR_RETURN(const std::string table,
                             memory.Read(located.info.runtime_address, kDebugOffsets313Size));
    const std::span<const std::uint8_t> table_bytes(
        reinterpret_cast<const std::uint8_t*>(table.data()), table.size());
    evidence.debug_offsets = DebugOffsetsVersion(table_bytes);
    if (evidence.debug_offsets) {
      evidence.debug_offsets->free_threaded = LoadU64(table_bytes, 16) != 0;
    }
    Result<PythonVersion> version = DecideVersion(evidence);
    if (!version.ok()) {
      return FailedPreconditionError(
                 Format("py_stacks: pid {}: {}", pid, version.status().message()))
          .WithReason("unsupported_version");
    }
    located.info.version = *version;
    if (version->minor >= 13) {
      EXPANSE_ASSIGN_OR_RETURN(located.info.layout, LayoutFromDebugOffsets(table_bytes));
    } else {
      EXPANSE_ASSIGN_OR_RETURN(located.info.layout, BuiltInLayout(*version));
    }
    located.info.code_type = address_of(kCodeTypeSymbol);
    located.info.str_type = address_of(kStrTypeSymbol);
    located.info.bytes_type = address_of(kBytesTypeSymbol);
    located.info.none_object = address_of(kNoneSymbol);
    return located;
  }
  if (named_version && !IsSupportedVersion(*named_version)) {
    return Unsupported(pid, named_version->ToString());
  }
  return FailedPreconditionError(
             Format("py_stacks: pid {} is not a Python process: no libpython or python "
                    "executable defining _PyRuntime is mapped",
                    pid))
      .WithReason("not_python");
}

}  // namespace

Result<LocatedInterpreter> LocateInterpreter(pid_t pid, RemoteMemory& memory, ElfCache& elf_cache,
                                             const NativeReaderLimits& limits) {
  Result<LocatedInterpreter> located = Locate(pid, memory, elf_cache, limits);
  if (located.ok() || located.status().message().starts_with("py_stacks: ")) {
    return located;
  }
  // A failed read of the target's memory or a bad table says nothing about which process.
  const Status& status = located.status();
  return Status(status.code(), Format("py_stacks: pid {}: {}", pid, status.message()))
      .WithReason(status.reason());
}

}  // namespace expanse::pystack
