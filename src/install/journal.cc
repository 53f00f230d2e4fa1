#include "install/journal.h"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::install {
namespace {

using nlohmann::json;

constexpr char kJournalName[] = "journal.jsonl";
constexpr size_t kMaxBackupBytes = size_t{64} << 20;  // binaries are backed up too
constexpr size_t kMaxJournalBytes = size_t{16} << 20;

Status Copy(Host& host, const std::string& from, const std::string& to) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> bytes, host.ReadFile(from, kMaxBackupBytes));
  if (!bytes)
    return NotFoundError(from + " vanished while it was being copied");
  return host.WriteFile(to, *bytes, 0600, 0, 0);
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

// What a failed command said, for a message the installer prints: the start of its stderr as
// printable ASCII, so that neither a control character nor a UTF-8 sequence cut in two reaches
// the terminal (a raw cut at `max_chars` bytes did both).
std::string CommandSaid(const SubprocessResult& result, size_t max_chars) {
  return result.timed_out ? "timed out" : EscapeForMessage(Trimmed(result.stderr_text), max_chars);
}

// Where MoveAside puts `path`: beside it, so the rename stays on its filesystem (the shared
// prefix is often another filesystem than the journal's).
std::string AsidePath(const std::string& path, int64_t seq) {
  return path + ".expanse-undo-" + std::to_string(seq);
}

Status RunUndoCommand(Host& host, const std::vector<std::string>& argv) {
  if (argv.empty())
    return OkStatus();
  SubprocessOptions options;
  options.argv = argv;
  options.timeout = std::chrono::seconds(60);
  EXPANSE_ASSIGN_OR_RETURN(SubprocessResult result, host.Run(options));
  if (!result.Succeeded()) {
    return UnavailableError(argv[0] + " " + (argv.size() > 1 ? argv[1] : "") +
                            " failed: " + CommandSaid(result, 300));
  }
  return OkStatus();
}

// One line, `number` counted from 1, that parsed as a JSON object: a member of the wrong type is
// a refusal naming it.
Result<JournalRecord> DecodeJournalRecord(const json& line, size_t number) {
  constexpr size_t kMaxText = 4096;
  constexpr wire::Need kOptional = wire::Need::kOptional;
  EXPANSE_ASSIGN_OR_RETURN(
      const wire::FieldReader r,
      wire::FieldReader::Object(line, "journal line " + std::to_string(number), "bad_journal"));
  JournalRecord out;
  EXPANSE_ASSIGN_OR_RETURN(out.seq, r.Int("seq", 0, INT32_MAX, kOptional));
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
      out.op != "chown" && out.op != "tree" && out.op != "aside") {
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

Status UndoRecord(Host& host, const std::string& dir, const JournalRecord& r, const LogFn& log) {
  const std::string& op = r.op;
  const std::string& path = r.path;
  if (op == "file" || op == "remove") {
    if (!r.existed) {
      EXPANSE_RETURN_IF_ERROR(host.RemoveFile(path));
      log("undo: removed " + path);
      return OkStatus();
    }
    const std::string backup = dir + "/" + r.backup;
    EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                             host.ReadFile(backup, kMaxBackupBytes));
    if (!bytes)
      return DataLossError("the backup of " + path + " (" + backup + ") is missing");
    EXPANSE_RETURN_IF_ERROR(host.WriteFile(path, *bytes, static_cast<mode_t>(r.mode),
                                           static_cast<uid_t>(r.uid), static_cast<gid_t>(r.gid)));
    log("undo: restored " + path);
    return OkStatus();
  }
  if (op == "mkdir") {
    Status removed = host.RemoveDirectory(path);
    if (!removed.ok()) {
      return FailedPreconditionError(removed.message() +
                                     " (something not created by this install is inside)");
    }
    log("undo: removed directory " + path);
    return OkStatus();
  }
  if (op == "chown") {
    if (host.LinkStat(path))
      EXPANSE_RETURN_IF_ERROR(
          host.SetOwner(path, static_cast<uid_t>(r.uid), static_cast<gid_t>(r.gid)));
    log("undo: gave " + path + " back its owner");
    return OkStatus();
  }
  if (op == "aside") {
    const std::string aside = AsidePath(path, r.seq);
    if (!host.LinkStat(aside)) {
      // Never set aside (the run stopped between the record and the rename), or put back by
      // an earlier rollback that stopped later on.
      if (host.LinkStat(path))
        return OkStatus();
      return DataLossError(path + " was set aside as " + aside + ", which is missing");
    }
    // What the failed install put at `path` was undone before this record (newest first);
    // anything left there is its debris.
    EXPANSE_RETURN_IF_ERROR(host.RemoveTree(path));
    EXPANSE_RETURN_IF_ERROR(host.Rename(aside, path));
    log("undo: put back " + path);
    return OkStatus();
  }
  if (op == "tree") {
    EXPANSE_RETURN_IF_ERROR(host.RemoveTree(path));
    log("undo: removed " + path);
    return OkStatus();
  }
  // op == "command" (DecodeJournalRecord admits no other)
  if (r.undo.empty())
    return OkStatus();
  Status s = RunUndoCommand(host, r.undo);
  log("undo: " + (r.what.empty() ? std::string("command") : r.what) +
      (s.ok() ? "" : ": " + s.message()));
  return s;
}

}  // namespace

std::vector<Result<JournalRecord>> DecodeJournal(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    lines.push_back(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  }
  std::vector<Result<JournalRecord>> records;
  for (size_t i = 0; i < lines.size(); ++i) {
    Result<json> line = wire::ParseJson(lines[i], wire::JsonLimits{.max_depth = 4});
    if (line.ok() && line->is_object()) {
      records.push_back(DecodeJournalRecord(*line, i + 1));
    } else if (i + 1 < lines.size()) {
      // Every record is fsync'ed before the next one is written, so only the last line can be
      // torn: one before it is damage, and the changes recorded after it did happen.
      records.push_back(DataLossError("journal line " + std::to_string(i + 1) +
                                      " is not a JSON object (a damaged journal)")
                            .WithReason("bad_journal"));
    }
    // else: a torn last record; its change never started, because the record comes first.
  }
  return records;
}

bool Journal::Pending(Host& host, const std::string& dir) {
  return host.LinkStat(dir + "/" + kJournalName).has_value();
}

Result<Journal> Journal::Begin(Host& host, const std::string& dir, FaultInjection faults) {
  if (Pending(host, dir)) {
    return FailedPreconditionError("an unfinished install journal is in " + dir)
        .WithReason("journal_pending");
  }
  EXPANSE_RETURN_IF_ERROR(host.MakeDirectories(dir, 0700));
  // The journal exists (empty) from here on, so a crash before the first change still
  // leaves a journal that the next install finds and rolls back (to nothing).
  EXPANSE_RETURN_IF_ERROR(host.AppendToFile(dir + "/" + kJournalName, "", 0600));
  return Journal(host, dir, faults);
}

Status Journal::Append(const std::string& record_json) {
  Status appended = host_.AppendToFile(dir_ + "/" + kJournalName, record_json + "\n", 0600);
  if (!appended.ok())
    return InternalError("append to the install journal in " + dir_ + ": " + appended.message());
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
  EXPANSE_RETURN_IF_ERROR(RecordFileReplacement(path));
  return host_.WriteFile(path, contents, mode, uid, gid);
}

Status Journal::CopyLocalFile(const std::string& local_source, const std::string& path,
                              size_t max_bytes, mode_t mode, uid_t uid, gid_t gid) {
  EXPANSE_RETURN_IF_ERROR(RecordFileReplacement(path));
  return host_.CopyLocalFile(local_source, path, max_bytes, mode, uid, gid);
}

Status Journal::RecordFileReplacement(const std::string& path) {
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  json r = {{"seq", seq_}, {"op", "file"}, {"path", path}};
  if (std::optional<FileInfo> was = host_.LinkStat(path)) {
    if (was->type != FileInfo::Type::kFile)
      return FailedPreconditionError(path + " exists and is not a regular file");
    r["existed"] = true;
    r["backup"] = NextBackupName();
    r["mode"] = was->mode;
    r["uid"] = was->uid;
    r["gid"] = was->gid;
    EXPANSE_RETURN_IF_ERROR(Copy(host_, path, dir_ + "/" + NextBackupName()));
  } else {
    r["existed"] = false;
  }
  return Append(r.dump());
}

Status Journal::RemoveFile(const std::string& path) {
  std::optional<FileInfo> was = host_.LinkStat(path);
  if (!was)
    return OkStatus();
  if (was->type != FileInfo::Type::kFile)
    return FailedPreconditionError(path + " is not a regular file");
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  json r = {{"seq", seq_},
            {"op", "remove"},
            {"path", path},
            {"existed", true},
            {"backup", NextBackupName()},
            {"mode", was->mode},
            {"uid", was->uid},
            {"gid", was->gid}};
  EXPANSE_RETURN_IF_ERROR(Copy(host_, path, dir_ + "/" + NextBackupName()));
  EXPANSE_RETURN_IF_ERROR(Append(r.dump()));
  return host_.RemoveFile(path);
}

Status Journal::MakeDirectories(const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
  // Walk down from the root; record each directory just before creating it.
  std::vector<std::string> missing;
  std::string p = path;
  while (!p.empty() && p != "/") {
    if (std::optional<FileInfo> there = host_.LinkStat(p)) {
      if (there->type != FileInfo::Type::kDirectory)
        return FailedPreconditionError(p + " exists and is not a directory");
      break;
    }
    missing.push_back(p);
    const size_t slash = p.rfind('/');
    p = slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
  }
  std::reverse(missing.begin(), missing.end());
  for (const std::string& d : missing) {
    EXPANSE_RETURN_IF_ERROR(BeforeChange());
    ++seq_;
    EXPANSE_RETURN_IF_ERROR(Append(json{{"seq", seq_}, {"op", "mkdir"}, {"path", d}}.dump()));
    EXPANSE_RETURN_IF_ERROR(host_.MakeDirectories(d, mode));
    EXPANSE_RETURN_IF_ERROR(host_.SetOwner(d, uid, gid));
  }
  return OkStatus();
}

Status Journal::Chown(const std::string& path, uid_t uid, gid_t gid) {
  std::optional<FileInfo> was = host_.LinkStat(path);
  if (!was)
    return NotFoundError("chown " + path + ": No such file or directory");
  if (was->uid == uid && was->gid == gid)
    return OkStatus();
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  EXPANSE_RETURN_IF_ERROR(Append(
      json{{"seq", seq_}, {"op", "chown"}, {"path", path}, {"uid", was->uid}, {"gid", was->gid}}
          .dump()));
  return host_.SetOwner(path, uid, gid);
}

Status Journal::RunCommand(const std::string& what, const std::vector<std::string>& run,
                           const std::vector<std::string>& undo) {
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  EXPANSE_RETURN_IF_ERROR(Append(
      json{{"seq", seq_}, {"op", "command"}, {"what", what}, {"run", run}, {"undo", undo}}.dump()));
  return RunInstallCommand(host_, what, run);
}

Status RunInstallCommand(Host& host, const std::string& what,
                         const std::vector<std::string>& argv) {
  if (argv.empty())
    return OkStatus();
  SubprocessOptions options;
  options.argv = argv;
  options.timeout = std::chrono::seconds(120);
  EXPANSE_ASSIGN_OR_RETURN(SubprocessResult result, host.Run(options));
  if (!result.Succeeded()) {
    return UnavailableError(what + " failed: " + CommandSaid(result, 500))
        .WithReason("command_failed");
  }
  return OkStatus();
}

Status Journal::AdoptNewTree(const std::string& path) {
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  return Append(json{{"seq", seq_}, {"op", "tree"}, {"path", path}}.dump());
}

Status Journal::MoveAside(const std::string& path) {
  if (!host_.LinkStat(path))
    return OkStatus();
  EXPANSE_RETURN_IF_ERROR(BeforeChange());
  ++seq_;
  const std::string aside = AsidePath(path, seq_);
  // One left by an earlier run that stopped between its commit and deleting what it set aside:
  // garbage, as only this journal's own records are live (Begin refuses while one is pending).
  EXPANSE_RETURN_IF_ERROR(host_.RemoveTree(aside));
  EXPANSE_RETURN_IF_ERROR(Append(json{{"seq", seq_}, {"op", "aside"}, {"path", path}}.dump()));
  EXPANSE_RETURN_IF_ERROR(host_.Rename(path, aside));
  set_aside_.push_back(aside);
  return OkStatus();
}

Status Journal::Commit() {
  EXPANSE_RETURN_IF_ERROR(host_.RemoveTree(dir_));
  // After the commit point: what cannot be deleted now is only garbage (a later MoveAside
  // that picks the same name clears it).
  for (const std::string& aside : set_aside_)
    (void)host_.RemoveTree(aside);
  set_aside_.clear();
  return OkStatus();
}

Status Journal::RollBack(Host& host, const std::string& dir, const LogFn& log) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text,
                           host.ReadFile(dir + "/" + kJournalName, kMaxJournalBytes));
  if (!text)
    return OkStatus();  // nothing was recorded
  const std::vector<Result<JournalRecord>> records = DecodeJournal(*text);
  Status first = OkStatus();
  Status damaged = OkStatus();
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    Status s = it->ok() ? UndoRecord(host, dir, **it, log) : it->status();
    if (!s.ok()) {
      log("undo failed: " + s.message());
      if (first.ok())
        first = s;
      if (!it->ok())
        damaged = s;  // the oldest, as the loop runs newest first
    }
  }
  // A failed undo may succeed on the next try; a damaged line never will, so the way out is
  // the operator's, and the message says where the journal is and what to do.
  if (!damaged.ok()) {
    return DataLossError(dir + "/" + std::string(kJournalName) + ": " + damaged.message() +
                         "; every other change it recorded was undone: put back by hand what "
                         "that line recorded (docs/formats/install-journal.md), then remove " +
                         dir)
        .WithReason("bad_journal");
  }
  if (!first.ok())
    return first;
  return host.RemoveTree(dir);
}

}  // namespace expanse::install
