// The files through which a worker's sampler and the controller arrange the direct transport of
// a trace segment (EXPANSE_SEGMENT_UPLOAD_MODE=direct|auto; docs/formats/segment-direct.md), in
// <prefix>/spool/segment-grants/<host>/:
//
//   request-<sha256>-<bytes>   empty; the sampler asks for a grant for one segment
//   grant-<sha256>.json        the controller's answer: the segment-scoped grant the server
//                              issued, where to send the segment, and until when
//
// Both are written by the daemon account through a dot-named temporary and a rename. Every
// name and byte is hostile input to the side that reads it.
#ifndef EXPANSE_AGENT_SEGMENT_GRANT_FILES_H_
#define EXPANSE_AGENT_SEGMENT_GRANT_FILES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::agent {

// A grant file is a few hundred bytes; anything past this is refused unread.
inline constexpr size_t kMaxSegmentGrantFileBytes = 4096;
inline constexpr char kSegmentGrantsPath[] = "/dp/v1/segment-grants";

// <prefix>/spool/segment-grants: one directory per host.
std::string SegmentGrantRoot(const std::string& shared_prefix);

struct SegmentGrantRequest {
  std::string sha256;  // 64 lowercase hex digits
  uint64_t bytes = 0;  // 1 .. kMaxTraceSegmentBytes
};

std::string SegmentGrantRequestName(const SegmentGrantRequest& request);
// nullopt for any other name (temporaries, grants, foreign files).
std::optional<SegmentGrantRequest> ParseSegmentGrantRequestName(std::string_view name);

std::string SegmentGrantFileName(std::string_view sha256);
bool IsSegmentGrantFileName(std::string_view name);

struct SegmentGrantFile {
  std::string grant;       // exp_sg_…
  std::string upload_url;  // absolute, https (or http to loopback)
  int64_t expires_at_ms = 0;
};

std::string EncodeSegmentGrantFile(const SegmentGrantFile& file);
// kInvalidArgument (reason bad_grant_file) for anything but the documented document: a grant
// that is not exp_sg_ text of at most 2 KiB, an upload URL the HTTP client would refuse.
Result<SegmentGrantFile> DecodeSegmentGrantFile(std::string_view bytes);

// The grant file for the server's 201 answer to a grant request, which is outside input too:
// {"grant", "expires_at_ms", "upload_url"} read without throwing, an upload URL that is not
// absolute (or absent) replaced by `fallback_upload_url`, and the result checked as a worker
// will decode it. kInvalidArgument (reason bad_grant_answer) saying what is wrong.
Result<SegmentGrantFile> GrantFileFromAnswer(std::string_view body,
                                             const std::string& fallback_upload_url);

bool IsSha256Hex(std::string_view text);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SEGMENT_GRANT_FILES_H_
