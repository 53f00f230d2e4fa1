// What `dcgmi` prints when it cannot do its job, recognised from one line of its output.
//
// dcgmi writes its failures as plain sentences, some on stdout (connection errors, health
// errors) and some on stderr (dmon's watch and field errors), and exits with its DCGM return
// code as an 8-bit status (-21 becomes 235). The sentences below are the ones in NVIDIA/DCGM's
// dcgmi sources from 2.4 to 4.6 (tests/fixtures/dcgm/README.md has the file and line of each).
// Anything else that starts with "Error" is still an error, reported as kOther.
#ifndef EXPANSE_DCGM_DCGMI_ERRORS_H_
#define EXPANSE_DCGM_DCGMI_ERRORS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace expanse::dcgm {

enum class DcgmiFailure {
  kEngineUnreachable,  // no host engine at --host (dcgmi retried for 5 s first)
  kInitFailed,         // dcgmi could not initialise its DCGM library
  kWatchFailed,        // dmon could not watch a field: DCP unsupported, profiling busy, ...
  kInvalidField,       // dmon was given a field id this dcgmi does not know
  kReadFailed,         // dmon could not read values (the host engine went away: -21)
  kNoData,             // dmon got no values at all from the host engine
  kStopped,            // dmon ended on SIGINT
  kHealthNotEnabled,   // `health -c` before any `health -s` on the group
  kHealthFailed,       // `health -c` or `-s` refused by the host engine
  kOther,              // another "Error..." line
};

struct DcgmiError {
  DcgmiFailure failure = DcgmiFailure::kOther;
  // DCGM's dcgmReturn_t when the line names one, e.g. -33 in "Result: -33: This request...".
  std::optional<int> dcgm_return;
  // The line itself, trimmed, printable ASCII only, at most kMaxErrorMessageBytes.
  std::string message;
};

inline constexpr size_t kMaxErrorMessageBytes = 512;

// The error a line reports, or nullopt for a line that is not one of dcgmi's error sentences.
std::optional<DcgmiError> RecognizeDcgmiError(std::string_view line);

// A stable snake_case name for capability reports and counters, e.g. "engine_unreachable".
std::string_view FailureReason(DcgmiFailure failure);

// "DCGM_ST_MODULE_NOT_LOADED" for -33; "" for a code this build does not name.
std::string_view DcgmReturnName(int dcgm_return);

// The DCGM return code behind a dcgmi exit status (235 -> -21), when the status is one dcgmi
// gives for a code this build names; nullopt for 0, for 128 + signal statuses and for others.
std::optional<int> DcgmReturnOfExitStatus(int exit_status);

}  // namespace expanse::dcgm

#endif  // EXPANSE_DCGM_DCGMI_ERRORS_H_
