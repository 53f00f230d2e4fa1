// Opening entries of the shared spool as hostile input. A worker (or whoever else can write
// to the share) controls every name, type, owner, link count and byte; these functions let
// only a plain, single-linked file or directory owned by the expected user through, and
// never block or follow a link while finding out.
#ifndef EXPANSE_SPOOL_HOSTILE_READ_H_
#define EXPANSE_SPOOL_HOSTILE_READ_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/file_util.h"
#include "core/result.h"

namespace expanse::spool {

struct HostileReadLimits {
  uid_t expected_uid = 0;  // the daemon user the samplers write as
  uint64_t max_bytes = 0;
  // Any owner is let through (the caller judges it from `*owner`): the capture spool, where
  // each job's user writes its own files.
  bool any_owner = false;
};

// Reads `name` in `dir_fd`. Failures, by code:
//  - kDataLoss, reason symlink | not_regular | wrong_owner | hardlink | too_large: refused,
//    the caller quarantines the entry;
//  - kNotFound: the entry vanished (a concurrent delete); skip it;
//  - kUnavailable, reason unreadable: an I/O error; leave the entry for the next round;
//  - kUnavailable, reason permission_denied: its mode keeps this reader out (EACCES, EPERM),
//    which the same entry will do again; a reader of hostile writers' files refuses it.
// Opens with O_NOFOLLOW | O_NONBLOCK (a FIFO cannot block) after an lstat that keeps devices
// and FIFOs from being opened at all; the checks that decide run on the opened descriptor.
// The bytes are read into `buffer`, which only grows so a caller reading file after file
// reuses one allocation; the result views it and is valid until the buffer changes.
// `owner`, when given, receives the opened file's owner.
Result<std::string_view> ReadHostileFile(int dir_fd, std::string_view dir_path,
                                         std::string_view name, const HostileReadLimits& limits,
                                         std::string& buffer, uid_t* owner = nullptr);

// A host directory `name` in `parent_fd`, with the same rules and codes: reason symlink,
// not_directory or wrong_owner when refused.
Result<fs::UniqueFd> OpenHostileDirectory(int parent_fd, std::string_view parent_path,
                                          std::string_view name, uid_t expected_uid);

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_HOSTILE_READ_H_
