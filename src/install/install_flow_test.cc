// The install, uninstall and rollback flows end to end on an in-memory host (core/memory_host.h):
// every file they write, every command they run, and — the point of the journal — that a
// failure at ANY change leaves the host exactly as it was. The control plane is a small real
// HTTP server on loopback answering as the real one does; the cluster tests run the same
// flows against a real expanse-server, systemd and SLURM.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_host.h"
#include "core/test_temp_dir.h"
#include "install/install_state.h"
#include "install/installer.h"
#include "install/systemd_unit.h"

namespace expanse::install {
namespace install_flow_test {
namespace {

constexpr char kToken[] = "exp_it_0123456789abcdefXYZ";
constexpr char kSlurmConf[] = "ClusterName=c\nSlurmctldHost=ctl\nProlog=/etc/slurm/site-prolog\n";
constexpr uid_t kSlurmUid = 64030;

// Answers the control-plane and data-plane calls the installer makes.
class FakePlanes {
 public:
  FakePlanes() {
    const std::string compute = R"("compute":{"id":"c-17","name":"gpu-cluster","state":"pending"},)"
                                R"("organization":{"slug":"acme","name":"Acme"})";
    server_.Post("/cp/v1/install-tokens/introspect",
                 [compute](const httplib::Request&, httplib::Response& response) {
                   response.set_content("{" + compute + "}", "application/json");
                 });
    server_.Post("/cp/v1/install-tokens/exchange", [this, compute](const httplib::Request&,
                                                                   httplib::Response& response) {
      ++exchanges_;
      response.set_content(R"({"credential":"exp_cc_secret","credential_id":7,)" + compute + "}",
                           "application/json");
    });
    server_.Get("/cp/v1/enrolment", [this](const httplib::Request&, httplib::Response& response) {
      response.set_content(enrolled_ ? R"({"enrolled":true})" : R"({"enrolled":false})",
                           "application/json");
    });
    server_.Post("/cp/v1/deprovision",
                 [this](const httplib::Request& request, httplib::Response& response) {
                   deprovisioned_with_ = request.get_header_value("Authorization");
                   response.set_content("{}", "application/json");
                 });
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("ok", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakePlanes() {
    while (!server_.is_running())
      std::this_thread::yield();
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::atomic<bool> enrolled_{true};
  std::atomic<int> exchanges_{0};
  std::string deprovisioned_with_;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

SubprocessResult Ok(const std::vector<std::string>&) { return MemoryHost::Exit(0); }

class InstallFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.AddUser({"slurm", kSlurmUid, kSlurmUid});
    host_.Put("/etc/slurm/slurm.conf", kSlurmConf, 0644);
    ASSERT_TRUE(host_.MakeDirectories("/srv/expanse", 0755).ok());
    ASSERT_TRUE(host_.MakeDirectories("/run/systemd/system", 0755).ok());
    ASSERT_TRUE(host_.MakeDirectories("/var/lib/expanse-install", 0700).ok());
    host_.OnRun("systemctl", Ok);
    host_.OnRun("journalctl", [](const std::vector<std::string>&) {
      return MemoryHost::Exit(0, "expanse-daemon[1]: TLS handshake failed\n");
    });
    host_.OnRun("scontrol", [](const std::vector<std::string>& argv) {
      return MemoryHost::Exit(0, argv[1] == "--version" ? "slurm 22.05.8\n" : "");
    });

    paths_.host = &host_;
    paths_.lock_path = scratch_ / "install.lock";
    paths_.staging_dir = scratch_.path();

    install_.type = "slurm";
    install_.shared_prefix = "/srv/expanse";
    install_.daemon_binary = scratch_.Write("expanse-daemon",
                                            "\x7f"
                                            "ELF daemon");
    install_.control_plane = planes_.url();
    install_.data_plane = planes_.url();
    install_.slurm_conf = "/etc/slurm/slurm.conf";
    install_.patch_slurm_conf = true;
    install_.hostname = "ctl";
    install_.heartbeat_timeout = std::chrono::seconds(5);
  }

  Output Collect() {
    Output out;
    out.progress = [this](const std::string& line) { progress_.push_back(line); };
    out.detail = [](const std::string&) {};
    out.text = [](const std::string&) {};
    return out;
  }
  Status Install() { return RunInstall(install_, paths_, SecretString(kToken), Collect()); }
  bool Said(const std::string& words) const {
    for (const std::string& line : progress_)
      if (line.find(words) != std::string::npos)
        return true;
    return false;
  }
  bool Ran(const std::string& command) const {
    for (const std::string& c : host_.commands())
      if (c == command)
        return true;
    return false;
  }

  MemoryHost host_;
  testing::TempDir scratch_;  // the lock and the release staging are always on local disk
  FakePlanes planes_;
  HostPaths paths_;
  InstallOptions install_;
  std::vector<std::string> progress_;
};

TEST_F(InstallFlowTest, AFreshControllerInstallPutsEverythingInPlaceAndStartsTheService) {
  const Status s = Install();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(host_.Contents("/srv/expanse/bin/expanse-daemon"),
            "\x7f"
            "ELF daemon");
  EXPECT_EQ(host_.Stat("/srv/expanse/bin/expanse-daemon")->mode, 0755u);
  const std::string config = host_.Contents("/var/lib/slurm/.expanse/config.json").value_or("");
  EXPECT_NE(config.find("exp_cc_secret"), std::string::npos);
  EXPECT_EQ(host_.Stat("/var/lib/slurm/.expanse/config.json")->mode, 0600u);
  EXPECT_EQ(host_.Stat("/var/lib/slurm/.expanse/config.json")->uid, kSlurmUid);
  EXPECT_TRUE(host_.Stat("/etc/systemd/system/expanse-daemon.service"));
  EXPECT_TRUE(host_.Stat("/srv/expanse/hooks/prolog"));
  EXPECT_TRUE(host_.Stat("/var/lib/expanse-install/controller.json")) << "the install state";
  const std::string conf = host_.Contents("/etc/slurm/slurm.conf").value_or("");
  EXPECT_NE(conf.find("/srv/expanse/hooks/prolog"), std::string::npos) << conf;
  const std::string prolog = host_.Contents("/srv/expanse/hooks/prolog").value_or("");
  EXPECT_NE(prolog.find("/etc/slurm/site-prolog"), std::string::npos)
      << "the site's own Prolog is chained";
  // This controller has no GPU (no driver, no CUPTI build of its own), yet every node's
  // TaskProlog injects the capture agent of that node's own build.
  const std::string taskprolog = host_.Contents("/srv/expanse/hooks/taskprolog").value_or("");
  EXPECT_NE(taskprolog.find("--inject-agent"), std::string::npos) << taskprolog;
  EXPECT_EQ(taskprolog.find("--agent-library"), std::string::npos)
      << "not the controller's own build: " << taskprolog;
  EXPECT_TRUE(Ran("systemctl daemon-reload"));
  EXPECT_TRUE(Ran("systemctl enable --now expanse-daemon.service"));
  EXPECT_TRUE(Ran("scontrol reconfigure"));
  EXPECT_EQ(planes_.exchanges_, 1);
  EXPECT_FALSE(host_.Stat("/var/lib/expanse-install/journal")) << "committed and forgotten";
  for (const std::string& file : host_.Files()) {
    EXPECT_EQ(host_.Contents(file)->find(kToken), std::string::npos)
        << "the install token never reaches the disk: " << file;
    if (file != "/var/lib/slurm/.expanse/config.json") {
      EXPECT_EQ(host_.Contents(file)->find("exp_cc_secret"), std::string::npos)
          << "the credential is only in the config: " << file;
    }
  }
  for (const std::string& line : host_.commands()) {
    EXPECT_EQ(line.find(kToken), std::string::npos) << line;
    EXPECT_EQ(line.find("exp_cc_secret"), std::string::npos) << line;
  }
  for (const std::string& line : progress_) {
    EXPECT_EQ(line.find(kToken), std::string::npos) << line;
    EXPECT_EQ(line.find("exp_cc_secret"), std::string::npos) << line;
  }
}

// --bundled-pyspy (the default) installs the py-spy shipped beside a bare daemon binary too, and
// says so when there is none.
TEST_F(InstallFlowTest, ABareBinaryBringsThePySpyBesideIt) {
  ASSERT_TRUE(Install().ok());
  EXPECT_FALSE(host_.Stat("/srv/expanse/bin/py-spy"));
  EXPECT_TRUE(Said("this release has no bundled py-spy"));
  scratch_.Write("py-spy",
                 "\x7f"
                 "ELF py-spy");
  install_.reinstall = true;
  const Status again = Install();
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_EQ(host_.Contents("/srv/expanse/bin/py-spy"),
            "\x7f"
            "ELF py-spy");
  EXPECT_EQ(host_.Stat("/srv/expanse/bin/py-spy")->mode, 0755u);
}

// Every change the install makes is a rollback point: fail before change 1, 2, ... until the
// install gets through, and after each the host must be exactly as it was.
TEST_F(InstallFlowTest, AFailureAtEveryChangeRollsTheHostBackExactly) {
  const std::string before = host_.Snapshot();
  int points = 0;
  for (int n = 0; n < 200; ++n) {
    paths_.faults.fail_after_changes = n;
    progress_.clear();
    const Status s = Install();
    if (s.ok())
      break;
    ++points;
    ASSERT_EQ(s.reason(), "injected_failure") << "at change " << n + 1 << ": " << s;
    ASSERT_EQ(host_.Snapshot(), before) << "after a failure at change " << n + 1;
    ASSERT_TRUE(Said("the host is as it was before this install")) << "at change " << n + 1;
  }
  EXPECT_GT(points, 20) << "every file, directory and command of the install is a point";
  EXPECT_NE(host_.Snapshot(), before) << "and with no failure the install went through";
}

// A reinstall first removes the previous installation, through the same journal: a failure at
// any change, in that cleanup or in the new install, puts the previous installation back,
// running, exactly as it was.
TEST_F(InstallFlowTest, AFailedReinstallPutsThePreviousInstallationBack) {
  ASSERT_TRUE(Install().ok());
  const std::string installed = host_.Snapshot();
  install_.reinstall = true;
  install_.daemon_binary = scratch_.Write("expanse-daemon-new",
                                          "\x7f"
                                          "ELF daemon, the next version");
  int points = 0;
  for (int n = 0; n < 200; ++n) {
    paths_.faults.fail_after_changes = n;
    progress_.clear();
    host_.ClearCommands();
    const Status s = RunInstall(install_, paths_, std::nullopt, Collect());
    if (s.ok())
      break;
    ++points;
    ASSERT_EQ(s.reason(), "injected_failure") << "at change " << n + 1 << ": " << s;
    ASSERT_EQ(host_.Snapshot(), installed) << "after a failure at change " << n + 1;
    ASSERT_TRUE(Said("the previous installation is back in place")) << "at change " << n + 1;
    if (n > 0) {
      ASSERT_TRUE(Ran("systemctl enable --now expanse-daemon.service"))
          << "the previous daemon runs again, after a failure at change " << n + 1;
    }
  }
  EXPECT_GT(points, 25) << "the cleanup's changes are rollback points too";
  EXPECT_EQ(host_.Contents("/srv/expanse/bin/expanse-daemon"),
            "\x7f"
            "ELF daemon, the next version");
  for (const std::string& file : host_.Files())
    EXPECT_EQ(file.find(".expanse-undo-"), std::string::npos) << "set aside and deleted: " << file;
}

TEST_F(InstallFlowTest, NoHeartbeatRollsBackAndShowsTheServicesOwnWords) {
  const std::string before = host_.Snapshot();
  planes_.enrolled_ = false;
  install_.heartbeat_timeout = std::chrono::milliseconds(200);
  const Status s = Install();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), "heartbeat_timeout") << s;
  EXPECT_TRUE(Ran("journalctl -u expanse-daemon.service -n 20 --no-pager"));
  EXPECT_TRUE(Said("last lines of the daemon's journal"));
  EXPECT_EQ(host_.Snapshot(), before);
  // The undo of each command ran too: the service is disabled again and SLURM reloaded
  // without the hooks.
  EXPECT_TRUE(Ran("systemctl disable --now expanse-daemon.service"));
  EXPECT_EQ(std::count(host_.commands().begin(), host_.commands().end(), "scontrol reconfigure"),
            2);
}

TEST_F(InstallFlowTest, AnExistingConfigIsNeverOverwrittenWithoutReinstall) {
  host_.Put("/var/lib/slurm/.expanse/config.json", "{}", 0600, kSlurmUid, kSlurmUid);
  const std::string before = host_.Snapshot();
  const Status s = Install();
  EXPECT_EQ(s.reason(), "existing_config") << s;
  EXPECT_EQ(host_.Snapshot(), before);
  EXPECT_EQ(planes_.exchanges_, 0) << "the token is not used";
}

// daemon.env wins over the unit, so the 0 an install with --profiling-agent=false wrote there
// must not outlive a later install with the flag true; a 0 the operator wrote stays, named.
TEST_F(InstallFlowTest, TheProfilingAgentFlagOfTheLatestInstallWins) {
  constexpr char kEnv[] = "/etc/expanse/daemon.env";
  install_.profiling_agent = false;
  ASSERT_TRUE(Install().ok());
  EXPECT_NE(host_.Contents(kEnv).value_or("").find("EXPANSE_PROFILING_AGENT_ENABLE=0"),
            std::string::npos);
  EXPECT_NE(host_.Contents("/etc/systemd/system/expanse-daemon.service")
                .value_or("")
                .find("EXPANSE_PROFILING_AGENT_ENABLE=0"),
            std::string::npos);

  install_.profiling_agent = true;
  install_.reinstall = true;
  progress_.clear();
  ASSERT_TRUE(RunInstall(install_, paths_, std::nullopt, Collect()).ok());
  const std::string env = host_.Contents(kEnv).value_or("");
  EXPECT_NE(env.find("EXPANSE_PROFILING_AGENT_ENABLE=1"), std::string::npos) << env;
  EXPECT_EQ(env.find("EXPANSE_PROFILING_AGENT_ENABLE=0"), std::string::npos) << env;
  EXPECT_TRUE(Said("which the earlier install wrote for --profiling-agent=false, becomes 1"));
  EXPECT_EQ(host_.Contents("/etc/systemd/system/expanse-daemon.service")
                .value_or("")
                .find("EXPANSE_PROFILING_AGENT_ENABLE"),
            std::string::npos);

  // The operator's own 0, with no earlier --profiling-agent=false behind it: kept, and said.
  host_.Put(kEnv, "# site policy\nEXPANSE_PROFILING_AGENT_ENABLE=0\n", 0640, 0, kSlurmUid);
  progress_.clear();
  ASSERT_TRUE(RunInstall(install_, paths_, std::nullopt, Collect()).ok());
  EXPECT_EQ(host_.Contents(kEnv), "# site policy\nEXPANSE_PROFILING_AGENT_ENABLE=0\n");
  EXPECT_TRUE(
      Said("warning: /etc/expanse/daemon.env sets EXPANSE_PROFILING_AGENT_ENABLE=0, "
           "which overrides --profiling-agent=true"));
}

// A rebuilt controller (the guide's "Replace a lost compute credential"): no config is left, so
// --reinstall without a token is refused before anything changes, and with a re-issued token
// and both plane URLs it exchanges the token and installs as a fresh install does.
TEST_F(InstallFlowTest, ARebuiltControllerNeedsAReissuedTokenAndThePlanes) {
  install_.reinstall = true;
  const std::string before = host_.Snapshot();
  Status s = RunInstall(install_, paths_, std::nullopt, Collect());
  EXPECT_EQ(s.reason(), "no_saved_config") << s;
  EXPECT_NE(s.message().find("a rebuilt controller needs a token re-issued"), std::string::npos)
      << s;
  EXPECT_EQ(host_.Snapshot(), before);
  EXPECT_EQ(planes_.exchanges_, 0);

  s = RunInstall(install_, paths_, SecretString(kToken), Collect());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(planes_.exchanges_, 1);
  EXPECT_NE(
      host_.Contents("/var/lib/slurm/.expanse/config.json").value_or("").find("exp_cc_secret"),
      std::string::npos);
  EXPECT_TRUE(Ran("systemctl enable --now expanse-daemon.service"));
}

// A host that ran jobs as a worker before it became the controller: the sampler a Prolog
// started there (under the bootstrap's unit, or directly) would sample the daemon's GPUs twice.
TEST_F(InstallFlowTest, AControllerInstallRemovesTheSamplerAPrologLeftOnItsHost) {
  const std::string unit = "/etc/systemd/system/expanse-sampler.service";
  UnitOptions sampler;  // as the controller install renders it for the workers' bootstrap
  sampler.role = UnitRole::kSampler;
  sampler.daemon_binary = "/srv/expanse/bin/expanse-daemon";
  sampler.shared_prefix = "/srv/expanse";
  host_.Put(unit, RenderUnit(sampler).value(), 0644);
  host_.Put("/var/lib/expanse/sampler/sampler.pid", "4242\n");
  host_.Put("/proc/4242/cmdline", std::string("expanse-daemon\0--role\0sampler\0", 30));
  host_.AddProcess(4242);
  ASSERT_TRUE(Install().ok());
  EXPECT_TRUE(Ran("systemctl disable --now expanse-sampler.service"));
  EXPECT_FALSE(host_.Stat(unit)) << "the bootstrap's unit is gone";
  EXPECT_TRUE(Ran("kill -15 4242"));
  EXPECT_TRUE(Said("stopping the sampler a Prolog started (pid 4242); the controller daemon"));
}

// --write-config-only with --type slurm: the credential, and no cluster runtime at all.
TEST_F(InstallFlowTest, WriteConfigOnlyWritesTheCredentialAndNothingElse) {
  install_.write_config_only = true;
  install_.daemon_binary.clear();
  const std::string conf_before = host_.Contents("/etc/slurm/slurm.conf").value_or("");
  ASSERT_TRUE(Install().ok());
  EXPECT_EQ(planes_.exchanges_, 1);
  const std::string config = host_.Contents("/var/lib/slurm/.expanse/config.json").value_or("");
  EXPECT_NE(config.find("exp_cc_secret"), std::string::npos) << config;
  EXPECT_FALSE(host_.Stat("/etc/systemd/system/expanse-daemon.service"));
  EXPECT_FALSE(host_.Stat("/srv/expanse/bin"));
  EXPECT_FALSE(host_.Stat("/srv/expanse/hooks"));
  EXPECT_FALSE(host_.Stat("/var/lib/expanse-install/controller.json"));
  EXPECT_EQ(host_.Contents("/etc/slurm/slurm.conf"), conf_before);
  EXPECT_FALSE(Ran("scontrol reconfigure"));
  EXPECT_FALSE(Ran("systemctl enable --now expanse-daemon.service"));
}

// --reconfigure=false: the hooks are wired but SLURM is left for the operator to reload, on
// install and on uninstall, and each says the command.
TEST_F(InstallFlowTest, ReconfigureFalsePrintsTheCommandInsteadOfRunningIt) {
  install_.reconfigure = false;
  ASSERT_TRUE(Install().ok());
  EXPECT_NE(host_.Contents("/etc/slurm/slurm.conf")->find("/srv/expanse/hooks/prolog"),
            std::string::npos);
  EXPECT_FALSE(Ran("scontrol reconfigure"));
  EXPECT_TRUE(Said("run `scontrol reconfigure` to make slurmctld and slurmd load the hooks"));
  UninstallOptions un;
  un.type = "slurm";
  un.slurm_conf = "/etc/slurm/slurm.conf";
  un.reconfigure = false;
  progress_.clear();
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_EQ(host_.Contents("/etc/slurm/slurm.conf"), kSlurmConf);
  EXPECT_FALSE(Ran("scontrol reconfigure"));
  EXPECT_TRUE(Said("run `scontrol reconfigure` so SLURM stops calling the removed hooks"));
}

// --config and --user other than the defaults: the credential is written there, owned by that
// account, the unit runs as it and names the file, and a later uninstall without the flags
// finds both through the install state.
TEST_F(InstallFlowTest, AnotherAccountAndConfigPathReachTheUnitAndTheUninstall) {
  constexpr uid_t kSvcUid = 990;
  host_.AddUser({"gpumon", kSvcUid, kSvcUid});
  install_.user = "gpumon";
  install_.config_path = "/etc/gpumon/expanse.json";
  ASSERT_TRUE(Install().ok());
  const std::optional<FileInfo> config = host_.Stat("/etc/gpumon/expanse.json");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->uid, kSvcUid);
  EXPECT_EQ(config->mode, 0600u);
  EXPECT_FALSE(host_.Stat("/var/lib/slurm/.expanse/config.json"));
  const std::string unit =
      host_.Contents("/etc/systemd/system/expanse-daemon.service").value_or("");
  EXPECT_NE(unit.find("User=gpumon\n"), std::string::npos) << unit;
  EXPECT_NE(unit.find("EXPANSE_DAEMON_CONFIG=/etc/gpumon/expanse.json"), std::string::npos) << unit;
  UninstallOptions un;
  un.type = "slurm";
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_FALSE(host_.Stat("/etc/gpumon/expanse.json"));
  EXPECT_EQ(planes_.deprovisioned_with_, "Bearer exp_cc_secret");
}

// --cupti-mode decides the counter capability the unit grants: CAP_PERFMON by default,
// CAP_SYS_ADMIN when asked for, neither with none (py-spy's CAP_SYS_PTRACE stays).
TEST_F(InstallFlowTest, CuptiModeDecidesTheUnitsCapability) {
  for (const auto& [mode, granted, not_granted] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"perfmon", "CAP_PERFMON", "CAP_SYS_ADMIN"},
           {"sysadmin", "CAP_SYS_ADMIN", "CAP_PERFMON"},
           {"none", "CAP_SYS_PTRACE", "CAP_PERFMON"}}) {
    install_.cupti_mode = mode;
    install_.reinstall = mode != "perfmon";
    ASSERT_TRUE(RunInstall(install_, paths_,
                           install_.reinstall ? std::nullopt : std::optional(SecretString(kToken)),
                           Collect())
                    .ok())
        << mode;
    const std::string unit =
        host_.Contents("/etc/systemd/system/expanse-daemon.service").value_or("");
    EXPECT_NE(unit.find(granted), std::string::npos) << mode << ":\n" << unit;
    EXPECT_EQ(unit.find(not_granted), std::string::npos) << mode << ":\n" << unit;
    if (mode == "none") {
      EXPECT_EQ(unit.find("CAP_SYS_ADMIN"), std::string::npos) << unit;
    }
  }
}

// The installer's own proxy and CA settings become the daemon's (daemon.env), since a service
// never sees the shell's exports.
TEST_F(InstallFlowTest, TheInstallersNetworkSettingsAreSeededIntoDaemonEnv) {
  host_.SetEnv("HTTPS_PROXY", "http://proxy.site:3128");
  host_.SetEnv("NO_PROXY", "localhost,.site");
  // Read for real by the installer's own HTTP client, so a real file.
  host_.SetEnv("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt");
  const Status s = Install();
  ASSERT_TRUE(s.ok()) << s;
  const std::string env = host_.Contents("/etc/expanse/daemon.env").value_or("");
  EXPECT_NE(env.find("HTTPS_PROXY=http://proxy.site:3128\n"), std::string::npos) << env;
  EXPECT_NE(env.find("NO_PROXY=localhost,.site\n"), std::string::npos) << env;
  EXPECT_NE(env.find("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt\n"), std::string::npos)
      << env;
  const std::optional<FileInfo> info = host_.Stat("/etc/expanse/daemon.env");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->mode & 0007, 0u) << "not world-readable: a proxy URL may carry a password";
}

TEST_F(InstallFlowTest, PreflightListsEveryProblemBeforeAnythingChanges) {
  ASSERT_TRUE(host_.RemoveTree("/run/systemd/system").ok());
  install_.user = "nobody-here";
  const std::string before = host_.Snapshot();
  const Status s = Install();
  EXPECT_EQ(s.reason(), "preflight_failed") << s;
  EXPECT_NE(s.message().find("nobody-here"), std::string::npos) << s;
  EXPECT_NE(s.message().find("systemd is not running"), std::string::npos) << s;
  EXPECT_EQ(host_.Snapshot(), before);
  EXPECT_EQ(planes_.exchanges_, 0);
}

TEST_F(InstallFlowTest, UninstallTakesBackWhatTheInstallDidAndDeprovisions) {
  const std::string conf_before = host_.Contents("/etc/slurm/slurm.conf").value_or("");
  ASSERT_TRUE(Install().ok());
  host_.Put("/var/lib/expanse/outbox/segment-000001", "queued for compute c-17");  // the daemon's
  host_.Put("/var/lib/expanse/sacct-covered-to", "1800000000000\n");
  UninstallOptions un;
  un.type = "slurm";
  un.slurm_conf = "/etc/slurm/slurm.conf";
  const Status s = RunUninstall(un, paths_, Collect());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(host_.Contents("/etc/slurm/slurm.conf"), conf_before);
  EXPECT_FALSE(host_.Stat("/var/lib/slurm/.expanse/config.json"));
  EXPECT_FALSE(host_.Stat("/etc/systemd/system/expanse-daemon.service"));
  EXPECT_FALSE(host_.Stat("/srv/expanse/bin/expanse-daemon"));
  EXPECT_FALSE(host_.Stat("/srv/expanse/hooks/prolog"));
  EXPECT_EQ(planes_.deprovisioned_with_, "Bearer exp_cc_secret");
  EXPECT_FALSE(host_.Stat("/var/lib/expanse/outbox")) << "what was queued for the old compute";
  EXPECT_FALSE(host_.Stat("/var/lib/expanse/sacct-covered-to")) << "the old compute's sacct mark";
  EXPECT_TRUE(Ran("systemctl disable --now expanse-daemon.service"));
  // Again: nothing left to do, and saying so is a success.
  progress_.clear();
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_TRUE(Said("nothing to uninstall"));
}

// The nodes' CUPTI builds a reinstall into the same prefix keeps (jobs have their agent loaded)
// stay this install's: recorded again even when the new release brings no CUPTI archives, so
// the uninstall still removes them.
TEST_F(InstallFlowTest, AReinstallKeepsTheNodesBuildsAndTheUninstallStillRemovesThem) {
  ASSERT_TRUE(Install().ok());
  const std::string nodes = "/srv/expanse/lib/cupti-nodes";
  const std::string state_path = StatePath(paths_.state_dir, "controller");
  Result<InstallState> state = ParseInstallState(host_.Contents(state_path).value_or(""));
  ASSERT_TRUE(state.ok()) << state.status();
  state->trees.push_back(nodes);  // as an install of a release with CUPTI archives records it
  host_.Put(state_path, RenderInstallState(*state), 0600);
  host_.Put(nodes + "/w1/lib/libexpanse-agent.so", "in use on w1");
  install_.reinstall = true;
  ASSERT_TRUE(RunInstall(install_, paths_, std::nullopt, Collect()).ok());
  EXPECT_EQ(host_.Contents(nodes + "/w1/lib/libexpanse-agent.so"), "in use on w1");
  Result<InstallState> after = ParseInstallState(host_.Contents(state_path).value_or(""));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(std::find(after->trees.begin(), after->trees.end(), nodes), after->trees.end());
  UninstallOptions un;
  un.type = "slurm";
  un.slurm_conf = "/etc/slurm/slurm.conf";
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_FALSE(host_.Stat(nodes + "/w1/lib/libexpanse-agent.so"));
}

TEST_F(InstallFlowTest, UninstallRefusesFlagsThatNameAnotherInstall) {
  ASSERT_TRUE(Install().ok());
  const std::string installed = host_.Snapshot();
  UninstallOptions un;
  un.type = "slurm";
  un.shared_prefix = "/srv/other";
  Status s = RunUninstall(un, paths_, Collect());
  EXPECT_EQ(s.reason(), "flag_mismatch") << s;
  EXPECT_NE(s.message().find("(/srv/expanse)"), std::string::npos) << s;
  un.shared_prefix = "/srv/expanse";
  un.user = "root";
  s = RunUninstall(un, paths_, Collect());
  EXPECT_EQ(s.reason(), "flag_mismatch") << s;
  EXPECT_EQ(host_.Snapshot(), installed) << "nothing was removed";
  un.user = "slurm";
  EXPECT_TRUE(RunUninstall(un, paths_, Collect()).ok());
}

// When the site keeps its hooks in a file slurm.conf includes, that file is the one edited,
// and the progress line says so.
TEST_F(InstallFlowTest, HooksInAnIncludedFileAreWiredThereAndNamed) {
  host_.Put("/etc/slurm/slurm.conf", "ClusterName=c\nSlurmctldHost=ctl\nInclude hooks.conf\n");
  host_.Put("/etc/slurm/hooks.conf", "Prolog=/etc/slurm/site-prolog\n");
  const Status s = Install();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_NE(host_.Contents("/etc/slurm/hooks.conf")->find("/srv/expanse/hooks/prolog"),
            std::string::npos);
  bool named = false;
  for (const std::string& line : progress_)
    named |= line.starts_with("wiring ") && line.find("/etc/slurm/hooks.conf") != std::string::npos;
  EXPECT_TRUE(named) << "the edited file is named";
}

class SamplerFlowTest : public InstallFlowTest {
 protected:
  void SetUp() override {
    InstallFlowTest::SetUp();
    // What the controller's install left on the shared mount.
    host_.Put("/srv/expanse/bin/expanse-daemon", "ELF", 0755);
    host_.Put("/srv/expanse/.expanse-preflight-sentinel",
              R"({"format":1,"user":"slurm","uid":64030,"gid":64030,"controller":"ctl"})", 0644,
              kSlurmUid, kSlurmUid);
    install_.role = "sampler";
    install_.control_plane.clear();
    install_.data_plane.clear();
    install_.daemon_binary.clear();
    install_.slurm_conf.clear();
    install_.patch_slurm_conf = false;
    install_.hostname = "gpu-1";
  }
  Status InstallSampler() { return RunInstall(install_, paths_, std::nullopt, Collect()); }
};

TEST_F(SamplerFlowTest, AWorkerGetsItsServiceAndEveryFailureRollsBack) {
  const std::string before = host_.Snapshot();
  int points = 0;
  for (int n = 0; n < 100; ++n) {
    paths_.faults.fail_after_changes = n;
    const Status s = InstallSampler();
    if (s.ok())
      break;
    ++points;
    ASSERT_EQ(s.reason(), "injected_failure") << "at change " << n + 1 << ": " << s;
    ASSERT_EQ(host_.Snapshot(), before) << "after a failure at change " << n + 1;
  }
  EXPECT_GT(points, 5);
  EXPECT_TRUE(host_.Stat("/etc/systemd/system/expanse-sampler.service"));
  EXPECT_TRUE(Ran("systemctl enable --now expanse-sampler.service"));
}

TEST_F(SamplerFlowTest, ASamplerAPrologStartedIsStoppedForTheService) {
  host_.Put("/var/lib/expanse/sampler/sampler.pid", "4242\n");
  host_.Put("/proc/4242/cmdline", std::string("expanse-daemon\0--role\0sampler\0", 30));
  host_.AddProcess(4242);
  ASSERT_TRUE(InstallSampler().ok());
  EXPECT_TRUE(Ran("kill -15 4242"));
}

// The default flow: no `--role sampler` install ever ran on the worker, a job's Prolog installed
// the shared unit (or started the sampler directly). The worker's uninstall still stops it.
TEST_F(SamplerFlowTest, UninstallStopsTheSamplerAPrologStarted) {
  UninstallOptions un;
  un.type = "slurm";
  un.role = "sampler";
  un.shared_prefix = "/srv/expanse";
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_TRUE(Said("nothing to uninstall")) << "a worker that never sampled";

  const std::string unit = "/etc/systemd/system/expanse-sampler.service";
  UnitOptions sampler;  // what the bootstrap copies from <prefix>/lib/systemd/
  sampler.role = UnitRole::kSampler;
  sampler.daemon_binary = "/srv/expanse/bin/expanse-daemon";
  sampler.shared_prefix = "/srv/expanse";
  host_.Put(unit, RenderUnit(sampler).value(), 0644);
  progress_.clear();
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_TRUE(Ran("systemctl disable --now expanse-sampler.service"));
  EXPECT_TRUE(Ran("systemctl daemon-reload"));
  EXPECT_FALSE(host_.Stat(unit)) << "the bootstrap's copy of the unit";
  EXPECT_FALSE(Said("nothing to uninstall"));
  EXPECT_TRUE(Said("the next job on this host starts a sampler again"));

  // Without systemd the Prolog ran the sampler itself.
  ASSERT_TRUE(host_.RemoveTree("/run/systemd/system").ok());
  host_.Put("/var/lib/expanse/sampler/sampler.pid", "4242\n");
  host_.Put("/proc/4242/cmdline", std::string("expanse-daemon\0--role\0sampler\0", 30));
  host_.AddProcess(4242);
  progress_.clear();
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_TRUE(Ran("kill -15 4242"));
  EXPECT_TRUE(Said("stopping the sampler a Prolog started (pid 4242); uninstalling"));

  // An operator's own unit under that name is neither stopped nor removed: without an install
  // state its name does not make it ours.
  host_.Put(unit, "[Unit]\nDescription=the site's own\n", 0644);
  ASSERT_TRUE(host_.MakeDirectories("/run/systemd/system", 0755).ok());
  ASSERT_TRUE(host_.RemoveFile("/proc/4242/cmdline").ok());  // that sampler has exited
  progress_.clear();
  host_.ClearCommands();
  ASSERT_TRUE(RunUninstall(un, paths_, Collect()).ok());
  EXPECT_EQ(host_.Contents(unit), "[Unit]\nDescription=the site's own\n");
  EXPECT_TRUE(Said("is not ours (no expanse header); left alone"));
  EXPECT_FALSE(Ran("systemctl disable --now expanse-sampler.service"));
  EXPECT_TRUE(Said("nothing to uninstall"));
}

TEST_F(SamplerFlowTest, AMismatchedAccountAcrossTheMountIsRefused) {
  host_.AddUser({"slurm", 1000, 1000});  // this worker's slurm is another uid
  const std::string before = host_.Snapshot();
  const Status s = InstallSampler();
  EXPECT_EQ(s.reason(), "preflight_failed") << s;
  EXPECT_NE(s.message().find("UID/GID mismatch"), std::string::npos) << s;
  EXPECT_EQ(host_.Snapshot(), before);
}

}  // namespace
}  // namespace install_flow_test
}  // namespace expanse::install
