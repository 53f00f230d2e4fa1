#include "wire/field_reader.h"

#include <cmath>
#include <limits>

#include "core/utf8.h"

namespace expanse::wire {

using nlohmann::json;

Status BadField(std::string_view path, std::string_view what, std::string_view reason) {
  return InvalidArgumentError(std::string(path) + " " + std::string(what))
      .WithReason(std::string(reason));
}

bool IsCleanText(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f)
      return false;
  }
  return IsValidUtf8(text);
}

bool IsTerminalText(std::string_view text) {
  // In valid UTF-8, U+0080..U+009F are exactly 0xC2 followed by 0x80..0x9F.
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (static_cast<unsigned char>(text[i]) == 0xc2 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f)
      return false;
  }
  return IsCleanText(text);
}

namespace {

bool IsNameChar(char c, std::string_view extra, bool upper) {
  if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (upper && c >= 'A' && c <= 'Z'))
    return true;
  // A loop, not find(): `extra` is a few characters, and a memchr call per '.' or '-' of every
  // name of an ingest batch showed in its parse.
  for (char e : extra) {
    if (c == e)
      return true;
  }
  return false;
}

}  // namespace

bool IsName(std::string_view text, size_t max_bytes, std::string_view extra, bool upper) {
  if (text.empty() || text.size() > max_bytes)
    return false;
  for (char c : text) {
    if (!IsNameChar(c, extra, upper))
      return false;
  }
  return true;
}

bool IntegerIn(const json& value, int64_t min, int64_t max, int64_t* out) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    *out = static_cast<int64_t>(u);
  } else if (value.is_number_integer()) {
    *out = value.get<int64_t>();
  } else {
    return false;
  }
  return *out >= min && *out <= max;
}

Result<FieldReader> FieldReader::Object(const json& value, std::string path, std::string reason) {
  if (!value.is_object())
    return BadField(path.empty() ? "the document" : path, "must be an object", reason);
  return FieldReader(value, std::move(path), std::move(reason));
}

std::string FieldReader::PathOf(std::string_view key) const {
  if (path_.empty())
    return std::string(key);
  return path_ + "." + std::string(key);
}

std::string FieldReader::ElementPath(std::string_view key, size_t index) const {
  return PathOf(key) + "[" + std::to_string(index) + "]";
}

const json* FieldReader::Find(const char* key) const {
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null())
    return nullptr;
  return &*it;
}

Status FieldReader::Bad(const char* key, std::string_view what) const {
  return BadField(PathOf(key), what, reason_);
}

Result<std::string> FieldReader::Text(const char* key, size_t max_bytes, Need need) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (need == Need::kRequired)
      return Bad(key, "is required");
    return std::string();
  }
  if (!v->is_string())
    return Bad(key, "must be a string");
  const std::string& text = v->get_ref<const std::string&>();
  if (text.empty() && need == Need::kRequired)
    return Bad(key, "is empty");
  if (text.size() > max_bytes)
    return Bad(key, "is longer than " + std::to_string(max_bytes) + " bytes");
  if (!IsValidUtf8(text))
    return Bad(key, "is not valid UTF-8");
  if (!IsCleanText(text))
    return Bad(key, "contains a control character");
  return text;
}

Result<std::string> FieldReader::Name(const char* key, size_t max_bytes, std::string_view extra,
                                      bool upper, Need need) const {
  EXPANSE_ASSIGN_OR_RETURN(std::string name, Text(key, max_bytes, need));
  for (char c : name) {
    if (!IsNameChar(c, extra, upper)) {
      return Bad(key, "may contain only [" + std::string(upper ? "A-Za-z" : "a-z") + "0-9" +
                          std::string(extra) + "]");
    }
  }
  return name;
}

Result<int64_t> FieldReader::Int(const char* key, int64_t min, int64_t max, Need need,
                                 int64_t absent) const {
  const json* v = Find(key);
  if (v == nullptr && need == Need::kOptional)
    return absent;
  int64_t out = 0;
  if (v == nullptr || !IntegerIn(*v, min, max, &out)) {
    return Bad(key,
               "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return out;
}

Result<uint64_t> FieldReader::Uint(const char* key, uint64_t max, Need need,
                                   uint64_t absent) const {
  const json* v = Find(key);
  if (v == nullptr && need == Need::kOptional)
    return absent;
  uint64_t out = 0;
  if (v != nullptr && v->is_number_unsigned())
    out = v->get<uint64_t>();
  // nlohmann stores a non-negative literal as unsigned; anything else is refused here.
  if (v == nullptr || !v->is_number_unsigned() || out > max)
    return Bad(key, "must be an integer from 0 to " + std::to_string(max));
  return out;
}

Result<double> FieldReader::Double(const char* key, double min, double max, Need need,
                                   double absent) const {
  const json* v = Find(key);
  if (v == nullptr && need == Need::kOptional)
    return absent;
  double out = 0;
  if (v != nullptr && v->is_number())
    out = v->get<double>();
  // The negated comparison also refuses NaN, which a DOM built in code can hold.
  if (v == nullptr || !v->is_number() || !(out >= min && out <= max)) {
    return Bad(key, "must be a number from " + nlohmann::json(min).dump() + " to " +
                        nlohmann::json(max).dump());
  }
  return out;
}

Status FieldReader::Expect(const char* key, int64_t expected) const {
  const json* v = Find(key);
  if (v == nullptr)
    return Bad(key, "is required");
  int64_t found = 0;
  if (IntegerIn(*v, expected, expected, &found))
    return OkStatus();
  std::string shown = v->dump();
  if (shown.size() > 32)
    shown = shown.substr(0, 32) + "...";
  return BadField(PathOf(key),
                  "is " + shown + "; this build reads " + key + " " + std::to_string(expected),
                  "unsupported_format");
}

Result<bool> FieldReader::Bool(const char* key, bool absent) const {
  const json* v = Find(key);
  if (v == nullptr)
    return absent;
  if (!v->is_boolean())
    return Bad(key, "must be true or false");
  return v->get<bool>();
}

Result<const json*> FieldReader::Array(const char* key, size_t max_entries, Need need) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (need == Need::kRequired)
      return Bad(key, "is required");
    return static_cast<const json*>(nullptr);
  }
  if (!v->is_array())
    return Bad(key, "must be an array");
  if (v->size() > max_entries)
    return Bad(key, "has more than " + std::to_string(max_entries) + " entries");
  return v;
}

}  // namespace expanse::wire

namespace expanse::wire {

Result<std::vector<std::string>> FieldReader::Texts(const char* key, size_t max_entries,
                                                    size_t max_bytes, Need need) const {
  EXPANSE_ASSIGN_OR_RETURN(const json* array, Array(key, max_entries, need));
  std::vector<std::string> out;
  if (array == nullptr)
    return out;
  out.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const json& v = (*array)[i];
    const std::string path = ElementPath(key, i);
    if (!v.is_string())
      return BadField(path, "must be a string", reason_);
    const std::string& text = v.get_ref<const std::string&>();
    if (text.empty())
      return BadField(path, "is empty", reason_);
    if (text.size() > max_bytes)
      return BadField(path, "is longer than " + std::to_string(max_bytes) + " bytes", reason_);
    if (!IsValidUtf8(text))
      return BadField(path, "is not valid UTF-8", reason_);
    if (!IsCleanText(text))
      return BadField(path, "contains a control character", reason_);
    out.push_back(text);
  }
  return out;
}

Result<FieldReader> FieldReader::Member(const char* key, Need need) const {
  static const json kEmptyObject = json::object();
  const json* v = Find(key);
  if (v == nullptr) {
    if (need == Need::kRequired)
      return Bad(key, "is required");
    return FieldReader(kEmptyObject, PathOf(key), reason_);
  }
  return Object(*v, PathOf(key), reason_);
}

Result<std::vector<FieldReader>> FieldReader::Objects(const char* key, size_t max_entries,
                                                      Need need) const {
  EXPANSE_ASSIGN_OR_RETURN(const json* array, Array(key, max_entries, need));
  std::vector<FieldReader> out;
  if (array == nullptr)
    return out;
  out.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(FieldReader element,
                             Object((*array)[i], ElementPath(key, i), reason_));
    out.push_back(std::move(element));
  }
  return out;
}

}  // namespace expanse::wire
