#include "install/control_plane_answers.h"

#include <cstdint>

#include <nlohmann/json.hpp>

#include "wire/error_answer.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::install {
namespace {

using nlohmann::json;

// An answer is a small document; anything deeper or larger is not one of ours.
constexpr wire::JsonLimits kAnswerLimits{
    .max_depth = 8, .max_values = 10'000, .max_string_bytes = 64 * 1024};
constexpr wire::Need kOptionalMember = wire::Need::kOptional;

// An id the control plane sends as a string ("cmp_…") or as its record number (a credential's
// id): both read as text, anything else is refused by name.
Result<std::string> IdText(const wire::FieldReader& r, const char* key) {
  if (const json* id = r.Find(key); id != nullptr && id->is_number_unsigned())
    return std::to_string(id->get<uint64_t>());
  return r.Text(key, kMaxAnswerFieldBytes, kOptionalMember);
}

Result<json> ParseAnswer(std::string_view body, std::string_view what) {
  Result<json> doc = wire::ParseJson(body, kAnswerLimits);
  if (!doc.ok() || !doc->is_object()) {
    return DataLossError(std::string(what) + " answer is not a JSON object")
        .WithReason("invalid_answer");
  }
  return doc;
}

// A member that is text, read as FieldReader::Text reads it (clean, bounded, refused by name).
Result<std::string> TextOf(const wire::FieldReader& r, const char* key) {
  return r.Text(key, kMaxAnswerFieldBytes, kOptionalMember);
}

Result<ComputeSummary> SummaryFrom(const json& doc) {
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader root,
                           wire::FieldReader::Object(doc, "answer", "invalid_answer"));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader c, root.Member("compute", kOptionalMember));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader o, root.Member("organization", kOptionalMember));
  ComputeSummary s;
  EXPANSE_ASSIGN_OR_RETURN(s.id, IdText(c, "id"));
  EXPANSE_ASSIGN_OR_RETURN(s.name, TextOf(c, "name"));
  EXPANSE_ASSIGN_OR_RETURN(s.state, TextOf(c, "state"));
  EXPANSE_ASSIGN_OR_RETURN(s.pinned_daemon_version, TextOf(c, "pinned_daemon_version"));
  // The plane URLs sit at the top in newer answers and in the compute in older ones.
  EXPANSE_ASSIGN_OR_RETURN(s.control_plane_url, TextOf(root, "control_plane_url"));
  if (s.control_plane_url.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(s.control_plane_url, TextOf(c, "control_plane_url"));
  }
  EXPANSE_ASSIGN_OR_RETURN(s.data_plane_url, TextOf(root, "data_plane_url"));
  if (s.data_plane_url.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(s.data_plane_url, TextOf(c, "data_plane_url"));
  }
  EXPANSE_ASSIGN_OR_RETURN(s.organization_slug, TextOf(o, "slug"));
  EXPANSE_ASSIGN_OR_RETURN(s.organization_name, TextOf(o, "name"));
  return s;
}

}  // namespace

Result<ComputeSummary> DecodeIntrospection(std::string_view body) {
  EXPANSE_ASSIGN_OR_RETURN(const json doc, ParseAnswer(body, "the token introspection"));
  return SummaryFrom(doc);
}

Result<ExchangedCredential> DecodeExchange(std::string_view body) {
  EXPANSE_ASSIGN_OR_RETURN(const json doc, ParseAnswer(body, "the token exchange"));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader answer,
                           wire::FieldReader::Object(doc, "answer", "invalid_answer"));
  ExchangedCredential out;
  EXPANSE_ASSIGN_OR_RETURN(out.credential, TextOf(answer, "credential"));
  if (!out.credential.starts_with("exp_cc_"))
    return DataLossError("the token exchange answer carries no credential");
  EXPANSE_ASSIGN_OR_RETURN(out.credential_id, IdText(answer, "credential_id"));
  EXPANSE_ASSIGN_OR_RETURN(out.compute, SummaryFrom(doc));
  return out;
}

Result<Enrolment> DecodeEnrolment(std::string_view body) {
  EXPANSE_ASSIGN_OR_RETURN(const json doc, ParseAnswer(body, "the enrolment"));
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader r,
                           wire::FieldReader::Object(doc, "answer", "invalid_answer"));
  Enrolment out;
  EXPANSE_ASSIGN_OR_RETURN(out.enrolled, r.Bool("enrolled", false));
  EXPANSE_ASSIGN_OR_RETURN(out.last_heartbeat_ms,
                           r.Int("last_heartbeat_ms", 0, INT64_MAX, kOptionalMember, 0));
  return out;
}

Status StatusFromControlPlaneAnswer(int http_status, std::string_view body, std::string_view what) {
  // DecodeErrorAnswer's code is snake_case and its message clean text, or both are "".
  const wire::ErrorAnswer answer = wire::DecodeErrorAnswer(body);
  const std::string code =
      answer.code.empty() ? "http_" + std::to_string(http_status) : answer.code;
  const std::string& message = answer.message;
  std::string text = std::string(what) + ": the control plane answered " +
                     std::to_string(http_status) + " " + code +
                     (message.empty() ? "" : " (" + message + ")");
  Status s = http_status == 401 || http_status == 403   ? UnauthenticatedError(text)
             : http_status == 409                       ? FailedPreconditionError(text)
             : http_status >= 500 || http_status == 429 ? UnavailableError(text)
                                                        : InvalidArgumentError(text);
  return s.WithReason(code);
}

}  // namespace expanse::install
