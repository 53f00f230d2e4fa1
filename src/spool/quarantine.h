// Internal to the spool module: moving refused entries out of the polling path into
// <spool_root>/.quarantine/<host>-<name>-<reason>, where an operator can inspect them. The
// quarantine is bounded by entry count and bytes; past either bound, or when it cannot be
// used (say, someone replaced it with a symlink), refused entries are deleted instead.
#ifndef EXPANSE_SPOOL_QUARANTINE_H_
#define EXPANSE_SPOOL_QUARANTINE_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>

#include "core/file_util.h"

namespace expanse::spool {

struct QuarantineOptions {
  uint32_t max_entries = 1000;
  uint64_t max_bytes = 256ull << 20;
};

class Quarantine {
 public:
  enum class Outcome { kQuarantined, kDeleted, kLeft };
  using LogFn = std::function<void(std::string_view line)>;

  // `root_fd` is the spool root; it must outlive the Quarantine.
  Quarantine(int root_fd, std::string root_path, QuarantineOptions options, LogFn log);

  // Forgets what it counted, so the next Dispose recounts the quarantine directory (an
  // operator may have emptied it). Called at the start of each round.
  void BeginRound();

  // Moves `entry` of `dir_fd` into the quarantine as `target` (see QuarantineEntryName), or
  // deletes it when the quarantine is full or unusable; kLeft when neither worked (e.g. a
  // non-empty directory that cannot be moved).
  Outcome Dispose(int dir_fd, std::string_view entry, const std::string& target);

 private:
  void Open();

  int root_fd_;
  std::string root_path_;
  QuarantineOptions options_;
  LogFn log_;
  bool opened_ = false;  // Open() ran this round
  fs::UniqueFd dir_;     // invalid when the quarantine is unusable this round
  uint64_t entries_ = 0;
  uint64_t bytes_ = 0;
  bool unusable_logged_ = false;
  std::set<std::string> left_logged_;  // entries already reported as stuck; bounded
};

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_QUARANTINE_H_
