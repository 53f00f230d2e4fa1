#include "pystack/process_memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "pystack/text_format.h"

namespace expanse::pystack {

Status ProcessAccessStatus(pid_t pid, int error, std::string_view what) {
  switch (error) {
    case EPERM:
    case EACCES:
      return PermissionDeniedError(
                 Format("py_stacks: ptrace denied for pid {}: {}", pid, std::strerror(error)))
          .WithReason("ptrace_denied");
    case ESRCH:
    case ENOENT:
      return NotFoundError(Format("py_stacks: process {} exited", pid))
          .WithReason("process_exited");
    default:
      return UnavailableError(Format("py_stacks: {}: {}", what, std::strerror(error)))
          .WithReason("proc_read_failed");
  }
}

Status ProcessMemory::ReadInto(std::uint64_t address, std::span<std::uint8_t> out) {
  if (out.empty()) {
    return OkStatus();
  }
  if (out.size() > kMaxReadBytes) {
    return InvalidArgumentError(Format("refusing to read {} bytes", out.size()));
  }
  iovec local{out.data(), out.size()};
  iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), out.size()};
  const ssize_t got = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(out.size())) {
    return OkStatus();
  }
  if (got >= 0) {
    // A short read: the range runs into an unmapped page.
    return UnreadableAddress(address, out.size(), Format("only {} bytes mapped", got));
  }
  const int error = errno;
  if (error == EPERM || error == ESRCH) {
    return ProcessAccessStatus(pid_, error, "process_vm_readv");
  }
  return UnreadableAddress(address, out.size(), std::strerror(error));
}

Result<std::string> ReadProcFile(pid_t pid, const std::string& path, std::size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ProcessAccessStatus(pid, errno, "open " + path);
  }
  std::string text;
  std::array<char, 16384> chunk;
  while (true) {
    const ssize_t got = read(fd, chunk.data(), chunk.size());
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      const int error = errno;
      close(fd);
      return ProcessAccessStatus(pid, error, "read " + path);
    }
    if (got == 0) {
      break;
    }
    if (text.size() + static_cast<std::size_t>(got) > max_bytes) {
      close(fd);
      return ResourceExhaustedError(
                 Format("py_stacks: {} is larger than {} bytes", path, max_bytes))
          .WithReason("proc_file_too_large");
    }
    text.append(chunk.data(), static_cast<std::size_t>(got));
  }
  close(fd);
  return text;
}

Result<std::string> ReadSmallProcFile(pid_t pid, const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ProcessAccessStatus(pid, errno, "open " + path);
  }
  std::array<char, 4096> buffer;
  ssize_t got = 0;
  do {
    got = read(fd, buffer.data(), buffer.size());
  } while (got < 0 && errno == EINTR);
  const int error = errno;
  close(fd);
  if (got < 0) {
    return ProcessAccessStatus(pid, error, "read " + path);
  }
  if (static_cast<std::size_t>(got) == buffer.size()) {
    return ResourceExhaustedError(
               Format("py_stacks: {} is not under {} bytes", path, buffer.size()))
        .WithReason("proc_file_too_large");
  }
  return std::string(buffer.data(), static_cast<std::size_t>(got));
}

}  // namespace expanse::pystack
