// Parsing JSON from outside (a worker's spool record, a request body) with limits enforced
// while it is read: a document deeper, larger or with longer strings than allowed is refused
// at the first value past the limit, before anything more is built. nlohmann's own parser
// builds whatever it is given: 16 MB of '[' is a gigabyte of nested arrays, and a dump or
// comparison of 60,000 levels overflows the stack.
//
//   EXPANSE_ASSIGN_OR_RETURN(nlohmann::json doc, wire::ParseJson(body, wire::JsonLimits{}));
#ifndef EXPANSE_WIRE_JSON_PARSE_H_
#define EXPANSE_WIRE_JSON_PARSE_H_

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::wire {

struct JsonLimits {
  // Nesting of arrays and objects; the top-level value is depth 1 when it is a container.
  size_t max_depth = 32;
  // Every value, object key included, counts once.
  size_t max_values = 1'000'000;
  // Bytes of one string or key, after unescaping.
  size_t max_string_bytes = 1u << 20;
};

// The document, or kInvalidArgument with one of these reasons and a message that says where:
//   "invalid_json"   not JSON (the byte offset of the error)
//   "json_too_deep"  nesting past max_depth
//   "json_too_large" more than max_values values, or a string longer than max_string_bytes
// Never throws.
Result<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_JSON_PARSE_H_
