// Internal to the slurm module: reading SLURM's --json output. The document is parsed by
// wire::ParseJson (limits enforced while reading) and its members are read with
// wire::FieldReader, the one checked reader of outside JSON; this header adds only the shapes
// that are SLURM's own. Errors name the command and the field's full path:
//   "squeue --json: jobs[2].job_id must be a number"
//
// Numbers come in three shapes, all read by ReadNumber():
//  - 22.05 (openapi v0.0.38, verified on 22.05.8): plain integers, and null where the value is
//    not set (time_limit of a job without a limit, memory_per_cpu when --mem was used).
//  - 23.02 and later (data_parser v0.0.39+): {"set": true, "infinite": false, "number": N} for
//    many fields; "set": false means not set, "infinite": true means unlimited.
//  - SLURM's sentinels NO_VAL (0xfffffffe) and INFINITE (0xffffffff), and their 64-bit forms,
//    which older plugins print raw.
// A field that is absent reads as not set: every SLURM release adds and drops fields.
#ifndef EXPANSE_SLURM_SLURM_JSON_H_
#define EXPANSE_SLURM_SLURM_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::slurm::json_internal {

// The reason every parse error of SLURM output carries.
inline constexpr std::string_view kOutputReason = "slurm_output";

// Limits for SLURM's output, which is far larger than anything else Expanse reads as JSON.
//  - max_values: the captured outputs (tests/fixtures/slurm) spend 13-15 bytes per value, as
//    SLURM pretty-prints, so the 256 MiB the client accepts from one command
//    (SlurmClientOptions::max_output_bytes) holds about 20 million; a dense document such as
//    [0,0,0,...] is stopped there rather than at 134 million (2 bytes each).
//  - max_string_bytes: well above any one field SLURM fills from user input (a submit line is
//    bounded by the kernel's argument limit, a few MiB), so one user's long job name, comment
//    or submit line cannot blank the listing for the whole cluster. A string costs only its own
//    bytes, which the output limit already bounds.
//  - max_depth: SLURM nests 9 levels at most in the captured outputs (jobs[].job_resources.
//    allocated_nodes[].sockets...); 64 leaves room for later releases and still refuses a
//    nesting bomb long before it costs anything.
inline constexpr wire::JsonLimits kSlurmJsonLimits{
    .max_depth = 64, .max_values = 20'000'000, .max_string_bytes = 64u << 20};

// Entries one array may hold. max_values already bounds every array; how many jobs a cluster
// runs is not ours to cap.
inline constexpr size_t kMaxEntries = kSlurmJsonLimits.max_values;

struct Number {
  enum class Kind { kUnset, kValue, kInfinite };
  Kind kind = Kind::kUnset;
  int64_t value = 0;  // >= 0; meaningful only for kValue

  bool has_value() const { return kind == Kind::kValue; }
  // The value, or `fallback` when unset or infinite.
  int64_t value_or(int64_t fallback) const { return has_value() ? value : fallback; }
};

// Parses `text` as one JSON document within kSlurmJsonLimits. kInvalidArgument, reason
// slurm_output, "<command>: <what wire::ParseJson found>" when it is not JSON or is too deep
// or too large.
Result<nlohmann::json> ParseDocument(std::string_view text, std::string_view command);

// A reader of the document's top level, with reason slurm_output and an empty path, so members
// are named "jobs[2].job_id"; fails ("the document must be an object") unless it is an object.
Result<wire::FieldReader> ReadTopLevel(const nlohmann::json& document);

// `status` with "<command>: " before its message: the readers name the field, the caller that
// knows which command printed the document names that.
Status NameCommand(const Status& status, std::string_view command);

// A number in any of SLURM's shapes. Absent or null reads as unset.
Result<Number> ReadNumber(const wire::FieldReader& object, const char* key);
// Like ReadNumber, but absent, unset and infinite are errors.
Result<int64_t> ReadRequiredNumber(const wire::FieldReader& object, const char* key);
// Text as SLURM printed it; absent or null reads as "".
Result<std::string> ReadString(const wire::FieldReader& object, const char* key);
// A string, or an array of strings (a one-string list); absent or null reads as empty.
Result<std::vector<std::string>> ReadStrings(const wire::FieldReader& object, const char* key);

// OK when the document's top-level "errors" list is absent or empty. Otherwise kUnavailable,
// reason "slurm_error", with the first entry's text: the command could not ask SLURM (22.05
// writes {"error": ...}, 23.02+ {"description": ..., "error": ...}).
Status CheckReportedErrors(const nlohmann::json& document, std::string_view command);

// Unix seconds -> ms; 0 when unset, infinite, or too large to represent.
int64_t SecondsToMillis(const Number& seconds);

// a * b for non-negative values; nullopt on overflow.
std::optional<int64_t> CheckedMultiply(int64_t a, int64_t b);

}  // namespace expanse::slurm::json_internal

#endif  // EXPANSE_SLURM_SLURM_JSON_H_
