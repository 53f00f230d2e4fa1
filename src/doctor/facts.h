// What `expanse-daemon doctor` gathers about a deployment before it judges it (gather.h reads
// these from the machine through core/host.h; checks.h turns them into findings). Plain data:
// every broken setup a check recognises is a unit test over one of these structs.
//
// An `error` member that is not empty means the fact could not be read; the checks then report
// that instead of judging the missing value.
#ifndef EXPANSE_DOCTOR_FACTS_H_
#define EXPANSE_DOCTOR_FACTS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace expanse::doctor {

// One of SLURM's hook keys as slurm.conf sets it after Includes (the last assignment wins).
struct HookFacts {
  std::string key;          // "Prolog", "Epilog" or "TaskProlog"
  bool wanted = true;       // TaskProlog only with the profiling agent
  std::string value;        // the effective value; "" = not set
  std::string where;        // "file:line" of the effective assignment
  bool is_expanse = false;  // the effective value is one of our wrapper scripts
  // "file:line" of an assignment of one of our wrappers that a later assignment overrides
  // (SLURM runs only the last one); "" = none.
  std::string overridden_expanse_at;
};

struct SlurmConfFacts {
  std::string path;   // the slurm.conf read
  std::string error;  // could not be found or read
  std::vector<HookFacts> hooks;
  std::string task_plugin;     // TaskPlugin
  std::string proctrack_type;  // ProctrackType
};

struct CgroupConfFacts {
  std::string path;
  bool present = false;
  std::string error;
  std::map<std::string, std::string> settings;  // keys lower-cased, values as written
};

struct GpuFacts {
  std::string uuid;
  std::optional<uint32_t> minor;  // /dev/nvidiaN, when the backend knows it
};

// One GPU's processes as the worker's attribution saw them (agent/gpu_use.h).
struct GpuProcessFacts {
  int64_t pid = 0;
  std::string job_id;  // "" = not in any job's cgroup
  bool of_allocated_job = true;
  bool outside_cgroup = false;
};

struct GpuUseFacts {
  std::string uuid;
  std::vector<std::string> jobs;  // jobs SLURM allocated this GPU (SLURM_JOB_GPUS via gres.conf)
  std::vector<GpuProcessFacts> processes;  // NVML's process list, attributed
};

// One running job's attribution self-check (agent/job_devices_check.h): the GPUs its cgroup
// device list allows against those its Prolog recorded.
struct JobDevicesFacts {
  std::string job_id;
  std::string state;  // agrees | disagrees | unconstrained | not_checked | unreadable
  std::vector<std::string> allocated_gpus;
  std::vector<std::string> cgroup_gpus;
  std::string detail;
};

struct CapabilityFacts {
  std::string state;  // ok | degraded | absent | disabled
  std::string reason;
};

// What gres.conf says about one node (attribution/gres_conf.h).
struct GresFacts {
  std::string error;
  bool auto_detect = false;
  std::vector<uint32_t> minors;  // in GRES index order
  size_t gpus_without_file = 0;
};

// One node: a worker through its spool health report, or the controller itself.
struct NodeFacts {
  std::string host;
  std::string error;  // the report could not be read or was refused: why
  bool controller = false;
  int64_t written_ms = 0;             // the node's clock when it wrote the report
  std::optional<int64_t> arrived_ms;  // the report file's mtime (the shared file system's clock)
  int64_t last_sample_ms = 0;         // the GPU sampler's last good sample, 0 = never
  std::string problem;                // the sampler's own complaint, if any
  uint64_t spool_write_errors = 0;
  uint64_t spool_records_dropped = 0;
  std::vector<GpuFacts> gpus;  // what the sampler sees
  std::map<std::string, CapabilityFacts> capabilities;
  std::vector<GpuUseFacts> gpu_use;
  std::vector<JobDevicesFacts> job_devices;
  std::optional<GresFacts> gres;  // gres.conf for this node, when read
};

// A directory a daemon must write: owner, mode and the daemon's account, so the check can say
// whether the daemon (not doctor, which may run as root) can write it.
struct DirFacts {
  std::string path;
  bool exists = false;
  bool is_directory = false;
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct SpoolFacts {
  std::string root;  // <shared prefix>/spool/workers
  DirFacts dir;
  std::vector<DirFacts> host_dirs;
  std::map<std::string, uint64_t> backlog_files;  // host -> spool files not yet drained
  uint64_t quarantined = 0;                       // entries in .quarantine
  // Directories (the root, .quarantine, a host's) that held more names than the doctor reads
  // (GatherOptions::max_dir_names): the counts from them are lower bounds.
  std::vector<std::string> capped_dirs;
};

struct AccountFacts {
  std::string name;
  bool found = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// One answer from a plane: reached (with its HTTP status and error code) or why not.
struct ProbeFacts {
  std::string url;
  bool reached = false;
  int status = 0;
  std::string code;   // the error answer's code, e.g. "credential_revoked"
  std::string error;  // why the exchange failed (network, TLS, timeout)
};

struct CredentialFacts {
  std::string config_path;
  std::string error;  // the credential config could not be read or was refused
  std::string compute_id;
  std::optional<ProbeFacts> control_plane;
  std::optional<ProbeFacts> data_plane;
};

struct DiskFacts {
  std::string path;
  std::string error;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

struct OutboxFacts {
  std::string dir;
  std::string error;
  uint64_t depth_bytes = 0;  // segment files together
  uint64_t max_bytes = 0;    // the bound past which the oldest data is dropped
};

struct DeploymentFacts {
  int64_t now_ms = 0;  // the controller's clock
  std::string target;  // "" = the whole deployment, else the one host --host names
  std::optional<SlurmConfFacts> slurm_conf;
  std::optional<CgroupConfFacts> cgroup_conf;
  AccountFacts daemon_user;
  std::optional<SpoolFacts> spool;
  std::vector<NodeFacts> nodes;
  bool node_names_capped = false;  // the spool root held more names than were read
  // Why some reports' arrival times are unknown (find failed, timed out or was cut): they then
  // fall back to the time each worker wrote in its report. "" = every time was read.
  std::string report_times_error;
  std::optional<CredentialFacts> credential;
  std::vector<DiskFacts> disks;
  std::optional<OutboxFacts> outbox;
};

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_FACTS_H_
