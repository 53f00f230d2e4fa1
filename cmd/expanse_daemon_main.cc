// expanse-daemon: the node daemon (--role controller|sampler), the SLURM hook entry points and
// the GPU diagnostics. Everything lives in src/agent; see daemon_cli.cc for the commands.
#include "agent/daemon_cli.h"

int main(int argc, char** argv) { return expanse::agent::RunDaemonCli(argc, argv); }
