#include "install/release_source.h"

#include <dirent.h>
#include <sys/stat.h>

#include <memory>
#include <optional>

#include "core/file_util.h"
#include "core/version_compare.h"
#include "net/http_client.h"
#include "release/archive_extract.h"
#include "release/embedded_key.h"
#include "release/resolver.h"
#include "release/trusted_key.h"

namespace expanse::install {
namespace {

constexpr char kArch[] = "amd64";

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// --cosign-key, else a key pinned by the site's CLI installer, else the embedded one
// (release/trusted_key.h).
Result<std::string> VerificationKey(const InstallOptions& o,
                                    const std::function<void(const std::string&)>& log) {
  if (o.cosign_key.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(release::TrustedKey key, release::DefaultTrustedKey());
    log("release key: " + key.source);
    return key.pem;
  }
  EXPANSE_ASSIGN_OR_RETURN(
      std::optional<std::string> pem,
      fs::ReadSmallFile(o.cosign_key, 65536, fs::Symlinks::kFollow, fs::Pipes::kRead));
  if (!pem)
    return NotFoundError("--cosign-key " + o.cosign_key + " does not exist");
  return *pem;
}

// Fills the daemon paths from an extracted daemon release.
Status TakeDaemon(const release::ExtractedRelease& extracted, ResolvedRelease& out) {
  out.daemon_path = extracted.dir + "/bin/expanse-daemon";
  if (!IsFile(out.daemon_path)) {
    return FailedPreconditionError("the release archive holds no bin/expanse-daemon")
        .WithReason("release_incomplete");
  }
  if (IsFile(extracted.dir + "/bin/py-spy"))
    out.pyspy_path = extracted.dir + "/bin/py-spy";
  out.version = extracted.info.version;
  return OkStatus();
}

// CUPTI archives of `version` staged beside a --daemon-binary archive, each with a verified
// signature, copied into `staging_dir` with its .sig: the install copies exactly the bytes
// verified, never the operator's file again (it could change meanwhile), and another release's
// archives left in the same directory are not taken for this one's.
std::vector<std::pair<release::ManifestCupti, std::string>> StagedCupti(
    const std::string& dir, const std::string& key, const std::string& version,
    const std::string& staging_dir, const std::function<void(const std::string&)>& log) {
  std::vector<std::pair<release::ManifestCupti, std::string>> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    return found;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.starts_with(std::string(release::kCuptiPackage) + "_") &&
        name.ends_with(release::kArchiveSuffix))
      names.push_back(name);
  }
  closedir(d);
  for (const std::string& name : names) {
    const std::string copy = staging_dir + "/" + name;
    Result<release::StagedBinary> staged =
        release::InspectStagedBinary(dir + "/" + name, key, copy);
    if (!staged.ok() || !staged->verified || !staged->info) {
      log("staged CUPTI archive " + name +
          " skipped: " + (staged.ok() ? staged->message : staged.status().message()));
      continue;
    }
    if (staged->info->name != release::kCuptiPackage || staged->info->version != version) {
      log("staged CUPTI archive " + name + " skipped: it is " + staged->info->name + " " +
          staged->info->version + ", not " + release::kCuptiPackage + " " + version);
      continue;
    }
    // The signature beside the copy: the nodes verify the archive again from there.
    constexpr size_t kMaxSignatureBytes = 4096;  // a base64 ECDSA signature is ~100 bytes
    Result<std::optional<std::string>> signature =
        fs::ReadSmallFile(dir + "/" + name + release::kSignatureSuffix, kMaxSignatureBytes,
                          fs::Symlinks::kFollow, fs::Pipes::kRefuse);
    if (!signature.ok() || !*signature ||
        !fs::WriteFileAtomically(staging_dir, name + release::kSignatureSuffix, **signature, 0600)
             .ok()) {
      log("staged CUPTI archive " + name + " skipped: its signature could not be copied");
      continue;
    }
    release::ManifestCupti c;
    c.variant = staged->info->variant;
    c.arch = staged->info->arch;
    c.min_driver = staged->info->min_driver;
    found.emplace_back(c, copy);
  }
  return found;
}

}  // namespace

Result<ResolvedRelease> ResolveRelease(const InstallOptions& o, const std::string& staging_dir,
                                       const std::string& ca_file,
                                       const std::function<void(const std::string&)>& log) {
  EXPANSE_ASSIGN_OR_RETURN(std::string key, VerificationKey(o, log));
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(staging_dir, 0700));
  ResolvedRelease out;
  out.key_pem = key;

  if (!o.daemon_version.empty()) {
    net::HttpClientOptions base;
    base.ca_file = ca_file;
    EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> http,
                             net::HttpClient::Create(release::ReleaseHttpClientOptions(base)));
    EXPANSE_ASSIGN_OR_RETURN(release::VerifiedManifest manifest,
                             release::FetchManifest(*http, o.releases_url, key));
    log("release manifest signature verified (" + manifest.url + ")");
    // "v1.8.0" and "1.8.0+build" name release 1.8.0 (core/version_compare.h).
    const std::string wanted = CanonicalVersion(o.daemon_version).value_or(o.daemon_version);
    EXPANSE_ASSIGN_OR_RETURN(release::SelectedRelease selected,
                             release::SelectRelease(manifest.manifest, wanted, kArch));
    const std::string archive = staging_dir + "/daemon.tar.gz";
    EXPANSE_RETURN_IF_ERROR(
        release::DownloadVerified(*http, selected.archive.ref, key, archive).status());
    log("daemon " + o.daemon_version + ": archive checksum and signature verified");
    EXPANSE_ASSIGN_OR_RETURN(release::ExtractedRelease extracted,
                             release::ExtractArchive(archive, staging_dir + "/daemon"));
    EXPANSE_RETURN_IF_ERROR(TakeDaemon(extracted, out));
    out.verified = true;

    // Every variant for this architecture: each node picks the one its driver supports.
    for (const release::ManifestCupti& c : selected.release.cupti) {
      if (c.arch != kArch)
        continue;
      const std::string name = c.ref.url.substr(c.ref.url.rfind('/') + 1);
      const std::string path = staging_dir + "/" + name;
      Result<std::string> got = release::DownloadVerified(*http, c.ref, key, path);
      if (got.ok())
        out.cupti_archives.push_back(path);
      else
        log("CUPTI " + c.variant + " skipped: " + got.status().message());
    }
    if (out.cupti_archives.empty())
      out.cupti_note = "CUPTI not installed: release " + o.daemon_version + " has no usable build";
    return out;
  }

  // --daemon-binary: a staged archive with its signature, or a bare binary.
  // An archive is unpacked from the copy of the bytes that were verified (in the private staging
  // directory), never from the operator's path again.
  EXPANSE_ASSIGN_OR_RETURN(
      release::StagedBinary staged,
      release::InspectStagedBinary(o.daemon_binary, key, staging_dir + "/daemon.tar.gz"));
  log(staged.message);
  if (staged.kind == release::StagedBinary::Kind::kBareBinary) {
    out.daemon_path = o.daemon_binary;
    out.verified = false;
    out.cupti_note = "CUPTI not installed: a bare binary comes without CUPTI builds";
    // The guide's --bundled-pyspy: the py-spy shipped beside the daemon binary (unverified,
    // as the bare binary is).
    const size_t slash = o.daemon_binary.rfind('/');
    const std::string beside =
        (slash == std::string::npos ? std::string(".") : o.daemon_binary.substr(0, slash)) +
        "/py-spy";
    struct stat st {};
    if (::stat(beside.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      out.pyspy_path = beside;
    return out;
  }
  EXPANSE_ASSIGN_OR_RETURN(release::ExtractedRelease extracted,
                           release::ExtractArchive(staged.path, staging_dir + "/daemon"));
  EXPANSE_RETURN_IF_ERROR(TakeDaemon(extracted, out));
  out.verified = true;
  const std::string dir = o.daemon_binary.substr(0, o.daemon_binary.rfind('/'));
  for (const auto& [c, path] :
       StagedCupti(dir.empty() ? "/" : dir, key, out.version, staging_dir, log))
    out.cupti_archives.push_back(path);
  if (out.cupti_archives.empty())
    out.cupti_note = "CUPTI not installed: no signed CUPTI archives staged beside the daemon";
  return out;
}

}  // namespace expanse::install
