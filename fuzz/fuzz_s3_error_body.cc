// An S3-compatible store's error answer as the server's segment store reads it
// (src/server/s3_segment_store.h): whatever answered the request (the store, a proxy, something
// else) chose the bytes, and the code read from them goes into error messages and the server's
// log. Input: the answer's body.
// Properties:
// - nothing throws or crashes;
// - the code is "" or 1 to kMaxS3ErrorCodeBytes of [A-Za-z0-9._-];
// - a code is what the body holds between its first <Code> and the </Code> after it.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/s3_segment_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const std::string code = expanse::server::S3ErrorCode(body);
  if (code.empty())
    return 0;
  if (code.size() > expanse::server::kMaxS3ErrorCodeBytes)
    std::abort();
  for (const char c : code) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '-' || c == '_'))
      std::abort();
  }
  const size_t open = body.find("<Code>");
  if (open == std::string_view::npos || body.substr(open + 6, code.size() + 7) != code + "</Code>")
    std::abort();
  return 0;
}
