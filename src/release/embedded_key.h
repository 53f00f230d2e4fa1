// The public key that verifies official Expanse releases, compiled in from
// release/keys/expanse-release.pub. Its private half is held offline by the release managers;
// installs of self-built releases and tests pass their own key (--cosign-key) instead.

#ifndef EXPANSE_RELEASE_EMBEDDED_KEY_H_
#define EXPANSE_RELEASE_EMBEDDED_KEY_H_

#include <string_view>

namespace expanse::release {

// A SubjectPublicKeyInfo PEM of an ECDSA P-256 key.
std::string_view EmbeddedReleasePublicKey();

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_EMBEDDED_KEY_H_
