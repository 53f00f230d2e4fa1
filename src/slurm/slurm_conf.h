// slurm.conf as SLURM 22.05 reads it, for the installer's hook wiring: every `key=value`
// assignment with the file and line it came from, `Include` directives followed, and the
// discovery of which slurm.conf the controller uses. Line syntax: slurm_conf_syntax.h; the rules
// and their sources in SLURM: docs/formats/slurm-conf-patch.md.
#ifndef EXPANSE_SLURM_SLURM_CONF_H_
#define EXPANSE_SLURM_SLURM_CONF_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.h"
#include "core/result.h"
#include "core/subprocess.h"

namespace expanse::slurm {

// Bounds for hostile or mistaken input (a log file passed as slurm.conf, an Include of
// /dev/zero). SLURM itself has none; real configurations are far below them.
inline constexpr std::size_t kMaxSlurmConfFileBytes = 8 << 20;    // one file
inline constexpr std::size_t kMaxSlurmConfTotalBytes = 32 << 20;  // all reads together
inline constexpr int kMaxSlurmConfReads = 256;                    // files read, repeats counted
inline constexpr int kMaxSlurmConfIncludeDepth = 16;

struct SlurmConfFile {
  std::string path;  // absolute, as SLURM builds it (not resolved through symlinks)
  std::string contents;
};

struct SlurmConfAssignment {
  std::string path;  // the file holding it
  int line = 0;      // 1-based; the first physical line of a continued line
  int end_line = 0;  // the last physical line
  // The physical lines' bytes in the file: [begin, end), the last newline included.
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string key;    // as written ("prolog" and "Prolog" are the same key to SLURM)
  std::string value;  // as SLURM stores it: unescaped, without the quotes of a quoted value
  // What follows the value on the same line, trimmed: the other parameters of a NodeName= or
  // PartitionName= line. For a plain key such as Prolog SLURM refuses the line unless it is "".
  std::string rest;
};

class SlurmConf {
 public:
  SlurmConf(std::string main_path, std::vector<SlurmConfFile> files,
            std::vector<SlurmConfAssignment> assignments);

  const std::string& main_path() const { return main_path_; }
  // The main file first, then each included file once, in the order first read.
  const std::vector<SlurmConfFile>& files() const { return files_; }
  const SlurmConfFile* FindFile(std::string_view path) const;
  // In SLURM's reading order: an included file's lines sit where its Include line is.
  const std::vector<SlurmConfAssignment>& assignments() const { return assignments_; }

  // Every assignment of `key` (case-insensitive), in reading order.
  std::vector<const SlurmConfAssignment*> AssignmentsOf(std::string_view key) const;
  // The one SLURM uses: the last. nullptr when the key is not set.
  const SlurmConfAssignment* EffectiveAssignment(std::string_view key) const;
  std::optional<std::string> EffectiveValue(std::string_view key) const;

 private:
  std::string main_path_;
  std::vector<SlurmConfFile> files_;
  std::vector<SlurmConfAssignment> assignments_;
};

// Reads one file, at most `max_bytes` of it: nullopt when it does not exist, kResourceExhausted
// when it is larger. Tests and the fuzzer pass an in-memory one.
using SlurmConfFileReader = std::function<Result<std::optional<std::string>>(
    const std::string& path, std::size_t max_bytes)>;

// Parses `main_path` (absolute) and the files it includes, with SLURM 22.05's rules: keys are
// case-insensitive, `#` starts a comment unless escaped, a trailing backslash continues a line,
// `Include <file>` (case-insensitive, at the start of a line) reads a file inline, relative
// names resolving against the including file's directory and %c becoming the lower-cased
// ClusterName set so far. SLURM does not expand wildcards in Include paths, so neither does
// this. Errors name the file and line: kInvalidArgument (reason slurm_conf_syntax) for a line
// SLURM would refuse, a NUL byte, an include cycle or one nested deeper than
// kMaxSlurmConfIncludeDepth; kNotFound (slurm_conf_not_found) for a missing file;
// kResourceExhausted (slurm_conf_too_large) past the byte or read limits.
Result<SlurmConf> ParseSlurmConf(const std::string& main_path, const SlurmConfFileReader& read);

// ParseSlurmConf over `host`'s files (core/host.h). Only regular files are read
// (kInvalidArgument for a FIFO or device); a file that cannot be read gives kPermissionDenied or
// kInternal with reason slurm_conf_unreadable.
Result<SlurmConf> ReadSlurmConf(Host& host, const std::string& main_path);

// Which slurm.conf to patch, in this order:
//   1. `flag` (--slurm-conf): must be absolute and name an existing file, else an error;
//   2. $SLURM_CONF, when absolute and present;
//   3. the "SLURM_CONF = /path" line of `scontrol show config` (10 s limit), when present;
//   4. /etc/slurm/slurm.conf, 5. /etc/slurm-llnl/slurm.conf.
// None found: kNotFound (reason slurm_conf_not_found) listing each attempt and its outcome and
// asking for --slurm-conf.
// Everything is looked up on `host`: its environment, files and scontrol.
Result<std::string> DiscoverSlurmConf(std::optional<std::string> flag, Host& host);

// The value of "SLURM_CONF = ..." in `scontrol show config` output; nullopt when absent.
std::optional<std::string> SlurmConfFromScontrol(std::string_view output);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_SLURM_CONF_H_
