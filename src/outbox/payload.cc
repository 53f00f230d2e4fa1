#include "outbox/payload.h"

#include <zstd.h>

#include <utility>

namespace expanse::outbox {

Result<Payload> ZstdJsonPayload(std::string_view json, int level) {
  Payload payload{.content_type = "application/zstd", .bytes = {}};
  payload.bytes.resize(ZSTD_compressBound(json.size()));
  const size_t size =
      ZSTD_compress(payload.bytes.data(), payload.bytes.size(), json.data(), json.size(), level);
  if (ZSTD_isError(size))
    return InternalError(std::string("outbox: zstd compression failed: ") +
                         ZSTD_getErrorName(size));
  payload.bytes.resize(size);
  return payload;
}

Payload JsonPayload(std::string json) {
  return Payload{.content_type = "application/json", .bytes = std::move(json)};
}

}  // namespace expanse::outbox
