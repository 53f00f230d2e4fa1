#include "core/host.h"

#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_host.h"
#include "core/test_temp_dir.h"

namespace expanse {
namespace {

// The same contract, checked on the machine and on the in-memory host, so a unit test on
// MemoryHost means what it would on a real one.
struct HostCase {
  const char* name;
  std::function<std::unique_ptr<Host>()> make;
};

class HostContractTest : public ::testing::TestWithParam<HostCase> {
 protected:
  void SetUp() override {
    host_ = GetParam().make();
    if (auto* memory = dynamic_cast<MemoryHost*>(host_.get())) {
      root_ = "/work";
      ASSERT_TRUE(memory->MakeDirectories(root_, 0755).ok());
    } else {
      root_ = dir_.path();
    }
  }
  Host& host() { return GetParam().name == std::string("real") ? RealHost::Get() : *host_; }

  expanse::testing::TempDir dir_;
  std::unique_ptr<Host> host_;
  std::string root_;
};

TEST_P(HostContractTest, WritesReadsAndRemovesFiles) {
  const std::string path = root_ + "/etc/expanse/daemon.env";
  EXPECT_FALSE(host().WriteFile(path, "X=1\n", 0640, getuid(), getgid()).ok())
      << "the directory must exist";
  ASSERT_TRUE(host().MakeDirectories(root_ + "/etc/expanse", 0755).ok());
  ASSERT_TRUE(host().MakeDirectories(root_ + "/etc/expanse", 0755).ok()) << "twice is fine";
  ASSERT_TRUE(host().WriteFile(path, "X=1\n", 0640, getuid(), getgid()).ok());
  Result<std::optional<std::string>> read = host().ReadFile(path, 100);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ(**read, "X=1\n");
  EXPECT_EQ(host().ReadFile(path, 2).status().code(), StatusCode::kResourceExhausted);
  std::optional<FileInfo> info = host().Stat(path);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->type, FileInfo::Type::kFile);
  EXPECT_EQ(info->mode, 0640u);
  EXPECT_EQ(info->size, 4u);
  EXPECT_EQ(host().Stat(root_ + "/etc/expanse")->type, FileInfo::Type::kDirectory);
  ASSERT_TRUE(host().RemoveFile(path).ok());
  EXPECT_FALSE(host().Stat(path).has_value());
  EXPECT_TRUE(host().RemoveFile(path).ok()) << "removing what is not there is fine";
  Result<std::optional<std::string>> gone = host().ReadFile(path, 100);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_P(HostContractTest, RemoveTreeTakesEverythingBelowAndNothingBeside) {
  ASSERT_TRUE(host().MakeDirectories(root_ + "/tree/a/b", 0755).ok());
  ASSERT_TRUE(host().MakeDirectories(root_ + "/treehouse", 0755).ok());
  ASSERT_TRUE(host().WriteFile(root_ + "/tree/a/b/f", "x", 0644, getuid(), getgid()).ok());
  ASSERT_TRUE(host().WriteFile(root_ + "/treehouse/g", "y", 0644, getuid(), getgid()).ok());
  ASSERT_TRUE(host().RemoveTree(root_ + "/tree").ok());
  EXPECT_FALSE(host().Stat(root_ + "/tree").has_value());
  EXPECT_FALSE(host().Stat(root_ + "/tree/a/b/f").has_value());
  EXPECT_TRUE(host().Stat(root_ + "/treehouse/g").has_value()) << "a sibling with the same prefix";
  EXPECT_TRUE(host().RemoveTree(root_ + "/tree").ok()) << "removing what is not there is fine";
}

TEST_P(HostContractTest, RenamesAFileOrAWholeTreeButReplacesNothing) {
  ASSERT_TRUE(host().MakeDirectories(root_ + "/lib/a/b", 0755).ok());
  ASSERT_TRUE(host().WriteFile(root_ + "/lib/a/b/f", "x", 0644, getuid(), getgid()).ok());
  ASSERT_TRUE(host().WriteFile(root_ + "/lib/ab", "sibling", 0644, getuid(), getgid()).ok());
  ASSERT_TRUE(host().Rename(root_ + "/lib/a", root_ + "/lib/a.aside").ok());
  EXPECT_FALSE(host().Stat(root_ + "/lib/a").has_value());
  EXPECT_EQ(host().ReadFile(root_ + "/lib/a.aside/b/f", 10)->value_or(""), "x");
  EXPECT_EQ(host().ReadFile(root_ + "/lib/ab", 10)->value_or(""), "sibling")
      << "a sibling with the same prefix stays";
  ASSERT_TRUE(host().Rename(root_ + "/lib/ab", root_ + "/lib/ab2").ok()) << "a file";
  EXPECT_EQ(host().ReadFile(root_ + "/lib/ab2", 10)->value_or(""), "sibling");

  EXPECT_EQ(host().Rename(root_ + "/lib/ab2", root_ + "/lib/a.aside").code(),
            StatusCode::kFailedPrecondition)
      << "nothing is replaced";
  EXPECT_TRUE(host().Stat(root_ + "/lib/a.aside/b/f").has_value());
  EXPECT_EQ(host().Rename(root_ + "/lib/missing", root_ + "/lib/m2").code(), StatusCode::kNotFound);
}

TEST_P(HostContractTest, ADirectoryIsNeitherWrittenNorRemovedAsAFile) {
  ASSERT_TRUE(host().MakeDirectories(root_ + "/d", 0755).ok());
  EXPECT_FALSE(host().WriteFile(root_ + "/d", "x", 0644, getuid(), getgid()).ok());
  EXPECT_FALSE(host().RemoveFile(root_ + "/d").ok());
  EXPECT_TRUE(host().Stat(root_ + "/d").has_value());
}

TEST_P(HostContractTest, AppendsCreatingTheFileOnce) {
  const std::string path = root_ + "/journal.jsonl";
  ASSERT_TRUE(host().AppendToFile(path, "one\n", 0600).ok());
  ASSERT_TRUE(host().AppendToFile(path, "two\n", 0644).ok());
  EXPECT_EQ(host().ReadFile(path, 100)->value_or(""), "one\ntwo\n");
  EXPECT_EQ(host().Stat(path)->mode, 0600u) << "the mode is the creating call's";
  EXPECT_FALSE(host().AppendToFile(root_ + "/missing/j", "x", 0600).ok());
}

TEST_P(HostContractTest, MakesDirectoriesWithExactlyTheModeAsked) {
  const mode_t old_umask = ::umask(022);
  ASSERT_TRUE(host().MakeDirectories(root_ + "/a/b", 0775).ok());
  ::umask(old_umask);
  EXPECT_EQ(host().Stat(root_ + "/a")->mode, 0775u);
  EXPECT_EQ(host().Stat(root_ + "/a/b")->mode, 0775u);
  ASSERT_TRUE(host().WriteFile(root_ + "/a/f", "x", 0644, getuid(), getgid()).ok());
  EXPECT_FALSE(host().MakeDirectories(root_ + "/a/f", 0755).ok()) << "a file is in the way";
}

TEST_P(HostContractTest, RemovesOnlyEmptyDirectories) {
  ASSERT_TRUE(host().MakeDirectories(root_ + "/d/e", 0755).ok());
  Status full = host().RemoveDirectory(root_ + "/d");
  EXPECT_EQ(full.code(), StatusCode::kFailedPrecondition) << full.message();
  EXPECT_TRUE(host().Stat(root_ + "/d/e").has_value());
  ASSERT_TRUE(host().RemoveDirectory(root_ + "/d/e").ok());
  ASSERT_TRUE(host().RemoveDirectory(root_ + "/d").ok());
  EXPECT_FALSE(host().Stat(root_ + "/d").has_value());
  EXPECT_TRUE(host().RemoveDirectory(root_ + "/d").ok()) << "removing what is not there is fine";
}

TEST_P(HostContractTest, ListsADirectorysOwnNames) {
  ASSERT_TRUE(host().MakeDirectories(root_ + "/l/sub/deeper", 0755).ok());
  ASSERT_TRUE(host().WriteFile(root_ + "/l/b", "x", 0644, getuid(), getgid()).ok());
  ASSERT_TRUE(host().WriteFile(root_ + "/l/a", "x", 0644, getuid(), getgid()).ok());
  Result<std::vector<std::string>> names = host().ListDirectory(root_ + "/l");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b", "sub"}));
  Result<std::vector<std::string>> none = host().ListDirectory(root_ + "/none");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(HostContractTest, SetsOwners) {
  ASSERT_TRUE(host().WriteFile(root_ + "/f", "x", 0644, getuid(), getgid()).ok());
  ASSERT_TRUE(host().SetOwner(root_ + "/f", getuid(), getgid()).ok());
  EXPECT_EQ(host().LinkStat(root_ + "/f")->uid, getuid());
  EXPECT_FALSE(host().SetOwner(root_ + "/nothing", getuid(), getgid()).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Hosts, HostContractTest,
    ::testing::Values(HostCase{"real", [] { return std::unique_ptr<Host>(); }},
                      HostCase{"memory", [] { return std::make_unique<MemoryHost>(); }}),
    [](const ::testing::TestParamInfo<HostCase>& param) { return std::string(param.param.name); });

TEST(RealHostTest, RunsProgramsAndReadsTheEnvironment) {
  SubprocessOptions options;
  options.argv = {"/bin/sh", "-c", "echo hi"};
  Result<SubprocessResult> r = RealHost::Get().Run(options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_text, "hi\n");
  setenv("EXPANSE_HOST_TEST", "v", 1);
  EXPECT_EQ(RealHost::Get().GetEnv("EXPANSE_HOST_TEST"), "v");
  EXPECT_EQ(RealHost::Get().Environment().at("EXPANSE_HOST_TEST"), "v");
  unsetenv("EXPANSE_HOST_TEST");
  EXPECT_FALSE(RealHost::Get().GetEnv("EXPANSE_HOST_TEST").has_value());
  EXPECT_EQ(RealHost::Get().LookupUser("root")->uid, 0u);
  EXPECT_FALSE(RealHost::Get().LookupUser("no-such-user-expanse").has_value());
}

TEST(RealHostTest, LinkStatSeesTheLinkAndStatItsTarget) {
  expanse::testing::TempDir dir;
  ASSERT_TRUE(
      RealHost::Get().WriteFile(dir.path() + "/target", "x", 0600, getuid(), getgid()).ok());
  ASSERT_EQ(::symlink((dir.path() + "/target").c_str(), (dir.path() + "/link").c_str()), 0);
  EXPECT_EQ(RealHost::Get().LinkStat(dir.path() + "/link")->type, FileInfo::Type::kSymlink);
  EXPECT_EQ(RealHost::Get().Stat(dir.path() + "/link")->type, FileInfo::Type::kFile);
}

TEST(MemoryHostTest, SnapshotsDifferExactlyWhenTheTreesDo) {
  MemoryHost host;
  host.Put("/etc/a", "1");
  const std::string before = host.Snapshot();
  ASSERT_TRUE(host.SetOwner("/etc/a", 5, 5).ok());
  EXPECT_NE(host.Snapshot(), before) << "an owner is part of the tree";
  ASSERT_TRUE(host.SetOwner("/etc/a", 0, 0).ok());
  EXPECT_EQ(host.Snapshot(), before);
  ASSERT_TRUE(host.MakeDirectories("/etc/b", 0700).ok());
  EXPECT_NE(host.Snapshot(), before) << "an empty directory is part of the tree";
}

TEST(MemoryHostTest, RecordsCommandsAndAnswersAsScripted) {
  MemoryHost host;
  host.OnRun("scontrol", [](const std::vector<std::string>& argv) {
    return MemoryHost::Exit(0, argv[1] == "--version" ? "slurm 22.05.8\n" : "");
  });
  SubprocessOptions version;
  version.argv = {"scontrol", "--version"};
  EXPECT_EQ(host.Run(version)->stdout_text, "slurm 22.05.8\n");
  SubprocessOptions missing;
  missing.argv = {"systemctl", "daemon-reload"};
  EXPECT_EQ(host.Run(missing)->exit_code, 127) << "a program with no answer is not installed";
  EXPECT_EQ(host.commands(),
            (std::vector<std::string>{"scontrol --version", "systemctl daemon-reload"}));
  host.SetEnv("SSL_CERT_FILE", "/etc/ssl/ca.pem");
  EXPECT_EQ(host.GetEnv("SSL_CERT_FILE"), "/etc/ssl/ca.pem");
  host.AddUser({"slurm", 64030, 64031});
  EXPECT_EQ(host.LookupUser("slurm")->gid, 64031u);
  host.Put("/etc/slurm/slurm.conf", "ClusterName=c\n", 0644);
  EXPECT_EQ(host.Contents("/etc/slurm/slurm.conf"), "ClusterName=c\n");
  EXPECT_EQ(host.Stat("/etc/slurm")->type, FileInfo::Type::kDirectory);
  host.clock().Advance(5);
  EXPECT_EQ(host.clock().NowMs(), 1'800'000'000'005);
}

}  // namespace
}  // namespace expanse
