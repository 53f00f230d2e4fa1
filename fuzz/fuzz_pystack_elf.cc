// Fuzzes what the native CPython reader parses from files before it reads any memory: ELF
// headers and symbol tables (src/pystack/elf_symbols.h, on the python binary or libpython a
// process maps), /proc/<pid>/maps and /proc/<pid>/stat (src/pystack/proc_maps.h), and version
// numbers from file names. Properties, beyond no crash or sanitizer report:
//  - ELF: only wanted names come back, and a load bias is found exactly when some mapping
//    holds the first load segment's page;
//  - maps: every mapping has start <= end and 4-character permissions, and there are no more
//    than the limit;
//  - stat: the state is one letter;
//  - a version read from a file name prints as a name that reads back the same.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pystack/elf_symbols.h"
#include "pystack/proc_maps.h"
#include "pystack/python_version.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_pystack_elf: property violated: %s\n", what);
    std::abort();
  }
}

constexpr std::string_view kWanted[] = {"_PyRuntime", "Py_Version", "PyCode_Type"};

void CheckElf(std::string_view bytes) {
  expanse::pystack::StringFile file{std::string(bytes)};
  expanse::pystack::ElfLimits limits;
  limits.max_table_bytes = 1 << 16;
  const auto symbols = expanse::pystack::ReadElfSymbols(file, kWanted, limits);
  if (!symbols.ok()) {
    return;
  }
  for (const auto& [name, value] : symbols->values) {
    bool wanted = false;
    for (const std::string_view candidate : kWanted) {
      wanted = wanted || name == candidate;
    }
    Require(wanted, "a symbol that was not asked for");
  }
  if (!symbols->loads.empty()) {
    expanse::pystack::MemoryMapping mapping;
    mapping.start = 0x7f0000000000;
    mapping.file_offset = symbols->loads.front().file_offset & ~std::uint64_t{0xfff};
    Require(expanse::pystack::LoadBias(*symbols, {&mapping, 1}).has_value(), "no load bias");
  }
}

void CheckProcText(std::string_view text) {
  constexpr std::size_t kMaxMappings = 64;
  const auto maps = expanse::pystack::ParseProcMaps(text, kMaxMappings);
  if (maps.ok()) {
    Require(maps->size() <= kMaxMappings, "too many mappings");
    for (const auto& mapping : *maps) {
      Require(mapping.start <= mapping.end, "mapping ends before it starts");
      Require(mapping.permissions.size() == 4, "permissions not 4 characters");
    }
  }
  const auto stat = expanse::pystack::ParseProcStat(text);
  if (stat.ok()) {
    Require(std::isalpha(static_cast<unsigned char>(stat->state)) != 0, "state not a letter");
  }
  const auto version = expanse::pystack::VersionFromFileName(text);
  if (version) {
    const std::string name = "python" + version->ToString();
    const auto again = expanse::pystack::VersionFromFileName(name);
    Require(again && again->ToString() == version->ToString(), "version name does not read back");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckElf(bytes);
  CheckProcText(bytes);
  return 0;
}
