// Segment-scoped grants (docs/formats/segment-grant.md): what lets a GPU worker, which holds no
// credential, send one trace segment straight to the data plane. The compute's controller asks
// for a grant with its credential (`POST /dp/v1/segment-grants`) naming the host, the SHA-256
// and the length of the segment; the server answers a token that admits exactly those bytes
// from that host, for that compute, until it expires, and only while the credential that asked
// for it is not revoked. Leaked, a grant can only deliver the segment it names, which the
// server would take anyway: so it may travel through the shared control tree.
//
// The token is "exp_sg_" + hex(JSON payload) + "." + HMAC-SHA-256 of that hex text under the
// asking credential's stored hash. The server keeps no state per grant, replicas verify each
// other's grants through the shared database, and revoking the credential voids its grants.
#ifndef EXPANSE_SERVER_SEGMENT_GRANT_H_
#define EXPANSE_SERVER_SEGMENT_GRANT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::server {

inline constexpr char kSegmentGrantPrefix[] = "exp_sg_";
inline constexpr int64_t kSegmentGrantTtlMs = 15 * 60 * 1000;

struct SegmentGrant {
  int64_t credential_id = 0;  // the controller credential that asked for it
  std::string compute_id;
  std::string host;
  std::string sha256;  // of the segment's bytes, 64 lowercase hex digits
  int64_t bytes = 0;
  int64_t expires_ms = 0;
};

// The token for `grant`, signed with the asking credential's stored hash.
std::string EncodeSegmentGrant(const SegmentGrant& grant, std::string_view credential_hash);

// What `token` claims, and the signature to check (SegmentGrantSignedBy) before believing it.
// kUnauthenticated, reason "grant_invalid", for anything that is not a well-formed grant.
Result<SegmentGrant> DecodeSegmentGrant(std::string_view token);

// True when `token`'s signature is the one `credential_hash` makes (constant time).
bool SegmentGrantSignedBy(std::string_view token, std::string_view credential_hash);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_SEGMENT_GRANT_H_
