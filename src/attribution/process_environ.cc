#include "attribution/process_environ.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "attribution/parse_util.h"
#include "core/quote.h"

namespace expanse::attribution {
namespace {

constexpr std::array<std::string_view, 13> kWanted = {
    "SLURM_JOB_ID",          "SLURM_JOBID",          "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
    "SLURM_HET_JOB_ID",      "SLURM_HET_JOB_OFFSET", "SLURM_PACK_JOB_ID",  "SLURM_PACK_JOB_OFFSET",
    "CUDA_VISIBLE_DEVICES",  "SLURM_JOB_GPUS",       "SLURM_STEP_GPUS",    "CUDA_INJECTION64_PATH",
    "EXPANSE_YIELD_COUNTERS"};

bool IsWanted(std::string_view key) {
  for (const std::string_view wanted : kWanted) {
    if (key == wanted) {
      return true;
    }
  }
  return false;
}

// "<first><separator><second>" when both variables are set and numeric.
std::optional<std::string> NumericPair(const std::map<std::string_view, std::string_view>& vars,
                                       std::string_view first, std::string_view second,
                                       char separator) {
  const auto a = vars.find(first);
  const auto b = vars.find(second);
  if (a == vars.end() || b == vars.end()) {
    return std::nullopt;
  }
  const std::optional<uint32_t> x = internal::ParseDecimalU32(a->second);
  const std::optional<uint32_t> y = internal::ParseDecimalU32(b->second);
  if (!x || !y) {
    return std::nullopt;
  }
  return std::to_string(*x) + separator + std::to_string(*y);
}

}  // namespace

Result<SlurmEnviron> ParseProcessEnviron(std::string_view bytes, bool truncated) {
  std::vector<std::string_view> entries = internal::Split(bytes, '\0');
  if (truncated && !entries.empty()) {
    entries.pop_back();
  }
  std::map<std::string_view, std::string_view> vars;
  for (const std::string_view entry : entries) {
    const size_t equals = entry.find('=');
    if (equals == std::string_view::npos) {
      continue;  // the kernel shows whatever the process wrote; such an entry is not a variable
    }
    const std::string_view key = entry.substr(0, equals);
    if (IsWanted(key)) {
      vars.emplace(key, entry.substr(equals + 1));  // emplace keeps the first
    }
  }

  SlurmEnviron slurm;
  if (const auto it = vars.find("CUDA_VISIBLE_DEVICES"); it != vars.end()) {
    slurm.cuda_visible_devices = std::string(it->second);
  }
  if (const auto it = vars.find("SLURM_JOB_GPUS"); it != vars.end()) {
    slurm.slurm_job_gpus = std::string(it->second);
  }
  if (const auto it = vars.find("SLURM_STEP_GPUS"); it != vars.end()) {
    slurm.slurm_step_gpus = std::string(it->second);
  }
  if (const auto it = vars.find("CUDA_INJECTION64_PATH"); it != vars.end() && !it->second.empty()) {
    const std::string_view path = it->second;
    const std::string_view base = path.substr(path.rfind('/') + 1);
    if (base != kExpanseAgentLibrary)
      slurm.cuda_tool = std::string(path.substr(0, 256));
  }
  // A job's own way to claim its GPUs' counters, for a profiler nothing above reveals.
  if (const auto it = vars.find("EXPANSE_YIELD_COUNTERS"); it != vars.end() && it->second == "1")
    slurm.cuda_tool = "EXPANSE_YIELD_COUNTERS=1";
  auto job_var = vars.find("SLURM_JOB_ID");
  if (job_var == vars.end()) {
    job_var = vars.find("SLURM_JOBID");
  }
  if (job_var == vars.end()) {
    return slurm;
  }
  const std::optional<uint32_t> job_id = internal::ParseDecimalU32(job_var->second);
  if (!job_id || *job_id == 0) {
    return InvalidArgumentError(std::string(job_var->first) + "=" +
                                QuoteForMessage(job_var->second) + " is not a job id")
        .WithReason("environ_malformed");
  }
  SlurmJob job = JobFromNumber(*job_id);
  if (auto array = NumericPair(vars, "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", '_')) {
    job.display_id = std::move(*array);
  } else if (auto het = NumericPair(vars, "SLURM_HET_JOB_ID", "SLURM_HET_JOB_OFFSET", '+')) {
    job.display_id = std::move(*het);
  } else if (auto pack = NumericPair(vars, "SLURM_PACK_JOB_ID", "SLURM_PACK_JOB_OFFSET", '+')) {
    job.display_id = std::move(*pack);
  }
  slurm.job = std::move(job);
  return slurm;
}

}  // namespace expanse::attribution
