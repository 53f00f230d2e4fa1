#include "doctor/gather.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "attribution/gres_conf.h"
#include "core/file_util.h"
#include "core/quote.h"
#include "deploy/daemon_config.h"
#include "doctor/health_report.h"
#include "slurm/hook_script.h"
#include "slurm/slurm_conf.h"
#include "spool/spool_format.h"
#include "spool/spool_names.h"
#include "wire/json_parse.h"

namespace expanse::doctor {
namespace {

constexpr size_t kMaxHookScriptBytes = 64 << 10;
constexpr size_t kMaxCgroupConfBytes = 1 << 20;
constexpr size_t kMaxHealthFileBytes = 68 << 10;  // the aggregator's bound
constexpr size_t kMaxInstallStateBytes = 1 << 20;

std::string Dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

std::string LowerKey(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos)
    return "";
  return text.substr(begin, text.find_last_not_of(" \t\r") + 1 - begin);
}

// A configuration file's text: nullopt when absent, an error for anything but a regular file
// (a FIFO or device would block or never end the read).
Result<std::optional<std::string>> ReadRegularFile(Host& host, const std::string& path,
                                                   size_t max_bytes) {
  const std::optional<FileInfo> info = host.Stat(path);
  if (!info)
    return std::optional<std::string>();
  if (info->type != FileInfo::Type::kFile)
    return InvalidArgumentError(path + " is not a regular file");
  return host.ReadFile(path, max_bytes);
}

// Whether `value` names one of our wrapper scripts: a file whose text says so.
bool IsExpanseWrapper(Host& host, const std::string& value) {
  if (value.empty() || value.front() != '/')
    return false;
  const std::optional<FileInfo> info = host.Stat(value);
  if (!info || info->type != FileInfo::Type::kFile)
    return false;
  Result<std::optional<std::string>> text = host.ReadFile(value, kMaxHookScriptBytes);
  return text.ok() && *text && slurm::ParseManagedHookScript(**text).has_value();
}

// Whether `host` is this machine: then what workers wrote is read with the file system's own
// guards (O_NOFOLLOW, O_NONBLOCK, a bounded listing), which the Host seam does not offer.
// MemoryHost has no links, FIFOs or races to guard against.
bool IsRealHost(Host& host) { return dynamic_cast<RealHost*>(&host) != nullptr; }

// The names in `path`, a directory workers write into, sorted: at most `max_names` of them
// (*capped when it held more; on this machine no more than max_names + 1 are ever read). Absent:
// none. With `follow` false a symbolic link at `path` is refused, not listed.
Result<std::vector<std::string>> ListWorkerDir(Host& host, const std::string& path,
                                               size_t max_names, bool follow, bool* capped) {
  std::vector<std::string> names;
  if (IsRealHost(host)) {
    const fs::UniqueFd fd(
        open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW)));
    if (!fd.valid()) {
      if (errno == ENOENT)
        return names;
      return fs::ErrnoStatus(errno, "cannot open " + path);
    }
    EXPANSE_ASSIGN_OR_RETURN(
        names,
        fs::ListDirectoryAt(fd.get(), path, max_names == SIZE_MAX ? max_names : max_names + 1));
  } else {
    EXPANSE_ASSIGN_OR_RETURN(names, host.ListDirectory(path));
  }
  *capped = names.size() > max_names;
  if (*capped)
    names.resize(max_names);
  std::sort(names.begin(), names.end());
  return names;
}

// A worker's health report `name`/health.rec under `root`: nullopt when absent. Neither the
// host directory nor the report may be a symbolic link (a worker could point them at any path
// root can open, a device with side effects on open included), and the report must be a
// regular file, checked on the descriptor read (a FIFO put there neither blocks the open nor
// the read): the checks hold for what is read, not only for what was there a moment before.
Result<std::optional<std::string>> ReadWorkerReport(Host& host, const std::string& root,
                                                    const std::string& name) {
  const std::string dir = root + "/" + name;
  const std::string path = dir + "/" + spool::kHealthFileName;
  if (!IsRealHost(host)) {
    const std::optional<FileInfo> info = host.LinkStat(path);
    if (!info)
      return std::optional<std::string>();
    if (info->type != FileInfo::Type::kFile)
      return InvalidArgumentError(path + " is not a regular file");
    return host.ReadFile(path, kMaxHealthFileBytes);
  }
  const fs::UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) {
    if (errno == ENOENT)
      return std::optional<std::string>();
    if (errno == ELOOP || errno == ENOTDIR)
      return InvalidArgumentError(dir + " is a symbolic link or not a directory: not followed");
    return fs::ErrnoStatus(errno, "cannot open " + dir);
  }
  const fs::UniqueFd fd(openat(dir_fd.get(), spool::kHealthFileName,
                               O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT)
      return std::optional<std::string>();
    if (errno == ELOOP)
      return InvalidArgumentError(path + " is a symbolic link: not followed");
    return fs::ErrnoStatus(errno, "cannot open " + path);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0)
    return fs::ErrnoStatus(errno, "cannot stat " + path);
  if (!S_ISREG(st.st_mode))
    return InvalidArgumentError(path + " is not a regular file");
  std::string bytes;
  if (!fs::ReadAll(fd.get(), bytes, kMaxHealthFileBytes + 1))
    return fs::ErrnoStatus(errno, "cannot read " + path);
  if (bytes.size() > kMaxHealthFileBytes) {
    return ResourceExhaustedError(path + " is larger than " + std::to_string(kMaxHealthFileBytes) +
                                  " bytes");
  }
  return std::optional<std::string>(std::move(bytes));
}

// What is at `path`; with `follow` false a symbolic link is reported as one, never followed (a
// worker's directory may be replaced by a link to anywhere).
DirFacts StatDir(Host& host, const std::string& path, bool follow) {
  DirFacts dir;
  dir.path = path;
  if (const std::optional<FileInfo> info = follow ? host.Stat(path) : host.LinkStat(path)) {
    dir.exists = true;
    dir.is_directory = info->type == FileInfo::Type::kDirectory;
    dir.mode = info->mode;
    dir.uid = info->uid;
    dir.gid = info->gid;
  }
  return dir;
}

// What the install state says (docs/formats/install-state.md); empty members when it is absent.
struct InstallStateFacts {
  bool present = false;
  bool profiling_agent = true;
  std::string slurm_conf;
  std::string shared_prefix;
  std::string user;
};

InstallStateFacts ReadInstallState(Host& host, const std::string& path) {
  InstallStateFacts state;
  Result<std::optional<std::string>> text = ReadRegularFile(host, path, kMaxInstallStateBytes);
  if (!text.ok() || !*text)
    return state;
  Result<nlohmann::json> doc = wire::ParseJson(**text, wire::JsonLimits{});
  if (!doc.ok() || !doc->is_object())
    return state;
  state.present = true;
  const auto text_of = [&](const char* key) {
    const auto it = doc->find(key);
    return it != doc->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (const auto it = doc->find("profiling_agent"); it != doc->end() && it->is_boolean())
    state.profiling_agent = it->get<bool>();
  state.slurm_conf = text_of("slurm_conf");
  state.shared_prefix = text_of("shared_prefix");
  state.user = text_of("user");
  return state;
}

// find's %T@, seconds since the epoch with a fraction, in ms; nullopt unless the whole field is
// a time between the epoch and the end of year 9999.
std::optional<int64_t> EpochSecondsAsMs(std::string_view field) {
  const std::string text(field);  // strtod wants a terminated string
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() ||
      !(seconds > 0 && seconds < 253'402'300'799.0))
    return std::nullopt;
  return static_cast<int64_t>(seconds * 1000.0);
}

// A df size field, decimal KiB, in bytes: digits only (istream's >> read "-1" as 2^64 - 1) and
// nullopt past what uint64_t holds in bytes.
std::optional<uint64_t> KibibytesAsBytes(std::string_view field) {
  uint64_t kib = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), kib);
  if (field.empty() || error != std::errc() || end != field.data() + field.size() ||
      kib > UINT64_MAX / 1024)
    return std::nullopt;
  return kib * 1024;
}

// The first `count` fields of a df line, split at whitespace as df separates them.
std::vector<std::string_view> DfFields(std::string_view line, size_t count) {
  constexpr std::string_view kSpace = " \t\r\v\f";
  std::vector<std::string_view> fields;
  size_t at = line.find_first_not_of(kSpace);
  while (at != std::string_view::npos && fields.size() < count) {
    const size_t end = line.find_first_of(kSpace, at);
    fields.push_back(line.substr(at, end == std::string_view::npos ? end : end - at));
    at = end == std::string_view::npos ? end : line.find_first_not_of(kSpace, end);
  }
  return fields;
}

NodeFacts ReadNode(Host& host, const std::string& root, const std::string& name,
                   const std::map<std::string, int64_t>& mtimes) {
  NodeFacts node;
  node.host = name;
  const std::string path = root + "/" + name + "/" + spool::kHealthFileName;
  Result<std::optional<std::string>> bytes = ReadWorkerReport(host, root, name);
  if (!bytes.ok()) {
    node.error = bytes.status().message();
    return node;
  }
  if (!*bytes) {
    node.error = "no health report (" + path + ")";
    return node;
  }
  Result<NodeFacts> read = ReadHealthFile(**bytes, name);
  if (!read.ok()) {
    node.error = read.status().message();
    return node;
  }
  node = std::move(*read);
  if (const auto it = mtimes.find(name); it != mtimes.end())
    node.arrived_ms = it->second;
  return node;
}

}  // namespace

std::map<std::string, std::string> ParseCgroupConf(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (const size_t hash = line.find('#'); hash != std::string::npos)
      line.resize(hash);
    const size_t eq = line.find('=');
    if (eq == std::string::npos)
      continue;
    const std::string key = LowerKey(Trim(line.substr(0, eq)));
    if (!key.empty() && out.size() < 256)
      out[key] = Trim(line.substr(eq + 1));
  }
  return out;
}

SlurmConfFacts GatherSlurmConf(Host& host, const std::string& slurm_conf, bool taskprolog_wanted) {
  SlurmConfFacts facts;
  Result<std::string> path =
      slurm::DiscoverSlurmConf(slurm_conf.empty() ? std::nullopt : std::optional(slurm_conf), host);
  if (!path.ok()) {
    facts.error = path.status().message();
    return facts;
  }
  facts.path = *path;
  Result<slurm::SlurmConf> conf = slurm::ReadSlurmConf(host, *path);
  if (!conf.ok()) {
    facts.error = conf.status().message();
    return facts;
  }
  for (const char* key : {"Prolog", "Epilog", "TaskProlog"}) {
    HookFacts hook;
    hook.key = key;
    hook.wanted = std::string(key) != "TaskProlog" || taskprolog_wanted;
    const std::vector<const slurm::SlurmConfAssignment*> all = conf->AssignmentsOf(key);
    if (!all.empty()) {
      const slurm::SlurmConfAssignment& last = *all.back();
      hook.value = last.value;
      hook.where = last.path + ":" + std::to_string(last.line);
      hook.is_expanse = IsExpanseWrapper(host, last.value);
      for (size_t i = 0; i + 1 < all.size() && !hook.is_expanse; ++i) {
        if (IsExpanseWrapper(host, all[i]->value))
          hook.overridden_expanse_at = all[i]->path + ":" + std::to_string(all[i]->line);
      }
    }
    facts.hooks.push_back(std::move(hook));
  }
  facts.task_plugin = conf->EffectiveValue("TaskPlugin").value_or("");
  facts.proctrack_type = conf->EffectiveValue("ProctrackType").value_or("");
  return facts;
}

CgroupConfFacts GatherCgroupConf(Host& host, const std::string& path) {
  CgroupConfFacts facts;
  facts.path = path;
  Result<std::optional<std::string>> text = ReadRegularFile(host, path, kMaxCgroupConfBytes);
  if (!text.ok()) {
    facts.error = text.status().message();
    return facts;
  }
  if (!*text)
    return facts;
  facts.present = true;
  facts.settings = ParseCgroupConf(**text);
  return facts;
}

SpoolFacts GatherSpool(Host& host, const std::string& root, size_t max_names) {
  SpoolFacts spool;
  spool.root = root;
  spool.dir = StatDir(host, root, /*follow=*/true);
  if (!spool.dir.is_directory)
    return spool;
  bool capped = false;
  Result<std::vector<std::string>> names = ListWorkerDir(host, root, max_names, true, &capped);
  if (!names.ok())
    return spool;
  if (capped)
    spool.capped_dirs.push_back(root);
  for (const std::string& name : *names) {
    if (name == spool::kQuarantineDirName) {
      const std::string quarantine = root + "/" + name;
      bool q_capped = false;
      Result<std::vector<std::string>> q =
          ListWorkerDir(host, quarantine, max_names, false, &q_capped);
      spool.quarantined = q.ok() ? q->size() : 0;
      if (q_capped)
        spool.capped_dirs.push_back(quarantine);
      continue;
    }
    if (!spool::IsValidHostName(name))
      continue;
    DirFacts dir = StatDir(host, root + "/" + name, /*follow=*/false);
    if (!dir.is_directory)
      continue;  // a file, or a link GatherNodes reports
    bool files_capped = false;
    Result<std::vector<std::string>> files =
        ListWorkerDir(host, dir.path, max_names, false, &files_capped);
    uint64_t backlog = 0;
    if (files.ok()) {
      for (const std::string& file : *files)
        backlog += spool::ParseSpoolFileName(file).has_value() ? 1 : 0;
    }
    if (files_capped)
      spool.capped_dirs.push_back(dir.path);
    spool.backlog_files[name] = backlog;
    spool.host_dirs.push_back(std::move(dir));
  }
  return spool;
}

std::vector<NodeFacts> GatherNodes(Host& host, const std::string& root, const std::string& target,
                                   NodeListing* listing, size_t max_names) {
  NodeListing ignored;
  if (listing == nullptr)
    listing = &ignored;
  std::vector<NodeFacts> nodes;
  std::vector<std::string> hosts;
  if (!target.empty()) {
    hosts.push_back(target);
  } else if (Result<std::vector<std::string>> names =
                 ListWorkerDir(host, root, max_names, true, &listing->names_capped);
             names.ok()) {
    for (const std::string& name : *names) {
      if (!spool::IsValidHostName(name))
        continue;
      // LinkStat: a host directory replaced by a link to anywhere is reported, not walked.
      const FileInfo::Type type = host.LinkStat(root + "/" + name).value_or(FileInfo{}).type;
      if (type == FileInfo::Type::kDirectory || type == FileInfo::Type::kSymlink)
        hosts.push_back(name);
    }
  }
  std::sort(hosts.begin(), hosts.end());
  // One `find` for every report's mtime: Host has no mtime of its own, and the time the file
  // reached the shared file system is what tells a silent worker from a skewed clock. Records
  // end in NUL, the one byte no directory name holds (workers name their own).
  SubprocessOptions find;
  find.argv = {"find",      root,         "-mindepth", "2",
               "-maxdepth", "2",          "-name",     spool::kHealthFileName,
               "-printf",   "%h\\t%T@\\0"};
  find.timeout = std::chrono::seconds(30);
  std::map<std::string, int64_t> mtimes;
  Result<SubprocessResult> run = host.Run(find);
  std::string times_error;
  if (!run.ok()) {
    times_error = "find could not run: " + run.status().message();
  } else {
    // What find printed is still used: a cut or failed listing loses only the hosts it missed.
    mtimes = ParseReportMtimes(run->stdout_text);
    if (run->timed_out) {
      times_error = "find timed out after 30 s";
    } else if (run->stdout_truncated) {
      times_error =
          "find's output was cut at " + std::to_string(find.max_output_bytes >> 10) + " KiB";
    } else if (!run->Succeeded()) {
      times_error = (run->exit_code ? "find exited " + std::to_string(*run->exit_code)
                                    : std::string("find was ended by a signal")) +
                    ": " + QuoteForMessage(run->stderr_text, 200);
    }
  }
  if (!hosts.empty())  // no report to time: nothing is missing
    listing->times_error = std::move(times_error);
  for (const std::string& name : hosts) {
    if (!spool::IsValidHostName(name)) {
      NodeFacts bad;
      bad.host = QuoteForMessage(name);
      bad.error = "not a valid host name";
      nodes.push_back(std::move(bad));
      continue;
    }
    nodes.push_back(ReadNode(host, root, name, mtimes));
  }
  return nodes;
}

std::map<std::string, int64_t> ParseReportMtimes(std::string_view output) {
  std::map<std::string, int64_t> out;
  while (!output.empty()) {
    const size_t nul = output.find('\0');
    const std::string_view record = output.substr(0, nul);
    output.remove_prefix(nul == std::string_view::npos ? output.size() : nul + 1);
    // The last tab is find's own: a directory's name may hold tabs, never a '/' or a NUL.
    const size_t tab = record.rfind('\t');
    const size_t slash = record.rfind('/', tab);
    if (tab == std::string_view::npos || slash == std::string_view::npos)
      continue;
    const std::string_view host = record.substr(slash + 1, tab - slash - 1);
    const std::optional<int64_t> ms = EpochSecondsAsMs(record.substr(tab + 1));
    if (spool::IsValidHostName(host) && ms)
      out[std::string(host)] = *ms;
  }
  return out;
}

std::vector<DiskFacts> ParseDf(const std::string& output, const std::vector<std::string>& paths) {
  std::vector<DiskFacts> out;
  std::string_view rest = output;
  bool header = true;
  while (!rest.empty() && out.size() < paths.size()) {
    const size_t newline = rest.find('\n');
    const std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (std::exchange(header, false))
      continue;
    DiskFacts disk;
    disk.path = paths[out.size()];
    // Filesystem, 1024-blocks, Used, Available: the sizes must be numbers, Used included.
    const std::vector<std::string_view> fields = DfFields(line, 4);
    std::optional<uint64_t> total, used, avail;
    if (fields.size() == 4) {
      total = KibibytesAsBytes(fields[1]);
      used = KibibytesAsBytes(fields[2]);
      avail = KibibytesAsBytes(fields[3]);
    }
    if (total && used && avail) {
      disk.total_bytes = *total;
      disk.free_bytes = *avail;
    } else {
      disk.error = "df printed " + QuoteForMessage(line);
    }
    out.push_back(std::move(disk));
  }
  return out;
}

std::vector<DiskFacts> GatherDisks(Host& host, const std::vector<std::string>& paths) {
  std::vector<std::string> present;
  std::vector<DiskFacts> out;
  for (const std::string& path : paths) {
    if (host.Stat(path))
      present.push_back(path);
  }
  if (present.empty())
    return out;
  SubprocessOptions df;
  df.argv = {"df", "-P", "-k"};
  df.argv.insert(df.argv.end(), present.begin(), present.end());
  df.timeout = std::chrono::seconds(30);  // a hung NFS mount must not hang the doctor
  Result<SubprocessResult> run = host.Run(df);
  if (!run.ok() || !run->Succeeded()) {
    for (const std::string& path : present) {
      out.push_back({path,
                     run.ok() ? "df failed: " + QuoteForMessage(run->stderr_text, 200)
                              : run.status().message(),
                     0, 0});
    }
    return out;
  }
  return ParseDf(run->stdout_text, present);
}

DeploymentFacts GatherFacts(Host& host, const GatherOptions& options) {
  DeploymentFacts facts;
  facts.now_ms = host.clock().NowMs();
  facts.target = options.target;
  const InstallStateFacts state = ReadInstallState(host, options.install_state);

  CredentialFacts credential;
  credential.config_path = options.config_path;
  Result<deploy::DaemonConfig> config = deploy::LoadDaemonConfig(host, options.config_path);
  if (!config.ok())
    credential.error = config.status().message();
  std::string shared_prefix = options.shared_prefix;
  if (shared_prefix.empty())
    shared_prefix = config.ok() ? config->shared_prefix : state.shared_prefix;
  std::string user = options.user;
  if (user.empty())
    user = config.ok() && !config->daemon_user.empty() ? config->daemon_user : state.user;
  if (user.empty())
    user = "slurm";
  facts.daemon_user.name = user;
  if (std::optional<UserAccount> account = host.LookupUser(user)) {
    facts.daemon_user = {user, true, account->uid, account->gid};
  }

  const std::string spool_root = shared_prefix.empty() ? "" : shared_prefix + "/spool/workers";
  std::string gres_path = options.gres_conf;
  if (options.target.empty()) {
    // The deployment-wide facts; --host looks at one worker only.
    SlurmConfFacts slurm_conf =
        GatherSlurmConf(host, options.slurm_conf.empty() ? state.slurm_conf : options.slurm_conf,
                        state.present && state.profiling_agent);
    if (gres_path.empty() && !slurm_conf.path.empty())
      gres_path = Dir(slurm_conf.path) + "/gres.conf";
    facts.cgroup_conf = GatherCgroupConf(
        host, options.cgroup_conf.empty()
                  ? (slurm_conf.path.empty() ? "/etc/slurm" : Dir(slurm_conf.path)) + "/cgroup.conf"
                  : options.cgroup_conf);
    facts.slurm_conf = std::move(slurm_conf);
    if (!spool_root.empty())
      facts.spool = GatherSpool(host, spool_root, options.max_dir_names);
    if (config.ok() && options.probe) {
      credential.compute_id = config->compute_id;
      credential.control_plane = options.probe(
          "GET", config->control_plane_url + "/cp/v1/enrolment?wait_ms=0", config->credential);
      credential.data_plane =
          options.probe("POST", config->data_plane_url + "/dp/v1/sync", config->credential);
    }
    facts.credential = std::move(credential);
    std::vector<std::string> disk_paths = {options.state_dir};
    if (!shared_prefix.empty())
      disk_paths.push_back(shared_prefix);
    facts.disks = GatherDisks(host, disk_paths);
    OutboxFacts outbox;
    outbox.dir = options.state_dir + "/outbox";
    outbox.max_bytes = options.outbox_max_bytes;
    if (Result<std::vector<std::string>> files = host.ListDirectory(outbox.dir); files.ok()) {
      for (const std::string& name : *files) {
        if (const std::optional<FileInfo> info = host.Stat(outbox.dir + "/" + name);
            info && info->type == FileInfo::Type::kFile)
          outbox.depth_bytes += info->size;
      }
      facts.outbox = std::move(outbox);
    } else if (files.status().code() != StatusCode::kNotFound) {
      outbox.error = files.status().message();
      facts.outbox = std::move(outbox);
    }
  } else if (gres_path.empty()) {
    gres_path =
        Dir(slurm::DiscoverSlurmConf(std::nullopt, host).value_or("/etc/slurm/slurm.conf")) +
        "/gres.conf";
  }

  if (!spool_root.empty()) {
    NodeListing listing;
    facts.nodes = GatherNodes(host, spool_root, options.target, &listing, options.max_dir_names);
    facts.node_names_capped = listing.names_capped;
    facts.report_times_error = std::move(listing.times_error);
  }
  // gres.conf, read once, judged per node against what its sampler sees. Without a slurm.conf
  // there is no gres.conf to look for (and SLURM_CONF_UNREADABLE says so).
  if (gres_path.empty())
    return facts;
  std::optional<std::string> gres_text;
  std::string gres_error;
  Result<std::optional<std::string>> read =
      ReadRegularFile(host, gres_path, attribution::kMaxGresConfBytes);
  if (!read.ok())
    gres_error = read.status().message();
  else
    gres_text = *read;
  for (NodeFacts& node : facts.nodes) {
    if (!node.error.empty())
      continue;
    GresFacts gres;
    if (!gres_error.empty()) {
      gres.error = gres_path + ": " + gres_error;
    } else if (!gres_text) {
      continue;  // no gres.conf: nothing configured to compare
    } else if (Result<attribution::NodeGres> parsed =
                   attribution::ParseGresConf(*gres_text, node.host);
               !parsed.ok()) {
      gres.error = gres_path + ": " + parsed.status().message();
    } else {
      gres.auto_detect = parsed->auto_detect_nvidia;
      for (const attribution::GresGpuFile& file : parsed->files)
        gres.minors.push_back(file.minor);
      gres.gpus_without_file = parsed->gpus_without_file;
    }
    node.gres = std::move(gres);
  }
  return facts;
}

}  // namespace expanse::doctor
