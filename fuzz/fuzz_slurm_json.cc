// libFuzzer target for the SLURM output parsers (src/slurm/): squeue --json, sacct --json,
// scontrol show job -d, and the host list, GRES and TRES strings inside them. Their input is
// whatever the installed SLURM prints, and job names, comments and GRES requests in it come from
// users. Properties, checked on every input:
//  - no parser crashes, hangs or trips a sanitizer;
//  - a JSON failure is kInvalidArgument "slurm_output" or kUnavailable "slurm_error" (SLURM's
//    own error list); a text failure is kInvalidArgument;
//  - what parses keeps its promises: every job has an id, no count or time is negative, GPU
//    indices are ascending, unique and in range, host lists hold no empty name.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "slurm/gres.h"
#include "slurm/hostlist.h"
#include "slurm/sacct_parse.h"
#include "slurm/scontrol_parse.h"
#include "slurm/squeue_parse.h"
#include "slurm/tres.h"

namespace {

using expanse::StatusCode;
namespace slurm = expanse::slurm;

// Enough to exercise the bounds without spending each run on building strings.
constexpr size_t kFuzzMaxHosts = 4096;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_slurm_json: property violated: %s\n", what);
    std::abort();
  }
}

void RequireJsonError(const expanse::Status& status) {
  const bool output =
      status.code() == StatusCode::kInvalidArgument && status.reason() == "slurm_output";
  const bool reported =
      status.code() == StatusCode::kUnavailable && status.reason() == "slurm_error";
  Require(output || reported, "JSON failure is slurm_output or slurm_error");
}

void RequireIndices(const std::vector<int>& indices) {
  Require(std::is_sorted(indices.begin(), indices.end()), "GPU indices ascending");
  Require(std::adjacent_find(indices.begin(), indices.end()) == indices.end(),
          "GPU indices unique");
  for (int index : indices)
    Require(index >= 0 && index <= slurm::kMaxGpuIndex, "GPU index in range");
}

void RequireIndices(const slurm::GpuIndicesByHost& by_host) {
  for (const auto& [host, indices] : by_host) {
    Require(!host.empty(), "GPU host named");
    Require(!indices.empty(), "hosts without GPUs left out");
    RequireIndices(indices);
  }
}

void CheckJobs(const expanse::Result<std::vector<slurm::JobInfo>>& jobs) {
  if (!jobs.ok()) {
    RequireJsonError(jobs.status());
    return;
  }
  for (const slurm::JobInfo& job : *jobs) {
    Require(!job.job_id.empty(), "every job has an id");
    Require(job.slurm_job_id >= 0, "job number not negative");
    Require(job.submit_ms >= 0 && job.start_ms >= 0 && job.end_ms >= 0, "times not negative");
    Require(job.req_nodes >= 0 && job.req_cpus >= 0 && job.req_gpus >= 0 && job.req_mem_mib >= 0 &&
                job.time_limit_s >= 0,
            "requests not negative");
    RequireIndices(job.gpu_indices);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckJobs(slurm::ParseSqueueJson(text));
  CheckJobs(slurm::ParseSacctJson(text));

  if (const auto records = slurm::ParseScontrolShowJob(text); records.ok()) {
    for (const slurm::JobGres& record : *records) {
      Require(!record.job_id.empty(), "every scontrol record has an id");
      RequireIndices(record.gpu_indices);
    }
  } else {
    Require(records.status().code() == StatusCode::kInvalidArgument, "scontrol failure kind");
  }

  // The string-level parsers, on inputs short enough to be one field.
  if (size <= 256) {
    if (const auto hosts = slurm::ExpandHostList(text, kFuzzMaxHosts); hosts.ok()) {
      Require(hosts->size() <= kFuzzMaxHosts, "host list bounded");
      for (const auto& host : *hosts)
        Require(!host.empty(), "no empty host name");
    }
    if (const auto indices = slurm::GpuIndicesFromGres(text); indices.ok())
      RequireIndices(*indices);
    if (const auto gpus = slurm::tres::GpusInTresPer(text))
      Require(*gpus >= 0, "tres_per GPUs not negative");
    for (const auto& [name, count] : slurm::tres::ParseTresCounts(text))
      Require(count >= 0, "TRES count not negative");
  }
  return 0;
}
