// Reading the members of one JSON object that came from outside (a worker's spool record, an
// upload, a request body) without ever throwing: nlohmann's `value()` and `get<T>()` throw
// on a wrongly typed member, and one such throw outside a handler ends the process. Each
// getter checks presence, type and range, and a refusal names the member by its path:
//
//   EXPANSE_ASSIGN_OR_RETURN(wire::FieldReader r,
//                            wire::FieldReader::Object(entry, "batch.series[3]", "invalid_batch"));
//   EXPANSE_ASSIGN_OR_RETURN(int64_t t0, r.Int("t0", 0, wire::kMaxTimeMs, wire::Need::kRequired));
//   // on failure: kInvalidArgument "batch.series[3].t0 must be an integer from 0 to ...",
//   // reason "invalid_batch"
#ifndef EXPANSE_WIRE_FIELD_READER_H_
#define EXPANSE_WIRE_FIELD_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace expanse::wire {

// The characters a host name may hold besides letters and digits (FieldReader::Name's `extra`).
inline constexpr std::string_view kHostChars = "._-";

// Whether an absent (or null) member is an error. For strings, kRequired also refuses "".
enum class Need { kOptional, kRequired };

// The largest timestamp any record may carry (Unix ms, the end of year 9999): far from
// INT64_MAX, so sums of a timestamp and bounded offsets cannot overflow.
inline constexpr int64_t kMaxTimeMs = 253'402'300'799'999;

// A refusal of the value at `path`: kInvalidArgument "<path> <what>" with `reason`.
Status BadField(std::string_view path, std::string_view what, std::string_view reason);

// Valid UTF-8 and no control characters (what every stored or shown text must be).
bool IsCleanText(std::string_view text);
// IsCleanText, and no C1 control either (U+0080..U+009F: valid UTF-8 that a terminal still
// obeys, U+009B being CSI): what may be written to a terminal unquoted. IsCleanText lets C1
// through on purpose: the agent sends SLURM job names as users wrote them, and a batch the
// server refused for one would be lost whole; text on its way to a terminal checks this.
bool IsTerminalText(std::string_view text);
// 1..max_bytes bytes, each [a-z0-9], or in `extra`, or (with upper) [A-Z]: what
// FieldReader::Name accepts, for callers that check a name without a reader (a fast path).
bool IsName(std::string_view text, size_t max_bytes, std::string_view extra, bool upper);

class FieldReader {
 public:
  // A reader of `value`, which must be an object (else "<path> must be an object"). An empty
  // path stands for the document itself: its members are then named by key alone.
  static Result<FieldReader> Object(const nlohmann::json& value, std::string path,
                                    std::string reason);
  // The reader points into `value`, which must outlive it: no temporaries.
  static Result<FieldReader> Object(const nlohmann::json&& value, std::string path,
                                    std::string reason) = delete;

  // Clean text (IsCleanText) of at most max_bytes. Absent or null: "" unless required.
  Result<std::string> Text(const char* key, size_t max_bytes, Need need) const;
  // Text whose every byte is [a-z0-9], or in `extra`, or (with upper) [A-Z].
  Result<std::string> Name(const char* key, size_t max_bytes, std::string_view extra, bool upper,
                           Need need) const;
  // An integer in [min, max] (never a float, never an unsigned past INT64_MAX). Absent or
  // null: `absent` unless required.
  Result<int64_t> Int(const char* key, int64_t min, int64_t max, Need need,
                      int64_t absent = 0) const;
  // An integer in [0, max], up to UINT64_MAX (never a float, never negative). Absent or null:
  // `absent` unless required.
  Result<uint64_t> Uint(const char* key, uint64_t max, Need need, uint64_t absent = 0) const;
  // A number (integer or not) in [min, max]. Absent or null: `absent` unless required.
  Result<double> Double(const char* key, double min, double max, Need need,
                        double absent = 0) const;
  // true or false; absent or null: `absent`.
  Result<bool> Bool(const char* key, bool absent) const;
  // The member `key` (a document's "version" or "format") must be the integer `expected`:
  // else kInvalidArgument "<path>.<key> is <what it is>; this build reads <key> <expected>",
  // reason "unsupported_format", and "<path>.<key> is required" when absent.
  Status Expect(const char* key, int64_t expected) const;
  // The member, which must be an array of at most max_entries (null when optional and absent).
  Result<const nlohmann::json*> Array(const char* key, size_t max_entries, Need need) const;
  // An array of clean texts (as Text, each of at most max_bytes and never empty); absent or
  // null: empty unless required.
  Result<std::vector<std::string>> Texts(const char* key, size_t max_entries, size_t max_bytes,
                                         Need need) const;
  // The member as an object, with path "<path>.<key>". Absent or null: a reader of an empty
  // object unless required (so optional sections need no special case).
  Result<FieldReader> Member(const char* key, Need need) const;
  // The elements of an array member, each an object, with paths "<path>.<key>[i]".
  Result<std::vector<FieldReader>> Objects(const char* key, size_t max_entries, Need need) const;
  // The raw member, or null when absent or JSON null: for shapes a module reads itself
  // (SLURM's {"set","infinite","number"}); messages then come from Bad().
  const nlohmann::json* Find(const char* key) const;
  // kInvalidArgument "<path>.<key> <what>" with this reader's reason.
  Status Bad(const char* key, std::string_view what) const;
  // "<path>.<key>[<index>]".
  std::string ElementPath(std::string_view key, size_t index) const;

  // "<path>.<key>", for messages about a member's elements.
  std::string PathOf(std::string_view key) const;
  const std::string& reason() const { return reason_; }

 private:
  FieldReader(const nlohmann::json& object, std::string path, std::string reason)
      : object_(&object), path_(std::move(path)), reason_(std::move(reason)) {}

  const nlohmann::json* object_;
  std::string path_;
  std::string reason_;
};

// Reads a JSON number that must be an integer in [min, max], without throwing; false when it
// is not (a float, a string, out of range).
bool IntegerIn(const nlohmann::json& value, int64_t min, int64_t max, int64_t* out);

}  // namespace expanse::wire

#endif  // EXPANSE_WIRE_FIELD_READER_H_
