#include "server/validate.h"

#include <string>

#include "core/utf8.h"

namespace expanse::server {
namespace {

Status Invalid(std::string_view field, std::string_view what) {
  return InvalidArgumentError(std::string(field) + " " + std::string(what))
      .WithReason("invalid_argument");
}

}  // namespace

Status ValidateOptionalText(std::string_view field, std::string_view value, size_t max_bytes) {
  if (value.size() > max_bytes) {
    return Invalid(field, "is longer than " + std::to_string(max_bytes) + " bytes");
  }
  if (!IsValidUtf8(value))
    return Invalid(field, "is not valid UTF-8");
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7f)
      return Invalid(field, "contains a control character");
  }
  return OkStatus();
}

Status ValidateText(std::string_view field, std::string_view value, size_t max_bytes) {
  if (value.empty())
    return Invalid(field, "is empty");
  return ValidateOptionalText(field, value, max_bytes);
}

Status ValidateSlug(std::string_view field, std::string_view value) {
  if (value.empty() || value.size() > 63)
    return Invalid(field, "must be 1 to 63 characters");
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok)
      return Invalid(field, "may contain only a-z, 0-9 and '-'");
  }
  if (value.front() == '-' || value.back() == '-') {
    return Invalid(field, "must not start or end with '-'");
  }
  return OkStatus();
}

Status ValidateEmail(std::string_view value) {
  if (Status s = ValidateText("email", value, 254); !s.ok())
    return s;
  size_t at = value.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 == value.size() ||
      value.find('@', at + 1) != std::string_view::npos) {
    return Invalid("email", "must look like name@example.org");
  }
  if (value.find(' ') != std::string_view::npos)
    return Invalid("email", "contains a space");
  return OkStatus();
}

Status ValidateHostname(std::string_view field, std::string_view value) {
  if (value.empty() || value.size() > 253)
    return Invalid(field, "must be 1 to 253 characters");
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_';
    if (!ok)
      return Invalid(field, "may contain only letters, digits, '.', '-' and '_'");
  }
  return OkStatus();
}

}  // namespace expanse::server
