// Test helpers for slurm.conf reading, wiring and hook scripts: configurations held in memory
// and temporary directories.
#ifndef EXPANSE_SLURM_SLURM_CONF_TEST_UTIL_H_
#define EXPANSE_SLURM_SLURM_CONF_TEST_UTIL_H_

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/test_temp_dir.h"
#include "slurm/slurm_conf.h"

namespace expanse::slurm::testing {

using ConfFiles = std::map<std::string, std::string>;

// Reads from `files`, whose names are lexically normal paths (as the kernel would resolve
// "a/../b" when a exists); a file over the limit gives kResourceExhausted, as the real reader does.
inline SlurmConfFileReader MemoryReader(ConfFiles files) {
  return [files = std::move(files)](const std::string& path,
                                    std::size_t max_bytes) -> Result<std::optional<std::string>> {
    const auto found = files.find(std::filesystem::path(path).lexically_normal().string());
    if (found == files.end())
      return std::optional<std::string>();
    if (found->second.size() > max_bytes)
      return ResourceExhaustedError(path + ": too large");
    return std::optional<std::string>(found->second);
  };
}

inline Result<SlurmConf> ParseFiles(const ConfFiles& files,
                                    const std::string& main = "/etc/slurm/slurm.conf") {
  return ParseSlurmConf(main, MemoryReader(files));
}

using TempDir = ::expanse::testing::TempDir;

}  // namespace expanse::slurm::testing

#endif  // EXPANSE_SLURM_SLURM_CONF_TEST_UTIL_H_
