#include "release/archive_extract.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/file_util.h"
#include "release/archive_scan.h"
#include "release/file_io.h"

namespace expanse::release {

using fs::UniqueFd;
using release_internal::ArchiveScan;

namespace {

Result<UniqueFd> OpenArchive(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid())
    return fs::ErrnoStatus(errno, "open archive " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return fs::ErrnoStatus(errno, "stat archive " + path);
  if (!S_ISREG(st.st_mode))
    return InvalidArgumentError(path + " is not a regular file");
  return fd;
}

// Writes entries below a directory descriptor. Every step is relative to a descriptor opened
// with O_NOFOLLOW and every file is created with O_EXCL, so nothing in the destination (even
// if something raced us into it) can redirect a write elsewhere.
class DirectoryWriter final : public release_internal::ScanSink {
 public:
  DirectoryWriter(int root_fd, std::string root_path)
      : root_fd_(root_fd), root_path_(std::move(root_path)) {}

  Status MakeDirectory(const std::string& path) override {
    EXPANSE_ASSIGN_OR_RETURN(UniqueFd dir, OpenDirectory(path));
    return OkStatus();
  }

  Status BeginFile(const std::string& path, uint32_t mode) override {
    size_t slash = path.rfind('/');
    std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    EXPANSE_ASSIGN_OR_RETURN(UniqueFd dir, OpenDirectory(parent));
    file_ = UniqueFd(::openat(dir.get(), name.c_str(),
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!file_.valid())
      return fs::ErrnoStatus(errno, "create " + Shown(path));
    file_path_ = path;
    file_mode_ = mode;
    return OkStatus();
  }

  Status Write(std::string_view bytes) override {
    if (!fs::WriteFully(file_.get(), bytes))
      return fs::ErrnoStatus(errno, "write " + Shown(file_path_));
    return OkStatus();
  }

  Status EndFile() override {
    if (::fchmod(file_.get(), file_mode_) != 0 || ::fsync(file_.get()) != 0)
      return fs::ErrnoStatus(errno, "finish " + Shown(file_path_));
    file_ = UniqueFd();
    return OkStatus();
  }

 private:
  std::string Shown(const std::string& path) const { return root_path_ + "/" + path; }

  // Opens (creating as needed, mode 0755) the directory `path` below the root.
  Result<UniqueFd> OpenDirectory(const std::string& path) {
    UniqueFd current(::dup(root_fd_));
    if (!current.valid())
      return fs::ErrnoStatus(errno, "dup " + root_path_);
    size_t start = 0;
    while (start < path.size()) {
      size_t end = path.find('/', start);
      if (end == std::string::npos)
        end = path.size();
      std::string component = path.substr(start, end - start);
      std::string shown = Shown(path.substr(0, end));
      bool created = ::mkdirat(current.get(), component.c_str(), 0755) == 0;
      if (!created && errno != EEXIST)
        return fs::ErrnoStatus(errno, "create directory " + shown);
      UniqueFd next(::openat(current.get(), component.c_str(),
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next.valid())
        return fs::ErrnoStatus(errno, "open directory " + shown);
      if (created && ::fchmod(next.get(), 0755) != 0)  // exact, whatever the umask
        return fs::ErrnoStatus(errno, "chmod " + shown);
      current = std::move(next);
      start = end + 1;
    }
    return current;
  }

  int root_fd_;
  std::string root_path_;
  UniqueFd file_;
  std::string file_path_;
  uint32_t file_mode_ = kRegularMode;
};

Result<ExtractedRelease> ExtractInto(int archive_fd, const std::string& dest_dir,
                                     const ExtractLimits& limits, const ArchiveScan& first_pass) {
  UniqueFd root(::open(dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid())
    return fs::ErrnoStatus(errno, "open " + dest_dir);
  if (::lseek(archive_fd, 0, SEEK_SET) != 0)
    return fs::ErrnoStatus(errno, "rewind archive for " + dest_dir);
  DirectoryWriter writer(root.get(), dest_dir);
  EXPANSE_ASSIGN_OR_RETURN(ArchiveScan second_pass,
                           release_internal::ScanArchive(archive_fd, limits, &writer));
  // The file could have been replaced between the passes; what was written must be what
  // was checked.
  if (second_pass.files != first_pass.files ||
      second_pass.release_json != first_pass.release_json) {
    return DataLossError("the archive changed while it was being extracted")
        .WithReason("archive_corrupt");
  }
  EXPANSE_ASSIGN_OR_RETURN(ReleaseInfo info,
                           release_internal::CheckAgainstReleaseInfo(second_pass));
  if (::fsync(root.get()) != 0 || ::fchmod(root.get(), 0755) != 0)
    return fs::ErrnoStatus(errno, "finish " + dest_dir);
  return ExtractedRelease{dest_dir, std::move(info)};
}

}  // namespace

Result<ReleaseInfo> InspectArchive(const std::string& archive_path, const ExtractLimits& limits) {
  EXPANSE_ASSIGN_OR_RETURN(UniqueFd fd, OpenArchive(archive_path));
  EXPANSE_ASSIGN_OR_RETURN(ArchiveScan scan,
                           release_internal::ScanArchive(fd.get(), limits, nullptr));
  return release_internal::CheckAgainstReleaseInfo(scan);
}

Result<ExtractedRelease> ExtractArchive(const std::string& archive_path,
                                        const std::string& dest_dir, const ExtractLimits& limits) {
  if (dest_dir.empty())
    return InvalidArgumentError("the extraction directory is empty");
  EXPANSE_ASSIGN_OR_RETURN(UniqueFd fd, OpenArchive(archive_path));
  // First pass: nothing is written until every entry and release.json have checked out.
  EXPANSE_ASSIGN_OR_RETURN(ArchiveScan scan,
                           release_internal::ScanArchive(fd.get(), limits, nullptr));
  EXPANSE_RETURN_IF_ERROR(release_internal::CheckAgainstReleaseInfo(scan));

  // mkdir is the existence check: it fails on anything already there, a symlink included.
  // 0700 until the end, so nobody reads a half-written tree.
  if (::mkdir(dest_dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) {
      return AlreadyExistsError(dest_dir +
                                " already exists; releases are extracted into a fresh directory");
    }
    return fs::ErrnoStatus(errno, "create " + dest_dir);
  }
  Result<ExtractedRelease> extracted = ExtractInto(fd.get(), dest_dir, limits, scan);
  if (!extracted.ok()) {
    std::error_code ignored;
    std::filesystem::remove_all(dest_dir, ignored);  // never follows symlinks
  }
  return extracted;
}

}  // namespace expanse::release
