// DecodeSegmentGrant on arbitrary bytes: a grant arrives as a bearer token from the network (a
// worker's upload). It must never crash, and what it accepts must encode and decode again to
// the same grant, whose signature then checks under the key it was signed with only.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/segment_grant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view token(reinterpret_cast<const char*>(data), size);
  (void)expanse::server::SegmentGrantSignedBy(token, "key");
  auto grant = expanse::server::DecodeSegmentGrant(token);
  if (!grant.ok())
    return 0;
  const std::string again = expanse::server::EncodeSegmentGrant(*grant, "key");
  auto decoded = expanse::server::DecodeSegmentGrant(again);
  if (!decoded.ok() || decoded->credential_id != grant->credential_id ||
      decoded->compute_id != grant->compute_id || decoded->host != grant->host ||
      decoded->sha256 != grant->sha256 || decoded->bytes != grant->bytes ||
      decoded->expires_ms != grant->expires_ms ||
      !expanse::server::SegmentGrantSignedBy(again, "key") ||
      expanse::server::SegmentGrantSignedBy(again, "other key"))
    std::abort();
  return 0;
}
