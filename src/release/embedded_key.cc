#include "release/embedded_key.h"

// Generated at configure time from release/keys/expanse-release.pub; defines
// kEmbeddedReleasePublicKeyPem.
#include "release/embedded_key.inc"

namespace expanse::release {

std::string_view EmbeddedReleasePublicKey() { return kEmbeddedReleasePublicKeyPem; }

}  // namespace expanse::release
