// FileReader: how the attribution module reads kernel-made files (/proc/<pid>/cgroup,
// /proc/<pid>/environ, cgroup devices.list), with a byte cap. An interface so tests can produce
// failures a root test run cannot provoke on real files (permission denied, a process that
// vanishes between two reads).
#ifndef EXPANSE_ATTRIBUTION_FILE_READER_H_
#define EXPANSE_ATTRIBUTION_FILE_READER_H_

#include <cstddef>
#include <string>

#include "core/result.h"

namespace expanse::attribution {

struct CappedFile {
  std::string bytes;       // at most the cap
  bool truncated = false;  // the file held more than the cap
};

class FileReader {
 public:
  virtual ~FileReader() = default;

  // Reads until end of file or `max_bytes` (procfs files report size 0). Errors:
  //   kNotFound, reason "gone": ENOENT or ESRCH (the process, cgroup or file went away);
  //   kPermissionDenied, reason "permission_denied": EACCES or EPERM (e.g. another user's environ
  //     without root or CAP_SYS_PTRACE);
  //   kUnavailable for any other failure.
  virtual Result<CappedFile> Read(const std::string& path, size_t max_bytes) const = 0;
};

// The real file system. Thread-safe; lives for the whole program.
const FileReader& SystemFileReader();

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_FILE_READER_H_
