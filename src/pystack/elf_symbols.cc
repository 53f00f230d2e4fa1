#include "pystack/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::uint64_t kPageMask = ~std::uint64_t{0xfff};

Status Malformed(std::string message) {
  return InvalidArgumentError("ELF: " + std::move(message)).WithReason("elf_malformed");
}

// Reads a whole table of `count` fixed-size records at `offset`, checking the arithmetic.
Result<std::string> ReadTable(RandomAccessFile& file, std::uint64_t offset, std::uint64_t size,
                              std::string_view what) {
  if (offset > file.Size() || size > file.Size() - offset) {
    return Malformed(Format("{} ({} bytes at {}) lies outside the file", what, size, offset));
  }
  std::string bytes(static_cast<std::size_t>(size), '\0');
  EXPANSE_RETURN_IF_ERROR(
      file.ReadAt(offset, std::span(reinterpret_cast<std::uint8_t*>(bytes.data()), bytes.size())));
  return bytes;
}

// Counts what is read from a file and refuses reads past a total, so that no header or
// table layout can make one file cost more than the limit.
class BoundedFile final : public RandomAccessFile {
 public:
  BoundedFile(RandomAccessFile& file, std::size_t max_bytes) : file_(file), left_(max_bytes) {}
  std::uint64_t Size() const override { return file_.Size(); }
  Status ReadAt(std::uint64_t offset, std::span<std::uint8_t> out) override {
    if (out.size() > left_) {
      return InvalidArgumentError("ELF: reading its symbols would read more than the limit")
          .WithReason("elf_too_large");
    }
    left_ -= out.size();
    return file_.ReadAt(offset, out);
  }

 private:
  RandomAccessFile& file_;
  std::size_t left_;
};

template <typename T>
T Record(const std::string& table, std::size_t index) {
  T value;
  std::memcpy(&value, table.data() + index * sizeof(T), sizeof(T));
  return value;
}

// Looks the still-missing wanted names up in one symbol table section.
Status SearchSymbolTable(RandomAccessFile& file, const std::vector<Elf64_Shdr>& sections,
                         const Elf64_Shdr& table, std::set<std::string_view>& missing,
                         ElfSymbols& out, const ElfLimits& limits, bool required) {
  if (table.sh_link >= sections.size()) {
    return Malformed("symbol table links to a missing string table");
  }
  const Elf64_Shdr& strings = sections[table.sh_link];
  if (table.sh_size > limits.max_table_bytes || strings.sh_size > limits.max_table_bytes) {
    if (!required) {
      return OkStatus();
    }
    return InvalidArgumentError(
               Format("ELF: symbol table of {} bytes is over the limit", table.sh_size))
        .WithReason("elf_too_large");
  }
  if (table.sh_entsize != sizeof(Elf64_Sym) || table.sh_size % sizeof(Elf64_Sym) != 0) {
    return Malformed("symbol table entries are not Elf64_Sym");
  }
  EXPANSE_ASSIGN_OR_RETURN(const std::string symbols,
                           ReadTable(file, table.sh_offset, table.sh_size, "symbol table"));
  EXPANSE_ASSIGN_OR_RETURN(const std::string names,
                           ReadTable(file, strings.sh_offset, strings.sh_size, "string table"));
  const std::size_t count = symbols.size() / sizeof(Elf64_Sym);
  for (std::size_t i = 0; i < count && !missing.empty(); ++i) {
    const auto symbol = Record<Elf64_Sym>(symbols, i);
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_name >= names.size()) {
      continue;
    }
    const std::string_view rest(names.data() + symbol.st_name, names.size() - symbol.st_name);
    const std::string_view name = rest.substr(0, std::min(rest.find('\0'), rest.size()));
    const auto wanted = missing.find(name);
    if (wanted == missing.end()) {
      continue;
    }
    out.values.emplace(std::string(name), symbol.st_value);
    missing.erase(wanted);
  }
  return OkStatus();
}

}  // namespace

Status StringFile::ReadAt(std::uint64_t offset, std::span<std::uint8_t> out) {
  if (offset > bytes_.size() || bytes_.size() - offset < out.size()) {
    return InvalidArgumentError(Format("read of {} bytes at {} is past the end ({} bytes)",
                                       out.size(), offset, bytes_.size()));
  }
  if (!out.empty()) {
    std::memcpy(out.data(), bytes_.data() + offset, out.size());
  }
  return OkStatus();
}

Result<std::unique_ptr<DiskFile>> DiskFile::FromFd(int fd, const std::string& path) {
  if (fd < 0) {
    const int error = errno;
    const std::string message = Format("open {}: {}", path, std::strerror(error));
    if (error == ENOENT) {
      return NotFoundError(message);
    }
    if (error == EACCES || error == EPERM) {
      return PermissionDeniedError(message);
    }
    if (error == ELOOP || error == EXDEV) {
      return FailedPreconditionError(message + " (a symbolic link, or a path leaving the root)");
    }
    return UnavailableError(message);
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return FailedPreconditionError(Format("{} is not a regular file", path));
  }
  const FileIdentity identity{
      static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino),
      static_cast<std::uint64_t>(info.st_size),
      static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
  struct statfs fs_info {};
  constexpr decltype(fs_info.f_type) kOverlayMagic = 0x794c7630;  // OVERLAYFS_SUPER_MAGIC
  const bool on_overlay = fstatfs(fd, &fs_info) == 0 && fs_info.f_type == kOverlayMagic;
  return std::unique_ptr<DiskFile>(new DiskFile(fd, identity, on_overlay));
}

Result<std::unique_ptr<DiskFile>> DiskFile::Open(const std::string& path) {
  return FromFd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), path);
}

Result<std::unique_ptr<DiskFile>> DiskFile::OpenInRoot(const std::string& root,
                                                       const std::string& path) {
  const int root_fd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return FromFd(-1, root);
  }
  open_how how{};
  // O_NONBLOCK: a FIFO planted where the binary was must not hang the sampler; it is then
  // refused as not a regular file.
  how.flags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how)));
  int error = errno;
  close(root_fd);
  if (fd < 0 && (error == ENOSYS || error == EPERM)) {
    // A kernel before 5.6, or a seccomp profile that refuses openat2: the path inside the root
    // as open() resolves it. Its last component is still no link, a FIFO still does not block,
    // and the caller still requires a regular file with the mapping's device and inode, so a
    // link in a parent directory can at most lead to that very file.
    fd = open((root + "/" + path).c_str(), how.flags);
    error = errno;
  }
  errno = error;
  return FromFd(fd, path);
}

DiskFile::~DiskFile() { close(fd_); }

Status DiskFile::ReadAt(std::uint64_t offset, std::span<std::uint8_t> out) {
  if (offset > identity_.size || identity_.size - offset < out.size()) {
    return InvalidArgumentError(Format("read of {} bytes at {} is past the end ({} bytes)",
                                       out.size(), offset, identity_.size));
  }
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t got =
        pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return UnavailableError(Format("read at {}: {}", offset + done,
                                     got == 0 ? "unexpected end" : std::strerror(errno)));
    }
    done += static_cast<std::size_t>(got);
  }
  return OkStatus();
}

Result<ElfSymbols> ReadElfSymbols(RandomAccessFile& whole_file,
                                  std::span<const std::string_view> wanted,
                                  const ElfLimits& limits) {
  BoundedFile file(whole_file, limits.max_file_bytes_read);
  Elf64_Ehdr header{};
  if (file.Size() < sizeof(header)) {
    return InvalidArgumentError("ELF: file too short for a header").WithReason("not_elf");
  }
  EXPANSE_RETURN_IF_ERROR(
      file.ReadAt(0, std::span(reinterpret_cast<std::uint8_t*>(&header), sizeof(header))));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_machine != EM_X86_64) {
    return InvalidArgumentError("ELF: not a 64-bit little-endian x86-64 ELF file")
        .WithReason("not_elf");
  }

  ElfSymbols out;
  if (header.e_phnum > limits.max_program_headers) {
    return InvalidArgumentError(Format("ELF: {} program headers", header.e_phnum))
        .WithReason("elf_too_large");
  }
  if (header.e_phnum > 0) {
    if (header.e_phentsize != sizeof(Elf64_Phdr)) {
      return Malformed("program header size is not sizeof(Elf64_Phdr)");
    }
    EXPANSE_ASSIGN_OR_RETURN(
        const std::string table,
        ReadTable(file, header.e_phoff, std::uint64_t{header.e_phnum} * sizeof(Elf64_Phdr),
                  "program headers"));
    for (std::size_t i = 0; i < header.e_phnum; ++i) {
      const auto segment = Record<Elf64_Phdr>(table, i);
      if (segment.p_type == PT_LOAD) {
        out.loads.push_back({segment.p_offset, segment.p_vaddr, segment.p_filesz, segment.p_memsz});
      }
    }
  }

  // e_shnum 0 with section headers present means "more than 0xff00, see section 0"; such
  // files are far past any limit here, so they count as having none.
  if (header.e_shnum > limits.max_sections) {
    return InvalidArgumentError(Format("ELF: {} sections", header.e_shnum))
        .WithReason("elf_too_large");
  }
  std::vector<Elf64_Shdr> sections;
  if (header.e_shnum > 0) {
    if (header.e_shentsize != sizeof(Elf64_Shdr)) {
      return Malformed("section header size is not sizeof(Elf64_Shdr)");
    }
    EXPANSE_ASSIGN_OR_RETURN(
        const std::string table,
        ReadTable(file, header.e_shoff, std::uint64_t{header.e_shnum} * sizeof(Elf64_Shdr),
                  "section headers"));
    for (std::size_t i = 0; i < header.e_shnum; ++i) {
      sections.push_back(Record<Elf64_Shdr>(table, i));
    }
  }

  std::set<std::string_view> missing(wanted.begin(), wanted.end());
  for (const std::uint32_t type : {SHT_DYNSYM, SHT_SYMTAB}) {
    const auto first = std::find_if(sections.begin(), sections.end(),
                                    [type](const Elf64_Shdr& s) { return s.sh_type == type; });
    if (first != sections.end() && !missing.empty()) {
      EXPANSE_RETURN_IF_ERROR(SearchSymbolTable(file, sections, *first, missing, out, limits,
                                                /*required=*/type == SHT_DYNSYM));
    }
  }
  return out;
}

std::optional<std::uint64_t> LoadBias(const ElfSymbols& elf,
                                      std::span<const MemoryMapping> mappings) {
  if (elf.loads.empty()) {
    return std::nullopt;
  }
  const ElfLoadSegment& first = elf.loads.front();
  for (const MemoryMapping& mapping : mappings) {
    if (mapping.file_offset == (first.file_offset & kPageMask)) {
      return mapping.start - (first.virtual_address & kPageMask);
    }
  }
  return std::nullopt;
}

}  // namespace expanse::pystack
