// expanse-daemon's command line: the roles (--role controller|sampler), the SLURM hook entry
// points and the diagnostics commands. cmd/expanse_daemon_main.cc only calls RunDaemonCli.
#ifndef EXPANSE_AGENT_DAEMON_CLI_H_
#define EXPANSE_AGENT_DAEMON_CLI_H_

namespace expanse::agent {

int RunDaemonCli(int argc, char** argv);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_DAEMON_CLI_H_
