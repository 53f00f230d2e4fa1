#include "install/slurm_wiring.h"

#include <set>

#include "slurm/hook_script.h"
#include "slurm/hook_wiring.h"
#include "slurm/slurm_conf.h"

namespace expanse::install {
namespace {

// A wrapper written by any earlier install, wherever it lives.
std::optional<slurm::ManagedHookScript> ReadManagedScript(Host& host, const std::string& path) {
  Result<std::optional<std::string>> text = host.ReadFile(path, 1 << 20);
  if (!text.ok() || !*text)
    return std::nullopt;
  return slurm::ParseManagedHookScript(**text);
}

// The site hook our wrapper must run: the one SLURM runs today, or — when that is already one
// of our wrappers (a reinstall) — the one that wrapper chains.
std::string SiteHookToChain(Host& host, const slurm::HookPlan& hook) {
  if (!hook.site)
    return "";
  if (!hook.site->is_expanse_wrapper)
    return hook.site->value;
  std::optional<slurm::ManagedHookScript> old = ReadManagedScript(host, hook.site->value);
  return old ? old->site_hook : "";
}

}  // namespace

Result<WiringPlan> PlanWiring(Host& host, const std::string& slurm_conf_flag,
                              const HookWrapperPaths& hooks) {
  std::optional<std::string> flag;
  if (!slurm_conf_flag.empty())
    flag = slurm_conf_flag;
  EXPANSE_ASSIGN_OR_RETURN(std::string path, slurm::DiscoverSlurmConf(flag, host));
  EXPANSE_ASSIGN_OR_RETURN(slurm::SlurmConf conf, slurm::ReadSlurmConf(host, path));
  slurm::HookTargets targets;
  targets.prolog = hooks.prolog;
  targets.epilog = hooks.epilog;
  targets.taskprolog = hooks.taskprolog.empty() ? hooks.prolog + "-task" : hooks.taskprolog;
  targets.taskprolog_enabled = !hooks.taskprolog.empty();
  targets.is_expanse_wrapper = [&host](const std::string& p) {
    return ReadManagedScript(host, p).has_value();
  };
  EXPANSE_ASSIGN_OR_RETURN(slurm::HookWiringPlan plan, slurm::PlanHookWiring(conf, targets));
  WiringPlan out;
  out.slurm_conf = path;
  for (const slurm::FileEdit& e : plan.edits)
    out.edits.push_back(WholeFileEdit{e.path, e.before, e.after});
  out.description = slurm::DescribePlan(plan);
  out.manual_instructions = slurm::ManualInstructions(plan);
  for (const slurm::HookPlan& h : plan.hooks) {
    for (const std::string& w : h.warnings)
      out.warnings.push_back(w);
    const std::string site = SiteHookToChain(host, h);
    switch (h.kind) {
      case slurm::HookKind::kProlog:
        out.site_prolog = site;
        break;
      case slurm::HookKind::kEpilog:
        out.site_epilog = site;
        break;
      case slurm::HookKind::kTaskProlog:
        out.site_taskprolog = site;
        break;
    }
  }
  return out;
}

Result<std::vector<WholeFileEdit>> PlanUnwiring(Host& host, const std::vector<std::string>& files,
                                                const std::string& slurm_conf) {
  std::set<std::string> candidates(files.begin(), files.end());
  if (!slurm_conf.empty()) {
    Result<slurm::SlurmConf> conf = slurm::ReadSlurmConf(host, slurm_conf);
    if (conf.ok()) {
      for (const slurm::SlurmConfFile& f : conf->files())
        candidates.insert(f.path);
    }
  }
  std::vector<WholeFileEdit> edits;
  for (const std::string& path : candidates) {
    EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text,
                             host.ReadFile(path, slurm::kMaxSlurmConfFileBytes));
    if (!text || !slurm::HasHookWiring(*text))
      continue;
    EXPANSE_ASSIGN_OR_RETURN(std::string restored, slurm::UnwireHooks(*text));
    edits.push_back(WholeFileEdit{path, *text, std::move(restored)});
  }
  return edits;
}

Result<std::string> RenderHookWrapper(const HookScriptSpec& spec) {
  slurm::HookScriptOptions options;
  options.kind = spec.kind == "prolog"   ? slurm::HookKind::kProlog
                 : spec.kind == "epilog" ? slurm::HookKind::kEpilog
                                         : slurm::HookKind::kTaskProlog;
  options.daemon_path = spec.daemon_path;
  options.shared_prefix = spec.shared_prefix;
  options.user = spec.user;
  options.sampler_bootstrap = spec.sampler_bootstrap == "prolog";
  options.inject_node_agent = spec.inject_node_agent;
  options.extra_daemon_args = spec.extra_args;
  options.site_hook = spec.site_hook;
  // TaskProlog has no SLURM time limit at all and delays every task; keep it short.
  options.time_limit = options.kind == slurm::HookKind::kTaskProlog ? std::chrono::seconds(3)
                                                                    : std::chrono::seconds(10);
  return slurm::RenderHookScript(options);
}

}  // namespace expanse::install
