#include "release/json_fields.h"

#include <string>

namespace expanse::release_internal {

using nlohmann::json;

std::string MemberPath(std::string_view where, std::string_view name) {
  if (where.empty())
    return std::string(name);
  return std::string(where) + "." + std::string(name);
}

std::string ElementPath(std::string_view where, std::string_view name, size_t index) {
  return MemberPath(where, name) + "[" + std::to_string(index) + "]";
}

Result<json> ParseJsonObject(std::string_view text, std::string_view what) {
  json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    return InvalidArgumentError(std::string(what) + " is not valid JSON");
  }
  if (!document.is_object()) {
    return InvalidArgumentError(std::string(what) + " must be a JSON object");
  }
  return document;
}

namespace {

Result<const json*> Member(const json& object, std::string_view where, const char* name,
                           bool required) {
  auto it = object.find(name);
  if (it == object.end()) {
    if (required)
      return InvalidArgumentError(MemberPath(where, name) + " is missing");
    return static_cast<const json*>(nullptr);
  }
  return &*it;
}

}  // namespace

Result<std::string> RequiredString(const json& object, std::string_view where, const char* name) {
  EXPANSE_ASSIGN_OR_RETURN(const json* value, Member(object, where, name, true));
  if (!value->is_string())
    return InvalidArgumentError(MemberPath(where, name) + " must be a string");
  return value->get<std::string>();
}

Result<std::string> OptionalString(const json& object, std::string_view where, const char* name) {
  EXPANSE_ASSIGN_OR_RETURN(const json* value, Member(object, where, name, false));
  if (value == nullptr)
    return std::string();
  if (!value->is_string())
    return InvalidArgumentError(MemberPath(where, name) + " must be a string");
  return value->get<std::string>();
}

Result<uint64_t> RequiredUnsigned(const json& object, std::string_view where, const char* name,
                                  uint64_t max) {
  EXPANSE_ASSIGN_OR_RETURN(const json* value, Member(object, where, name, true));
  if (!value->is_number_unsigned() || value->get<uint64_t>() > max) {
    return InvalidArgumentError(MemberPath(where, name) + " must be an integer from 0 to " +
                                std::to_string(max));
  }
  return value->get<uint64_t>();
}

Result<const json*> RequiredArray(const json& object, std::string_view where, const char* name) {
  EXPANSE_ASSIGN_OR_RETURN(const json* value, Member(object, where, name, true));
  if (!value->is_array())
    return InvalidArgumentError(MemberPath(where, name) + " must be an array");
  return value;
}

Status CheckFormat(const json& object, std::string_view what, uint64_t expected) {
  auto it = object.find("format");
  if (it == object.end())
    return InvalidArgumentError(std::string(what) + ": format is missing");
  if (!it->is_number_unsigned() || it->get<uint64_t>() != expected) {
    std::string shown = it->dump();
    if (shown.size() > 32)
      shown = shown.substr(0, 32) + "...";
    return InvalidArgumentError("unknown " + std::string(what) + " format " + shown +
                                "; this build reads format " + std::to_string(expected))
        .WithReason("unsupported_format");
  }
  return OkStatus();
}

}  // namespace expanse::release_internal
