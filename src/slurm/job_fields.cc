#include "slurm/job_fields.h"

#include <algorithm>
#include <array>

namespace expanse::slurm::job_fields {
namespace {

// JOB_STATE_BASE names, src/common/slurm_protocol_defs.c job_state_string().
constexpr std::array<std::string_view, 12> kBaseStates = {
    "PENDING", "RUNNING",   "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
    "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};

constexpr std::array<std::string_view, 5> kWaitingStates = {"PENDING", "REQUEUED", "REQUEUE_HOLD",
                                                            "REQUEUE_FED", "RESV_DEL_HOLD"};

// COMPLETING, STAGE_OUT, SPECIAL_EXIT and REVOKED are flags SLURM only sets once a job is over.
constexpr std::array<std::string_view, 13> kEndedStates = {
    "COMPLETING", "COMPLETED",    "CANCELLED", "FAILED",   "TIMEOUT",
    "NODE_FAIL",  "PREEMPTED",    "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
    "STAGE_OUT",  "SPECIAL_EXIT", "REVOKED"};

template <size_t N>
bool Contains(const std::array<std::string_view, N>& set, std::string_view state) {
  return std::find(set.begin(), set.end(), state) != set.end();
}

}  // namespace

std::string FormatJobId(const JobIdParts& parts) {
  if (parts.array_job_id > 0) {
    if (parts.array_task_id.has_value())
      return std::to_string(parts.array_job_id) + "_" + std::to_string(*parts.array_task_id);
    if (!parts.array_task_string.empty()) {
      return std::to_string(parts.array_job_id) + "_[" +
             TaskRangesFromBitmap(parts.array_task_string) + "]";
    }
  }
  if (parts.het_job_id > 0)
    return std::to_string(parts.het_job_id) + "+" + std::to_string(parts.het_job_offset);
  return std::to_string(parts.job_id);
}

std::string TaskRangesFromBitmap(std::string_view text) {
  if (!text.starts_with("0x") && !text.starts_with("0X"))
    return std::string(text);
  const std::string_view digits = text.substr(2);
  if (digits.empty())
    return std::string(text);
  std::string ranges;
  // Walks bits from task 0 upwards: the last hex digit holds tasks 0-3.
  int64_t run_start = -1;
  int64_t task = 0;
  const auto close_run = [&](int64_t end) {  // the run is [run_start, end)
    if (!ranges.empty())
      ranges += ',';
    ranges += std::to_string(run_start);
    if (end - 1 > run_start)
      ranges += "-" + std::to_string(end - 1);
    run_start = -1;
  };
  for (size_t i = digits.size(); i-- > 0;) {
    const char digit = digits[i];
    int nibble = 0;
    if (digit >= '0' && digit <= '9')
      nibble = digit - '0';
    else if (digit >= 'a' && digit <= 'f')
      nibble = digit - 'a' + 10;
    else if (digit >= 'A' && digit <= 'F')
      nibble = digit - 'A' + 10;
    else
      return std::string(text);
    for (int bit = 0; bit < 4; ++bit, ++task) {
      const bool set = (nibble >> bit) & 1;
      if (set && run_start < 0)
        run_start = task;
      else if (!set && run_start >= 0)
        close_run(task);
    }
  }
  if (run_start >= 0)
    close_run(task);
  return ranges;
}

std::string ReportedState(std::span<const std::string> states) {
  if (states.empty())
    return "";
  if (std::find(states.begin(), states.end(), "COMPLETING") != states.end())
    return "COMPLETING";
  for (const std::string& state : states) {
    if (Contains(kBaseStates, state))
      return state;
  }
  return states.front();
}

bool IsWaitingState(std::string_view state) { return Contains(kWaitingStates, state); }

bool HasEnded(std::string_view state) { return Contains(kEndedStates, state); }

}  // namespace expanse::slurm::job_fields
