#include "pystack/elf_symbols.h"

#include <elf.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::pystack {
namespace elf_symbols_test {
namespace {

constexpr std::array<std::string_view, 3> kWanted = {"_PyRuntime", "Py_Version", "PyCode_Type"};

// A small x86-64 ELF: two PT_LOAD segments, a .dynsym defining _PyRuntime (and referring to an
// undefined Py_Version), and a .symtab defining PyCode_Type.
struct ElfBuilder {
  ElfBuilder() {
    loads.resize(2);
    loads[0].p_type = PT_LOAD;
    loads[0].p_offset = 0;
    loads[0].p_vaddr = 0;
    loads[0].p_filesz = 0x1000;
    loads[1].p_type = PT_LOAD;
    loads[1].p_offset = 0x1000;
    loads[1].p_vaddr = 0x3000;
    loads[1].p_filesz = 0x1000;
  }

  std::string Build() const {
    std::string dynstr = std::string("\0_PyRuntime\0Py_Version\0", 23);
    std::string strtab = std::string("\0PyCode_Type\0", 13);
    std::vector<Elf64_Sym> dynsym(3);
    dynsym[1].st_name = 1;
    dynsym[1].st_shndx = 5;
    dynsym[1].st_value = 0x4000;
    dynsym[2].st_name = 12;  // Py_Version, undefined here
    dynsym[2].st_shndx = SHN_UNDEF;
    std::vector<Elf64_Sym> symtab(2);
    symtab[1].st_name = 1;
    symtab[1].st_shndx = 5;
    symtab[1].st_value = 0x5000;

    std::string file(sizeof(Elf64_Ehdr), '\0');
    const std::size_t phoff = Append(file, loads.data(), loads.size() * sizeof(Elf64_Phdr));
    const std::size_t dynsym_off = Append(file, dynsym.data(), dynsym.size() * sizeof(Elf64_Sym));
    const std::size_t dynstr_off = Append(file, dynstr.data(), dynstr.size());
    const std::size_t symtab_off = Append(file, symtab.data(), symtab.size() * sizeof(Elf64_Sym));
    const std::size_t strtab_off = Append(file, strtab.data(), strtab.size());
    std::vector<Elf64_Shdr> sections(5);
    sections[1] = Table(SHT_DYNSYM, dynsym_off, dynsym.size() * sizeof(Elf64_Sym), 2);
    sections[2] = Table(SHT_STRTAB, dynstr_off, dynstr.size(), 0);
    sections[3] = Table(SHT_SYMTAB, symtab_off, symtab.size() * sizeof(Elf64_Sym), 4);
    sections[4] = Table(SHT_STRTAB, strtab_off, strtab.size(), 0);
    for (const auto& [index, section] : section_overrides) {
      sections[index] = section;
    }
    const std::size_t shoff = Append(file, sections.data(), sections.size() * sizeof(Elf64_Shdr));

    Elf64_Ehdr header{};
    std::memcpy(header.e_ident, ELFMAG, SELFMAG);
    header.e_ident[EI_CLASS] = ELFCLASS64;
    header.e_ident[EI_DATA] = ELFDATA2LSB;
    header.e_type = ET_DYN;
    header.e_machine = machine;
    header.e_phoff = phoff;
    header.e_phentsize = sizeof(Elf64_Phdr);
    header.e_phnum = static_cast<Elf64_Half>(loads.size());
    header.e_shoff = shoff;
    header.e_shentsize = sizeof(Elf64_Shdr);
    header.e_shnum = static_cast<Elf64_Half>(sections.size());
    std::memcpy(file.data(), &header, sizeof(header));
    return file;
  }

  std::uint16_t machine = EM_X86_64;
  std::vector<Elf64_Phdr> loads;
  std::vector<std::pair<int, Elf64_Shdr>> section_overrides;  // replace section N

  static std::size_t Append(std::string& file, const void* data, std::size_t size) {
    const std::size_t offset = (file.size() + 7) & ~std::size_t{7};
    file.resize(offset);
    file.append(static_cast<const char*>(data), size);
    return offset;
  }
  static Elf64_Shdr Table(std::uint32_t type, std::size_t offset, std::size_t size,
                          std::uint32_t link) {
    Elf64_Shdr section{};
    section.sh_type = type;
    section.sh_offset = offset;
    section.sh_size = size;
    section.sh_link = link;
    section.sh_entsize = type == SHT_STRTAB ? 0 : sizeof(Elf64_Sym);
    return section;
  }
};

TEST(ElfSymbolsTest, FindsDefinedSymbolsInDynsymThenSymtab) {
  StringFile file(ElfBuilder().Build());
  const Result<ElfSymbols> symbols = ReadElfSymbols(file, kWanted);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  EXPECT_EQ(symbols->values.at("_PyRuntime"), 0x4000u);
  EXPECT_EQ(symbols->values.at("PyCode_Type"), 0x5000u);
  EXPECT_FALSE(symbols->values.contains("Py_Version"));  // only an undefined reference
  ASSERT_EQ(symbols->loads.size(), 2u);
  EXPECT_EQ(symbols->loads[1].virtual_address, 0x3000u);
}

TEST(ElfSymbolsTest, LoadBiasFromTheMappingOfTheFirstSegment) {
  StringFile file(ElfBuilder().Build());
  const ElfSymbols symbols = *ReadElfSymbols(file, kWanted);
  std::vector<MemoryMapping> maps(2);
  maps[0].start = 0x7f0000003000;
  maps[0].file_offset = 0x1000;
  maps[1].start = 0x7f0000000000;
  maps[1].file_offset = 0;
  EXPECT_EQ(LoadBias(symbols, maps), 0x7f0000000000u);
  maps.pop_back();
  EXPECT_FALSE(LoadBias(symbols, maps).has_value());
}

TEST(ElfSymbolsTest, RefusesWhatIsNotAnX8664Elf) {
  for (const std::string& bytes : {std::string("short"), std::string(64, '\0'),
                                   std::string("\x7f"
                                               "ELF") +
                                       std::string(60, '\x01')}) {
    StringFile file(bytes);
    const Result<ElfSymbols> symbols = ReadElfSymbols(file, kWanted);
    ASSERT_FALSE(symbols.ok());
    EXPECT_EQ(symbols.status().reason(), "not_elf");
  }
  ElfBuilder arm;
  arm.machine = EM_AARCH64;
  StringFile file(arm.Build());
  EXPECT_EQ(ReadElfSymbols(file, kWanted).status().reason(), "not_elf");
}

TEST(ElfSymbolsTest, RefusesTablesOutsideTheFile) {
  ElfBuilder builder;
  Elf64_Shdr outside{};
  outside.sh_type = SHT_DYNSYM;
  outside.sh_offset = 1 << 20;
  outside.sh_size = sizeof(Elf64_Sym) * 4;
  outside.sh_entsize = sizeof(Elf64_Sym);
  outside.sh_link = 2;
  builder.section_overrides.push_back({1, outside});
  StringFile file(builder.Build());
  const Result<ElfSymbols> symbols = ReadElfSymbols(file, kWanted);
  ASSERT_FALSE(symbols.ok());
  EXPECT_EQ(symbols.status().reason(), "elf_malformed");

  ElfBuilder bad_link;
  Elf64_Shdr dangling = outside;
  dangling.sh_offset = 0;
  dangling.sh_link = 99;
  bad_link.section_overrides.push_back({1, dangling});
  StringFile dangling_file(bad_link.Build());
  EXPECT_EQ(ReadElfSymbols(dangling_file, kWanted).status().reason(), "elf_malformed");
}

TEST(ElfSymbolsTest, KeepsToItsLimits) {
  StringFile file(ElfBuilder().Build());
  ElfLimits tiny;
  tiny.max_table_bytes = 16;
  const Result<ElfSymbols> too_large = ReadElfSymbols(file, kWanted, tiny);
  ASSERT_FALSE(too_large.ok());
  EXPECT_EQ(too_large.status().reason(), "elf_too_large");

  ElfLimits few_headers;
  few_headers.max_program_headers = 1;
  EXPECT_EQ(ReadElfSymbols(file, kWanted, few_headers).status().reason(), "elf_too_large");
}

// Counts the bytes a parse reads.
class CountingFile final : public RandomAccessFile {
 public:
  explicit CountingFile(std::string bytes) : file_(std::move(bytes)) {}
  std::uint64_t Size() const override { return file_.Size(); }
  Status ReadAt(std::uint64_t offset, std::span<std::uint8_t> out) override {
    bytes_read += out.size();
    return file_.ReadAt(offset, out);
  }
  std::size_t bytes_read = 0;

 private:
  StringFile file_;
};

// ElfBuilder's file with `extra` more .symtab sections, all naming one table of `table_bytes`
// bytes that defines nothing: a crafted libpython whose parse would read every one of them.
std::string ManySymbolTables(std::size_t extra, std::size_t table_bytes) {
  std::string file = ElfBuilder().Build();
  Elf64_Ehdr header;
  std::memcpy(&header, file.data(), sizeof(header));
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  std::memcpy(sections.data(), file.data() + header.e_shoff, sections.size() * sizeof(Elf64_Shdr));
  const std::string empty_table(table_bytes, '\0');
  const std::size_t table = ElfBuilder::Append(file, empty_table.data(), empty_table.size());
  for (std::size_t i = 0; i < extra; ++i) {
    sections.push_back(ElfBuilder::Table(SHT_SYMTAB, table, table_bytes, 4));
  }
  header.e_shoff = ElfBuilder::Append(file, sections.data(), sections.size() * sizeof(Elf64_Shdr));
  header.e_shnum = static_cast<Elf64_Half>(sections.size());
  std::memcpy(file.data(), &header, sizeof(header));
  return file;
}

TEST(ElfSymbolsTest, ReadsOnlyTheFirstOfEachSymbolTable) {
  constexpr std::size_t kTable = 64 * sizeof(Elf64_Sym) * 16;  // 24 KiB
  CountingFile file(ManySymbolTables(2000, kTable));
  // Py_Version is never defined, so every table would be searched for it.
  const Result<ElfSymbols> symbols = ReadElfSymbols(file, kWanted);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  EXPECT_EQ(symbols->values.at("PyCode_Type"), 0x5000u);
  EXPECT_LT(file.bytes_read, 2000 * sizeof(Elf64_Shdr) + 4096);  // headers, not 48 MB of tables
}

TEST(ElfSymbolsTest, BytesReadPerFileAreCapped) {
  CountingFile file(ElfBuilder().Build());
  ElfLimits limits;
  limits.max_file_bytes_read = 256;
  const Result<ElfSymbols> symbols = ReadElfSymbols(file, kWanted, limits);
  EXPECT_EQ(symbols.status().reason(), "elf_too_large");
  EXPECT_LE(file.bytes_read, 256u);
}

TEST(ElfSymbolsTest, TruncatedFilesNeverCrash) {
  const std::string whole = ElfBuilder().Build();
  for (std::size_t size = 0; size < whole.size(); size += 3) {
    StringFile file(whole.substr(0, size));
    const Result<ElfSymbols> symbols = ReadElfSymbols(file, kWanted);
    EXPECT_TRUE(!symbols.ok() || symbols->values.size() <= kWanted.size());
  }
}

TEST(ElfSymbolsTest, ReadsTheDebianPythonExecutable) {
  Result<std::unique_ptr<DiskFile>> file = DiskFile::Open("/usr/bin/python3.11");
  ASSERT_TRUE(file.ok()) << file.status()
                         << " (the native reader's tests need Debian's python3.11)";
  const Result<ElfSymbols> symbols = ReadElfSymbols(**file, kWanted);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  EXPECT_TRUE(symbols->values.contains("_PyRuntime"));
  EXPECT_TRUE(symbols->values.contains("Py_Version"));
  EXPECT_TRUE(symbols->values.contains("PyCode_Type"));
  EXPECT_FALSE(symbols->loads.empty());
}

TEST(ElfSymbolsTest, ASleepBinaryHasNoInterpreter) {
  Result<std::unique_ptr<DiskFile>> file = DiskFile::Open("/bin/sleep");
  ASSERT_TRUE(file.ok()) << file.status();
  const Result<ElfSymbols> symbols = ReadElfSymbols(**file, kWanted);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  EXPECT_TRUE(symbols->values.empty());
}

TEST(DiskFileTest, OpensRegularFilesOnly) {
  EXPECT_EQ(DiskFile::Open("/nonexistent/python").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(DiskFile::Open("/proc/self").status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace elf_symbols_test
}  // namespace expanse::pystack
