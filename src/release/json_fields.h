// Internal to the release module: strict member access for the JSON documents it reads
// (release.json, manifest.json). Each function names the member by its full path in the
// error, e.g. `releases[0].archives[1].sha256`.

#ifndef EXPANSE_RELEASE_JSON_FIELDS_H_
#define EXPANSE_RELEASE_JSON_FIELDS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::release_internal {

// `text` as a JSON object; kInvalidArgument "<what> is not valid JSON" otherwise.
Result<nlohmann::json> ParseJsonObject(std::string_view text, std::string_view what);

// A required member: kInvalidArgument "<where>.<name> is missing" or "... must be a string".
Result<std::string> RequiredString(const nlohmann::json& object, std::string_view where,
                                   const char* name);
// An optional string member: "" when absent.
Result<std::string> OptionalString(const nlohmann::json& object, std::string_view where,
                                   const char* name);
// A required non-negative integer member no larger than `max`.
Result<uint64_t> RequiredUnsigned(const nlohmann::json& object, std::string_view where,
                                  const char* name, uint64_t max);
// A required array member.
Result<const nlohmann::json*> RequiredArray(const nlohmann::json& object, std::string_view where,
                                            const char* name);
// Checks the "format" member equals `expected`: "unknown <what> format N; this build reads
// format <expected>" otherwise (reason "unsupported_format").
Status CheckFormat(const nlohmann::json& object, std::string_view what, uint64_t expected);

// "<where>.<name>", or just name when where is empty.
std::string MemberPath(std::string_view where, std::string_view name);
std::string ElementPath(std::string_view where, std::string_view name, size_t index);

}  // namespace expanse::release_internal

#endif  // EXPANSE_RELEASE_JSON_FIELDS_H_
