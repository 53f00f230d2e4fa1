// What the outbox stores for one entry: the bytes to send and their media type.
#ifndef EXPANSE_OUTBOX_PAYLOAD_H_
#define EXPANSE_OUTBOX_PAYLOAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::outbox {

struct Payload {
  std::string content_type{};  // e.g. "application/zstd"; at most 255 bytes
  std::string bytes{};         // at most kMaxPayloadBytes (outbox_format.h)
};

// Builds an entry's payload once the outbox has chosen its sequence. Ingest batches carry
// their sequence inside the JSON (docs/formats/ingest-batch.md), so the document is written
// with the sequence it is given: the stored bytes are then exactly what is sent, every retry
// sends the same bytes, and nothing is patched (or re-compressed) at upload time. A failure
// aborts the enqueue and consumes no sequence. Called with the outbox's lock held: it must
// not call back into the outbox.
using PayloadBuilder = std::function<Result<Payload>(uint64_t sequence)>;

// The document as one zstd frame, "application/zstd" (what the daemon sends). kInternal when
// zstd fails.
Result<Payload> ZstdJsonPayload(std::string_view json, int level = 3);
// The document as is, "application/json" (tests and small batches).
Payload JsonPayload(std::string json);

}  // namespace expanse::outbox

#endif  // EXPANSE_OUTBOX_PAYLOAD_H_
