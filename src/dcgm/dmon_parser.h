// An incremental parser of `dcgmi dmon -e <ids>` output, fed one line at a time by the reader of
// the long-lived dmon child. Pure: no I/O, no clock; fixtures and fuzz/fuzz_dcgmi_output.cc
// drive it directly.
//
// The format (DeviceMonitor.cpp in NVIDIA/DCGM; tests/fixtures/dcgm/README.md):
//   #Entity         RPCTR        XIDER        ...   <- header: one short name per field
//   ID              #                         ...   <- units ("Id" and indented before 2.4)
//   GPU 0           14           N/A          ...   <- one row per entity per interval
// Every column is left-aligned and padded; a value is a decimal integer, a fixed-point number
// with three decimals ("0.571"), "N/A" for a blank (unsupported, not yet sampled, no XID yet),
// or a string cut to its column width ending in "...". The header pair is printed first and
// then again after the 15th interval and every 14 intervals after that. Rows of other entity
// kinds ("GPU-I 3", "GPU 0 LINK 1", "Switch 0", "CPU 0") are counted and skipped.
//
// Every line is hostile input: a line that is none of the above is refused and counted, never
// thrown on, and nothing is kept between lines but the counters and whether the last header
// named the fields asked for, in which order (rows under one naming other columns are refused).
#ifndef EXPANSE_DCGM_DMON_PARSER_H_
#define EXPANSE_DCGM_DMON_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.h"
#include "dcgm/dcgm_fields.h"
#include "dcgm/dcgmi_errors.h"

namespace expanse::dcgm {

// Longer lines are refused unread. A row of all 26 catalogue fields is 566 bytes.
inline constexpr size_t kMaxDmonLineBytes = 8192;
// More fields than any dmon command Expanse builds; bounds the parser's own memory.
inline constexpr size_t kMaxDmonFields = 64;

struct DmonValue {
  uint16_t field_id = 0;
  std::optional<double> value;  // in series units (FieldSpec::scale applied); unset: absent
};

// One GPU's row: a value slot for every field asked for, in `-e` order.
struct DmonSample {
  uint32_t gpu_id = 0;  // DCGM's GPU id (map to a UUID with `dcgmi discovery -l`)
  std::vector<DmonValue> values;
};

// A line that carried nothing to keep: the header pair, a blank line, another entity kind.
struct DmonSkipped {};

// A line that is neither dmon's format nor one of dcgmi's errors.
struct DmonRefused {
  std::string why;  // for a log line; quotes the line through QuoteForMessage
};

using DmonEvent = std::variant<DmonSkipped, DmonSample, DcgmiError, DmonRefused>;

struct DmonCounters {
  uint64_t lines = 0;
  uint64_t samples = 0;            // GPU rows accepted
  uint64_t headers = 0;            // "#Entity" lines
  uint64_t header_mismatches = 0;  // headers naming other columns than the fields asked for
                                   // (the rows under them are refused)
  uint64_t headers_reordered = 0;  // headers naming the fields asked for in another order (the
                                   // rows under them are read by the header's columns)
  uint64_t other_entities = 0;     // rows of MIG instances, links, switches, CPUs
  uint64_t errors = 0;             // dcgmi error lines
  uint64_t refused = 0;            // lines refused, oversized ones included
  uint64_t oversized = 0;          // of those, longer than kMaxDmonLineBytes
  uint64_t values_na = 0;          // "N/A" cells
  uint64_t values_truncated = 0;   // cells dmon cut to its column width ("123...")
  uint64_t values_refused = 0;     // cells that are not a number, or implausible for the field
};

// Per field (in `-e` order): how its cells went, so a field that is always N/A can be reported
// as unsupported on this node.
struct DmonFieldStats {
  uint16_t field_id = 0;
  uint64_t present = 0;
  uint64_t na = 0;
  uint64_t refused = 0;  // truncated or refused
};

class DmonParser {
 public:
  // `field_ids` in the order they were passed to `dmon -e`; each must be in the catalogue
  // (dcgm_fields.h), without repeats, 1..kMaxDmonFields of them. Else kInvalidArgument.
  static Result<DmonParser> Create(std::vector<uint16_t> field_ids);

  // One line, without or with its newline.
  DmonEvent Feed(std::string_view line);

  const std::vector<uint16_t>& field_ids() const { return field_ids_; }
  const DmonCounters& counters() const { return counters_; }
  const std::vector<DmonFieldStats>& field_stats() const { return field_stats_; }
  // The column names of the last header, escaped and cut, while they are not the fields asked
  // for in any order (the rows under it are then refused); "" otherwise.
  const std::string& other_header() const { return other_header_; }

 private:
  explicit DmonParser(std::vector<uint16_t> field_ids);
  DmonEvent Refuse(std::string_view line, std::string_view why);
  DmonEvent ParseRow(std::string_view line, uint32_t gpu_id,
                     const std::vector<std::string_view>& cells);
  void CheckHeader(const std::vector<std::string_view>& names);

  std::vector<uint16_t> field_ids_;
  std::vector<const FieldSpec*> specs_;  // parallel to field_ids_
  DmonCounters counters_;
  std::vector<DmonFieldStats> field_stats_;
  // Cells are read by the last header's columns: columns_[i] is the cell of field_ids_[i]. A
  // header naming the fields asked for in another order maps them anew; under one naming other
  // columns a row would put one field's value under another's name, so rows are refused until a
  // header naming the fields asked for comes again. Before any header: `-e` order (dmon prints
  // one first, and nothing has said the order differs).
  std::vector<size_t> columns_;
  bool header_matches_ = true;
  std::string other_header_;
};

// A whole captured output (a fixture, `dmon -c N`): every sample, and the last error line.
struct DmonOutput {
  std::vector<DmonSample> samples;
  std::optional<DcgmiError> error;
  DmonCounters counters;
};
Result<DmonOutput> ParseDmonOutput(std::string_view text, std::vector<uint16_t> field_ids);

}  // namespace expanse::dcgm

#endif  // EXPANSE_DCGM_DMON_PARSER_H_
