#include "install/systemd_unit.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/path_rules.h"
#include "core/quote.h"

namespace expanse::install {
namespace {

// The header's first line; ManagedUnitFormat() reads the number after it.
constexpr std::string_view kManagedPrefix = "# Managed by `expanse compute install` (unit format ";

// UT_NAMESIZE less one, the limit systemd applies to user names.
constexpr std::size_t kMaxUserNameBytes = 31;

Status BadOption(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("invalid_unit_option");
}

// The shared path rule, with this module's reason.
Status CheckUnitPath(std::string_view field, std::string_view path) {
  Status status = CheckAbsolutePath(field, path);
  return status.ok() ? status : std::move(status).WithReason("invalid_unit_option");
}

// Characters that mean nothing to systemd's word splitting, specifier (%) and variable ($)
// expansion or C unescaping, so a word made only of them can be written bare.
bool IsBareSafe(std::string_view word) {
  if (word.empty())
    return false;
  for (char c : word) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("/_.:,@+=-").find(c) != std::string_view::npos;
    if (!safe)
      return false;
  }
  return true;
}

// Inside double quotes systemd C-unescapes (so \ and " need a backslash) and expands
// specifiers (so % is doubled); ExecStart= arguments also expand $VAR, so $ is doubled there.
// Callers have already refused control characters. Reference: systemd.service(5) "Command
// lines" and systemd.unit(5) "Specifiers" (systemd 252).
std::string QuoteForUnit(std::string_view value, bool escape_dollar) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '%') {
      out += "%%";
    } else if (c == '$' && escape_dollar) {
      out += "$$";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string ExecArgument(std::string_view word) {
  return IsBareSafe(word) ? std::string(word) : QuoteForUnit(word, /*escape_dollar=*/true);
}

// One Environment= line; systemd does not expand $ there.
std::string EnvironmentLine(std::string_view key, std::string_view value) {
  const std::string assignment = fmt::format("{}={}", key, value);
  return "Environment=" +
         (IsBareSafe(assignment) ? assignment : QuoteForUnit(assignment, /*escape_dollar=*/false)) +
         "\n";
}

// "/a//b/" -> "/a/b", for comparing paths by component.
std::string NormalizeSlashes(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/')
      continue;
    out += c;
  }
  while (out.size() > 1 && out.back() == '/')
    out.pop_back();
  return out;
}

bool IsSameOrBelow(std::string_view path, std::string_view directory) {
  const std::string p = NormalizeSlashes(path);
  const std::string d = NormalizeSlashes(directory);
  if (d == "/")
    return true;
  return p == d || (p.size() > d.size() && p.starts_with(d) && p[d.size()] == '/');
}

std::string_view CapabilityFor(CuptiMode mode) {
  switch (mode) {
    case CuptiMode::kPerfmon:
      return "CAP_PERFMON";
    case CuptiMode::kSysadmin:
      return "CAP_SYS_ADMIN";
    case CuptiMode::kNone:
      break;
  }
  return "";
}

Status CheckOptions(const UnitOptions& o) {
  EXPANSE_RETURN_IF_ERROR(CheckUnitPath("daemon binary", o.daemon_binary));
  // systemd expands $VAR in arguments but not in the executable's path, so "$$" cannot stand
  // for "$" there; no real install path needs one.
  if (o.daemon_binary.find('$') != std::string::npos) {
    return BadOption("daemon binary " + QuoteForMessage(o.daemon_binary) +
                     " contains '$', which a systemd unit cannot express in ExecStart's program");
  }
  EXPANSE_RETURN_IF_ERROR(CheckUserName("--user", o.user));
  if (o.role == UnitRole::kSampler && o.shared_prefix.empty()) {
    return BadOption(
        "--shared-prefix is required for the sampler unit: the worker spool lives there");
  }
  if (!o.shared_prefix.empty()) {
    EXPANSE_RETURN_IF_ERROR(CheckUnitPath("--shared-prefix", o.shared_prefix));
  }
  if (!o.slurm_conf.empty())
    EXPANSE_RETURN_IF_ERROR(CheckUnitPath("--slurm-conf", o.slurm_conf));
  if (o.role == UnitRole::kController) {
    if (o.config_path.empty())
      return BadOption("--config is required for the controller unit (EXPANSE_DAEMON_CONFIG)");
    EXPANSE_RETURN_IF_ERROR(CheckUnitPath("--config", o.config_path));
    if (!o.shared_prefix.empty() && IsSameOrBelow(o.config_path, o.shared_prefix)) {
      return BadOption("--config " + QuoteForMessage(o.config_path) +
                       " lies on the shared prefix " + QuoteForMessage(o.shared_prefix) +
                       ", which every worker can read; keep the credential on the controller's "
                       "local disk");
    }
  } else if (!o.config_path.empty()) {
    return BadOption("--config applies to the controller only; a sampler holds no credential");
  }
  EXPANSE_RETURN_IF_ERROR(CheckUnitPath("env file", o.env_file));
  // EnvironmentFile= takes the rest of the line as the path, without unquoting.
  if (!IsBareSafe(o.env_file)) {
    return BadOption("env file " + QuoteForMessage(o.env_file) +
                     " must consist of letters, digits and / _ . : , @ + = -");
  }
  if (o.restart_delay.count() < 1 || o.restart_delay.count() > 3600) {
    return BadOption(
        fmt::format("restart delay {}s is outside 1s..3600s", o.restart_delay.count()));
  }
  return OkStatus();
}

}  // namespace

Result<UnitRole> ParseUnitRole(std::string_view text) {
  if (text == "controller")
    return UnitRole::kController;
  if (text == "sampler")
    return UnitRole::kSampler;
  return InvalidArgumentError("--role " + QuoteForMessage(text) +
                              ": expected controller or sampler")
      .WithReason("invalid_role");
}

Result<CuptiMode> ParseCuptiMode(std::string_view text) {
  if (text == "perfmon")
    return CuptiMode::kPerfmon;
  if (text == "sysadmin")
    return CuptiMode::kSysadmin;
  if (text == "none")
    return CuptiMode::kNone;
  return InvalidArgumentError("--cupti-mode " + QuoteForMessage(text) +
                              ": expected perfmon, sysadmin or none")
      .WithReason("invalid_cupti_mode");
}

std::string_view UnitName(UnitRole role) {
  return role == UnitRole::kController ? kControllerUnitName : kSamplerUnitName;
}

Status CheckUserName(std::string_view field, std::string_view user) {
  const std::string shown = std::string(field) + " " + QuoteForMessage(user);
  if (user.empty())
    return BadOption(std::string(field) + " is empty: expected an account name such as slurm");
  if (user.size() > kMaxUserNameBytes)
    return BadOption(shown + fmt::format(" is longer than {} characters", kMaxUserNameBytes));
  for (std::size_t i = 0; i < user.size(); ++i) {
    const char c = user[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool later = (c >= '0' && c <= '9') || c == '-';
    if (!letter && !(i > 0 && later)) {
      return BadOption(shown +
                       " is not a valid user name: expected a letter or '_' followed by letters, "
                       "digits, '_' or '-'");
    }
  }
  return OkStatus();
}

Result<std::string> RenderUnit(const UnitOptions& options) {
  EXPANSE_RETURN_IF_ERROR(CheckOptions(options));
  const bool controller = options.role == UnitRole::kController;
  const std::string_view unit_name = UnitName(options.role);
  const std::string_view service = unit_name.substr(0, unit_name.find('.'));

  std::string out;
  out += fmt::format("{}{}).\n", kManagedPrefix, kUnitFormatVersion);
  out += fmt::format(
      "# Reinstall replaces this file and uninstall removes it. Put local changes in a drop-in\n"
      "# (systemctl edit {}) and runtime settings in {}.\n",
      service, options.env_file);
  out += "[Unit]\n";
  out += controller
             ? "Description=Expanse controller daemon (SLURM jobs, GPU telemetry, uploads)\n"
             : "Description=Expanse sampler (this worker's GPUs and jobs, via the shared spool)\n";
  // Only the controller talks to the planes. Both roles use the shared prefix, which is often
  // a network filesystem.
  if (controller) {
    out += "Wants=network-online.target\n";
    out += "After=network-online.target remote-fs.target\n";
  } else {
    out += "After=remote-fs.target\n";
  }

  out += "\n[Service]\n";
  out += "Type=simple\n";
  out += "User=" + options.user + "\n";
  std::vector<std::string> argv = {options.daemon_binary, "--role",
                                   controller ? "controller" : "sampler"};
  if (!options.shared_prefix.empty()) {
    argv.insert(argv.end(), {"--shared-prefix", options.shared_prefix});
  }
  if (options.env_file != kDaemonEnvPath)
    argv.insert(argv.end(), {"--env-file", options.env_file});
  out += "ExecStart=";
  for (std::size_t i = 0; i < argv.size(); ++i) {
    out += (i == 0 ? "" : " ") + ExecArgument(argv[i]);
  }
  out += "\n";
  if (controller)
    out += EnvironmentLine("EXPANSE_DAEMON_CONFIG", options.config_path);
  if (controller && !options.slurm_conf.empty())
    out += EnvironmentLine("SLURM_CONF", options.slurm_conf);
  // The node's own CUPTI helper, named so `systemctl cat` shows which one runs: %l is the
  // short host name, the <host> of lib/cupti-nodes/<host>/ (the unit is shared by workers).
  // daemon.env, read after, may point elsewhere. A prefix that needs quoting is left to the
  // daemon's discovery, which finds the same path.
  if (!options.shared_prefix.empty() && IsBareSafe(options.shared_prefix)) {
    out += "Environment=EXPANSE_CUPTI_HELPER=" + NormalizeSlashes(options.shared_prefix) +
           "/lib/cupti-nodes/%l/bin/expanse-cupti-helper\n";
  }
  // Recorded here so the opt-out survives a restart; daemon.env, read after, can override it.
  if (!options.profiling_agent)
    out += EnvironmentLine("EXPANSE_PROFILING_AGENT_ENABLE", "0");
  // '-': the file is optional; the installer creates it, but a missing one must not stop us.
  out += fmt::format("EnvironmentFile=-{}\n", options.env_file);
  // CAP_SYS_PTRACE lets py-spy read Python stacks of other users' jobs. Listed in both sets:
  // the bounding set limits what the service may ever hold, the ambient set grants it to a
  // non-root User= and to the helpers it runs (py-spy, the CUPTI helper).
  std::string capabilities(CapabilityFor(options.cupti_mode));
  capabilities += capabilities.empty() ? "CAP_SYS_PTRACE" : " CAP_SYS_PTRACE";
  out += "CapabilityBoundingSet=" + capabilities + "\n";
  out += "AmbientCapabilities=" + capabilities + "\n";
  out += "NoNewPrivileges=yes\n";
  // A clean exit (status 0, e.g. a revoked credential) is final; a crash is retried.
  out += "Restart=on-failure\n";
  out += fmt::format("RestartSec={}s\n", options.restart_delay.count());

  out += "\n[Install]\n";
  out += "WantedBy=multi-user.target\n";
  return out;
}

std::optional<int> ManagedUnitFormat(std::string_view unit_text) {
  if (!unit_text.starts_with(kManagedPrefix))
    return std::nullopt;
  std::string_view rest = unit_text.substr(kManagedPrefix.size());
  int version = 0;
  std::size_t digits = 0;
  while (digits < rest.size() && digits < 6 && rest[digits] >= '0' && rest[digits] <= '9') {
    version = version * 10 + (rest[digits] - '0');
    ++digits;
  }
  if (digits == 0 || !rest.substr(digits).starts_with(")."))
    return std::nullopt;
  return version;
}

}  // namespace expanse::install
