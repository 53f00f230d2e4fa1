// Internal to the slurm module: reading SLURM's --json output with nlohmann::json, with errors
// that name the command and the field ("squeue --json: jobs[2].job_id: expected a number").
//
// Numbers come in three shapes, all read by Number():
//  - 22.05 (openapi v0.0.38, verified on 22.05.8): plain integers, and null where the value is
//    not set (time_limit of a job without a limit, memory_per_cpu when --mem was used).
//  - 23.02 and later (data_parser v0.0.39+): {"set": true, "infinite": false, "number": N} for
//    many fields; "set": false means not set, "infinite": true means unlimited.
//  - SLURM's sentinels NO_VAL (0xfffffffe) and INFINITE (0xffffffff), and their 64-bit forms,
//    which older plugins print raw.
// A field that is absent reads as not set: every SLURM release adds and drops fields.
#ifndef EXPANSE_SLURM_SLURM_JSON_H_
#define EXPANSE_SLURM_SLURM_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::slurm::json_internal {

// The reason every parse error of SLURM output carries.
inline constexpr std::string_view kOutputReason = "slurm_output";

struct Number {
  enum class Kind { kUnset, kValue, kInfinite };
  Kind kind = Kind::kUnset;
  int64_t value = 0;  // >= 0; meaningful only for kValue

  bool has_value() const { return kind == Kind::kValue; }
  // The value, or `fallback` when unset or infinite.
  int64_t value_or(int64_t fallback) const { return has_value() ? value : fallback; }
};

// Parses `text` as one JSON document; kInvalidArgument naming `command` and the byte offset
// when it is not.
Result<nlohmann::json> ParseDocument(std::string_view text, std::string_view command);

// A JSON object and where it sits in the document, for messages. An absent or null object reads
// as empty, so optional sections need no special case.
class ObjectReader {
 public:
  // Fails unless `value` is an object or null.
  static Result<ObjectReader> Make(const nlohmann::json& value, std::string_view command,
                                   std::string path);

  const std::string& path() const { return path_; }

  // "<command>: <path>.<key>: <what>", kInvalidArgument, reason slurm_output.
  Status Error(std::string_view key, std::string_view what) const;

  bool Has(std::string_view key) const;
  Result<Number> GetNumber(std::string_view key) const;
  // Like GetNumber, but an unset value is an error ("missing").
  Result<int64_t> GetRequiredNumber(std::string_view key) const;
  // An absent or null string reads as "".
  Result<std::string> GetString(std::string_view key) const;
  // A string, or an array of strings (a one-string list); absent or null reads as empty.
  Result<std::vector<std::string>> GetStrings(std::string_view key) const;
  Result<ObjectReader> GetObject(std::string_view key) const;
  // The elements of an array field, each with its path ("<path>.<key>[i]"); empty when absent.
  Result<std::vector<ObjectReader>> GetObjects(std::string_view key) const;

 private:
  ObjectReader(const nlohmann::json* object, std::string_view command, std::string path)
      : object_(object), command_(command), path_(std::move(path)) {}
  // The member, or nullptr when absent or null.
  const nlohmann::json* Find(std::string_view key) const;

  const nlohmann::json* object_;  // nullptr stands for an empty object
  std::string_view command_;      // a string literal owned by the caller
  std::string path_;
};

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
