#include "core/memory_host.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/file_util.h"

namespace expanse {

MemoryHost::MemoryHost(int64_t now_ms) : clock_(now_ms) {
  directories_["/"] = FileInfo{.type = FileInfo::Type::kDirectory, .mode = 0755};
}

SubprocessResult MemoryHost::Exit(int code, std::string out, std::string err) {
  SubprocessResult r;
  r.exit_code = code;
  r.stdout_text = std::move(out);
  r.stderr_text = std::move(err);
  return r;
}

std::string MemoryHost::Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

void MemoryHost::OnRun(const std::string& program, Program answer) {
  programs_[program] = std::move(answer);
}

void MemoryHost::Put(const std::string& path, std::string bytes, mode_t mode, uid_t uid,
                     gid_t gid) {
  (void)MakeDirectories(Parent(path), 0755);
  files_[path] = File{
      std::move(bytes),
      FileInfo{.type = FileInfo::Type::kFile, .mode = mode, .uid = uid, .gid = gid, .size = 0}};
  files_[path].info.size = files_[path].bytes.size();
}

std::optional<std::string> MemoryHost::Contents(const std::string& path) const {
  auto it = files_.find(path);
  if (it == files_.end())
    return std::nullopt;
  return it->second.bytes;
}

std::vector<std::string> MemoryHost::Files() const {
  std::vector<std::string> out;
  for (const auto& [path, file] : files_)
    out.push_back(path);
  return out;
}

std::vector<std::string> MemoryHost::Directories() const {
  std::vector<std::string> out;
  for (const auto& [path, info] : directories_)
    out.push_back(path);
  return out;
}

std::string MemoryHost::Snapshot() const {
  auto describe = [](const FileInfo& info) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.mode));
    return std::string(mode) + " " + std::to_string(info.uid) + ":" + std::to_string(info.gid);
  };
  std::string out;
  for (const auto& [path, info] : directories_)
    out += "dir  " + path + " " + describe(info) + "\n";
  for (const auto& [path, file] : files_)
    out += "file " + path + " " + describe(file.info) + " " + file.bytes + "\n";
  return out;
}

std::optional<FileInfo> MemoryHost::Stat(const std::string& path) {
  if (auto file = files_.find(path); file != files_.end())
    return file->second.info;
  if (auto dir = directories_.find(path); dir != directories_.end())
    return dir->second;
  return std::nullopt;
}

Result<std::optional<std::string>> MemoryHost::ReadFile(const std::string& path, size_t max_bytes) {
  if (directories_.contains(path))
    return FailedPreconditionError("read " + path + ": Is a directory");
  auto it = files_.find(path);
  if (it == files_.end())
    return std::optional<std::string>();
  if (it->second.bytes.size() > max_bytes) {
    return ResourceExhaustedError(path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  return std::optional<std::string>(it->second.bytes);
}

Status MemoryHost::WriteFile(const std::string& path, std::string_view bytes, mode_t mode,
                             uid_t uid, gid_t gid) {
  if (!directories_.contains(Parent(path)))
    return NotFoundError("write " + path + ": No such file or directory");
  if (directories_.contains(path))
    return FailedPreconditionError("write " + path + ": Is a directory");
  files_[path] = File{std::string(bytes), FileInfo{.type = FileInfo::Type::kFile,
                                                   .mode = static_cast<mode_t>(mode & 07777),
                                                   .uid = uid,
                                                   .gid = gid,
                                                   .size = bytes.size()}};
  return OkStatus();
}

// The source is on the real disk (outside this host), as the seam's contract says.
Status MemoryHost::CopyLocalFile(const std::string& local_source, const std::string& path,
                                 size_t max_bytes, mode_t mode, uid_t uid, gid_t gid) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                           fs::ReadSmallFile(local_source, max_bytes));
  if (!bytes)
    return NotFoundError(local_source + " vanished before it was copied");
  return WriteFile(path, *bytes, mode, uid, gid);
}

Status MemoryHost::AppendToFile(const std::string& path, std::string_view bytes, mode_t mode) {
  auto it = files_.find(path);
  if (it == files_.end())
    return WriteFile(path, bytes, mode, 0, 0);
  it->second.bytes.append(bytes);
  it->second.info.size = it->second.bytes.size();
  return OkStatus();
}

Status MemoryHost::SetOwner(const std::string& path, uid_t uid, gid_t gid) {
  FileInfo* info = nullptr;
  if (auto file = files_.find(path); file != files_.end())
    info = &file->second.info;
  else if (auto dir = directories_.find(path); dir != directories_.end())
    info = &dir->second;
  if (info == nullptr)
    return NotFoundError("chown " + path + ": No such file or directory");
  info->uid = uid;
  info->gid = gid;
  return OkStatus();
}

Status MemoryHost::RemoveDirectory(const std::string& path) {
  if (files_.contains(path))
    return FailedPreconditionError("remove directory " + path + ": Not a directory");
  if (!directories_.contains(path))
    return OkStatus();
  const std::string below = path + "/";
  auto inside = [&](const auto& entry) { return entry.first.starts_with(below); };
  if (std::any_of(files_.begin(), files_.end(), inside) ||
      std::any_of(directories_.begin(), directories_.end(), inside)) {
    return FailedPreconditionError("remove directory " + path + ": Directory not empty")
        .WithReason("directory_not_empty");
  }
  directories_.erase(path);
  return OkStatus();
}

Result<std::vector<std::string>> MemoryHost::ListDirectory(const std::string& path) {
  std::vector<std::string> names;
  if (files_.contains(path))
    return FailedPreconditionError("list " + path + ": Not a directory");
  const std::string below = path == "/" ? "/" : path + "/";
  auto child = [&](const std::string& entry) {
    if (entry == path || !entry.starts_with(below))
      return;
    const std::string rest = entry.substr(below.size());
    if (!rest.empty() && rest.find('/') == std::string::npos)
      names.push_back(rest);
  };
  for (const auto& [entry, file] : files_)
    child(entry);
  for (const auto& [entry, info] : directories_)
    child(entry);
  std::sort(names.begin(), names.end());
  return names;
}

Status MemoryHost::RemoveFile(const std::string& path) {
  if (directories_.contains(path))
    return FailedPreconditionError("remove " + path + ": Is a directory");
  files_.erase(path);
  return OkStatus();
}

Status MemoryHost::MakeDirectories(const std::string& path, mode_t mode) {
  if (directories_.contains(path))
    return OkStatus();
  if (files_.contains(path))
    return FailedPreconditionError("mkdir " + path + ": a file is in the way");
  EXPANSE_RETURN_IF_ERROR(MakeDirectories(Parent(path), mode));
  directories_[path] = FileInfo{.type = FileInfo::Type::kDirectory,
                                .mode = static_cast<mode_t>(mode & 07777),
                                .uid = 0,
                                .gid = 0,
                                .size = 0};
  return OkStatus();
}

Status MemoryHost::RemoveTree(const std::string& path) {
  const std::string below = path + "/";
  std::erase_if(files_, [&](const auto& entry) {
    return entry.first == path || entry.first.starts_with(below);
  });
  if (path != "/") {
    std::erase_if(directories_, [&](const auto& entry) {
      return entry.first == path || entry.first.starts_with(below);
    });
  }
  return OkStatus();
}

Status MemoryHost::Rename(const std::string& from, const std::string& to) {
  if (!LinkStat(from))
    return NotFoundError("rename " + from + ": No such file or directory");
  if (LinkStat(to))
    return FailedPreconditionError("rename " + from + " to " + to + ": " + to + " exists");
  if (!directories_.contains(Parent(to)))
    return NotFoundError("rename " + from + " to " + to + ": No such directory");
  const std::string below = from + "/";
  auto moved = [&](const std::string& name) { return to + name.substr(from.size()); };
  auto move_entries = [&](auto& entries) {
    for (auto it = entries.begin(); it != entries.end();) {
      if (it->first == from || it->first.starts_with(below)) {
        auto node = entries.extract(it++);
        node.key() = moved(node.key());
        entries.insert(std::move(node));
      } else {
        ++it;
      }
    }
  };
  move_entries(files_);
  move_entries(directories_);
  return OkStatus();
}

Result<SubprocessResult> MemoryHost::Run(const SubprocessOptions& options) {
  if (options.argv.empty())
    return InvalidArgumentError("no program to run");
  std::string line;
  for (const std::string& arg : options.argv)
    line += (line.empty() ? "" : " ") + arg;
  commands_.push_back(line);
  auto it = programs_.find(options.argv[0]);
  if (it == programs_.end())
    return Exit(127, "", options.argv[0] + ": command not found");
  return it->second(options.argv);
}

Status MemoryHost::SignalProcess(pid_t pid, int signal) {
  if (signal != 0)
    commands_.push_back("kill -" + std::to_string(signal) + " " + std::to_string(pid));
  if (!processes_.contains(pid))
    return NotFoundError("no process " + std::to_string(pid));
  if (signal != 0)
    processes_.erase(pid);
  return OkStatus();
}

std::optional<std::string> MemoryHost::GetEnv(std::string_view name) {
  auto it = env_.find(name);
  if (it == env_.end())
    return std::nullopt;
  return it->second;
}

std::optional<UserAccount> MemoryHost::LookupUser(const std::string& name) {
  looked_up_users_.push_back(name);
  auto it = users_.find(name);
  if (it == users_.end())
    return std::nullopt;
  return it->second;
}

}  // namespace expanse
