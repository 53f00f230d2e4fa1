#include "daemon_flags.h"

#include <initializer_list>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_host.h"

namespace expanse::cmd {
namespace {

using Command = DaemonCommandLine::Command;
using std::chrono::milliseconds;

class DaemonFlagsTest : public ::testing::Test {
 protected:
  std::variant<DaemonCommandLine, ExitNow> Parse(std::initializer_list<std::string> args) {
    storage_.assign({"expanse-daemon"});
    storage_.insert(storage_.end(), args);
    argv_.clear();
    for (std::string& a : storage_)
      argv_.push_back(a.data());
    return ParseDaemonCommandLine(static_cast<int>(argv_.size()), argv_.data(), host_);
  }
  DaemonCommandLine Line(std::initializer_list<std::string> args) {
    auto parsed = Parse(args);
    EXPECT_TRUE(std::holds_alternative<DaemonCommandLine>(parsed));
    return std::holds_alternative<DaemonCommandLine>(parsed) ? std::get<DaemonCommandLine>(parsed)
                                                             : DaemonCommandLine{};
  }
  int ExitStatus(std::initializer_list<std::string> args) {
    auto parsed = Parse(args);
    EXPECT_TRUE(std::holds_alternative<ExitNow>(parsed));
    return std::holds_alternative<ExitNow>(parsed) ? std::get<ExitNow>(parsed).status : -1;
  }

  MemoryHost host_;
  std::vector<std::string> storage_;
  std::vector<char*> argv_;
};

TEST_F(DaemonFlagsTest, RoleWithDefaults) {
  const DaemonCommandLine line = Line({"--role", "controller"});
  EXPECT_EQ(line.command, Command::kRole);
  EXPECT_EQ(line.node.role, "controller");
  EXPECT_EQ(line.node.config_path, "/var/lib/slurm/.expanse/config.json");
  EXPECT_EQ(line.node.env_file, "/etc/expanse/daemon.env");
  EXPECT_EQ(line.node.state_dir, "/var/lib/expanse");
  EXPECT_EQ(line.node.events_dir, "/var/lib/expanse/events");
  EXPECT_EQ(line.node.control_dir, "/var/lib/expanse/control");
  EXPECT_EQ(line.node.interval, milliseconds(1000));
  EXPECT_EQ(line.node.slow_interval, milliseconds(10000));
  EXPECT_EQ(line.node.flush_interval, milliseconds(10000));
  EXPECT_EQ(line.node.heartbeat_interval, milliseconds(30000));
  EXPECT_EQ(line.node.hostname, "");  // the main fills in the host name
}

TEST_F(DaemonFlagsTest, DurationsAreConverted) {
  const DaemonCommandLine line = Line({"--role", "sampler", "--interval", "250ms",
                                       "--flush-interval", "1m", "--shared-prefix", "/srv/x"});
  EXPECT_EQ(line.node.interval, milliseconds(250));
  EXPECT_EQ(line.node.flush_interval, milliseconds(60000));
  EXPECT_EQ(line.node.shared_prefix, "/srv/x");
}

TEST_F(DaemonFlagsTest, ConfigDefaultsToTheEnvironmentAndTheFlagWins) {
  host_.SetEnv("EXPANSE_DAEMON_CONFIG", "/etc/expanse/other.json");
  EXPECT_EQ(Line({"--role", "controller"}).node.config_path, "/etc/expanse/other.json");
  EXPECT_EQ(Line({"--role", "controller", "--config", "/x.json"}).node.config_path, "/x.json");
  host_.SetEnv("EXPANSE_DAEMON_CONFIG", "");
  EXPECT_EQ(Line({"--role", "controller"}).node.config_path, "/var/lib/slurm/.expanse/config.json");
}

TEST_F(DaemonFlagsTest, BadFlagsExitNonZeroButNeverForAHook) {
  EXPECT_NE(ExitStatus({"--role", "controller", "--interval", "0s"}), 0);
  EXPECT_NE(ExitStatus({"--role", "controller", "--interval", "soon"}), 0);
  EXPECT_NE(ExitStatus({"--role", "gardener"}), 0);
  EXPECT_NE(ExitStatus({"--no-such-flag"}), 0);
  EXPECT_EQ(ExitStatus({"hook", "prolog", "--no-such-flag"}), 0);
  EXPECT_EQ(ExitStatus({"hook", "dinner"}), 0);
  EXPECT_EQ(ExitStatus({"--version"}), 0);
}

TEST_F(DaemonFlagsTest, Hook) {
  DaemonCommandLine line = Line({"hook", "prolog", "--sampler-bootstrap", "prolog", "--timeout",
                                 "3s", "--shared-prefix", "/srv/x", "--user", "expanse"});
  EXPECT_EQ(line.command, Command::kHook);
  EXPECT_EQ(line.hook.kind, "prolog");
  EXPECT_TRUE(line.hook.sampler_bootstrap);
  EXPECT_EQ(line.hook.timeout, milliseconds(3000));
  EXPECT_EQ(line.node.shared_prefix, "/srv/x");
  EXPECT_EQ(line.node.user, "expanse");

  line = Line({"hook", "taskprolog", "--timeout", "whenever"});
  EXPECT_FALSE(line.hook.sampler_bootstrap);
  EXPECT_FALSE(line.hook.timeout.has_value());  // the kind's default
  // The role's durations are checked only for a role.
  EXPECT_EQ(Line({"hook", "epilog", "--interval", "soon"}).command, Command::kHook);
}

TEST_F(DaemonFlagsTest, DoctorTakesTheNodeFlagsAndItsOwn) {
  const DaemonCommandLine line =
      Line({"doctor", "--host", "w1", "--json", "--shared-prefix", "/srv/expanse", "--config",
            "/etc/cfg.json", "--user", "expanse", "--slurm-conf", "/etc/slurm/slurm.conf",
            "--no-planes"});
  EXPECT_EQ(line.command, Command::kDoctor);
  EXPECT_EQ(line.doctor.gather.target, "w1");
  EXPECT_TRUE(line.doctor.json);
  EXPECT_FALSE(line.doctor.probe_planes);
  EXPECT_EQ(line.doctor.gather.shared_prefix, "/srv/expanse");
  EXPECT_EQ(line.doctor.gather.config_path, "/etc/cfg.json");
  EXPECT_EQ(line.doctor.gather.user, "expanse");
  EXPECT_EQ(line.doctor.gather.slurm_conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(line.doctor.gather.state_dir, "/var/lib/expanse");
  EXPECT_EQ(line.doctor.env_file, "/etc/expanse/daemon.env");
  EXPECT_TRUE(Line({"doctor"}).doctor.probe_planes);
}

TEST_F(DaemonFlagsTest, DoctorUsageErrorsExitTwo) {
  EXPECT_EQ(ExitStatus({"doctor", "--no-such-flag"}), 2);
  EXPECT_EQ(ExitStatus({"doctor", "--host"}), 2);
  EXPECT_EQ(ExitStatus({"doctor", "--help"}), 0);
}

TEST_F(DaemonFlagsTest, Commands) {
  EXPECT_EQ(Line({}).command, Command::kNone);
  EXPECT_EQ(Line({"diagnostics"}).command, Command::kDiagnostics);
  DaemonCommandLine line = Line({"gpus", "--json", "--repeat", "3", "--backend", "nvidia-smi"});
  EXPECT_EQ(line.command, Command::kGpus);
  EXPECT_TRUE(line.gpus_json);
  EXPECT_EQ(line.gpus_repeat, 3);
  EXPECT_EQ(line.gpus_backend.kind, "nvidia-smi");
  line = Line({"sample", "--duration", "5s"});
  EXPECT_EQ(line.command, Command::kSample);
  EXPECT_EQ(line.sample.duration, milliseconds(5000));
  line = Line({"pystack", "--pid", "42", "--backend", "py-spy"});
  EXPECT_EQ(line.command, Command::kPystack);
  EXPECT_EQ(line.pystack.pid, 42);
  EXPECT_EQ(line.pystack.backend, "py-spy");
  // A subcommand wins over --role.
  EXPECT_EQ(Line({"--role", "controller", "diagnostics"}).command, Command::kDiagnostics);
}

}  // namespace
}  // namespace expanse::cmd
