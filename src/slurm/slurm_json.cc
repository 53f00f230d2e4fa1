#include "slurm/slurm_json.h"

#include <cmath>
#include <limits>
#include <utility>

#include "core/quote.h"

namespace expanse::slurm::json_internal {
namespace {

using nlohmann::json;

// src/common/slurm_protocol_defs.h: NO_VAL, INFINITE, NO_VAL64, INFINITE64.
constexpr uint64_t kNoVal = 0xfffffffe;
constexpr uint64_t kInfinite = 0xffffffff;
constexpr uint64_t kNoVal64 = 0xfffffffffffffffe;
constexpr uint64_t kInfinite64 = 0xffffffffffffffff;

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

constexpr std::string_view kNotWhole = "must be a whole number from 0 to 9223372036854775807";

// A plain number (22.05, or the "number" inside a 23.02+ object), named `key` in `owner`.
Result<Number> ReadPlainNumber(const json& value, const wire::FieldReader& owner, const char* key) {
  if (value.is_number_unsigned()) {
    const uint64_t raw = value.get<uint64_t>();
    if (raw == kNoVal || raw == kNoVal64)
      return Number{};
    if (raw == kInfinite || raw == kInfinite64)
      return Number{Number::Kind::kInfinite, 0};
    if (raw > static_cast<uint64_t>(kMaxInt64))
      return owner.Bad(key, kNotWhole);
    return Number{Number::Kind::kValue, static_cast<int64_t>(raw)};
  }
  if (value.is_number_integer()) {
    const int64_t raw = value.get<int64_t>();
    if (raw < 0)
      return owner.Bad(key, kNotWhole);
    return Number{Number::Kind::kValue, raw};
  }
  if (value.is_number_float()) {
    const double raw = value.get<double>();
    // 2^63 is exactly representable; anything at or above it does not fit.
    if (!std::isfinite(raw) || raw < 0 || raw >= 9223372036854775808.0 || std::trunc(raw) != raw)
      return owner.Bad(key, kNotWhole);
    return Number{Number::Kind::kValue, static_cast<int64_t>(raw)};
  }
  return owner.Bad(key, "must be a number");
}

// 23.02+: {"set": bool, "infinite": bool, "number": N}, the member `key` of `owner`. Some
// writers leave out "set" or "infinite"; a missing flag counts as false, and a missing "set" as
// set. A "number" that is null reads as unset, one that is absent is an error.
Result<Number> ReadNumberObject(const json& value, const wire::FieldReader& owner,
                                const char* key) {
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader object,
                           owner.Member(key, wire::Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(const bool infinite, object.Bool("infinite", false));
  EXPANSE_ASSIGN_OR_RETURN(const bool set, object.Bool("set", true));
  if (infinite)
    return Number{Number::Kind::kInfinite, 0};
  if (!set)
    return Number{};
  if (!value.contains("number"))
    return object.Bad("number", "is required");
  const json* number = object.Find("number");
  if (number == nullptr)
    return Number{};
  return ReadPlainNumber(*number, object, "number");
}

}  // namespace

Result<json> ParseDocument(std::string_view text, std::string_view command) {
  Result<json> document = wire::ParseJson(text, kSlurmJsonLimits);
  if (!document.ok()) {
    // wire's own reasons (invalid_json, json_too_deep, json_too_large) give way to the one
    // every SLURM output failure carries; its message already says what was wrong and where.
    return InvalidArgumentError(std::string(command) + ": " + document.status().message())
        .WithReason(std::string(kOutputReason));
  }
  return std::move(document).value();
}

Result<wire::FieldReader> ReadTopLevel(const json& document) {
  return wire::FieldReader::Object(document, "", std::string(kOutputReason));
}

Status NameCommand(const Status& status, std::string_view command) {
  if (status.ok())
    return status;
  return Status(status.code(), std::string(command) + ": " + status.message())
      .WithReason(status.reason());
}

Result<Number> ReadNumber(const wire::FieldReader& object, const char* key) {
  const json* value = object.Find(key);
  if (value == nullptr)
    return Number{};
  if (value->is_object())
    return ReadNumberObject(*value, object, key);
  return ReadPlainNumber(*value, object, key);
}

Result<int64_t> ReadRequiredNumber(const wire::FieldReader& object, const char* key) {
  if (object.Find(key) == nullptr)
    return object.Bad(key, "is required");
  EXPANSE_ASSIGN_OR_RETURN(const Number number, ReadNumber(object, key));
  if (!number.has_value())
    return object.Bad(key, "must be a number, not unset or infinite");
  return number.value;
}

// Not FieldReader::Text: that refuses control characters, and SLURM prints users' own text (job
// names, comments) in which one "\t" would then fail the listing of every job on the cluster.
Result<std::string> ReadString(const wire::FieldReader& object, const char* key) {
  const json* value = object.Find(key);
  if (value == nullptr)
    return std::string();
  if (!value->is_string())
    return object.Bad(key, "must be a string");
  return value->get_ref<const std::string&>();
}

Result<std::vector<std::string>> ReadStrings(const wire::FieldReader& object, const char* key) {
  const json* value = object.Find(key);
  std::vector<std::string> strings;
  if (value == nullptr)
    return strings;
  if (value->is_string()) {
    strings.push_back(value->get_ref<const std::string&>());
    return strings;
  }
  if (!value->is_array())
    return object.Bad(key, "must be a string or an array of strings");
  strings.reserve(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    const json& element = (*value)[i];
    if (!element.is_string())
      return wire::BadField(object.ElementPath(key, i), "must be a string", object.reason());
    strings.push_back(element.get_ref<const std::string&>());
  }
  return strings;
}

Status CheckReportedErrors(const json& document, std::string_view command) {
  if (!document.is_object())
    return OkStatus();
  const auto errors = document.find("errors");
  if (errors == document.end() || !errors->is_array() || errors->empty())
    return OkStatus();
  const json& first = errors->front();
  std::string text;
  if (first.is_string()) {
    text = first.get<std::string>();
  } else if (first.is_object()) {
    for (const char* key : {"description", "error"}) {
      const auto it = first.find(key);
      if (it != first.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
        text = it->get<std::string>();
        break;
      }
    }
  }
  return UnavailableError(std::string(command) + " reported an error: " +
                          (text.empty() ? std::string("(no text)") : QuoteForMessage(text, 200)))
      .WithReason("slurm_error");
}

int64_t SecondsToMillis(const Number& seconds) {
  if (!seconds.has_value())
    return 0;
  return CheckedMultiply(seconds.value, 1000).value_or(0);
}

std::optional<int64_t> CheckedMultiply(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    return std::nullopt;
  return product;
}

}  // namespace expanse::slurm::json_internal
