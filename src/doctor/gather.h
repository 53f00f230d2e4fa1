// Gathering the doctor's facts (facts.h) from the controller host, through the host seam
// (core/host.h) so that a MemoryHost stands in for the machine in tests: slurm.conf and its
// Includes, cgroup.conf and gres.conf, the workers' spool health reports, the spool's
// directories and quarantine, the credential config, free disk space (`df`), the outbox, and
// the planes through a probe the caller supplies.
#ifndef EXPANSE_DOCTOR_GATHER_H_
#define EXPANSE_DOCTOR_GATHER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "core/host.h"
#include "doctor/facts.h"

namespace expanse::doctor {

// Asks one plane one question with the compute's credential: method, URL, bearer credential.
using PlaneProbe = std::function<ProbeFacts(const std::string& method, const std::string& url,
                                            const std::string& credential)>;

struct GatherOptions {
  std::string target;  // --host: only this node's report is read; "" = the whole deployment
  std::string config_path;
  std::string shared_prefix;  // "" = the credential config's
  std::string slurm_conf;     // "" = discovered as the installer does
  std::string cgroup_conf;    // "" = beside slurm.conf
  std::string gres_conf;      // "" = beside slurm.conf
  std::string state_dir = "/var/lib/expanse";
  std::string user;  // the daemon's account; "" = the credential config's, else "slurm"
  std::string install_state = "/var/lib/expanse-install/controller.json";
  uint64_t outbox_max_bytes = uint64_t{2} << 30;  // the controller's default bound
  PlaneProbe probe;                               // null: the planes are not asked
};

DeploymentFacts GatherFacts(Host& host, const GatherOptions& options);

// The parts.
SlurmConfFacts GatherSlurmConf(Host& host, const std::string& slurm_conf, bool taskprolog_wanted);
CgroupConfFacts GatherCgroupConf(Host& host, const std::string& path);
SpoolFacts GatherSpool(Host& host, const std::string& root);
// Every host directory's report (or only `target`'s), with the files' mtimes from `find`.
std::vector<NodeFacts> GatherNodes(Host& host, const std::string& root, const std::string& target);
std::vector<DiskFacts> GatherDisks(Host& host, const std::vector<std::string>& paths);

// `df -P -k` output: one DiskFacts per data line, in order.
std::vector<DiskFacts> ParseDf(const std::string& output, const std::vector<std::string>& paths);
// cgroup.conf's Key=Value lines, keys lower-cased; '#' comments.
std::map<std::string, std::string> ParseCgroupConf(const std::string& text);

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_GATHER_H_
