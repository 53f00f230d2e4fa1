// The version of this build, for --version output, logs and the server's /version.

#ifndef EXPANSE_CORE_VERSION_H_
#define EXPANSE_CORE_VERSION_H_

#include <string>
#include <string_view>

namespace expanse {

// The release version from the repository's VERSION file, e.g. "0.1.0".
std::string_view ReleaseVersion();

// The 12-digit git revision the binary was built from, with "-dirty" when the
// working tree had changes, or "unknown" outside a git checkout or before the
// first commit.
std::string_view GitRevision();

// "0.1.0 (git abc123def456)", "0.1.0 (git abc123def456-dirty)" or "0.1.0 (unknown)".
std::string VersionString();

}  // namespace expanse

#endif  // EXPANSE_CORE_VERSION_H_
