// Several ingest batches in one request (wire/ingest_envelope.h): the envelope's frames as the
// server reads them from any compute's request, and the envelope's answer as the controller's
// uploader reads it from whatever answered (a proxy, another build). The first byte picks
// which. Properties: never a crash or an exception; frames the parser accepts are views inside
// the body, 1 to 64 of them, each within its limits, and framing them again gives the same
// body (the framing has one spelling); answers it accepts are as many as asked for, each with
// an HTTP status, and encoding them again reads back the same.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "wire/ingest_envelope.h"

namespace {

void Require(bool condition) {
  if (!condition)
    std::abort();
}

void CheckEnvelope(std::string_view body) {
  using expanse::wire::EnvelopeFrame;
  const expanse::Result<std::vector<EnvelopeFrame>> frames =
      expanse::wire::ParseIngestEnvelope(body);
  if (!frames.ok()) {
    Require(frames.status().reason() == "invalid_envelope");
    return;
  }
  Require(!frames->empty() && frames->size() <= expanse::wire::kMaxEnvelopeBatches);
  std::string again;
  for (const EnvelopeFrame& frame : *frames) {
    Require(!frame.body.empty());
    Require(expanse::wire::IsFrameContentType(frame.content_type));
    Require(frame.body.data() >= body.data() &&
            frame.body.data() + frame.body.size() <= body.data() + body.size());
    expanse::wire::AppendEnvelopeFrame(again, frame.content_type, frame.body);
  }
  Require(again == body);
}

void CheckAnswers(std::string_view body, size_t expected) {
  const expanse::Result<std::vector<expanse::wire::EnvelopeAnswer>> answers =
      expanse::wire::DecodeEnvelopeAnswers(body, expected);
  if (!answers.ok()) {
    Require(answers.status().reason() == "invalid_answer");
    return;
  }
  Require(answers->size() == expected);
  for (const expanse::wire::EnvelopeAnswer& a : *answers)
    Require(a.status >= 100 && a.status <= 599);
  const expanse::Result<std::vector<expanse::wire::EnvelopeAnswer>> again =
      expanse::wire::DecodeEnvelopeAnswers(expanse::wire::EncodeEnvelopeAnswers(*answers),
                                           expected);
  Require(again.ok() && again->size() == answers->size());
  for (size_t i = 0; i < answers->size(); ++i) {
    Require((*again)[i].status == (*answers)[i].status);
    Require((*again)[i].retry_after == (*answers)[i].retry_after);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1u << 20))
    return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1)
    CheckAnswers(rest, 1 + (data[0] >> 1) % expanse::wire::kMaxEnvelopeBatches);
  else
    CheckEnvelope(rest);
  return 0;
}
