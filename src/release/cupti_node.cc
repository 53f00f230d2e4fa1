#include "release/cupti_node.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <vector>

#include "core/file_util.h"
#include "core/subprocess.h"
#include "release/archive_extract.h"
#include "release/embedded_key.h"
#include "release/release_info.h"
#include "release/resolver.h"

namespace expanse::release {
namespace {

constexpr char kArch[] = "amd64";

std::vector<std::string> CuptiArchives(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.starts_with(std::string(kCuptiPackage) + "_") && name.ends_with(kArchiveSuffix))
      out.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The variant and version unpacked at `dir` now, from its release.json ("" when none).
std::string InstalledIdentity(const std::string& dir) {
  Result<std::optional<std::string>> text =
      fs::ReadSmallFile(dir + "/" + kReleaseInfoName, kMaxReleaseInfoBytes);
  if (!text.ok() || !*text)
    return "";
  Result<ReleaseInfo> info = ParseReleaseInfo(**text);
  return info.ok() ? info->variant + "@" + info->version : "";
}

}  // namespace

std::optional<std::string> LocalDriverVersion(std::string& why) {
  SubprocessOptions options;
  options.argv = {"nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"};
  options.timeout = std::chrono::seconds(20);
  Result<SubprocessResult> r = RunSubprocess(options);
  if (!r.ok()) {
    why = "nvidia-smi is not installed";
    return std::nullopt;
  }
  if (!r->Succeeded()) {
    why = r->timed_out ? "nvidia-smi did not answer in 20 s" : "nvidia-smi found no usable GPU";
    return std::nullopt;
  }
  // One line per GPU, each the same version: take the first, exactly.
  std::string line = r->stdout_text.substr(0, r->stdout_text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  static const std::regex kDriver("[0-9]+\\.[0-9]+(\\.[0-9]+)?");
  if (!std::regex_match(line, kDriver)) {
    why = "nvidia-smi printed no driver version";
    return std::nullopt;
  }
  return line;
}

NodeCupti EnsureNodeCupti(const std::string& prefix, const std::string& host,
                          const std::optional<std::string>& driver, std::string_view pinned,
                          std::string_view key_pem) {
  NodeCupti out;
  const std::string artifacts = prefix + "/" + kCuptiArtifactsDir;
  std::string key(key_pem);
  if (key.empty()) {
    Result<std::optional<std::string>> stored =
        fs::ReadSmallFile(artifacts + "/" + kArtifactsKeyName, 65536);
    key = stored.ok() && *stored ? **stored : std::string(EmbeddedReleasePublicKey());
  }
  std::vector<ManifestCupti> variants;
  std::vector<std::string> paths;
  for (const std::string& path : CuptiArchives(artifacts)) {
    Result<StagedBinary> staged = InspectStagedBinary(path, key);
    if (!staged.ok() || !staged->verified || !staged->info)
      continue;  // unsigned or damaged: never used
    ManifestCupti c;
    c.variant = staged->info->variant;
    c.arch = staged->info->arch;
    c.min_driver = staged->info->min_driver;
    variants.push_back(c);
    paths.push_back(path);
  }
  if (variants.empty()) {
    out.note = "CUPTI: no signed CUPTI archives in " + artifacts;
    return out;
  }
  Result<CuptiSelection> chosen = SelectCuptiVariant(variants, kArch, driver, pinned);
  if (!chosen.ok()) {
    out.note = "CUPTI: " + chosen.status().message();
    return out;
  }
  if (!chosen->variant) {
    out.note = "CUPTI " + chosen->explanation;
    return out;
  }
  std::string archive;
  for (size_t i = 0; i < variants.size(); ++i) {
    if (variants[i].variant == chosen->variant->variant)
      archive = paths[i];
  }
  const std::string nodes = prefix + "/" + kCuptiNodesDir;
  const std::string target = nodes + "/" + host;
  Result<ReleaseInfo> info = InspectArchive(archive);
  const std::string wanted = info.ok() ? info->variant + "@" + info->version : "";
  out.variant = chosen->variant->variant;
  out.dir = target;
  if (!wanted.empty() && InstalledIdentity(target) == wanted) {
    out.note = "CUPTI " + chosen->explanation + " (already in place)";
    return out;
  }
  if (!fs::MakeDirectories(nodes, 0755).ok()) {
    out.variant.clear();
    out.note = "CUPTI: cannot create " + nodes;
    return out;
  }
  // 0755 whatever the umask: every job's process passes through here to load the agent (a
  // failure shows in profiling_permissions with this path).
  (void)::chmod(nodes.c_str(), 0755);
  const std::string fresh = target + ".new." + std::to_string(getpid());
  std::error_code ec;
  std::filesystem::remove_all(fresh, ec);
  Result<ExtractedRelease> unpacked = ExtractArchive(archive, fresh);
  if (!unpacked.ok()) {
    out.variant.clear();
    out.note = "CUPTI not installed: " + unpacked.status().message();
    return out;
  }
  // Replace what is there in one rename; the old tree goes after.
  const std::string old = target + ".old." + std::to_string(getpid());
  struct stat st {};
  const bool had = lstat(target.c_str(), &st) == 0;
  if (had && std::rename(target.c_str(), old.c_str()) != 0) {
    std::filesystem::remove_all(fresh, ec);
    out.variant.clear();
    out.note = "CUPTI: cannot replace " + target;
    return out;
  }
  if (std::rename(fresh.c_str(), target.c_str()) != 0) {
    std::filesystem::remove_all(fresh, ec);
    out.variant.clear();
    out.note = "CUPTI: cannot move the new build into " + target;
    return out;
  }
  if (had)
    std::filesystem::remove_all(old, ec);
  out.changed = true;
  out.note = "CUPTI " + chosen->explanation;
  return out;
}

}  // namespace expanse::release
