// Several ingest batches in one POST /dp/v1/ingest (docs/formats/ingest-batch.md, "Several
// batches in one request"). A busy controller pays an HTTP exchange, an authentication and a
// group's round trips to the stores per request; carrying up to kMaxEnvelopeBatches batches in
// one request pays them once for all, while each batch is still validated, stored and
// answered on its own, exactly as if it had been sent alone.
//
// Body (content type kIngestEnvelopeContentType): frames, each a header line
// "<content type> <length>\n" followed by exactly <length> bytes, the batch as a single
// request would carry it (application/zstd or application/json). Answer: 200
// {"answers": [{"status": 200, "body": {...}}, ...]}, one per frame in order, each the status,
// body and Retry-After the batch would have had alone.
#ifndef EXPANSE_WIRE_INGEST_ENVELOPE_H_
#define EXPANSE_WIRE_INGEST_ENVELOPE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::wire {

inline constexpr char kIngestEnvelopeContentType[] = "application/x-expanse-batches";
inline constexpr size_t kMaxEnvelopeBatches = 64;
// A frame's content type: 1..64 bytes of [a-z0-9/.+-].
inline constexpr size_t kMaxFrameContentTypeBytes = 64;

// Whether a batch of this content type can go in a frame: 1..64 bytes of [a-z0-9/.+-].
bool IsFrameContentType(std::string_view content_type);

struct EnvelopeFrame {
  std::string_view content_type;
  std::string_view body;  // views into the envelope's body
};

// Appends one frame to `envelope`.
void AppendEnvelopeFrame(std::string& envelope, std::string_view content_type,
                         std::string_view body);

// The frames of an envelope, at least 1 and at most kMaxEnvelopeBatches, viewing `body`.
// kInvalidArgument, reason "invalid_envelope", naming the first bad frame and what is wrong
// (a header line without its length, a length past the body's end, an empty frame, too many
// frames, bytes after the last frame).
Result<std::vector<EnvelopeFrame>> ParseIngestEnvelope(std::string_view body);

// One batch's answer inside the envelope's answer.
struct EnvelopeAnswer {
  int status = 0;
  std::optional<std::string> retry_after{};  // the Retry-After it would have had alone
  std::string body{};                        // the JSON body it would have had alone
};

// The envelope's answer document.
std::string EncodeEnvelopeAnswers(const std::vector<EnvelopeAnswer>& answers);

// The answers of a 2xx envelope answer that must hold `expected` of them. The answer is outside
// input (a proxy, another server's build): kInvalidArgument, reason "invalid_answer", when it
// is not JSON, has no "answers" array of exactly `expected` objects, or a status outside
// 100..599 or a retry_after that is not short text; a body that is not JSON reads as "{}".
Result<std::vector<EnvelopeAnswer>> DecodeEnvelopeAnswers(std::string_view body, size_t expected);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_INGEST_ENVELOPE_H_
