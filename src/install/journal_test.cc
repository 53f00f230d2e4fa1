#include "install/journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/file_util.h"

namespace expanse::install {
namespace journal_test {
namespace {

namespace stdfs = std::filesystem;

// path -> "mode:contents" (directories as "dir:mode") of everything under `root`.
std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : stdfs::recursive_directory_iterator(root)) {
    struct stat st {};
    lstat(e.path().c_str(), &st);
    if (S_ISDIR(st.st_mode)) {
      out[e.path()] = "dir:" + std::to_string(st.st_mode & 07777);
    } else {
      std::ifstream in(e.path(), std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), {});
      out[e.path()] = std::to_string(st.st_mode & 07777) + ":" + bytes;
    }
  }
  return out;
}

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/journal_test.XXXXXX";
    root_ = mkdtemp(tmpl);
    host_ = root_ + "/host";
    stdfs::create_directories(host_ + "/etc");
    std::ofstream(host_ + "/etc/slurm.conf") << "ClusterName=tc\nProlog=/site/prolog\n";
    chmod((host_ + "/etc/slurm.conf").c_str(), 0640);
    jdir_ = root_ + "/journal";
  }
  void TearDown() override { stdfs::remove_all(root_); }

  // Makes four kinds of change; returns the first error.
  Status Changes(Journal& j) {
    EXPANSE_RETURN_IF_ERROR(j.MakeDirectories(host_ + "/srv/expanse/bin", 0755));
    EXPANSE_RETURN_IF_ERROR(j.WriteFile(host_ + "/srv/expanse/bin/daemon", "ELF", 0755));
    // A staged release file outside the host, streamed into place.
    std::ofstream(root_ + "/staged-py-spy") << "#!/bin/sh\n";
    EXPANSE_RETURN_IF_ERROR(
        j.CopyLocalFile(root_ + "/staged-py-spy", host_ + "/srv/expanse/bin/py-spy", 100, 0755));
    EXPANSE_RETURN_IF_ERROR(j.WriteFile(host_ + "/etc/slurm.conf", "ClusterName=tc\n", 0644));
    EXPANSE_RETURN_IF_ERROR(j.AdoptNewTree(host_ + "/srv/expanse/lib"));
    stdfs::create_directories(host_ + "/srv/expanse/lib/a/b");
    std::ofstream(host_ + "/srv/expanse/lib/a/b/f") << "x";
    EXPANSE_RETURN_IF_ERROR(j.RunCommand("touch marker", {"/bin/true"},
                                         {"/bin/sh", "-c", "echo undone >" + root_ + "/undo"}));
    return OkStatus();
  }

  std::string root_, host_, jdir_;
  std::vector<std::string> log_;
  LogFn Log() {
    return [this](const std::string& s) { log_.push_back(s); };
  }
};

TEST_F(JournalTest, RollBackRestoresTheHostExactly) {
  auto before = Snapshot(host_);
  auto j = Journal::Begin(RealHost::Get(), jdir_);
  ASSERT_TRUE(j.ok()) << j.status();
  ASSERT_TRUE(Changes(*j).ok());
  EXPECT_NE(Snapshot(host_), before);
  EXPECT_TRUE(Journal::Pending(RealHost::Get(), jdir_));
  ASSERT_TRUE(Journal::RollBack(RealHost::Get(), jdir_, Log()).ok());
  EXPECT_EQ(Snapshot(host_), before);
  EXPECT_FALSE(stdfs::exists(jdir_));
  EXPECT_TRUE(stdfs::exists(root_ + "/undo")) << "the undo command ran";
}

TEST_F(JournalTest, CommitKeepsTheChangesAndForgetsTheJournal) {
  auto j = Journal::Begin(RealHost::Get(), jdir_);
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE(Changes(*j).ok());
  ASSERT_TRUE(j->Commit().ok());
  EXPECT_FALSE(Journal::Pending(RealHost::Get(), jdir_));
  EXPECT_TRUE(stdfs::exists(host_ + "/srv/expanse/bin/daemon"));
  EXPECT_EQ(*fs::ReadSmallFile(host_ + "/srv/expanse/bin/py-spy", 100), std::string("#!/bin/sh\n"));
  EXPECT_EQ(*fs::ReadSmallFile(host_ + "/etc/slurm.conf", 100), std::string("ClusterName=tc\n"));
}

TEST_F(JournalTest, InjectedFailureAtEveryChangeRollsBackToTheSameHost) {
  auto before = Snapshot(host_);
  for (int n = 0; n < 8; ++n) {
    auto j = Journal::Begin(RealHost::Get(), jdir_, FaultInjection{.fail_after_changes = n});
    ASSERT_TRUE(j.ok()) << j.status();
    Status s = Changes(*j);
    ASSERT_FALSE(s.ok()) << "fail after " << n;
    EXPECT_EQ(s.reason(), "injected_failure");
    EXPECT_EQ(j->changes(), n);
    ASSERT_TRUE(Journal::RollBack(RealHost::Get(), jdir_, Log()).ok());
    EXPECT_EQ(Snapshot(host_), before) << "after failing at change " << n + 1;
  }
}

TEST_F(JournalTest, ATornLastRecordIsSkipped) {
  auto before = Snapshot(host_);
  {
    auto j = Journal::Begin(RealHost::Get(), jdir_);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE(j->WriteFile(host_ + "/new", "n", 0600).ok());
  }
  std::ofstream(jdir_ + "/journal.jsonl", std::ios::app) << "{\"seq\":2,\"op\":\"fi";
  ASSERT_TRUE(Journal::RollBack(RealHost::Get(), jdir_, Log()).ok());
  EXPECT_EQ(Snapshot(host_), before);
}

// Records are fsync'ed one by one, so only the last line can be torn. A damaged line before it
// used to end the reading there: the records after it were never undone and the journal was
// deleted as if the rollback were complete. Now that line is refused by its number, every other
// record is undone, and the journal is kept.
TEST_F(JournalTest, ADamagedLineBeforeTheLastIsRefusedByName) {
  {
    auto j = Journal::Begin(RealHost::Get(), jdir_);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE(j->WriteFile(host_ + "/first", "1", 0600).ok());
  }
  std::ofstream(jdir_ + "/journal.jsonl", std::ios::app)
      << std::string("{\"seq\":2,\0\0\0\n", 13) << R"({"seq":3,"op":"file","path":")" << host_
      << R"(/third","existed":false})"
      << "\n";
  std::ofstream(host_ + "/third") << "3";
  const Status s = Journal::RollBack(RealHost::Get(), jdir_, Log());
  ASSERT_FALSE(s.ok());
  // Re-running cannot undo a damaged line: the message names the file and the way out.
  EXPECT_EQ(s.message(), jdir_ +
                             "/journal.jsonl: journal line 2 is not a JSON object (a damaged "
                             "journal); every other change it recorded was undone: put back by "
                             "hand what that line recorded (docs/formats/install-journal.md), "
                             "then remove " +
                             jdir_);
  EXPECT_EQ(s.reason(), "bad_journal");
  EXPECT_FALSE(stdfs::exists(host_ + "/third")) << "the record after the damage is undone";
  EXPECT_FALSE(stdfs::exists(host_ + "/first"));
  EXPECT_TRUE(Journal::Pending(RealHost::Get(), jdir_)) << "kept for another try";
}

// The installer prints what a failed undo command said. It used to print its stderr's first
// 300 bytes raw: a terminal escape went through, and a cut inside a UTF-8 character left
// invalid text (fuzz_install_journal holds every logged line to clean text).
TEST_F(JournalTest, AFailedUndoCommandsOutputIsLoggedAsPrintableText) {
  {
    auto j = Journal::Begin(RealHost::Get(), jdir_);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE(
        j->RunCommand("reload", {}, {"/bin/sh", "-c", "printf '\\033]0;owned\\007\\n' >&2; exit 1"})
            .ok());
    ASSERT_TRUE(j->RunCommand("reload again", {},
                              {"/bin/sh", "-c", "printf '%0299d\\303\\251' 0 >&2; exit 1"})
                    .ok());
  }
  const Status s = Journal::RollBack(RealHost::Get(), jdir_, Log());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "/bin/sh -c failed: " + std::string(299, '0') + "\\xC3...");
  ASSERT_EQ(log_.size(), 4u);
  EXPECT_EQ(log_[3], "undo failed: /bin/sh -c failed: \\x1B]0;owned\\x07");
  for (const std::string& line : log_) {
    for (const char c : line)
      EXPECT_TRUE(c >= 0x20 && c < 0x7f) << line;
  }
}

TEST(JournalDecodeTest, EachLineIsARecordOrItsRefusalAndOnlyTheLastMayBeTorn) {
  const std::vector<Result<JournalRecord>> records = DecodeJournal(
      "{\"seq\":1,\"op\":\"mkdir\",\"path\":\"/etc/expanse\"}\n"
      "[1]\n"
      "{\"seq\":3,\"op\":\"tree\",\"path\":\"relative\"}\n"
      "{\"seq\":4,\"op\":\"fi");
  ASSERT_EQ(records.size(), 3u);
  ASSERT_TRUE(records[0].ok());
  EXPECT_EQ(records[0]->path, "/etc/expanse");
  EXPECT_EQ(records[1].status().message(),
            "journal line 2 is not a JSON object (a damaged journal)");
  EXPECT_EQ(records[2].status().message(), "journal line 3 names no absolute path to undo");
  // A torn write may also leave a whole line of zeros where the file grew before its data.
  EXPECT_TRUE(DecodeJournal(std::string("\0\0\0\n", 4)).empty());
  EXPECT_TRUE(DecodeJournal("").empty());
}

// A whole record whose member has the wrong type (a damaged disk, a hand edit) used to throw
// out of the rollback; now it is that record's undo failure, and every other record is undone.
TEST_F(JournalTest, AWronglyTypedRecordFailsOnlyItsOwnUndo) {
  {
    auto j = Journal::Begin(RealHost::Get(), jdir_);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE(j->WriteFile(host_ + "/new", "n", 0600).ok());
  }
  std::ofstream(jdir_ + "/journal.jsonl", std::ios::app)
      << R"({"seq":2,"op":"file","path":")" << host_
      << R"(/other","existed":true,"backup":"backup-2","mode":"rw"})"
      << "\n";
  const Status s = Journal::RollBack(RealHost::Get(), jdir_, Log());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("journal line 2.mode must be an integer"), std::string::npos) << s;
  EXPECT_NE(s.message().find("then remove " + jdir_), std::string::npos) << s;
  EXPECT_FALSE(stdfs::exists(host_ + "/new")) << "the good record is still undone";
  EXPECT_TRUE(Journal::Pending(RealHost::Get(), jdir_)) << "kept for another try";
}

// A reinstall sets the previous binaries and trees aside (renamed beside themselves, not
// copied): a rollback puts them back over whatever the failed install left there, a commit
// deletes them.
TEST_F(JournalTest, WhatIsSetAsideComesBackOnRollBackAndGoesOnCommit) {
  stdfs::create_directories(host_ + "/srv/lib/cupti/x");
  std::ofstream(host_ + "/srv/lib/cupti/x/lib.so") << "old build";
  std::ofstream(host_ + "/srv/daemon") << "old daemon";
  const auto before = Snapshot(host_);
  for (const bool commit : {false, true}) {
    auto j = Journal::Begin(RealHost::Get(), jdir_);
    ASSERT_TRUE(j.ok()) << j.status();
    ASSERT_TRUE(j->MoveAside(host_ + "/srv/lib/cupti").ok());
    ASSERT_TRUE(j->MoveAside(host_ + "/srv/daemon").ok());
    ASSERT_TRUE(j->MoveAside(host_ + "/srv/nothing-here").ok()) << "nothing there is fine";
    EXPECT_EQ(j->changes(), 2);
    EXPECT_FALSE(stdfs::exists(host_ + "/srv/daemon"));
    // What the new install writes in their place (one part journalled, one not).
    ASSERT_TRUE(j->WriteFile(host_ + "/srv/daemon", "new daemon", 0755).ok());
    stdfs::create_directories(host_ + "/srv/lib/cupti/debris");
    if (commit) {
      ASSERT_TRUE(j->Commit().ok());
      EXPECT_EQ(*fs::ReadSmallFile(host_ + "/srv/daemon", 100), std::string("new daemon"));
      for (const auto& e : stdfs::directory_iterator(host_ + "/srv"))
        EXPECT_EQ(e.path().string().find(".expanse-undo-"), std::string::npos) << e.path();
    } else {
      EXPECT_EQ(Snapshot(host_).size(), before.size() + 3) << "set aside beside themselves";
      ASSERT_TRUE(Journal::RollBack(RealHost::Get(), jdir_, Log()).ok());
      EXPECT_EQ(Snapshot(host_), before);
    }
  }
}

// A run that stopped between writing the record and the rename left the path where it was.
TEST_F(JournalTest, ASetAsideThatNeverHappenedIsNothingToUndo) {
  std::ofstream(host_ + "/daemon") << "old daemon";
  const auto before = Snapshot(host_);
  {
    auto j = Journal::Begin(RealHost::Get(), jdir_);
    ASSERT_TRUE(j.ok());
  }
  std::ofstream(jdir_ + "/journal.jsonl", std::ios::app)
      << R"({"seq":1,"op":"aside","path":")" << host_ << R"(/daemon"})" << '\n';
  ASSERT_TRUE(Journal::RollBack(RealHost::Get(), jdir_, Log()).ok());
  EXPECT_EQ(Snapshot(host_), before);
}

TEST_F(JournalTest, APendingJournalBlocksANewOne) {
  auto j = Journal::Begin(RealHost::Get(), jdir_);
  ASSERT_TRUE(j.ok());
  auto second = Journal::Begin(RealHost::Get(), jdir_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().reason(), "journal_pending");
}

TEST_F(JournalTest, UndoOfADirectoryKeepsWhatOthersPutThere) {
  auto j = Journal::Begin(RealHost::Get(), jdir_);
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE(j->MakeDirectories(host_ + "/d", 0755).ok());
  std::ofstream(host_ + "/d/foreign") << "not ours";
  Status s = Journal::RollBack(RealHost::Get(), jdir_, Log());
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(stdfs::exists(host_ + "/d/foreign"));
  EXPECT_TRUE(Journal::Pending(RealHost::Get(), jdir_)) << "kept for another try";
}

}  // namespace
}  // namespace journal_test
}  // namespace expanse::install
