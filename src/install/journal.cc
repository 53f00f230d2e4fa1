#include "install/journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/subprocess.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::install {
namespace {

using nlohmann::json;

constexpr char kJournalName[] = "journal.jsonl";
constexpr size_t kMaxBackupBytes = size_t{64} << 20;  // binaries are backed up too

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

Status FsyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return InternalError(Errno("open " + dir));
  ::fsync(fd);
  ::close(fd);
  return OkStatus();
}

// Copies `path` (a regular file, not followed if a link) into `backup`, fsync'ed.
Status CopyForBackup(const std::string& path, const std::string& backup) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                           fs::ReadSmallFile(path, kMaxBackupBytes));
  if (!bytes)
    return NotFoundError(path + " vanished while it was being backed up");
  auto [dir, name] = SplitPath(backup);
  return fs::WriteFileAtomically(dir, name, *bytes, 0600);
}

Status RunUndoCommand(const std::vector<std::string>& argv, const LogFn& log) {
  if (argv.empty())
    return OkStatus();
  SubprocessOptions options;
  options.argv = argv;
  options.timeout = std::chrono::seconds(60);
  Result<SubprocessResult> result = RunSubprocess(options);
  if (!result.ok())
    return result.status();
  if (!result->Succeeded()) {
    std::string detail = result->stderr_text.substr(0, 300);
    return UnavailableError(argv[0] + " " + (argv.size() > 1 ? argv[1] : "") +
                            " failed: " + (result->timed_out ? std::string("timed out") : detail));
  }
  (void)log;
  return OkStatus();
}

Status RemoveTree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? OkStatus() : InternalError(Errno("lstat " + path));
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return InternalError(Errno("unlink " + path));
    return OkStatus();
  }
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr)
    return InternalError(Errno("opendir " + path));
  std::vector<std::string> children;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      children.push_back(path + "/" + name);
  }
  ::closedir(d);
  for (const std::string& child : children)
    EXPANSE_RETURN_IF_ERROR(RemoveTree(child));
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
    return InternalError(Errno("rmdir " + path));
  return OkStatus();
}

// One journal line (docs/formats/install-journal.md), decoded before anything is undone: a
// record with a member of the wrong type (a damaged disk, a hand edit) is an undo failure
// named by its line, never a throw in the middle of a rollback.
struct JournalRecord {
  std::string op;
  std::string path;
  bool existed = false;
  std::string backup;
  int64_t mode = 0644;
  int64_t uid = 0;
  int64_t gid = 0;
  std::string what;
  std::vector<std::string> undo;
};

Result<JournalRecord> DecodeJournalRecord(const json& line, size_t number) {
  constexpr size_t kMaxText = 4096;
  constexpr wire::Need kOptional = wire::Need::kOptional;
  EXPANSE_ASSIGN_OR_RETURN(
      const wire::FieldReader r,
      wire::FieldReader::Object(line, "journal line " + std::to_string(number), "bad_journal"));
  JournalRecord out;
  EXPANSE_ASSIGN_OR_RETURN(out.op, r.Text("op", 16, wire::Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.path, r.Text("path", kMaxText, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.existed, r.Bool("existed", false));
  EXPANSE_ASSIGN_OR_RETURN(out.backup, r.Name("backup", 64, "-", false, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.mode, r.Int("mode", 0, 07777, kOptional, 0644));
  EXPANSE_ASSIGN_OR_RETURN(out.uid, r.Int("uid", 0, UINT32_MAX, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.gid, r.Int("gid", 0, UINT32_MAX, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.what, r.Text("what", kMaxText, kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.undo, r.Texts("undo", 256, kMaxText, kOptional));
  if (out.op != "command" && out.op != "file" && out.op != "remove" && out.op != "mkdir" &&
      out.op != "chown" && out.op != "tree") {
    return DataLossError("journal line " + std::to_string(number) + " has an unknown op '" +
                         out.op + "'");
  }
  if (out.op != "command" && (out.path.empty() || out.path.front() != '/')) {
    return DataLossError("journal line " + std::to_string(number) +
                         " names no absolute path to undo");
  }
  if ((out.op == "file" || out.op == "remove") && out.existed && out.backup.empty())
    return DataLossError("journal line " + std::to_string(number) + " names no backup");
  return out;
}

Status UndoRecord(const std::string& dir, const JournalRecord& r, const LogFn& log) {
  const std::string& op = r.op;
  const std::string& path = r.path;
  if (op == "file" || op == "remove") {
    if (!r.existed) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        return InternalError(Errno("remove " + path));
      log("undo: removed " + path);
      return OkStatus();
    }
    const std::string backup = dir + "/" + r.backup;
    EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                             fs::ReadSmallFile(backup, kMaxBackupBytes));
    if (!bytes)
      return DataLossError("the backup of " + path + " (" + backup + ") is missing");
    auto [parent, name] = SplitPath(path);
    EXPANSE_RETURN_IF_ERROR(
        fs::WriteFileAtomically(parent, name, *bytes, static_cast<mode_t>(r.mode),
                                static_cast<uid_t>(r.uid), static_cast<gid_t>(r.gid)));
    log("undo: restored " + path);
    return OkStatus();
  }
  if (op == "mkdir") {
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
      return FailedPreconditionError(Errno("remove directory " + path) +
                                     " (something not created by this install is inside)");
    }
    log("undo: removed directory " + path);
    return OkStatus();
  }
  if (op == "chown") {
    if (::lchown(path.c_str(), static_cast<uid_t>(r.uid), static_cast<gid_t>(r.gid)) != 0 &&
        errno != ENOENT)
      return InternalError(Errno("chown " + path));
    log("undo: gave " + path + " back its owner");
    return OkStatus();
  }
  if (op == "tree") {
    EXPANSE_RETURN_IF_ERROR(RemoveTree(path));
    log("undo: removed " + path);
    return OkStatus();
  }
  // op == "command" (DecodeJournalRecord admits no other)
  if (r.undo.empty())
    return OkStatus();
  Status s = RunUndoCommand(r.undo, log);
  log("undo: " + (r.what.empty() ? std::string("command") : r.what) +
      (s.ok() ? "" : ": " + s.message()));
  return s;
}

}  // namespace

FaultInjection FaultInjection::FromEnvironment() {
  FaultInjection f;
  auto read = [](const char* name) -> std::optional<int> {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0')
      return std::nullopt;
    return std::atoi(v);
  };
  f.fail_after_changes = read("EXPANSE_INSTALL_TEST_FAIL_AFTER");
  f.kill_after_changes = read("EXPANSE_INSTALL_TEST_KILL_AFTER");
  return f;
}

bool Journal::Pending(const std::string& dir) {
  struct stat st {};
  return ::lstat((dir + "/" + kJournalName).c_str(), &st) == 0;
}

Result<Journal> Journal::Begin(const std::string& dir, FaultInjection faults) {
  if (Pending(dir)) {
    return FailedPreconditionError("an unfinished install journal is in " + dir)
        .WithReason("journal_pending");
  }
  EXPANSE_RETURN_IF_ERROR(fs::MakeDirectories(dir, 0700));
  const std::string path = dir + "/" + kJournalName;
  int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return InternalError(Errno("create " + path));
  EXPANSE_RETURN_IF_ERROR(FsyncDirectory(dir));
  return Journal(dir, fd, faults);
}

Journal::Journal(Journal&& other) noexcept
    : dir_(std::move(other.dir_)),
      fd_(std::exchange(other.fd_, -1)),
      faults_(other.faults_),
      changes_(other.changes_),
      seq_(other.seq_) {}

Journal::~Journal() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status Journal::Append(const std::string& record_json) {
  const std::string line = record_json + "\n";
  if (!fs::WriteFully(fd_, line) || ::fsync(fd_) != 0)
    return InternalError(Errno("append to the install journal in " + dir_));
  return OkStatus();
}

Status Journal::BeforeChange() {
  if (faults_.kill_after_changes && changes_ >= *faults_.kill_after_changes)
    std::raise(SIGKILL);
  if (faults_.fail_after_changes && changes_ >= *faults_.fail_after_changes) {
    return InternalError("injected failure before change " + std::to_string(changes_ + 1) +
                         " (EXPANSE_INSTALL_TEST_FAIL_AFTER=" +
                         std::to_string(*faults_.fail_after_changes) + ")")
        .WithReason("injected_failure");
  }
  ++changes_;
  return OkStatus();
}

std::string Journal::NextBackupName() { return "backup-" + std::to_string(seq_); }

Status Journal::WriteFile(const std::string& path, const std::string& contents, mode_t mode,
                          uid_t uid, gid_t gid) {
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  json r = {{"seq", seq_}, {"op", "file"}, {"path", path}};
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return FailedPreconditionError(path + " exists and is not a regular file");
    r["existed"] = true;
    r["backup"] = NextBackupName();
    r["mode"] = st.st_mode & 07777;
    r["uid"] = st.st_uid;
    r["gid"] = st.st_gid;
    EXPANSE_RETURN_IF_ERROR(CopyForBackup(path, dir_ + "/" + NextBackupName()));
  } else {
    r["existed"] = false;
  }
  EXPANSE_RETURN_IF_ERROR(Append(r.dump()));
  auto [parent, name] = SplitPath(path);
  return fs::WriteFileAtomically(parent, name, contents, mode, uid, gid);
}

Status Journal::RemoveFile(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? OkStatus() : InternalError(Errno("lstat " + path));
  if (!S_ISREG(st.st_mode))
    return FailedPreconditionError(path + " is not a regular file");
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  json r = {{"seq", seq_},
            {"op", "remove"},
            {"path", path},
            {"existed", true},
            {"backup", NextBackupName()},
            {"mode", st.st_mode & 07777},
            {"uid", st.st_uid},
            {"gid", st.st_gid}};
  EXPANSE_RETURN_IF_ERROR(CopyForBackup(path, dir_ + "/" + NextBackupName()));
  EXPANSE_RETURN_IF_ERROR(Append(r.dump()));
  if (::unlink(path.c_str()) != 0)
    return InternalError(Errno("remove " + path));
  return OkStatus();
}

Status Journal::MakeDirectories(const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
  // Walk down from the root; record each directory just before creating it.
  std::vector<std::string> missing;
  std::string p = path;
  while (!p.empty() && p != "/") {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return FailedPreconditionError(p + " exists and is not a directory");
      break;
    }
    missing.push_back(p);
    p = SplitPath(p).first;
  }
  std::reverse(missing.begin(), missing.end());
  for (const std::string& d : missing) {
    EXPANSE_RETURN_IF_ERROR(BeforeChange());
    ++seq_;
    EXPANSE_RETURN_IF_ERROR(Append(json{{"seq", seq_}, {"op", "mkdir"}, {"path", d}}.dump()));
    if (::mkdir(d.c_str(), mode) != 0 && errno != EEXIST)
      return InternalError(Errno("mkdir " + d));
    ::chmod(d.c_str(), mode);  // not subject to the umask
    if (::chown(d.c_str(), uid, gid) != 0)
      return InternalError(Errno("chown " + d));
  }
  return OkStatus();
}

Status Journal::Chown(const std::string& path, uid_t uid, gid_t gid) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return InternalError(Errno("lstat " + path));
  if (st.st_uid == uid && st.st_gid == gid)
    return OkStatus();
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  EXPANSE_RETURN_IF_ERROR(Append(
      json{{"seq", seq_}, {"op", "chown"}, {"path", path}, {"uid", st.st_uid}, {"gid", st.st_gid}}
          .dump()));
  if (::lchown(path.c_str(), uid, gid) != 0)
    return InternalError(Errno("chown " + path));
  return OkStatus();
}

Status Journal::RunCommand(const std::string& what, const std::vector<std::string>& run,
                           const std::vector<std::string>& undo) {
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  EXPANSE_RETURN_IF_ERROR(Append(
      json{{"seq", seq_}, {"op", "command"}, {"what", what}, {"run", run}, {"undo", undo}}.dump()));
  if (run.empty())
    return OkStatus();
  SubprocessOptions options;
  options.argv = run;
  options.timeout = std::chrono::seconds(120);
  EXPANSE_ASSIGN_OR_RETURN(SubprocessResult result, RunSubprocess(options));
  if (!result.Succeeded()) {
    std::string detail = result.timed_out ? "timed out" : result.stderr_text.substr(0, 500);
    while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' '))
      detail.pop_back();
    return UnavailableError(what + " failed: " + detail).WithReason("command_failed");
  }
  return OkStatus();
}

Status Journal::AdoptNewTree(const std::string& path) {
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  return Append(json{{"seq", seq_}, {"op", "tree"}, {"path", path}}.dump());
}

Status Journal::Commit() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  return RemoveTree(dir_);
}

Status Journal::RollBack(const std::string& dir, const LogFn& log) {
  const std::string path = dir + "/" + kJournalName;
  std::ifstream in(path);
  if (!in)
    return OkStatus();  // nothing was recorded
  std::vector<Result<JournalRecord>> records;
  std::string line;
  while (std::getline(in, line)) {
    Result<json> r = wire::ParseJson(line, wire::JsonLimits{.max_depth = 4});
    if (!r.ok() || !r->is_object())
      break;  // a torn last record: its change never started
    records.push_back(DecodeJournalRecord(*r, records.size() + 1));
  }
  Status first = OkStatus();
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    Status s = it->ok() ? UndoRecord(dir, **it, log) : it->status();
    if (!s.ok()) {
      log("undo failed: " + s.message());
      if (first.ok())
        first = s;
    }
  }
  if (!first.ok())
    return first;
  return RemoveTree(dir);
}

}  // namespace expanse::install
