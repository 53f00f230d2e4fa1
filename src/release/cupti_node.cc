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
#include "core/version_compare.h"
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

// Whether only root can have written `path` (no symbolic link, owned by root, not writable by
// group or others).
bool OnlyRootCouldWrite(const std::string& path, std::string& why) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    why = path + " cannot be read";
    return false;
  }
  if (S_ISLNK(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) {
    why = path + " is not root's alone (a link, another owner, or group/other-writable)";
    return false;
  }
  return true;
}

// The key that verifies the archives on the mount when the caller gives none. The controller's
// install stores the key that verified its release beside them (a site's own key, after an
// agreed rotation); it is trusted only when nobody but root can have put it there, since
// whoever could replace it could sign archives of their own that every node's root Prolog
// would unpack and inject into jobs. Else the embedded release key, and `note` says why.
std::string KeyForMount(const std::string& prefix, std::string& note) {
  const std::string artifacts = prefix + "/" + kCuptiArtifactsDir;
  const std::string key_path = artifacts + "/" + kArtifactsKeyName;
  struct stat st {};
  if (lstat(key_path.c_str(), &st) != 0)
    return std::string(EmbeddedReleasePublicKey());
  std::string why;
  for (const std::string& path : {prefix, prefix + "/lib", artifacts, key_path}) {
    if (!OnlyRootCouldWrite(path, why)) {
      note = "; the key beside the archives is ignored (" + why + ")";
      return std::string(EmbeddedReleasePublicKey());
    }
  }
  Result<std::optional<std::string>> stored =
      fs::ReadSmallFile(key_path, 65536, fs::Symlinks::kRefuse);
  return stored.ok() && *stored ? **stored : std::string(EmbeddedReleasePublicKey());
}

struct SignedCupti {
  std::string path;
  ReleaseInfo info;
};

// The signed archives in `artifacts`, one per variant: the highest version of each (an
// operator may leave an older release's archives beside the newer ones).
std::vector<SignedCupti> SignedArchives(const std::string& artifacts, const std::string& key) {
  std::vector<SignedCupti> out;
  for (const std::string& path : CuptiArchives(artifacts)) {
    Result<StagedBinary> staged = InspectStagedBinary(path, key);
    if (!staged.ok() || !staged->verified || !staged->info || staged->info->name != kCuptiPackage)
      continue;  // unsigned, damaged or another package: never used
    auto same = std::find_if(out.begin(), out.end(), [&](const SignedCupti& c) {
      return c.info.variant == staged->info->variant;
    });
    if (same == out.end())
      out.push_back({path, *staged->info});
    else if (CompareVersions(staged->info->version, same->info.version) > 0)
      *same = {path, *staged->info};
  }
  return out;
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

namespace {

// EnsureNodeCupti without its note file.
NodeCupti ChooseAndUnpack(const std::string& prefix, const std::string& host,
                          const std::optional<std::string>& driver, std::string_view pinned,
                          std::string_view key_pem) {
  NodeCupti out;
  const std::string artifacts = prefix + "/" + kCuptiArtifactsDir;
  std::string key_note;
  const std::string key = key_pem.empty() ? KeyForMount(prefix, key_note) : std::string(key_pem);
  const std::vector<SignedCupti> signed_archives = SignedArchives(artifacts, key);
  std::vector<ManifestCupti> variants;
  for (const SignedCupti& c : signed_archives)
    variants.push_back(
        {.variant = c.info.variant, .arch = c.info.arch, .min_driver = c.info.min_driver});
  if (variants.empty()) {
    out.note = "CUPTI: no signed CUPTI archives in " + artifacts + key_note;
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
  const SignedCupti& pick = *std::find_if(
      signed_archives.begin(), signed_archives.end(),
      [&](const SignedCupti& c) { return c.info.variant == chosen->variant->variant; });
  const std::string nodes = prefix + "/" + kCuptiNodesDir;
  const std::string target = nodes + "/" + host;
  const std::string wanted = pick.info.variant + "@" + pick.info.version;
  out.variant = chosen->variant->variant;
  out.dir = target;
  if (InstalledIdentity(target) == wanted) {
    out.note = "CUPTI " + chosen->explanation + " (already in place)" + key_note;
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
  // Unpacked from a copy of exactly the bytes verified, never from the mount's file again:
  // it could be replaced between the check and the unpacking.
  const std::string copy = nodes + "/." + host + ".archive." + std::to_string(getpid());
  Result<ExtractedRelease> unpacked = [&]() -> Result<ExtractedRelease> {
    EXPANSE_ASSIGN_OR_RETURN(StagedBinary verified, InspectStagedBinary(pick.path, key, copy));
    if (!verified.info || verified.info->variant + "@" + verified.info->version != wanted)
      return FailedPreconditionError(pick.path + " changed while it was read");
    return ExtractArchive(copy, fresh);
  }();
  std::filesystem::remove(copy, ec);
  if (!unpacked.ok()) {
    std::filesystem::remove_all(fresh, ec);
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
  out.note = "CUPTI " + chosen->explanation + key_note;
  return out;
}

// Leaves `note` in <nodes>/<host>/NOTE (one line; best effort: a note that cannot be written
// must not stop anything either), for the sampler's cupti capability to quote when it finds no
// helper there.
void WriteNodeNote(const std::string& prefix, const std::string& host, const std::string& note) {
  const std::string nodes = prefix + "/" + kCuptiNodesDir;
  const std::string dir = nodes + "/" + host;
  if (!fs::MakeDirectories(dir, 0755).ok())
    return;
  (void)::chmod(nodes.c_str(), 0755);
  std::string line = note.substr(0, kMaxNodeCuptiNoteBytes - 1);
  std::replace_if(
      line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  (void)fs::WriteFileAtomically(dir, kNodeCuptiNoteName, line + "\n", 0644);
}

}  // namespace

std::string NodeCuptiNoteFor(const std::string& helper_path) {
  static constexpr std::string_view kInstalled = "/bin/expanse-cupti-helper";
  if (!helper_path.ends_with(kInstalled) ||
      helper_path.find(std::string("/") + kCuptiNodesDir + "/") == std::string::npos)
    return "";
  const std::string dir = helper_path.substr(0, helper_path.size() - kInstalled.size());
  Result<std::optional<std::string>> text = fs::ReadSmallFile(
      dir + "/" + kNodeCuptiNoteName, kMaxNodeCuptiNoteBytes, fs::Symlinks::kRefuse);
  if (!text.ok() || !*text)
    return "";
  std::string note = std::move(**text);
  while (!note.empty() && (note.back() == '\n' || note.back() == ' '))
    note.pop_back();
  for (char& c : note) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  }
  return note;
}

NodeCupti EnsureNodeCupti(const std::string& prefix, const std::string& host,
                          const std::optional<std::string>& driver, std::string_view pinned,
                          std::string_view key_pem) {
  NodeCupti out = ChooseAndUnpack(prefix, host, driver, pinned, key_pem);
  WriteNodeNote(prefix, host, out.note);
  return out;
}

}  // namespace expanse::release
