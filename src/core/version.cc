#include "core/version.h"

// Generated at build time from the VERSION file and git; see cmake/ExpanseVersion.cmake.
#include "expanse/version.h"

namespace expanse {

std::string_view ReleaseVersion() { return EXPANSE_VERSION; }

std::string_view GitRevision() { return EXPANSE_GIT_REVISION; }

std::string VersionString() {
  std::string out(ReleaseVersion());
  if (GitRevision() == "unknown") {
    out += " (unknown)";
  } else {
    out += " (git ";
    out += GitRevision();
    out += ')';
  }
  return out;
}

}  // namespace expanse
