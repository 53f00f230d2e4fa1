#include "slurm/slurm_json.h"

#include <cmath>
#include <exception>
#include <limits>

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

}  // namespace

Result<json> ParseDocument(std::string_view text, std::string_view command) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& error) {
    return InvalidArgumentError(std::string(command) + ": not valid JSON (syntax error at byte " +
                                std::to_string(error.byte) + ")")
        .WithReason(std::string(kOutputReason));
  } catch (const std::exception&) {
    return InvalidArgumentError(std::string(command) + ": not valid JSON")
        .WithReason(std::string(kOutputReason));
  }
}

Result<ObjectReader> ObjectReader::Make(const json& value, std::string_view command,
                                        std::string path) {
  if (value.is_null())
    return ObjectReader(nullptr, command, std::move(path));
  if (!value.is_object()) {
    std::string where = path.empty() ? "document" : path;
    return InvalidArgumentError(std::string(command) + ": " + where + ": expected an object")
        .WithReason(std::string(kOutputReason));
  }
  return ObjectReader(&value, command, std::move(path));
}

Status ObjectReader::Error(std::string_view key, std::string_view what) const {
  std::string message(command_);
  message += ": ";
  if (!path_.empty()) {
    message += path_;
    if (!key.empty())
      message += '.';
  }
  message += key;
  message += ": ";
  message += what;
  return InvalidArgumentError(std::move(message)).WithReason(std::string(kOutputReason));
}

const json* ObjectReader::Find(std::string_view key) const {
  if (object_ == nullptr)
    return nullptr;
  const auto it = object_->find(key);
  if (it == object_->end() || it->is_null())
    return nullptr;
  return &*it;
}

bool ObjectReader::Has(std::string_view key) const { return Find(key) != nullptr; }

Result<Number> ObjectReader::GetNumber(std::string_view key) const {
  const json* value = Find(key);
  if (value == nullptr)
    return Number{};
  if (value->is_object()) {
    // 23.02+: {"set": bool, "infinite": bool, "number": N}. Some writers leave out "set" or
    // "infinite"; a missing flag counts as false, and a missing "set" as set.
    const auto flag = [&](const char* name, bool fallback) -> Result<bool> {
      const auto it = value->find(name);
      if (it == value->end() || it->is_null())
        return fallback;
      if (!it->is_boolean())
        return Error(std::string(key) + "." + name, "expected true or false");
      return it->get<bool>();
    };
    EXPANSE_ASSIGN_OR_RETURN(const bool infinite, flag("infinite", false));
    EXPANSE_ASSIGN_OR_RETURN(const bool set, flag("set", true));
    if (infinite)
      return Number{Number::Kind::kInfinite, 0};
    if (!set)
      return Number{};
    const auto number = value->find("number");
    if (number == value->end() || number->is_object())
      return Error(key, "expected a number");
    // Recurse through a reader over the number object so its errors name this key.
    ObjectReader inner(&*value, command_,
                       path_.empty() ? std::string(key) : path_ + "." + std::string(key));
    return inner.GetNumber("number");
  }
  if (value->is_number_unsigned()) {
    const uint64_t raw = value->get<uint64_t>();
    if (raw == kNoVal || raw == kNoVal64)
      return Number{};
    if (raw == kInfinite || raw == kInfinite64)
      return Number{Number::Kind::kInfinite, 0};
    if (raw > static_cast<uint64_t>(kMaxInt64))
      return Error(key, "out of range");
    return Number{Number::Kind::kValue, static_cast<int64_t>(raw)};
  }
  if (value->is_number_integer()) {
    const int64_t raw = value->get<int64_t>();
    if (raw < 0)
      return Error(key, "expected a non-negative number");
    return Number{Number::Kind::kValue, raw};
  }
  if (value->is_number_float()) {
    const double raw = value->get<double>();
    // 2^63 is exactly representable; anything at or above it does not fit.
    if (!std::isfinite(raw) || raw < 0 || raw >= 9223372036854775808.0 || std::trunc(raw) != raw)
      return Error(key, "expected a whole non-negative number");
    return Number{Number::Kind::kValue, static_cast<int64_t>(raw)};
  }
  return Error(key, "expected a number");
}

Result<int64_t> ObjectReader::GetRequiredNumber(std::string_view key) const {
  if (!Has(key))
    return Error(key, "missing");
  EXPANSE_ASSIGN_OR_RETURN(const Number number, GetNumber(key));
  if (!number.has_value())
    return Error(key, "expected a number");
  return number.value;
}

Result<std::string> ObjectReader::GetString(std::string_view key) const {
  const json* value = Find(key);
  if (value == nullptr)
    return std::string();
  if (!value->is_string())
    return Error(key, "expected a string");
  return value->get<std::string>();
}

Result<std::vector<std::string>> ObjectReader::GetStrings(std::string_view key) const {
  const json* value = Find(key);
  std::vector<std::string> strings;
  if (value == nullptr)
    return strings;
  if (value->is_string()) {
    strings.push_back(value->get<std::string>());
    return strings;
  }
  if (!value->is_array())
    return Error(key, "expected a string or a list of strings");
  for (size_t i = 0; i < value->size(); ++i) {
    const json& element = (*value)[i];
    if (!element.is_string())
      return Error(std::string(key) + "[" + std::to_string(i) + "]", "expected a string");
    strings.push_back(element.get<std::string>());
  }
  return strings;
}

Result<ObjectReader> ObjectReader::GetObject(std::string_view key) const {
  std::string path = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  const json* value = Find(key);
  if (value == nullptr)
    return ObjectReader(nullptr, command_, std::move(path));
  return Make(*value, command_, std::move(path));
}

Result<std::vector<ObjectReader>> ObjectReader::GetObjects(std::string_view key) const {
  std::vector<ObjectReader> objects;
  const json* value = Find(key);
  if (value == nullptr)
    return objects;
  if (!value->is_array())
    return Error(key, "expected a list");
  const std::string prefix = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  objects.reserve(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(ObjectReader element,
                             Make((*value)[i], command_, prefix + "[" + std::to_string(i) + "]"));
    objects.push_back(std::move(element));
  }
  return objects;
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
