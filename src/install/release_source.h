// Where the daemon of an install comes from: a signed release fetched by version from the
// releases URL (--daemon-version), or a staged archive with its signature or a bare binary
// (--daemon-binary). Everything is verified and unpacked into a local staging directory before
// anything on the host changes. The CUPTI variant for this node is chosen here too; missing
// CUPTI is only ever a note, never an error.

#ifndef EXPANSE_INSTALL_RELEASE_SOURCE_H_
#define EXPANSE_INSTALL_RELEASE_SOURCE_H_

#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "install/install_options.h"

namespace expanse::install {

struct ResolvedRelease {
  std::string version;      // "" for a bare binary (its version is not known)
  std::string daemon_path;  // staged bin/expanse-daemon
  std::string pyspy_path;   // staged bin/py-spy, "" when the release has none
  bool verified = false;    // signature checked
  // Every signed CUPTI archive of the release (each with <archive>.sig beside it), verified, to
  // be left on the shared mount for the nodes to choose from; empty when the release has none.
  std::vector<std::string> cupti_archives;
  std::string cupti_note;  // why there are none
  std::string key_pem;     // the key everything was verified with
};

// `staging_dir` must not exist; it is created and filled. `ca_file` for HTTPS downloads.
Result<ResolvedRelease> ResolveRelease(const InstallOptions& options,
                                       const std::string& staging_dir, const std::string& ca_file,
                                       const std::function<void(const std::string&)>& log);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_RELEASE_SOURCE_H_
