#include "wire/error_answer.h"

#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::wire {
namespace {

constexpr size_t kMaxCodeBytes = 64;
constexpr size_t kMaxMessageBytes = 1024;
// An error body is small; anything deeper or larger is not one of ours.
constexpr JsonLimits kErrorAnswerLimits{
    .max_depth = 8, .max_values = 10'000, .max_string_bytes = 64 * 1024};

}  // namespace

ErrorAnswer DecodeErrorAnswer(std::string_view body) {
  ErrorAnswer out;
  Result<nlohmann::json> doc = ParseJson(body, kErrorAnswerLimits);
  if (!doc.ok())
    return out;
  Result<FieldReader> root = FieldReader::Object(*doc, "", "invalid_answer");
  if (!root.ok())
    return out;
  Result<FieldReader> error = root->Member("error", Need::kOptional);
  if (!error.ok())
    return out;
  if (Result<std::string> code = error->Name("code", kMaxCodeBytes, "_", false, Need::kOptional);
      code.ok()) {
    out.code = *std::move(code);
  }
  // A message too long for a log line is cut rather than dropped: it is what a person reads.
  if (const nlohmann::json* message = error->Find("message");
      message != nullptr && message->is_string()) {
    std::string text = message->get<std::string>().substr(0, kMaxMessageBytes);
    while (!text.empty() && !IsCleanText(text))
      text.pop_back();  // a cut inside a UTF-8 sequence, or a control character
    out.message = std::move(text);
  }
  return out;
}

}  // namespace expanse::wire
