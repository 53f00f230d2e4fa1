// Finding and reading a job's cgroup v1 devices.list. Touches the file system (under an
// injectable root).
#ifndef EXPANSE_ATTRIBUTION_DEVICES_CGROUP_H_
#define EXPANSE_ATTRIBUTION_DEVICES_CGROUP_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "attribution/file_reader.h"
#include "core/result.h"

namespace expanse::attribution {

// The job cgroup path SLURM's cgroup/v1 plugin makes, relative to a hierarchy's root:
// "/<prefix>/uid_<uid>/job_<id>". `prefix` is "slurm" by default, "slurm_<node>" for slurmd's
// built with multiple-slurmd, and whatever lies between the hierarchy's root and that when the
// reader is outside slurmd's cgroup namespace (our test cluster: "expanse-testcluster/<host>/
// slurm"). For hook events, where no process shows the path; a process's own cgroup path
// (AttributedProcess::job_cgroup) is better when there is one.
std::string SlurmV1JobCgroup(std::string_view prefix, uint32_t uid, uint32_t job_id);

// The text of <cgroup_root>/devices<job_cgroup>/devices.list, at most 64 KiB. `cgroup_root` is
// "/sys/fs/cgroup" outside tests. kInvalidArgument when `job_cgroup` is not absolute or holds a
// "." or ".." component (it comes from /proc, which a process does not control, but a path built
// from text is checked anyway); kNotFound when the job or the file is gone; kResourceExhausted
// past the cap; otherwise FileReader::Read's errors.
Result<std::string> ReadJobDevicesList(std::string_view cgroup_root, std::string_view job_cgroup,
                                       const FileReader& reader = SystemFileReader());

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_DEVICES_CGROUP_H_
