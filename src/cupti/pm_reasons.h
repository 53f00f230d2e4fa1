// Why PM sampling is unavailable on a GPU, and what an operator does about it. Reasons are
// CUPTI result names (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) or the helper's own stable codes;
// docs/formats/cupti-helper.md lists them. The console, `expanse-daemon diagnostics` and the
// troubleshooting guide all show the same text.
#ifndef EXPANSE_CUPTI_PM_REASONS_H_
#define EXPANSE_CUPTI_PM_REASONS_H_

#include <string>
#include <string_view>

namespace expanse::cupti {

// The helper's own reason codes.
inline constexpr char kReasonLibcudaNotFound[] = "libcuda_not_found";
inline constexpr char kReasonLibcuptiNotFound[] = "libcupti_not_found";
inline constexpr char kReasonSymbolMissing[] = "symbol_missing";
inline constexpr char kReasonDriverTooOld[] = "driver_too_old";
inline constexpr char kReasonUnsupportedDevice[] = "unsupported_device";
inline constexpr char kReasonNoMetrics[] = "no_metrics";
inline constexpr char kReasonNotVisible[] = "not_visible_to_cuda";
inline constexpr char kReasonYielded[] = "yielded_to_job_profiler";
inline constexpr char kReasonHungCall[] = "hung_call";
// Not a failure: the GPU is sampled, configured without its counter availability image because
// CUPTI refused every metric with it (a status "ok" with this reason).
inline constexpr char kReasonAvailabilityRefused[] = "counter_availability_refused";

// What to do; "" when the reason needs no action.
std::string FixFor(std::string_view reason);

// Whether the reason means another profiler holds the counters (the helper yields and retries)
// rather than something an operator must fix.
bool IsCounterContention(std::string_view reason);

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_PM_REASONS_H_
