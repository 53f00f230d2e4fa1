#include "doctor/gather.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memory_host.h"
#include "core/test_temp_dir.h"
#include "deploy/daemon_config.h"
#include "doctor/checks.h"
#include "slurm/hook_script.h"
#include "spool/spool_file.h"
#include "spool/spool_names.h"

namespace expanse::doctor {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kSlurm = 64030;
constexpr char kRoot[] = "/srv/expanse/spool/workers";
constexpr char kConfig[] = "/var/lib/slurm/.expanse/config.json";

std::string Wrapper(slurm::HookKind kind) {
  slurm::HookScriptOptions options;
  options.kind = kind;
  options.daemon_path = "/srv/expanse/bin/expanse-daemon";
  options.shared_prefix = "/srv/expanse";
  Result<std::string> script = slurm::RenderHookScript(options);
  EXPECT_TRUE(script.ok()) << script.status().message();
  return script.ok() ? *script : "";
}

// `gpu_host` names the GPUs (GPU-<gpu_host>-0): the host's own name unless given.
std::string HealthFile(const std::string& host, int64_t created_ms, std::string gpu_host = "") {
  if (gpu_host.empty())
    gpu_host = host;
  const std::string payload = R"({"version":1,"host":")" + host + R"(","last_sample_ms":)" +
                              std::to_string(created_ms - 1000) +
                              R"(,"capabilities":{"nvml":{"state":"ok","reason":""}},)"
                              R"("inventory":{"gpus":[{"index":0,"uuid":"GPU-)" +
                              gpu_host +
                              R"(-0","minor":0},)"
                              R"({"index":1,"uuid":"GPU-)" +
                              gpu_host + R"(-1","minor":1}]},"gpu_use":[],"spool":{}})";
  spool::SpoolFile file{host, "boot-a", 3, created_ms, {{"worker_health", payload}}};
  return spool::EncodeSpoolFile(file).value();
}

// A controller with two workers, wired and healthy.
class DoctorGather : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.AddUser({"slurm", kSlurm, kSlurm});
    host_.SetEnv("SLURM_CONF", "/etc/slurm/slurm.conf");
    host_.Put(
        "/etc/slurm/slurm.conf",
        "ClusterName=test\nInclude /etc/slurm/hooks.conf\nTaskPlugin=task/affinity,task/cgroup\n"
        "ProctrackType=proctrack/cgroup\nGresTypes=gpu\n");
    host_.Put("/etc/slurm/hooks.conf",
              "Prolog=/srv/expanse/hooks/prolog\nEpilog=/srv/expanse/hooks/epilog\n");
    host_.Put("/srv/expanse/hooks/prolog", Wrapper(slurm::HookKind::kProlog), 0755);
    host_.Put("/srv/expanse/hooks/epilog", Wrapper(slurm::HookKind::kEpilog), 0755);
    host_.Put("/etc/slurm/cgroup.conf", "CgroupPlugin=cgroup/v1\nConstrainDevices=yes # GPUs\n");
    host_.Put("/etc/slurm/gres.conf", "NodeName=w[1-2] Name=gpu File=/dev/nvidia[0-1]\n");
    deploy::DaemonConfig config;
    config.compute_id = "cmp_1";
    config.credential = "exp_cc_secret";
    config.control_plane_url = "https://cp.example";
    config.data_plane_url = "https://dp.example";
    config.shared_prefix = "/srv/expanse";
    host_.Put(kConfig, deploy::RenderDaemonConfig(config), 0600, kSlurm, kSlurm);
    host_.Put(std::string(kRoot) + "/w1/health.rec", HealthFile("w1", Now() - 3000), 0644, kSlurm,
              kSlurm);
    host_.Put(std::string(kRoot) + "/w2/health.rec", HealthFile("w2", Now() - 3000), 0644, kSlurm,
              kSlurm);
    for (const char* dir : {"/srv/expanse/spool/workers", "/srv/expanse/spool/workers/w1",
                            "/srv/expanse/spool/workers/w2"})
      ASSERT_TRUE(host_.SetOwner(dir, kSlurm, kSlurm).ok());
    host_.Put("/var/lib/expanse/outbox/segment-1", std::string(1000, 's'));
    host_.OnRun("find",
                [this](const std::vector<std::string>&) { return MemoryHost::Exit(0, mtimes_); });
    host_.OnRun("df", [](const std::vector<std::string>& argv) {
      std::string out = "Filesystem 1024-blocks Used Available Capacity Mounted on\n";
      for (size_t i = 3; i < argv.size(); ++i)
        out += "/dev/sda1 104857600 52428800 52428800 50% /\n";
      return MemoryHost::Exit(0, out);
    });
    const std::string seconds = std::to_string((Now() - 2000) / 1000) + ".5";
    mtimes_ = std::string(kRoot) + "/w1\t" + seconds + '\0' + kRoot + "/w2\t" + seconds + '\0';
    options_.config_path = kConfig;
    options_.probe = [this](const std::string& method, const std::string& url,
                            const std::string& credential) {
      probes_.push_back(method + " " + url + " " + credential);
      return ProbeFacts{url, true, answer_status_, answer_code_, ""};
    };
  }

  int64_t Now() { return host_.clock().NowMs(); }

  std::vector<std::string> Codes() {
    std::vector<std::string> codes;
    for (const Finding& f : RunChecks(GatherFacts(host_, options_)))
      codes.push_back(f.code + (f.host.empty() ? "" : "@" + f.host));
    return codes;
  }

  MemoryHost host_;
  GatherOptions options_;
  std::string mtimes_;
  std::vector<std::string> probes_;
  int answer_status_ = 200;
  std::string answer_code_;
};

TEST_F(DoctorGather, HealthyDeploymentGathersEveryFactAndHasNothingToDo) {
  const DeploymentFacts facts = GatherFacts(host_, options_);
  ASSERT_TRUE(facts.slurm_conf.has_value());
  EXPECT_EQ(facts.slurm_conf->error, "");
  ASSERT_EQ(facts.slurm_conf->hooks.size(), 3u);
  EXPECT_TRUE(facts.slurm_conf->hooks[0].is_expanse);
  EXPECT_EQ(facts.slurm_conf->hooks[0].where, "/etc/slurm/hooks.conf:1");
  EXPECT_FALSE(facts.slurm_conf->hooks[2].wanted);  // no install state: no profiling agent known
  EXPECT_EQ(facts.cgroup_conf->settings.at("constraindevices"), "yes");
  ASSERT_EQ(facts.nodes.size(), 2u);
  EXPECT_EQ(facts.nodes[0].host, "w1");
  EXPECT_EQ(facts.nodes[0].arrived_ms, (Now() - 2000) / 1000 * 1000 + 500);
  ASSERT_TRUE(facts.nodes[0].gres.has_value());
  EXPECT_EQ(facts.nodes[0].gres->minors, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(facts.outbox->depth_bytes, 1000u);
  ASSERT_EQ(facts.disks.size(), 2u);
  EXPECT_EQ(facts.disks[1].path, "/srv/expanse");
  EXPECT_EQ(facts.disks[1].free_bytes, 52428800ull * 1024);
  EXPECT_THAT(probes_, ::testing::ElementsAre(
                           "GET https://cp.example/cp/v1/enrolment?wait_ms=0 exp_cc_secret",
                           "POST https://dp.example/dp/v1/sync exp_cc_secret"));
  EXPECT_THAT(Codes(), ::testing::IsEmpty());
}

TEST_F(DoctorGather, PrologLineRemoved) {
  host_.Put("/etc/slurm/hooks.conf", "Epilog=/srv/expanse/hooks/epilog\n");
  EXPECT_EQ(Codes(), std::vector<std::string>{"HOOK_MISSING"});
}

TEST_F(DoctorGather, LaterPrologInTheMainFileOverridesTheWiring) {
  host_.Put(
      "/etc/slurm/slurm.conf",
      "Include /etc/slurm/hooks.conf\nTaskPlugin=task/cgroup\nProctrackType=proctrack/cgroup\n"
      "Prolog=/etc/slurm/site-prolog\n");
  const DeploymentFacts facts = GatherFacts(host_, options_);
  EXPECT_EQ(facts.slurm_conf->hooks[0].overridden_expanse_at, "/etc/slurm/hooks.conf:1");
  EXPECT_EQ(facts.slurm_conf->hooks[0].where, "/etc/slurm/slurm.conf:4");
  EXPECT_EQ(Codes(), std::vector<std::string>{"HOOK_OVERRIDDEN"});
}

TEST_F(DoctorGather, TaskPrologWantedWhenTheInstallStateSaysProfilingAgent) {
  host_.Put(options_.install_state, R"({"format":1,"role":"controller","profiling_agent":true})",
            0600);
  EXPECT_EQ(Codes(), std::vector<std::string>{"HOOK_MISSING"});
}

TEST_F(DoctorGather, GresMinorWrong) {
  host_.Put(
      "/etc/slurm/gres.conf",
      "NodeName=w1 Name=gpu File=/dev/nvidia[0-1]\nNodeName=w2 Name=gpu File=/dev/nvidia[1-2]\n");
  EXPECT_EQ(Codes(), std::vector<std::string>{"GRES_MINOR_MISMATCH@w2"});
}

TEST_F(DoctorGather, WorkerSilent) {
  const std::string old = std::to_string((Now() - 20 * 60 * 1000) / 1000);
  host_.Put(std::string(kRoot) + "/w2/health.rec", HealthFile("w2", Now() - 20 * 60 * 1000), 0644,
            kSlurm, kSlurm);
  mtimes_ = std::string(kRoot) + "/w2\t" + old + "\n" + kRoot + "/w1\t" +
            std::to_string(Now() / 1000) + "\n";
  EXPECT_EQ(Codes(), std::vector<std::string>{"WORKER_SILENT@w2"});
}

TEST_F(DoctorGather, GarbageReport) {
  host_.Put(std::string(kRoot) + "/w1/health.rec", "not a spool file");
  EXPECT_EQ(Codes(), std::vector<std::string>{"WORKER_REPORT_UNREADABLE@w1"});
}

TEST_F(DoctorGather, HugeReportIsRefusedUnread) {
  host_.Put(std::string(kRoot) + "/w1/health.rec", std::string(10 << 20, 'x'));
  const DeploymentFacts facts = GatherFacts(host_, options_);
  EXPECT_THAT(facts.nodes[0].error, HasSubstr("larger than"));
}

TEST_F(DoctorGather, HugeSlurmConfIsRefused) {
  host_.Put("/etc/slurm/hooks.conf", std::string(9 << 20, '#'));
  const DeploymentFacts facts = GatherFacts(host_, options_);
  EXPECT_NE(facts.slurm_conf->error, "");
  EXPECT_EQ(Codes().front(), "SLURM_CONF_UNREADABLE");
}

TEST_F(DoctorGather, SpoolUnwritableAndQuarantine) {
  ASSERT_TRUE(host_.SetOwner(kRoot, 0, 0).ok());
  host_.Put(std::string(kRoot) + "/.quarantine/w1-000001-boot-bad_checksum", "x");
  EXPECT_EQ(Codes(), (std::vector<std::string>{"SPOOL_NOT_WRITABLE", "SPOOL_QUARANTINE"}));
}

TEST_F(DoctorGather, CredentialRevoked) {
  answer_status_ = 401;
  answer_code_ = "credential_revoked";
  EXPECT_EQ(Codes(), std::vector<std::string>{"CREDENTIAL_REVOKED"});
}

TEST_F(DoctorGather, CredentialConfigReadableByOthers) {
  deploy::DaemonConfig config;
  config.compute_id = "cmp_1";
  config.credential = "exp_cc_secret";
  config.control_plane_url = "https://cp.example";
  config.data_plane_url = "https://dp.example";
  config.shared_prefix = "/srv/expanse";
  host_.Put(kConfig, deploy::RenderDaemonConfig(config), 0644, kSlurm, kSlurm);
  options_.shared_prefix = "/srv/expanse";
  const std::vector<std::string> codes = Codes();
  EXPECT_EQ(codes, std::vector<std::string>{"CREDENTIAL_CONFIG_UNREADABLE"});
  EXPECT_TRUE(probes_.empty());
}

TEST_F(DoctorGather, ConstrainDevicesOff) {
  host_.Put("/etc/slurm/cgroup.conf", "ConstrainDevices=no\n");
  EXPECT_EQ(Codes(), std::vector<std::string>{"CGROUP_CONSTRAIN_DEVICES_OFF"});
}

TEST_F(DoctorGather, OneHostReadsOnlyThatWorker) {
  options_.target = "w2";
  host_.Put("/etc/slurm/hooks.conf", "");  // not judged with --host
  const DeploymentFacts facts = GatherFacts(host_, options_);
  EXPECT_FALSE(facts.slurm_conf.has_value());
  EXPECT_FALSE(facts.credential.has_value());
  ASSERT_EQ(facts.nodes.size(), 1u);
  EXPECT_EQ(facts.nodes[0].host, "w2");
  EXPECT_TRUE(probes_.empty());
  EXPECT_THAT(Codes(), ::testing::IsEmpty());
  options_.target = "w9";
  EXPECT_EQ(Codes(), std::vector<std::string>{"WORKER_REPORT_UNREADABLE@w9"});
}

TEST_F(DoctorGather, HugeOrOddConfigurationFilesAreRefusedNotRead) {
  host_.Put("/etc/slurm/cgroup.conf", std::string(2 << 20, 'x'));
  host_.Put("/etc/slurm/gres.conf", std::string(2 << 20, 'x'));
  EXPECT_EQ(Codes(), (std::vector<std::string>{"CGROUP_CONF_UNREADABLE", "GRES_CONF_UNREADABLE@w1",
                                               "GRES_CONF_UNREADABLE@w2"}));
  ASSERT_TRUE(host_.RemoveFile("/etc/slurm/gres.conf").ok());
  ASSERT_TRUE(host_.MakeDirectories("/etc/slurm/gres.conf", 0755).ok());
  EXPECT_THAT(GatherFacts(host_, options_).nodes[0].gres->error, HasSubstr("not a regular file"));
}

TEST_F(DoctorGather, ReportTimesCutByFindsOutputCapAreSaidToBeIncomplete) {
  // find's output past its cap is dropped: hosts whose records were cut lose their arrival
  // time, and the operator must hear that the times are incomplete.
  host_.OnRun("find", [this](const std::vector<std::string>&) {
    SubprocessResult cut = MemoryHost::Exit(0, mtimes_);
    cut.stdout_truncated = true;
    return cut;
  });
  const DeploymentFacts facts = GatherFacts(host_, options_);
  EXPECT_THAT(facts.report_times_error, HasSubstr("cut"));
  EXPECT_EQ(Codes(), std::vector<std::string>{"REPORT_TIMES_INCOMPLETE"});
  host_.OnRun("find", [](const std::vector<std::string>&) {
    SubprocessResult hung = MemoryHost::Exit(-1);
    hung.timed_out = true;
    return hung;
  });
  EXPECT_EQ(Codes(), std::vector<std::string>{"REPORT_TIMES_INCOMPLETE"});
}

TEST_F(DoctorGather, WorkerWrittenDirectoriesAreReadOnlyUpToACap) {
  // The spool's directories are written by workers: a million names must not all be read.
  for (int i = 0; i < 5; ++i)
    host_.Put(std::string(kRoot) + "/w1/" + spool::SpoolFileName(i + 1, "boot-a"), "x", 0644,
              kSlurm, kSlurm);
  host_.Put(std::string(kRoot) + "/.quarantine/a", "x");
  host_.Put(std::string(kRoot) + "/.quarantine/b", "x");
  host_.Put(std::string(kRoot) + "/.quarantine/c", "x");
  host_.Put(std::string(kRoot) + "/.quarantine/d", "x");
  options_.max_dir_names = 3;
  const DeploymentFacts facts = GatherFacts(host_, options_);
  ASSERT_TRUE(facts.spool.has_value());
  // The root holds .quarantine, w1, w2: three names, not capped. w1 holds health.rec and five
  // spool files: capped at three. The quarantine holds four: capped.
  EXPECT_THAT(facts.spool->capped_dirs, ::testing::ElementsAre(std::string(kRoot) + "/.quarantine",
                                                               std::string(kRoot) + "/w1"));
  EXPECT_LE(facts.spool->backlog_files.at("w1"), 3u);
  EXPECT_EQ(facts.spool->quarantined, 3u);
  std::vector<std::string> codes = Codes();
  EXPECT_THAT(codes, ::testing::Contains("SPOOL_LISTING_CAPPED"));

  host_.Put(std::string(kRoot) + "/w3/health.rec", HealthFile("w3", Now() - 3000), 0644, kSlurm,
            kSlurm);
  host_.Put(std::string(kRoot) + "/w4/health.rec", HealthFile("w4", Now() - 3000), 0644, kSlurm,
            kSlurm);
  const DeploymentFacts more = GatherFacts(host_, options_);
  EXPECT_EQ(more.spool->capped_dirs.front(), kRoot);
  EXPECT_TRUE(more.node_names_capped);
  EXPECT_LE(more.nodes.size(), 3u);
}

// On the real file system: what a worker can put in the spool (it writes there as the daemon's
// account) must not lead the doctor, running as root, out of it.
class DoctorGatherOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "workers";
    ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir_ / "elsewhere").c_str(), 0755), 0);
    // A report that is not w1's to give: it names a GPU only "stolen" shows.
    stolen_ = dir_.Write("elsewhere/health.rec", StolenReport());
  }

  static std::string StolenReport() { return HealthFile("w1", 1'800'000'000'000, "STLN"); }

  testing::TempDir dir_{"expanse_doctor"};
  std::string root_;
  std::string stolen_;
};

TEST_F(DoctorGatherOnDisk, AHostDirectoryThatIsASymlinkIsNotFollowed) {
  ASSERT_EQ(symlink((dir_ / "elsewhere").c_str(), (root_ + "/w1").c_str()), 0);
  const std::vector<NodeFacts> nodes = GatherNodes(RealHost::Get(), root_, "");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_THAT(nodes[0].error, HasSubstr("symbolic link"));
  EXPECT_TRUE(nodes[0].gpus.empty());
  const SpoolFacts spool = GatherSpool(RealHost::Get(), root_);
  EXPECT_TRUE(spool.host_dirs.empty());
}

TEST_F(DoctorGatherOnDisk, AReportSwappedForASymlinkAfterItsCheckIsNotRead) {
  // A worker swaps health.rec between a file and a link to elsewhere while the doctor reads:
  // the read itself must refuse the link, not only the check before it.
  ASSERT_EQ(mkdir((root_ + "/w1").c_str(), 0755), 0);
  const std::string report = root_ + "/w1/health.rec";
  const std::string other = root_ + "/w1/.other";
  std::FILE* f = std::fopen(report.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string bytes = HealthFile("w1", 1'800'000'000'000);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  ASSERT_EQ(std::fclose(f), 0);
  ASSERT_EQ(symlink(stolen_.c_str(), other.c_str()), 0);
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    // One syscall per swap: the name is a file, then a link, thousands of times a second.
    while (!stop &&
           renameat2(AT_FDCWD, report.c_str(), AT_FDCWD, other.c_str(), RENAME_EXCHANGE) == 0) {
    }
  });
  int stolen = 0;
  for (int i = 0; i < 300 && stolen == 0; ++i) {
    for (const NodeFacts& node : GatherNodes(RealHost::Get(), root_, "w1")) {
      for (const GpuFacts& gpu : node.gpus)
        stolen += gpu.uuid == "GPU-STLN-0" ? 1 : 0;
    }
  }
  stop = true;
  swapper.join();
  EXPECT_EQ(stolen, 0);
}

TEST_F(DoctorGatherOnDisk, AFifoForAReportDoesNotBlock) {
  ASSERT_EQ(mkdir((root_ + "/w1").c_str(), 0755), 0);
  ASSERT_EQ(mkfifo((root_ + "/w1/health.rec").c_str(), 0644), 0);
  const std::vector<NodeFacts> nodes = GatherNodes(RealHost::Get(), root_, "");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_THAT(nodes[0].error, HasSubstr("not a regular file"));
}

TEST_F(DoctorGatherOnDisk, ListingsStopAtTheCap) {
  for (const char* name : {"w1", "w2", "w3", "w4"})
    ASSERT_EQ(mkdir((root_ + "/" + name).c_str(), 0755), 0);
  NodeListing listing;
  const std::vector<NodeFacts> nodes = GatherNodes(RealHost::Get(), root_, "", &listing, 2);
  EXPECT_TRUE(listing.names_capped);
  EXPECT_LE(nodes.size(), 2u);
  const SpoolFacts spool = GatherSpool(RealHost::Get(), root_, 2);
  EXPECT_EQ(spool.capped_dirs, std::vector<std::string>{root_});
}

// Workers name their own spool directories, and a name may hold a line break: with find's
// records ending in '\n', a directory "x\nw2" printed a line "w2\t<its report's mtime>" that set
// w2's arrival time. The records now end in NUL, which no name can hold.
TEST(DoctorParse, ReportMtimesCannotBeForgedByADirectorysName) {
  const std::string root = kRoot;
  const std::string output = root + "/w1\t1800000000.25" + '\0' + root + "/x\nw2\t1900000000.0" +
                             '\0' + root + "/w2\t1700000000.5" + '\0' + root + "/w3\t-1" + '\0' +
                             root + "/w4\t1700000000x" + '\0' + "w5\t1700000000";
  EXPECT_EQ(ParseReportMtimes(output),
            (std::map<std::string, int64_t>{{"w1", 1'800'000'000'250}, {"w2", 1'700'000'000'500}}));
  EXPECT_TRUE(ParseReportMtimes(root + "/w1\t1800000000\n" + root + "/w2\t1800000000\n").empty());
}

// istream's >> read "-1" as 2^64 - 1 KiB, and a size past 2^54 KiB wrapped when made bytes.
TEST(DoctorParse, DfSizesAreDecimalKibibytesThatFitInBytes) {
  const std::vector<DiskFacts> disks = ParseDf(
      "Filesystem 1024-blocks Used Available Capacity Mounted on\n"
      "fuse 100 -1 40 1% /a\n"
      "fuse 18014398509481984 0 1 0% /b\n"
      "fuse 18014398509481983 0 1 0% /c\n",
      {"/a", "/b", "/c"});
  ASSERT_EQ(disks.size(), 3u);
  EXPECT_EQ(disks[0].error, R"(df printed "fuse 100 -1 40 1% /a")");
  EXPECT_NE(disks[1].error, "");
  EXPECT_EQ(disks[2].error, "");
  EXPECT_EQ(disks[2].total_bytes, UINT64_MAX - 1023);
}

TEST(DoctorParse, DfAndCgroupConf) {
  const std::vector<DiskFacts> disks = ParseDf(
      "Filesystem 1024-blocks Used Available Capacity Mounted on\n"
      "/dev/sda1 100 60 40 60% /\nnonsense\n",
      {"/a", "/b"});
  ASSERT_EQ(disks.size(), 2u);
  EXPECT_EQ(disks[0].total_bytes, 102400u);
  EXPECT_EQ(disks[0].free_bytes, 40960u);
  EXPECT_NE(disks[1].error, "");
  const auto conf =
      ParseCgroupConf("# c\nConstrainDevices = yes\n\nConstrainCores=no#x\ngarbage\n");
  EXPECT_EQ(conf.at("constraindevices"), "yes");
  EXPECT_EQ(conf.at("constraincores"), "no");
  EXPECT_EQ(conf.size(), 2u);
}

}  // namespace
}  // namespace expanse::doctor
