// Building manifest.json from a directory of signed release archives (the release manager's
// side; the mirror serves the directory as it is).

#ifndef EXPANSE_RELEASE_MANIFEST_BUILD_H_
#define EXPANSE_RELEASE_MANIFEST_BUILD_H_

#include <cstdint>
#include <string>

#include "core/result.h"
#include "release/manifest.h"

namespace expanse::release {

struct BuildManifestOptions {
  std::string dir{};       // holds <archive>.tar.gz and <archive>.tar.gz.sig files
  std::string base_url{};  // absolute http(s); an archive's URL is base_url + "/" + its file name
  // published_ms of versions that the directory's existing manifest.json does not list yet
  // (those it lists keep their date, so rebuilding does not re-date old releases).
  int64_t now_ms = 0;
  // When set, every archive's .sig must verify with this key (the manifest command passes the
  // public half of its signing key, so a mix-up of keys is caught before publishing).
  std::string public_key_pem{};
};

// Inspects every *.tar.gz in `dir` in full (InspectArchive), requires its file name to be
// ArchiveFileName(release.json) and a .sig beside it, and writes `dir`/manifest.json listing
// them: releases newest first, archives by name/os/arch, CUPTI builds (those with a variant)
// by variant/arch. Returns what it wrote. Errors name the archive: kFailedPrecondition with
// reason "archive_unsigned" for a missing .sig, the archive's own refusal when it is not a
// valid release archive, kInvalidArgument for a bad base URL, a renamed archive, or an
// existing manifest.json that does not parse.
Result<Manifest> BuildManifest(const BuildManifestOptions& options);

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_MANIFEST_BUILD_H_
