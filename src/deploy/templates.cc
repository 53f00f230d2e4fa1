#include "deploy/templates.h"

#include <cctype>
#include <regex>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/path_rules.h"
#include "core/quote.h"
#include "core/shell_quote.h"
#include "core/version_compare.h"
#include "deploy/plane_url.h"

namespace expanse::deploy {
namespace {

constexpr std::size_t kMaxVersionBytes = 64;

// @NAME@ placeholders are replaced with shell-quoted values; see Fill().
constexpr std::string_view kInstallScript = R"SCRIPT(#!/usr/bin/env bash
# Installs the Expanse controller daemon on this host, which must be the SLURM controller (the
# host that runs slurmctld). Made by the Expanse console for one compute, for a fresh
# registration; an existing compute is upgraded with `expanse compute install --reinstall`.
#
# The script holds no credential. Run it as yourself (it calls sudo):  bash install-expanse.sh
# It asks for the install token without echoing it. When its standard input is not a terminal
# it reads the token from the first line of that input instead, without a prompt. The token
# reaches the installer through sudo's environment, never as a command-line argument, which any
# user of this host could read in ps or /proc. HTTPS_PROXY, NO_PROXY and SSL_CERT_FILE from your
# environment are passed on as well: the installer records them for the service.
set +x  # a trace would print the token
set -euo pipefail

daemon_version=@DAEMON_VERSION@
shared_prefix=@SHARED_PREFIX@
control_plane=@CONTROL_PLANE_URL@
data_plane=@DATA_PLANE_URL@
# An existing account with the same UID and GID on every node.
daemon_user=slurm

if ! expanse_cli=$(command -v expanse); then
  echo 'install-expanse.sh: the expanse CLI is not on PATH; install it first' >&2
  exit 1
fi

install_token=
trap 'unset install_token EXPANSE_INSTALL_TOKEN' EXIT
if [[ -t 0 ]]; then
  read -r -s -p 'Expanse install token (typing is hidden): ' install_token || true
  echo >&2
else
  read -r install_token || true
fi
if [[ -z $install_token ]]; then
  echo 'install-expanse.sh: no install token given; generate one in the console (Add compute)' >&2
  exit 1
fi

EXPANSE_INSTALL_TOKEN=$install_token \
  sudo --preserve-env=EXPANSE_INSTALL_TOKEN,HTTPS_PROXY,https_proxy,NO_PROXY,no_proxy,SSL_CERT_FILE \
  "$expanse_cli" compute install \
  --type slurm \
  --role controller \
  --daemon-version "$daemon_version" \
  --shared-prefix "$shared_prefix" \
  --control-plane "$control_plane" \
  --data-plane "$data_plane" \
  --user "$daemon_user" \
  --patch-slurm-conf=true \
  --reconfigure=true \
  --systemd=true \
  --sampler-bootstrap prolog \
  --cupti-mode perfmon \
  --profiling-agent=true \
  --bundled-pyspy=true \
  --heartbeat-timeout 1m
)SCRIPT";

constexpr std::string_view kAssistantPrompt =
    R"PROMPT(You are helping a person install Expanse on their SLURM cluster. Expanse runs one daemon on
the SLURM controller (the host running slurmctld), which reports to the Expanse control and data
planes, and a sampler on each GPU worker, which hands its samples to the controller through a
shared directory. You have shell access to the controller and the workers. Work one step at a
time: say what you are about to run and why, run it, and read the output before going on. When
a step fails, stop and report the exact error instead of working around it. Do not edit SLURM
configuration, delete Expanse files or change the NVIDIA driver's settings by hand.

Values for this installation, already quoted for the shell:
  daemon version:  @DAEMON_VERSION@
  shared prefix:   @SHARED_PREFIX@   (must be the same shared mount on every node)
  control plane:   @CONTROL_PLANE_URL@
  data plane:      @DATA_PLANE_URL@

The install token
  The person has a short-lived install token from the Expanse console. It is a secret. Never ask
  for it, and never type, print, echo, log or store it: not in a command, a file, an environment
  file, your notes or this conversation. The person types it themselves into the hidden prompt
  of the install script in step 2. If the token ever appears in anything you can see, tell the
  person to generate a new one in the console, and do not use the one you saw.

Step 1. Check the controller
  - This host runs the SLURM controller:  systemctl is-active slurmctld  and  scontrol ping
  - The shared prefix is mounted from shared storage, not a local directory:
      findmnt -T @SHARED_PREFIX@
  - The Expanse CLI is installed:  command -v expanse  (if not, ask the person to install it as
    the console describes), and it knows the flags used below:  expanse compute install --help
  - Both planes answer over HTTPS (any HTTP status code proves reachability here):
      curl -sS -o /dev/null -w '%{http_code}\n' @CONTROL_PLANE_URL@
      curl -sS -o /dev/null -w '%{http_code}\n' @DATA_PLANE_URL@
  - The daemon account exists with the same UID and GID on every node:  id slurm
    If the site uses another account, change daemon_user in the script of step 2.
  - If the site needs an HTTPS proxy or a private CA, HTTPS_PROXY, NO_PROXY and SSL_CERT_FILE
    must be set in the shell where the person runs the script; the script passes them on.

Step 2. Install the controller daemon
  Save the script between the lines below as install-expanse.sh on the controller, unchanged,
  and check it with  bash -n install-expanse.sh . Then ask the person to run
      bash install-expanse.sh
  in their own terminal on the controller and to type the token at its hidden prompt. Do not
  run it yourself in a way that would need you to supply the token. Ask the person to share the
  installer's output (it never contains the token) and read it. The installer checks the release
  signature, preflights the host, installs the daemon, the SLURM hooks and the systemd unit, and
  waits for the first heartbeat; a failed fresh install undoes its own changes.
  If it reports an existing daemon config, stop: ask the person whether they want an upgrade,
  a replacement credential or a new registration, and do not delete files to get past it.
----- install-expanse.sh -----
@INSTALL_SCRIPT@----- end of install-expanse.sh -----

Step 3. Start samplers on static workers
  The SLURM Prolog the installer wired in starts or updates a worker's sampler when a job
  starts there, so workers need no action for that. Only workers that must report before their
  first job need an explicit install. On each such worker (never on the controller: its daemon
  already samples its own GPUs), with the Expanse CLI installed, run:
      sudo expanse compute install --type slurm --role sampler --shared-prefix @SHARED_PREFIX@
  No token is needed or used on workers.

Step 4. Verify
  On the controller:
      sudo systemctl status expanse-daemon --no-pager
      sudo journalctl -u expanse-daemon --since '10 minutes ago' --no-pager
      sudo systemctl show expanse-daemon -p User -p CapabilityBoundingSet -p AmbientCapabilities
  On each worker with a sampler:
      sudo systemctl status expanse-sampler --no-pager
      sudo journalctl -u expanse-sampler --since '10 minutes ago' --no-pager
      nvidia-smi --query-gpu=name,uuid,memory.total --format=csv
  On each worker, the controller's preflight sentinel must be visible, which shows that the
  worker sees the same shared directory (compare  findmnt -T @SHARED_PREFIX@  with the controller):
      test -f @SENTINEL_PATH@ && echo shared
  Diagnostics: find the daemon binary in  systemctl show -p ExecStart expanse-daemon  and run
      sudo -u slurm <that binary> diagnostics --shared-prefix @SHARED_PREFIX@
  It lists each collector (CUPTI, DCGM, Python stacks, profiling permissions) with its state or
  the reason it is off; those are optional and their absence does not block basic telemetry. Run
  it as the daemon account so that file permissions match the service's; the capabilities the
  service holds on top are the ones systemctl show listed above. Root sees more than the service.
  Ask the person to check in the console that the compute shows a fresh heartbeat and the
  expected nodes and GPUs, and to submit a small GPU job with sbatch and look for its metrics.
  An idle GPU showing zero utilisation is normal.

Finally, report what was installed on which host, the result of every check, and anything that
is degraded or still open.
)PROMPT";

Status BadValue(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("invalid_template_value");
}

Status CheckVersion(const std::string& version) {
  // The installer's own rule (core/version_compare.h), so a rendered script never carries a
  // version the CLI refuses.
  if (version.empty())
    return BadValue("--daemon-version is empty: expected a release such as 1.8.0");
  if (version.size() > kMaxVersionBytes || !CanonicalVersion(version)) {
    return BadValue("--daemon-version " + QuoteForMessage(version) +
                    " is not a release version such as 1.8.0 or v1.8.0-rc.1");
  }
  return OkStatus();
}

// Every placeholder is replaced once, in a single pass over the template, so a value that
// happens to contain "@NAME@" is never substituted again.
std::string Fill(std::string_view text,
                 const std::vector<std::pair<std::string_view, std::string>>& values) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    bool replaced = false;
    for (const auto& [name, value] : values) {
      if (text.substr(at).starts_with(name)) {
        out += value;
        at += name.size();
        replaced = true;
        break;
      }
    }
    if (!replaced)
      out += text[at++];
  }
  return out;
}

std::vector<std::pair<std::string_view, std::string>> QuotedValues(const TemplateValues& v) {
  std::string sentinel = v.shared_prefix;
  if (!sentinel.ends_with('/'))
    sentinel += '/';
  sentinel += kPreflightSentinelName;
  return {{"@DAEMON_VERSION@", ShellQuote(v.daemon_version)},
          {"@SHARED_PREFIX@", ShellQuote(v.shared_prefix)},
          {"@CONTROL_PLANE_URL@", ShellQuote(v.control_plane_url)},
          {"@DATA_PLANE_URL@", ShellQuote(v.data_plane_url)},
          {"@SENTINEL_PATH@", ShellQuote(sentinel)}};
}

}  // namespace

Status ValidateTemplateValues(const TemplateValues& values) {
  EXPANSE_RETURN_IF_ERROR(CheckVersion(values.daemon_version));
  if (Status prefix = CheckAbsolutePath("--shared-prefix", values.shared_prefix); !prefix.ok())
    return BadValue(prefix.message());
  for (const auto& [flag, url] : {std::pair{"--control-plane", &values.control_plane_url},
                                  std::pair{"--data-plane", &values.data_plane_url}}) {
    if (Status checked = CheckPlaneUrl(flag, *url); !checked.ok())
      return BadValue(checked.message());
  }
  return OkStatus();
}

Result<std::string> RenderInstallScript(const TemplateValues& values) {
  EXPANSE_RETURN_IF_ERROR(ValidateTemplateValues(values));
  return Fill(kInstallScript, QuotedValues(values));
}

Result<std::string> RenderAssistantPrompt(const TemplateValues& values) {
  EXPANSE_ASSIGN_OR_RETURN(std::string script, RenderInstallScript(values));
  std::vector<std::pair<std::string_view, std::string>> fills = QuotedValues(values);
  fills.emplace_back("@INSTALL_SCRIPT@", std::move(script));
  return Fill(kAssistantPrompt, fills);
}

}  // namespace expanse::deploy
