// Gathering the doctor's facts (facts.h) from the controller host, through the host seam
// (core/host.h) so that a MemoryHost stands in for the machine in tests: slurm.conf and its
// Includes, cgroup.conf and gres.conf, the workers' spool health reports, the spool's
// directories and quarantine, the credential config, free disk space (`df`), the outbox, and
// the planes through a probe the caller supplies.
#ifndef EXPANSE_DOCTOR_GATHER_H_
#define EXPANSE_DOCTOR_GATHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/host.h"
#include "doctor/facts.h"

namespace expanse::doctor {

// The most names the doctor reads from one directory workers write into (the spool's root, a
// host's directory, the quarantine): a directory holding millions must not exhaust memory.
inline constexpr size_t kMaxDirNames = 100'000;

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
  size_t max_dir_names = kMaxDirNames;            // per directory workers write into
  PlaneProbe probe;                               // null: the planes are not asked
};

DeploymentFacts GatherFacts(Host& host, const GatherOptions& options);

// The parts.
SlurmConfFacts GatherSlurmConf(Host& host, const std::string& slurm_conf, bool taskprolog_wanted);
CgroupConfFacts GatherCgroupConf(Host& host, const std::string& path);
SpoolFacts GatherSpool(Host& host, const std::string& root, size_t max_names = kMaxDirNames);
// What GatherNodes could not read whole.
struct NodeListing {
  bool names_capped = false;  // the root held more than max_names names
  std::string times_error;    // why some arrival times are unknown; "" = none
};
// Every host directory's report (or only `target`'s), with the files' mtimes from `find`. A
// host directory that is a symbolic link is not followed (its node has an error), and a report
// is read without following a link or waiting on a FIFO.
std::vector<NodeFacts> GatherNodes(Host& host, const std::string& root, const std::string& target,
                                   NodeListing* listing = nullptr, size_t max_names = kMaxDirNames);
std::vector<DiskFacts> GatherDisks(Host& host, const std::vector<std::string>& paths);

// `find <spool> -mindepth 2 -maxdepth 2 -name health.rec -printf '%h\t%T@\0'` output: each
// host directory's report mtime in ms, by host. Records end in NUL because workers name their
// own directories and a name may hold a line break (which could otherwise forge another host's
// record); a record whose name is not a valid spool host name, or whose time is not one, is
// skipped.
std::map<std::string, int64_t> ParseReportMtimes(std::string_view output);
// `df -P -k` output: one DiskFacts per data line, in order, at most one per path; a line whose
// sizes are not decimal KiB that fit in bytes has an error instead.
std::vector<DiskFacts> ParseDf(const std::string& output, const std::vector<std::string>& paths);
// cgroup.conf's Key=Value lines, keys lower-cased; '#' comments.
std::map<std::string, std::string> ParseCgroupConf(const std::string& text);

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_GATHER_H_
