// The installer's journal (/var/lib/expanse-install/journal/journal.jsonl, docs/formats/
// install-journal.md) as the next install or uninstall finds it after a crash, a full disk or a
// hand edit, and rolls it back as root. Input: the journal's bytes. They are decoded
// (DecodeJournal), then rolled back (Journal::RollBack) on an in-memory host that holds a few
// files, directories and one backup.
// Properties:
// - nothing throws or crashes;
// - every line yields at most one entry, and only the last line may be left out (torn);
// - an accepted record has a known op, an absolute path unless it is a command, a backup name
//   of [a-z0-9-] (no way out of the journal's directory) where one is needed, and a mode of
//   permission bits;
// - the rollback fails when any line was refused (a damaged journal is never forgotten), and
//   when it succeeds the journal is gone;
// - every line the rollback logs (the installer prints them) is clean text.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory_host.h"
#include "install/journal.h"
#include "wire/field_reader.h"

namespace {

constexpr char kJournalDir[] = "/var/lib/expanse-install/journal";

bool KnownOp(const std::string& op) {
  for (const char* known : {"file", "remove", "mkdir", "chown", "command", "aside", "tree"}) {
    if (op == known)
      return true;
  }
  return false;
}

void CheckRecord(const expanse::install::JournalRecord& r) {
  if (!KnownOp(r.op) || r.mode < 0 || r.mode > 07777)
    std::abort();
  if (r.op != "command" && (r.path.empty() || r.path.front() != '/'))
    std::abort();
  if (!r.backup.empty() && !expanse::wire::IsName(r.backup, 64, "-", false))
    std::abort();
  if ((r.op == "file" || r.op == "remove") && r.existed && r.backup.empty())
    std::abort();
}

// A host like the one an interrupted install leaves: what the records name may or may not be
// there, and programs run by undo records are not found.
void SetScene(expanse::MemoryHost& host, std::string_view journal) {
  host.Put("/etc/slurm/slurm.conf", "ClusterName=tc\n");
  host.Put("/etc/expanse/daemon.env", "SLURM_CONF=/etc/slurm/slurm.conf\n");
  host.Put("/srv/expanse/bin/expanse-daemon", "ELF");
  host.Put("/srv/expanse/bin.expanse-undo-3/expanse-daemon", "old ELF");
  host.Put(std::string(kJournalDir) + "/backup-1", "ClusterName=tc\nProlog=/site/prolog\n", 0600);
  host.Put(std::string(kJournalDir) + "/journal.jsonl", std::string(journal), 0600);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace expanse::install;
  const std::string_view journal(reinterpret_cast<const char*>(data), size);
  const std::vector<expanse::Result<JournalRecord>> records = DecodeJournal(journal);
  size_t lines = 0;
  for (size_t from = 0; from < journal.size(); ++lines) {
    const size_t newline = journal.find('\n', from);
    from = newline == std::string_view::npos ? journal.size() : newline + 1;
  }
  if (records.size() > lines || records.size() + 1 < lines)
    std::abort();
  bool refused = false;
  for (const expanse::Result<JournalRecord>& r : records) {
    if (r.ok())
      CheckRecord(*r);
    else
      refused = true;
  }

  expanse::MemoryHost host;
  SetScene(host, journal);
  std::vector<std::string> logged;
  const expanse::Status rolled_back = Journal::RollBack(
      host, kJournalDir, [&](const std::string& line) { logged.push_back(line); });
  if (refused && rolled_back.ok())
    std::abort();
  if (rolled_back.ok() && Journal::Pending(host, kJournalDir))
    std::abort();
  for (const std::string& line : logged) {
    if (!expanse::wire::IsCleanText(line))
      std::abort();
  }
  return 0;
}
