#include "wire/ingest_envelope.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::wire {
namespace {

// A length takes at most this many digits: past the body's cap (16 MiB) long before.
constexpr size_t kMaxLengthDigits = 10;
// 64 answers of an ingest answer or an error body each.
constexpr JsonLimits kAnswersLimits{
    .max_depth = 8, .max_values = 100'000, .max_string_bytes = 64 * 1024};
constexpr size_t kMaxRetryAfterBytes = 32;

bool IsContentTypeByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' || c == '.' || c == '+' ||
         c == '-';
}

Status BadFrame(size_t index, std::string_view what) {
  return InvalidArgumentError("ingest envelope frame " + std::to_string(index) + ": " +
                              std::string(what))
      .WithReason("invalid_envelope");
}

}  // namespace

bool IsFrameContentType(std::string_view content_type) {
  if (content_type.empty() || content_type.size() > kMaxFrameContentTypeBytes)
    return false;
  for (char c : content_type) {
    if (!IsContentTypeByte(c))
      return false;
  }
  return true;
}

void AppendEnvelopeFrame(std::string& envelope, std::string_view content_type,
                         std::string_view body) {
  envelope.append(content_type);
  envelope.push_back(' ');
  envelope.append(std::to_string(body.size()));
  envelope.push_back('\n');
  envelope.append(body);
}

Result<std::vector<EnvelopeFrame>> ParseIngestEnvelope(std::string_view body) {
  std::vector<EnvelopeFrame> frames;
  if (body.empty())
    return BadFrame(0, "the envelope holds no batch");
  while (!body.empty()) {
    const size_t index = frames.size();
    if (index == kMaxEnvelopeBatches) {
      return BadFrame(
          index, "an envelope holds at most " + std::to_string(kMaxEnvelopeBatches) + " batches");
    }
    // The header line is short; a newline further than this is not one.
    const size_t newline =
        body.substr(0, kMaxFrameContentTypeBytes + 1 + kMaxLengthDigits + 1).find('\n');
    if (newline == std::string_view::npos)
      return BadFrame(index, "no header line \"<content type> <length>\" ends with a newline");
    const std::string_view header = body.substr(0, newline);
    const size_t space = header.find(' ');
    if (space == std::string_view::npos)
      return BadFrame(index, "the header line has no space before the length");
    const std::string_view type = header.substr(0, space);
    const std::string_view digits = header.substr(space + 1);
    if (type.empty() || type.size() > kMaxFrameContentTypeBytes) {
      return BadFrame(index, "the content type must be 1 to " +
                                 std::to_string(kMaxFrameContentTypeBytes) + " bytes");
    }
    if (!IsFrameContentType(type))  // its length is right: a byte is not
      return BadFrame(index, "the content type may hold only [a-z0-9/.+-]");
    size_t length = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), length);
    if (digits.empty() || digits.size() > kMaxLengthDigits || error != std::errc() ||
        end != digits.data() + digits.size() || (digits.size() > 1 && digits.front() == '0')) {
      return BadFrame(index, "the length must be a decimal number of bytes");
    }
    if (length == 0)
      return BadFrame(index, "a frame must hold a batch (its length is 0)");
    body.remove_prefix(newline + 1);
    if (length > body.size()) {
      return BadFrame(index, "its length, " + std::to_string(length) + " bytes, is past the end (" +
                                 std::to_string(body.size()) + " bytes left)");
    }
    frames.push_back({.content_type = type, .body = body.substr(0, length)});
    body.remove_prefix(length);
  }
  return frames;
}

std::string EncodeEnvelopeAnswers(const std::vector<EnvelopeAnswer>& answers) {
  nlohmann::json list = nlohmann::json::array();
  for (const EnvelopeAnswer& a : answers) {
    nlohmann::json entry = {{"status", a.status}};
    if (a.retry_after)
      entry["retry_after"] = *a.retry_after;
    // The bodies are the server's own JSON; one that somehow is not stays a string.
    nlohmann::json body = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
    entry["body"] = body.is_discarded() ? nlohmann::json(a.body) : std::move(body);
    list.push_back(std::move(entry));
  }
  return nlohmann::json{{"answers", std::move(list)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::vector<EnvelopeAnswer>> DecodeEnvelopeAnswers(std::string_view body, size_t expected) {
  Result<nlohmann::json> doc = ParseJson(body, kAnswersLimits);
  if (!doc.ok()) {
    return InvalidArgumentError("the envelope's answer is not JSON: " + doc.status().message())
        .WithReason("invalid_answer");
  }
  EXPANSE_ASSIGN_OR_RETURN(FieldReader root,
                           FieldReader::Object(*doc, "envelope answer", "invalid_answer"));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<FieldReader> entries,
                           root.Objects("answers", kMaxEnvelopeBatches, Need::kRequired));
  if (entries.size() != expected) {
    return InvalidArgumentError("the envelope's answer holds " + std::to_string(entries.size()) +
                                " answers for " + std::to_string(expected) + " batches")
        .WithReason("invalid_answer");
  }
  std::vector<EnvelopeAnswer> answers;
  answers.reserve(entries.size());
  for (const FieldReader& entry : entries) {
    EnvelopeAnswer answer;
    EXPANSE_ASSIGN_OR_RETURN(int64_t status, entry.Int("status", 100, 599, Need::kRequired));
    answer.status = static_cast<int>(status);
    EXPANSE_ASSIGN_OR_RETURN(std::string retry_after,
                             entry.Text("retry_after", kMaxRetryAfterBytes, Need::kOptional));
    if (!retry_after.empty())
      answer.retry_after = std::move(retry_after);
    const nlohmann::json* member = entry.Find("body");
    answer.body = member == nullptr || member->is_null()
                      ? "{}"
                      : member->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    answers.push_back(std::move(answer));
  }
  return answers;
}

}  // namespace expanse::wire
