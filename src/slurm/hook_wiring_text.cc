// The words of hook_wiring.h: DescribePlan and ManualInstructions.
#include <string>

#include "core/quote.h"
#include "slurm/hook_wiring.h"

namespace expanse::slurm {
namespace {

std::string Quote(const std::string& text) { return QuoteForMessage(text, 200); }

std::string Where(const SiteHook& site) { return site.path + ":" + std::to_string(site.line); }

std::string DescribeHook(const HookWiringPlan& plan, const HookPlan& hook) {
  const std::string key(HookKey(hook.kind));
  std::string line = key + ": ";
  const std::optional<SiteHook>& site = hook.site;
  switch (hook.action) {
    case HookAction::kWire:
      if (!site.has_value()) {
        line += "not set; " + key + "=" + hook.target + " is added to the end of " + plan.main_path;
      } else if (site->is_expanse_wrapper) {
        line += "the Expanse wrapper " + Quote(site->value) + " at " + Where(*site) +
                " is replaced by " + hook.target + ", which keeps chaining the same site hook";
      } else {
        line += "the site's " + Quote(site->value) + " (" + Where(*site) + ") runs first, then " +
                "Expanse; that line becomes " + key + "=" + hook.target;
      }
      break;
    case HookAction::kAlreadyWired:
      line += "already runs " + hook.target;
      if (site.has_value() && site->is_expanse_wrapper)
        line += " (set at " + Where(*site) + ")";
      else if (site.has_value())
        line += ", chaining the site's " + Quote(site->value);
      break;
    case HookAction::kRetarget:
      line += "the Expanse wiring in " + (site.has_value() ? site->path : plan.main_path) +
              " now names " + hook.target;
      break;
    case HookAction::kUnwire:
      line += "profiling agent off: the Expanse wiring is removed";
      if (site.has_value())
        line += " and " + key + "=" + Quote(site->value) + " restored";
      break;
    case HookAction::kNotWired:
      line += "left as it is (profiling agent off)";
      break;
  }
  return line + "\n";
}

}  // namespace

std::string DescribePlan(const HookWiringPlan& plan) {
  std::string text;
  for (const HookPlan& hook : plan.hooks)
    text += DescribeHook(plan, hook);
  for (const HookPlan& hook : plan.hooks) {
    for (const std::string& warning : hook.warnings)
      text += "warning: " + warning + "\n";
  }
  if (plan.edits.empty()) {
    text += "No SLURM file changes.\n";
  } else {
    for (const FileEdit& edit : plan.edits)
      text += "changes " + edit.path + "\n";
  }
  return text;
}

std::string ManualInstructions(const HookWiringPlan& plan) {
  std::string steps;
  for (const HookPlan& hook : plan.hooks) {
    const std::string key(HookKey(hook.kind));
    const std::optional<SiteHook>& site = hook.site;
    switch (hook.action) {
      case HookAction::kWire:
        if (site.has_value()) {
          steps += "# " + site->path + " line " + std::to_string(site->line) + ": replace " +
                   Quote(key + "=" + site->value) + " with\n";
        } else {
          steps += "# " + plan.main_path + ": add\n";
        }
        steps += key + "=" + hook.target + "\n";
        break;
      case HookAction::kRetarget:
        steps += "# " + (site.has_value() ? site->path : plan.main_path) + ": set\n";
        steps += key + "=" + hook.target + "\n";
        break;
      case HookAction::kUnwire:
        if (site.has_value()) {
          steps +=
              "# " + site->path + ": set " + key + " back to\n" + key + "=" + site->value + "\n";
        } else {
          steps += "# " + plan.main_path + ": remove the " + key + "= line Expanse added\n";
        }
        break;
      case HookAction::kAlreadyWired:
      case HookAction::kNotWired:
        break;
    }
  }
  if (steps.empty())
    return "# SLURM already runs the Expanse hooks; nothing to add to slurm.conf.\n";
  return "# slurm.conf was not changed (--patch-slurm-conf=false). Make these changes, by hand or\n"
         "# through your configuration management, on every host that reads slurm.conf, then\n"
         "# run: scontrol reconfigure\n" +
         steps;
}

}  // namespace expanse::slurm
