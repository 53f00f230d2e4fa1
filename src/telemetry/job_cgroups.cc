#include "telemetry/job_cgroups.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace expanse::telemetry {
namespace {

// The number in "<prefix><digits>"; job ids start at 1, uids at 0.
std::optional<uint32_t> NumberAfter(const std::string& name, const std::string& prefix,
                                    bool allow_zero = false) {
  if (!name.starts_with(prefix) || name.size() == prefix.size() ||
      name.size() > prefix.size() + 10) {
    return std::nullopt;
  }
  uint64_t value = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])))
      return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  if ((value == 0 && !allow_zero) || value > UINT32_MAX)
    return std::nullopt;
  return static_cast<uint32_t>(value);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::optional<uint64_t> ReadNumber(const std::string& path) {
  std::ifstream in(path);
  uint64_t value = 0;
  if (!(in >> value))
    return std::nullopt;
  return value;
}

// cpu.stat's usage_usec, in ns.
std::optional<uint64_t> ReadV2CpuNs(const std::string& dir) {
  std::ifstream in(dir + "/cpu.stat");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "usage_usec")
      return value * 1000;
  }
  return std::nullopt;
}

// The "some" and "full" totals (µs) of a PSI file ("some avg10=0.00 avg60=0.00 avg300=0.00
// total=123"); nullopt without the file or either line (a kernel without PSI, or v1).
std::optional<std::pair<uint64_t, uint64_t>> ReadPressureTotals(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::optional<uint64_t> some, full;
  for (int lines = 0; lines < 4 && std::getline(in, line); ++lines) {
    const size_t at = line.find(" total=");
    if (at == std::string::npos)
      continue;
    const char* begin = line.c_str() + at + 7;
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(begin, &end, 10);
    if (end == begin || errno != 0)
      continue;
    if (line.starts_with("some "))
      some = value;
    else if (line.starts_with("full "))
      full = value;
  }
  if (!some || !full)
    return std::nullopt;
  return std::make_pair(*some, *full);
}

}  // namespace

void JobCgroups::SampleIoPressure(uint32_t job, const std::string& dir, int64_t now_ms,
                                  const std::string& host, SeriesBuffer& buffer,
                                  std::map<uint32_t, LastIo>& next) {
  const auto totals = ReadPressureTotals(dir + "/io.pressure");
  if (!totals)
    return;
  const auto last = last_io_.find(job);
  if (last != last_io_.end() && now_ms > last->second.at_ms &&
      totals->first >= last->second.some_us && totals->second >= last->second.full_us) {
    const double interval_us = static_cast<double>(now_ms - last->second.at_ms) * 1000.0;
    const std::string device = "job/" + std::to_string(job);
    // A stall longer than the interval cannot be: clamp what a coarse clock could make > 1.
    const auto share = [&](uint64_t now_us, uint64_t then_us) {
      return std::min(1.0, static_cast<double>(now_us - then_us) / interval_us);
    };
    buffer.Add({host, device, "job.io_pressure_some"}, now_ms,
               share(totals->first, last->second.some_us));
    buffer.Add({host, device, "job.io_pressure_full"}, now_ms,
               share(totals->second, last->second.full_us));
  }
  next[job] = {now_ms, totals->first, totals->second};
}

std::vector<int> JobCgroups::Ids(uint32_t job, const char* v1_file, const char* v2_file,
                                 size_t max_ids) const {
  std::vector<int> ids;
  auto it = jobs_.find(job);
  if (it == jobs_.end())
    return ids;
  const std::string& root = it->second.cpu.empty() ? it->second.memory : it->second.cpu;
  if (root.empty())
    return ids;
  const std::string file = std::string("/") + (it->second.v2 ? v2_file : v1_file);
  std::set<int> seen;
  // Steps and tasks sit a few levels below the job (v2: job_N/step_0/user/task_0).
  std::vector<std::pair<std::string, int>> stack{{root, 0}};
  size_t visited = 0;
  while (!stack.empty() && visited < 4096 && ids.size() < max_ids) {
    auto [dir_path, depth] = std::move(stack.back());
    stack.pop_back();
    ++visited;
    if (std::FILE* f = std::fopen((dir_path + file).c_str(), "re")) {
      long id = 0;
      while (ids.size() < max_ids && std::fscanf(f, "%ld", &id) == 1) {
        if (id > 0 && id <= INT32_MAX && seen.insert(static_cast<int>(id)).second)
          ids.push_back(static_cast<int>(id));
      }
      std::fclose(f);
    }
    if (depth >= 4)
      continue;
    DIR* dir = opendir(dir_path.c_str());
    if (dir == nullptr)
      continue;
    while (dirent* d = readdir(dir)) {
      const std::string name = d->d_name;
      if (name == "." || name == ".." || d->d_type != DT_DIR)
        continue;
      stack.emplace_back(dir_path + "/" + name, depth + 1);
    }
    closedir(dir);
  }
  return ids;
}

std::vector<int> JobCgroups::Pids(uint32_t job, size_t max_pids) const {
  return Ids(job, "cgroup.procs", "cgroup.procs", max_pids);
}

void JobCgroups::Rescan() {
  jobs_.clear();
  size_t visited = 0;
  // Depth-first walk, not following symlinks, not descending into job directories.
  struct Entry {
    std::string path;
    std::string name;
    int depth;
  };
  std::vector<Entry> stack{{options_.cgroup_root, "", 0}};
  while (!stack.empty() && visited < options_.max_directories) {
    Entry e = std::move(stack.back());
    stack.pop_back();
    ++visited;
    DIR* dir = opendir(e.path.c_str());
    if (dir == nullptr)
      continue;
    while (dirent* d = readdir(dir)) {
      const std::string name = d->d_name;
      if (name == "." || name == "..")
        continue;
      const std::string child = e.path + "/" + name;
      if (d->d_type == DT_UNKNOWN) {
        struct stat st {};
        if (lstat(child.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
          continue;
      } else if (d->d_type != DT_DIR) {
        continue;
      }
      const std::optional<uint32_t> job = NumberAfter(name, "job_");
      if (job && (NumberAfter(e.name, "uid_", true) || e.name == "slurmstepd.scope")) {
        JobDirs& dirs = jobs_[*job];
        if (Exists(child + "/cpuacct.usage"))
          dirs.cpu = child;
        if (Exists(child + "/memory.usage_in_bytes"))
          dirs.memory = child;
        if (Exists(child + "/devices.list"))
          dirs.devices = child;
        if (Exists(child + "/cpu.stat") && Exists(child + "/memory.current")) {
          dirs.cpu = dirs.memory = child;
          dirs.v2 = true;
        }
        continue;
      }
      if (e.depth + 1 < options_.max_depth)
        stack.push_back({child, name, e.depth + 1});
    }
    closedir(dir);
  }
  samples_since_scan_ = 0;
  scanned_ = true;
}

void JobCgroups::ExpectJob(uint32_t job) {
  // Bounded: an entry lasts rescan_every samples, so only a storm of job starts could fill it,
  // and then the walk at every Sample goes on regardless.
  constexpr size_t kMaxExpected = 4096;
  if (expected_.size() < kMaxExpected || expected_.contains(job))
    expected_[job] = std::max(options_.rescan_every, 1);
  scanned_ = false;
}

void JobCgroups::Sample(int64_t now_ms, const std::string& host, SeriesBuffer& buffer) {
  if (!scanned_ || ++samples_since_scan_ >= options_.rescan_every || !expected_.empty())
    Rescan();
  for (auto it = expected_.begin(); it != expected_.end();) {
    const auto found = jobs_.find(it->first);
    const bool complete =
        found != jobs_.end() && !found->second.cpu.empty() && !found->second.memory.empty();
    it = complete || --it->second <= 0 ? expected_.erase(it) : std::next(it);
  }
  bool vanished = false;
  std::map<uint32_t, Last> next;
  std::map<uint32_t, LastIo> next_io;
  std::map<uint32_t, std::vector<int>> threads;
  for (const auto& [job, dirs] : jobs_) {
    if (dirs.v2)
      SampleIoPressure(job, dirs.cpu, now_ms, host, buffer, next_io);
    // v1 lists a cgroup's threads in `tasks`, v2 in `cgroup.threads`.
    if (threads_.enabled())
      threads[job] = Ids(job, "tasks", "cgroup.threads", options_.max_threads);
    const std::string device = "job/" + std::to_string(job);
    if (!dirs.cpu.empty()) {
      const std::optional<uint64_t> ns =
          dirs.v2 ? ReadV2CpuNs(dirs.cpu) : ReadNumber(dirs.cpu + "/cpuacct.usage");
      if (!ns) {
        vanished = true;
        continue;
      }
      auto last = last_.find(job);
      if (last != last_.end() && now_ms > last->second.at_ms && *ns >= last->second.cpu_ns) {
        const double cores = static_cast<double>(*ns - last->second.cpu_ns) / 1e6 /
                             static_cast<double>(now_ms - last->second.at_ms);
        buffer.Add({host, device, "job.cpu_used_cores"}, now_ms, cores);
      }
      next[job] = {now_ms, *ns};
    }
    if (!dirs.memory.empty()) {
      const std::optional<uint64_t> bytes =
          ReadNumber(dirs.memory + (dirs.v2 ? "/memory.current" : "/memory.usage_in_bytes"));
      if (bytes)
        buffer.Add({host, device, "job.mem_used_mib"}, now_ms, *bytes / 1048576.0);
    }
  }
  last_ = std::move(next);
  last_io_ = std::move(next_io);
  threads_.Sample(threads, now_ms, host, buffer);
  if (vanished)
    Rescan();

  // node.cpu_util from the first line of /proc/stat.
  std::ifstream stat(options_.proc_stat);
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal &&
      cpu == "cpu") {
    const uint64_t busy = user + nice + system + irq + softirq + steal;
    const uint64_t total = busy + idle + iowait;
    if (last_node_cpu_ && total > last_node_cpu_->second) {
      const double util = 100.0 * static_cast<double>(busy - last_node_cpu_->first) /
                          static_cast<double>(total - last_node_cpu_->second);
      buffer.Add({host, "", "node.cpu_util"}, now_ms, util);
    }
    last_node_cpu_ = {busy, total};
  }
}

}  // namespace expanse::telemetry
