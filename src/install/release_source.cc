#include "install/release_source.h"

#include <dirent.h>
#include <sys/stat.h>

#include <map>
#include <memory>

#include "core/file_util.h"
#include "install/host_facts.h"
#include "net/http_client.h"
#include "release/archive_extract.h"
#include "release/embedded_key.h"
#include "release/resolver.h"

namespace expanse::install {
namespace {

constexpr char kArch[] = "amd64";

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<std::string> VerificationKey(const InstallOptions& o) {
  if (o.cosign_key.empty())
    return std::string(release::EmbeddedReleasePublicKey());
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> pem, fs::ReadSmallFile(o.cosign_key, 65536));
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

std::optional<std::string> DriverOrNote(std::string& why) { return NvidiaDriverVersion(why); }

// CUPTI archives staged beside a --daemon-binary archive, each with a verified signature.
std::vector<std::pair<release::ManifestCupti, std::string>> StagedCupti(
    const std::string& dir, const std::string& key,
    const std::function<void(const std::string&)>& log) {
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
    Result<release::StagedBinary> staged = release::InspectStagedBinary(dir + "/" + name, key);
    if (!staged.ok() || !staged->verified || !staged->info) {
      log("staged CUPTI archive " + name +
          " skipped: " + (staged.ok() ? staged->message : staged.status().message()));
      continue;
    }
    release::ManifestCupti c;
    c.variant = staged->info->variant;
    c.arch = staged->info->arch;
    c.min_driver = staged->info->min_driver;
    found.emplace_back(c, dir + "/" + name);
  }
  return found;
}

}  // namespace

Result<ResolvedRelease> ResolveRelease(const InstallOptions& o, const std::string& staging_dir,
                                       const std::string& ca_file,
                                       const std::function<void(const std::string&)>& log) {
  EXPANSE_ASSIGN_OR_RETURN(std::string key, VerificationKey(o));
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(staging_dir, 0700));
  ResolvedRelease out;
  std::string why_no_driver;
  const std::optional<std::string> driver = DriverOrNote(why_no_driver);

  if (!o.daemon_version.empty()) {
    net::HttpClientOptions base;
    base.ca_file = ca_file;
    EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> http,
                             net::HttpClient::Create(release::ReleaseHttpClientOptions(base)));
    EXPANSE_ASSIGN_OR_RETURN(release::VerifiedManifest manifest,
                             release::FetchManifest(*http, o.releases_url, key));
    log("release manifest signature verified (" + manifest.url + ")");
    EXPANSE_ASSIGN_OR_RETURN(release::SelectedRelease selected,
                             release::SelectRelease(manifest.manifest, o.daemon_version, kArch));
    const std::string archive = staging_dir + "/daemon.tar.gz";
    EXPANSE_RETURN_IF_ERROR(
        release::DownloadVerified(*http, selected.archive.ref, key, archive).status());
    log("daemon " + o.daemon_version + ": archive checksum and signature verified");
    EXPANSE_ASSIGN_OR_RETURN(release::ExtractedRelease extracted,
                             release::ExtractArchive(archive, staging_dir + "/daemon"));
    EXPANSE_RETURN_IF_ERROR(TakeDaemon(extracted, out));
    out.verified = true;

    Result<release::CuptiSelection> cupti =
        release::SelectCuptiVariant(selected.release, kArch, driver, o.cupti_variant);
    if (!cupti.ok()) {
      out.cupti_note = "CUPTI not installed: " + cupti.status().message();
    } else if (!cupti->variant) {
      out.cupti_note =
          "CUPTI not installed: " + cupti->explanation + (driver ? "" : " (" + why_no_driver + ")");
    } else {
      const std::string cupti_archive = staging_dir + "/cupti.tar.gz";
      Status got =
          release::DownloadVerified(*http, cupti->variant->ref, key, cupti_archive).status();
      Result<release::ExtractedRelease> unpacked =
          got.ok() ? release::ExtractArchive(cupti_archive, staging_dir + "/cupti")
                   : Result<release::ExtractedRelease>(got);
      if (unpacked.ok()) {
        out.cupti_dir = unpacked->dir;
        out.cupti_variant = cupti->variant->variant;
        out.cupti_note = "CUPTI " + cupti->explanation;
      } else {
        out.cupti_note =
            "CUPTI not installed (baseline metrics are unaffected): " + unpacked.status().message();
      }
    }
    return out;
  }

  // --daemon-binary: a staged archive with its signature, or a bare binary.
  EXPANSE_ASSIGN_OR_RETURN(release::StagedBinary staged,
                           release::InspectStagedBinary(o.daemon_binary, key));
  log(staged.message);
  if (staged.kind == release::StagedBinary::Kind::kBareBinary) {
    out.daemon_path = o.daemon_binary;
    out.verified = false;
    out.cupti_note = "CUPTI not installed: a bare binary carries no CUPTI selection";
    return out;
  }
  EXPANSE_ASSIGN_OR_RETURN(release::ExtractedRelease extracted,
                           release::ExtractArchive(o.daemon_binary, staging_dir + "/daemon"));
  EXPANSE_RETURN_IF_ERROR(TakeDaemon(extracted, out));
  out.verified = true;
  const std::string dir = o.daemon_binary.substr(0, o.daemon_binary.rfind('/'));
  auto staged_cupti = StagedCupti(dir.empty() ? "/" : dir, key, log);
  std::vector<release::ManifestCupti> variants;
  std::map<std::string, std::string> path_of;
  for (const auto& [c, path] : staged_cupti) {
    variants.push_back(c);
    path_of[c.variant] = path;
  }
  Result<release::CuptiSelection> cupti =
      release::SelectCuptiVariant(variants, kArch, driver, o.cupti_variant);
  if (!cupti.ok()) {
    out.cupti_note = "CUPTI not installed: " + cupti.status().message();
  } else if (!cupti->variant) {
    out.cupti_note = "CUPTI not installed: " + cupti->explanation;
  } else {
    Result<release::ExtractedRelease> unpacked =
        release::ExtractArchive(path_of[cupti->variant->variant], staging_dir + "/cupti");
    if (unpacked.ok()) {
      out.cupti_dir = unpacked->dir;
      out.cupti_variant = cupti->variant->variant;
      out.cupti_note = "CUPTI " + cupti->explanation;
    } else {
      out.cupti_note = "CUPTI not installed: " + unpacked.status().message();
    }
  }
  return out;
}

}  // namespace expanse::install
