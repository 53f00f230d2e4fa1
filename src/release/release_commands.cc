#include "release/release_commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "core/file_util.h"
#include "crypto/ecdsa.h"
#include "release/archive_extract.h"
#include "release/archive_pack.h"
#include "release/embedded_key.h"
#include "release/file_io.h"
#include "release/manifest.h"
#include "release/manifest_build.h"
#include "release/release_info.h"
#include "release/status_util.h"
#include "release/trusted_key.h"

namespace expanse::release {

using release_internal::Annotate;
using release_internal::ReadWholeFile;

namespace {

constexpr size_t kMaxKeyFileBytes = 64 << 10;

Status Required(const std::string& value, const char* what) {
  if (value.empty())
    return InvalidArgumentError(std::string(what) + " is required");
  return OkStatus();
}

// The signing key's PEM. Warns when others can read it: it signs what every installer trusts.
Result<std::string> ReadPrivateKey(const std::string& path, std::ostream& out) {
  EXPANSE_ASSIGN_OR_RETURN(std::string pem, ReadWholeFile(path, kMaxKeyFileBytes));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0077) != 0) {
    out << "warning: " << path << " can be read by other users (mode " << std::oct
        << (st.st_mode & 0777) << std::dec << "); chmod 600 it\n";
  }
  return pem;
}

void NoteKey(std::string_view public_key_pem, std::ostream& out) {
  if (public_key_pem != EmbeddedReleasePublicKey()) {
    out << "note: this is not the embedded release key; installers need --cosign-key with its "
           "public key\n";
  }
}

}  // namespace

Status RunKeygen(const KeygenFlags& flags, std::ostream& out) {
  EXPANSE_RETURN_IF_ERROR(Required(flags.private_key_path, "the private key path"));
  EXPANSE_RETURN_IF_ERROR(Required(flags.public_key_path, "the public key path"));
  if (flags.private_key_path == flags.public_key_path)
    return InvalidArgumentError("the private and public key paths must differ");
  for (const std::string& path : {flags.private_key_path, flags.public_key_path}) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0)
      return AlreadyExistsError(path + " already exists; refusing to overwrite a key");
  }
  EXPANSE_ASSIGN_OR_RETURN(crypto::SigningKeyPair pair, crypto::GenerateSigningKey());
  EXPANSE_RETURN_IF_ERROR(
      release_internal::CreateNewFile(flags.private_key_path, pair.private_key_pem, 0600));
  Status public_written =
      release_internal::CreateNewFile(flags.public_key_path, pair.public_key_pem, 0644);
  if (!public_written.ok()) {
    ::unlink(flags.private_key_path.c_str());  // no half a key pair left behind
    return public_written;
  }
  out << "wrote private key " << flags.private_key_path << " (mode 0600; keep it offline)\n"
      << "wrote public key " << flags.public_key_path << "\n";
  return OkStatus();
}

Status RunPack(const PackFlags& flags, std::ostream& out) {
  EXPANSE_RETURN_IF_ERROR(Required(flags.version, "--version"));
  EXPANSE_RETURN_IF_ERROR(Required(flags.staging_dir, "the staging directory"));
  PackOptions options{.name = flags.name,
                      .version = flags.version,
                      .os = flags.os,
                      .arch = flags.arch,
                      .variant = flags.variant,
                      .min_driver = flags.min_driver,
                      .files = {},
                      .output_dir = flags.output_dir};
  EXPANSE_ASSIGN_OR_RETURN(options.files, FilesUnder(flags.staging_dir));
  EXPANSE_ASSIGN_OR_RETURN(std::string path, PackArchive(options));
  out << "wrote " << path << " (" << options.files.size() << " files + release.json)\n";
  return OkStatus();
}

Status RunSign(const SignFlags& flags, std::ostream& out) {
  EXPANSE_RETURN_IF_ERROR(Required(flags.private_key_path, "--key"));
  if (flags.files.empty())
    return InvalidArgumentError("name at least one file to sign");
  EXPANSE_ASSIGN_OR_RETURN(std::string key, ReadPrivateKey(flags.private_key_path, out));
  for (const std::string& file : flags.files) {
    EXPANSE_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(file, kMaxArchiveBytes));
    EXPANSE_ASSIGN_OR_RETURN(std::string signature,
                             Annotate(crypto::SignBlob(key, data), flags.private_key_path + ": "));
    EXPANSE_RETURN_IF_ERROR(
        release_internal::ReplaceFile(file + kSignatureSuffix, signature, 0644));
    out << "wrote " << file << kSignatureSuffix << "\n";
  }
  return OkStatus();
}

Status RunManifest(const ManifestFlags& flags, Clock& clock, std::ostream& out) {
  EXPANSE_RETURN_IF_ERROR(Required(flags.dir, "the release directory"));
  EXPANSE_RETURN_IF_ERROR(Required(flags.base_url, "--base-url"));
  EXPANSE_RETURN_IF_ERROR(Required(flags.private_key_path, "--key"));
  EXPANSE_ASSIGN_OR_RETURN(std::string key, ReadPrivateKey(flags.private_key_path, out));
  EXPANSE_ASSIGN_OR_RETURN(std::string public_key,
                           Annotate(crypto::PublicKeyOf(key), flags.private_key_path + ": "));
  EXPANSE_ASSIGN_OR_RETURN(Manifest manifest, BuildManifest({.dir = flags.dir,
                                                             .base_url = flags.base_url,
                                                             .now_ms = clock.NowMs(),
                                                             .public_key_pem = public_key}));
  const std::string manifest_path = flags.dir + "/" + kManifestName;
  EXPANSE_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(manifest_path, kMaxManifestBytes));
  EXPANSE_ASSIGN_OR_RETURN(std::string signature, crypto::SignBlob(key, bytes));
  EXPANSE_RETURN_IF_ERROR(
      release_internal::ReplaceFile(flags.dir + "/" + kManifestSignatureName, signature, 0644));
  size_t archives = 0;
  for (const ManifestRelease& release : manifest.releases)
    archives += release.archives.size() + release.cupti.size();
  out << "wrote " << manifest_path << " (" << manifest.releases.size() << " releases, " << archives
      << " archives) and " << kManifestSignatureName << "\n";
  NoteKey(public_key, out);
  return OkStatus();
}

Status RunVerify(const VerifyFlags& flags, std::ostream& out) {
  EXPANSE_RETURN_IF_ERROR(Required(flags.file, "the file to verify"));
  std::string public_key;
  std::string key_source = flags.public_key_path;
  if (!flags.public_key_path.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(public_key, ReadWholeFile(flags.public_key_path, kMaxKeyFileBytes));
  } else {
    // As the installer: a key the site's CLI installer pinned, else the embedded one.
    EXPANSE_ASSIGN_OR_RETURN(TrustedKey trusted, DefaultTrustedKey());
    public_key = std::move(trusted.pem);
    key_source = std::move(trusted.source);
  }
  const std::string signature_path =
      flags.signature_path.empty() ? flags.file + kSignatureSuffix : flags.signature_path;
  Result<std::string> signature = ReadWholeFile(signature_path, kMaxSignatureFileBytes);
  if (signature.status().code() == StatusCode::kNotFound) {
    return FailedPreconditionError(flags.file + " has no signature: " + signature_path +
                                   " does not exist")
        .WithReason("signature_missing");
  }
  EXPANSE_RETURN_IF_ERROR(signature);
  EXPANSE_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(flags.file, kMaxArchiveBytes));
  EXPANSE_RETURN_IF_ERROR(
      Annotate(crypto::VerifyBlob(public_key, data, *signature), flags.file + ": "));
  out << flags.file << ": signature OK (" << key_source << ")\n";

  const std::string name = fs::SplitPath(flags.file).second;
  if (name == kManifestName) {
    EXPANSE_ASSIGN_OR_RETURN(Manifest manifest, Annotate(ParseManifest(data), flags.file + ": "));
    out << flags.file << ": " << manifest.releases.size() << " releases";
    for (const ManifestRelease& release : manifest.releases) {
      out << (&release == &manifest.releases.front() ? " (" : ", ") << release.version;
    }
    out << (manifest.releases.empty() ? "\n" : ")\n");
  } else if (name.ends_with(kArchiveSuffix)) {
    EXPANSE_ASSIGN_OR_RETURN(ReleaseInfo info,
                             Annotate(InspectArchive(flags.file), flags.file + ": "));
    out << flags.file << ": " << info.name << " " << info.version
        << (info.variant.empty() ? "" : " " + info.variant) << " for " << info.os << "/"
        << info.arch << ", " << info.files.size() << " files match release.json\n";
  }
  return OkStatus();
}

}  // namespace expanse::release
