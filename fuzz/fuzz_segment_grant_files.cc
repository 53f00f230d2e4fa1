// The files of the direct segment transport as each side finds them in the shared spool
// (docs/formats/segment-direct.md): a request's name (the controller reads it) and a grant
// file's bytes (the worker reads it), both hostile. Input: the name, a newline, the bytes.
// Properties:
// - neither parser throws or crashes;
// - an accepted request name is exactly the one the sampler would write for what it names;
// - an accepted grant file encodes and decodes again to the same grant;
// - the bytes read as the server's answer to a grant request never throw, and an accepted one
//   makes a grant file the worker accepts.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/segment_grant_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace expanse::agent;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view name = input.substr(0, newline);
  const std::string_view bytes =
      newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  if (const auto request = ParseSegmentGrantRequestName(name)) {
    if (SegmentGrantRequestName(*request) != name || !IsSha256Hex(request->sha256))
      std::abort();
  }
  if (expanse::Result<SegmentGrantFile> answered =
          GrantFileFromAnswer(bytes, "https://dp.example/dp/v1/segments");
      answered.ok() && !DecodeSegmentGrantFile(EncodeSegmentGrantFile(*answered)).ok()) {
    std::abort();
  }
  expanse::Result<SegmentGrantFile> grant = DecodeSegmentGrantFile(bytes);
  if (!grant.ok())
    return 0;
  expanse::Result<SegmentGrantFile> again = DecodeSegmentGrantFile(EncodeSegmentGrantFile(*grant));
  if (!again.ok() || again->grant != grant->grant || again->upload_url != grant->upload_url ||
      again->expires_at_ms != grant->expires_at_ms) {
    std::abort();
  }
  return 0;
}
