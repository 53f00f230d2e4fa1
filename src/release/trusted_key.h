// Which release key verifies a release when the command line names none (docs/install.md,
// "Which key verifies"): a site's key pinned beside the CLI, else the system's pinned key, else
// the key compiled in.
//
// The CLI installer a site's expanse-server serves (GET /install) puts the key that signs that
// server's mirror in <prefix>/etc/expanse/release.pub next to <prefix>/bin/expanse, so the CLI
// it installed trusts the site's releases without --cosign-key. A pinned file that exists but
// is unreadable or not a public key is an error, never skipped: falling back to another key
// would hide a broken pin.
#ifndef EXPANSE_RELEASE_TRUSTED_KEY_H_
#define EXPANSE_RELEASE_TRUSTED_KEY_H_

#include <string>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse::release {

struct TrustedKey {
  std::string pem;     // a SubjectPublicKeyInfo PEM of an ECDSA P-256 key
  std::string source;  // the file it came from, or "the embedded release key"
};

// Where a pinned key is looked for, in order: <directory of the running program>/../etc/
// expanse/release.pub, then /etc/expanse/release.pub.
std::vector<std::string> PinnedKeyPaths();

// The first of `candidates` that exists, checked to be a P-256 public key; the embedded key
// when none exists.
Result<TrustedKey> FirstTrustedKey(const std::vector<std::string>& candidates);

// FirstTrustedKey(PinnedKeyPaths()).
Result<TrustedKey> DefaultTrustedKey();

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_TRUSTED_KEY_H_
