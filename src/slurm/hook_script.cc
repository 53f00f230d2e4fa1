#include "slurm/hook_script.h"

#include <charconv>
#include <string>

#include "core/quote.h"
#include "core/shell_quote.h"

namespace expanse::slurm {
namespace {

constexpr std::string_view kKindField = "# expanse-hook-kind:";
constexpr std::string_view kSiteField = "# expanse-site-hook:";
constexpr std::string_view kFormatField = "(hook-script format ";

Status ScriptError(const std::string& what) {
  return InvalidArgumentError("hook script: " + what).WithReason("hook_script_invalid");
}

bool HasNul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

bool HasControlCharacter(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F)
      return true;
  }
  return false;
}

Status Validate(const HookScriptOptions& options) {
  if (!options.daemon_path.starts_with('/')) {
    return ScriptError("daemon path " + QuoteForMessage(options.daemon_path, 200) +
                       " is not absolute");
  }
  if (options.time_limit < std::chrono::seconds(1))
    return ScriptError("time limit must be at least 1 second");
  if (HasControlCharacter(options.site_hook)) {
    return ScriptError("site hook " + QuoteForMessage(options.site_hook, 200) +
                       " holds a control character");
  }
  bool nul = HasNul(options.daemon_path) || HasNul(options.shared_prefix) || HasNul(options.user) ||
             HasNul(options.agent_library);
  for (const std::string& arg : options.extra_daemon_args)
    nul = nul || HasNul(arg);
  if (nul)
    return ScriptError("a daemon argument holds a NUL byte");
  return OkStatus();
}

std::vector<std::string> DaemonArgs(const HookScriptOptions& options) {
  std::vector<std::string> args = {"hook", std::string(HookName(options.kind))};
  if (!options.shared_prefix.empty())
    args.insert(args.end(), {"--shared-prefix", options.shared_prefix});
  if (!options.user.empty())
    args.insert(args.end(), {"--user", options.user});
  if (options.kind == HookKind::kProlog) {
    args.insert(args.end(), {"--sampler-bootstrap", options.sampler_bootstrap ? "prolog" : "off"});
  }
  if (options.kind == HookKind::kTaskProlog && !options.agent_library.empty())
    args.insert(args.end(), {"--agent-library", options.agent_library});
  if (options.kind == HookKind::kTaskProlog && options.inject_node_agent)
    args.emplace_back("--inject-agent");
  args.insert(args.end(), options.extra_daemon_args.begin(), options.extra_daemon_args.end());
  return args;
}

std::string Header(const HookScriptOptions& options) {
  const std::string name(HookName(options.kind));
  const std::string key(HookKey(options.kind));
  std::string text = "#!/bin/bash\n";
  text += "# Expanse SLURM " + key + " wrapper, " + std::string(kHookScriptMarker) + " " +
          std::string(kFormatField) + std::to_string(kHookScriptFormatVersion) + ").\n";
  text += std::string(kKindField) + " " + name + "\n";
  text += std::string(kSiteField) + (options.site_hook.empty() ? "" : " " + options.site_hook);
  text += "\n#\n";
  text +=
      "# `expanse compute install` writes this file and `expanse compute uninstall` removes it;\n"
      "# edits are lost at the next install. It runs the site's " +
      key +
      " named above exactly as SLURM\n"
      "# would, then Expanse's hook under a time limit, and exits with the site's status.\n\n";
  return text;
}

std::string Variables(const HookScriptOptions& options) {
  std::string text = "site_hook=" + ShellQuote(options.site_hook) + "\n";
  text += "daemon=" + ShellQuote(options.daemon_path) + "\n";
  text += "daemon_args=(";
  bool first = true;
  for (const std::string& arg : DaemonArgs(options)) {
    text += (first ? "" : " ") + ShellQuote(arg);
    first = false;
  }
  text += ")\n";
  text += "time_limit=" + std::to_string(options.time_limit.count()) + "\n\n";
  return text;
}

// slurmd and slurmstepd start a hook through run_command() (src/common/run_command.c).
std::string RunOneFunction(std::string_view name) {
  return R"(# As SLURM's run_command(): only an absolute path the caller may read and execute runs, with no
# arguments; anything else fails with status 127.
run_one() {
  if [[ $1 != /* || ! -r $1 || ! -x $1 ]]; then
    printf 'expanse )" +
         std::string(name) + R"( wrapper: cannot execute %s\n' "$1" >&2
    return 127
  fi
  "$1"
}

)";
}

// slurmd 22.05's Prolog and Epilog (src/plugins/prep/script/prep_script_slurmd.c).
std::string RunSiteGlobFunction(std::string_view name) {
  return R"(# As slurmd: glob(3) the value (C locale, so byte order; the whole value is one pattern), run
# the matches in REVERSE order (they are pushed onto a list) and stop at the first failure. No
# match at all fails the hook, as SLURM fails it.
run_site_hooks() {
  local -a paths=()
  local path i status
  while IFS= read -r -d '' path; do
    paths+=("$path")
  done < <(
    LC_ALL=C
    shopt -s nullglob
    IFS=
    for path in $site_hook; do
      if [[ -e $path || -L $path ]]; then printf '%s\0' "$path"; fi
    done
  )
  if ((${#paths[@]} == 0)); then
    printf 'expanse )" +
         std::string(name) + R"( wrapper: no file matches %s\n' "$site_hook" >&2
    return 1
  fi
  for ((i = ${#paths[@]} - 1; i >= 0; i--)); do
    run_one "${paths[i]}"
    status=$?
    if ((status != 0)); then
      return "$status"
    fi
  done
  return 0
}

)";
}

constexpr std::string_view kRunExpanseHookFunction =
    R"(# Expanse's hook, bounded by timeout(1); it never changes the exit status. A missing or
# non-executable daemon (shared mount down, uninstall under way) is skipped silently: timeout's
# complaint goes to the caller's stderr redirection.
run_expanse_hook() {
  local timeout_bin
  for timeout_bin in /usr/bin/timeout /bin/timeout; do
    if [[ -x $timeout_bin ]]; then
      "$timeout_bin" -k 1 "$time_limit" "$daemon" "${daemon_args[@]}"
      return 0
    fi
  done
  # Without timeout(1) the daemon's own deadline bounds it.
  if [[ -f $daemon && -x $daemon ]]; then
    "$daemon" "${daemon_args[@]}"
  fi
  return 0
}

)";

constexpr std::string_view kPrologMain = R"(site_status=0
if [[ -n $site_hook ]]; then
  run_site_hooks
  site_status=$?
fi
run_expanse_hook </dev/null >/dev/null 2>&1 || true
exit "$site_status"
)";

// (Delimited: the script holds `)"`.)
constexpr std::string_view kTaskPrologMain =
    R"sh(# slurmstepd runs TaskProlog as one literal path, never a glob (src/slurmd/slurmstepd/task.c).
site_status=0
site_out=
if [[ -n $site_hook ]]; then
  site_out="$(run_one "$site_hook")"
  site_status=$?
  if [[ -n $site_out ]]; then
    printf '%s\n' "$site_out"
  fi
fi
# Our export lines come after the site's output, and slurmstepd applies the last line for a
# name: a site TaskProlog that injects its own tool (CUDA_INJECTION64_PATH) keeps it, so ours
# does not run. A failed TaskProlog ends the task, so then there is nothing to add either.
# (As slurmstepd reads the line: blanks after `export` and before `=` are allowed.)
site_injects=$'(^|\n)export[ \t]+CUDA_INJECTION64_PATH[ \t]*='
if ((site_status == 0)) && ! [[ $site_out =~ $site_injects ]]; then
  run_expanse_hook </dev/null 2>/dev/null || true
fi
exit "$site_status"
)sh";

std::optional<int> ParseVersion(std::string_view line) {
  const std::size_t at = line.find(kFormatField);
  if (at == std::string_view::npos)
    return std::nullopt;
  line.remove_prefix(at + kFormatField.size());
  int version = 0;
  const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), version);
  if (error != std::errc() || end == line.data() || end == line.data() + line.size() || *end != ')')
    return std::nullopt;
  return version;
}

std::optional<std::string_view> Field(std::string_view line, std::string_view name) {
  if (!line.starts_with(name))
    return std::nullopt;
  line.remove_prefix(name.size());
  if (line.starts_with(' '))
    line.remove_prefix(1);
  return line;
}

}  // namespace

Result<std::string> RenderHookScript(const HookScriptOptions& options) {
  EXPANSE_RETURN_IF_ERROR(Validate(options));
  const std::string_view name = HookName(options.kind);
  std::string script = Header(options) + Variables(options) + RunOneFunction(name);
  if (options.kind == HookKind::kTaskProlog) {
    script += std::string(kRunExpanseHookFunction) + std::string(kTaskPrologMain);
  } else {
    script +=
        RunSiteGlobFunction(name) + std::string(kRunExpanseHookFunction) + std::string(kPrologMain);
  }
  return script;
}

std::optional<ManagedHookScript> ParseManagedHookScript(std::string_view contents) {
  std::vector<std::string_view> lines;
  while (lines.size() < 4 && !contents.empty()) {
    const std::size_t newline = contents.find('\n');
    lines.push_back(contents.substr(0, newline));
    contents = newline == std::string_view::npos ? "" : contents.substr(newline + 1);
  }
  if (lines.size() < 4 || !lines[0].starts_with("#!") ||
      lines[1].find(kHookScriptMarker) == std::string_view::npos) {
    return std::nullopt;
  }
  const std::optional<int> version = ParseVersion(lines[1]);
  const std::optional<std::string_view> kind = Field(lines[2], kKindField);
  const std::optional<std::string_view> site = Field(lines[3], kSiteField);
  if (!version.has_value() || !kind.has_value() || !site.has_value())
    return std::nullopt;
  return ManagedHookScript{*version, std::string(*kind), std::string(*site)};
}

}  // namespace expanse::slurm
