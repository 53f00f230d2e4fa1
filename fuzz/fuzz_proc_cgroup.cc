// libFuzzer target for the cgroup files attribution reads: /proc/<pid>/cgroup
// (src/attribution/proc_cgroup.h) and the v1 devices.list (devices_list.h).
//
// Beyond "no crash, no sanitizer report" it checks, aborting when one fails:
//  1. A placement names a non-zero job whose cgroup path ends in "/job_<id>" and starts one of
//     the input's cgroup paths; a v2 placement comes from the unified hierarchy's line.
//  2. devices.list minors come out ascending, unique, and below NVIDIA's control minors.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "attribution/devices_list.h"
#include "attribution/proc_cgroup.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_proc_cgroup: property violated: %s\n", what);
    std::abort();
  }
}

void CheckCgroup(std::string_view text) {
  const expanse::Result<std::optional<expanse::attribution::CgroupPlacement>> parsed =
      expanse::attribution::ParseProcCgroup(text);
  if (!parsed.ok() || !parsed->has_value()) {
    return;
  }
  const expanse::attribution::CgroupPlacement& placement = **parsed;
  Require(placement.job.job_id != 0, "job 0");
  Require(placement.job.job_cgroup.ends_with("/job_" + std::to_string(placement.job.job_id)),
          "job cgroup does not end in its job");
  bool found = false;
  size_t start = 0;
  while (start < text.size() && !found) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const expanse::Result<expanse::attribution::ProcCgroupLine> line =
        expanse::attribution::ParseProcCgroupLine(text.substr(start, end - start));
    found = line.ok() && line->path.starts_with(placement.job.job_cgroup) &&
            (placement.cgroup_version == 1) == (line->hierarchy_id != 0);
    start = end + 1;
  }
  Require(found, "placement not taken from any line");
}

void CheckDevicesList(std::string_view text) {
  const expanse::Result<expanse::attribution::DeviceWhitelist> parsed =
      expanse::attribution::ParseDevicesList(text);
  if (!parsed.ok()) {
    return;
  }
  for (size_t i = 0; i < parsed->gpu_minors.size(); ++i) {
    Require(parsed->gpu_minors[i] < expanse::attribution::kFirstNvidiaControlMinor,
            "control minor as GPU");
    Require(i == 0 || parsed->gpu_minors[i - 1] < parsed->gpu_minors[i], "minors not ascending");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckCgroup(text);
  CheckDevicesList(text);
  return 0;
}
