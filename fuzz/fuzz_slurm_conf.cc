// libFuzzer target for slurm.conf reading and hook wiring (src/slurm/slurm_conf.h,
// src/slurm/hook_wiring.h).
//
// The input is up to eight files separated by 0x01 bytes: /etc/slurm/slurm.conf, then
// /etc/slurm/f1.conf ... /etc/slurm/f7.conf (reachable through "Include f1.conf"). Beyond "no
// crash, no sanitizer report" it checks, aborting when one fails:
//  1. MatchKeyValue agrees with glibc regexec(3) on SLURM's own keyvalue_pattern for every
//     logical line.
//  2. No parsed value holds a newline; the effective assignment is the last one.
//  3. For files without Expanse markers: wiring then UnwireHooks gives every file back byte for
//     byte, unwiring twice changes nothing more, the wired files parse, SLURM would run our
//     wrappers, and planning again changes nothing.

#include <regex.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "slurm/hook_wiring.h"
#include "slurm/slurm_conf.h"
#include "slurm/slurm_conf_syntax.h"

namespace {

using Files = std::map<std::string, std::string>;

constexpr char kMain[] = "/etc/slurm/slurm.conf";
constexpr std::size_t kMaxRegexLine = 4096;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_slurm_conf: property violated: %s\n", what);
    std::abort();
  }
}

const regex_t& SlurmKeyValuePattern() {
  static const regex_t* pattern = [] {
    auto* compiled = new regex_t;
    const int error = regcomp(compiled,
                              "^[[:space:]]*([[:alnum:]_.]+)[[:space:]]*([-*+/]?)=[[:space:]]*"
                              "((\"([^\"]*)\")|([^[:space:]]+))([[:space:]]|$)",
                              REG_EXTENDED);
    Require(error == 0, "regcomp");
    return compiled;
  }();
  return *pattern;
}

void CheckKeyValueMatchesSlurm(const std::string& text) {
  if (text.size() > kMaxRegexLine || text.find('\0') != std::string::npos)
    return;
  regmatch_t groups[8];
  const bool matched = regexec(&SlurmKeyValuePattern(), text.c_str(), 8, groups, 0) == 0;
  const std::optional<expanse::slurm::conf_syntax::KeyValue> ours =
      expanse::slurm::conf_syntax::MatchKeyValue(text);
  Require(matched == ours.has_value(), "key=value match differs from regexec");
  if (!matched)
    return;
  const auto group = [&](int i) {
    return text.substr(groups[i].rm_so, groups[i].rm_eo - groups[i].rm_so);
  };
  const std::string value = groups[5].rm_so != -1 ? group(5) : group(6);
  Require(ours->key == group(1), "key differs from regexec");
  Require(ours->value == value, "value differs from regexec");
  Require(ours->rest == text.substr(groups[3].rm_eo), "rest differs from regexec");
}

Files SplitFiles(std::string_view input) {
  Files files;
  for (int index = 0; index < 8; ++index) {
    const std::size_t separator = input.find('\x01');
    const std::string name = index == 0 ? kMain : "/etc/slurm/f" + std::to_string(index) + ".conf";
    files[name] = std::string(input.substr(0, separator));
    if (separator == std::string_view::npos)
      break;
    input.remove_prefix(separator + 1);
  }
  return files;
}

expanse::Result<expanse::slurm::SlurmConf> Parse(const Files& files) {
  return expanse::slurm::ParseSlurmConf(
      kMain,
      [&files](const std::string& path,
               std::size_t max_bytes) -> expanse::Result<std::optional<std::string>> {
        const auto found = files.find(path);
        if (found == files.end())
          return std::optional<std::string>();
        if (found->second.size() > max_bytes)
          return expanse::ResourceExhaustedError(path + ": too large");
        return std::optional<std::string>(found->second);
      });
}

expanse::slurm::HookTargets Targets(bool taskprolog) {
  expanse::slurm::HookTargets targets;
  targets.prolog = "/srv/expanse/libexec/expanse-prolog";
  targets.epilog = "/srv/expanse/libexec/expanse-epilog";
  targets.taskprolog = "/srv/expanse/libexec/expanse-taskprolog";
  targets.taskprolog_enabled = taskprolog;
  return targets;
}

void CheckWiringRoundTrip(const Files& files, const expanse::slurm::SlurmConf& conf,
                          bool taskprolog) {
  using expanse::slurm::HookAction;
  const expanse::slurm::HookTargets targets = Targets(taskprolog);
  const expanse::Result<expanse::slurm::HookWiringPlan> plan =
      expanse::slurm::PlanHookWiring(conf, targets);
  if (!plan.ok())
    return;
  (void)expanse::slurm::DescribePlan(*plan);
  (void)expanse::slurm::ManualInstructions(*plan);
  bool pristine = true;
  for (const auto& [path, contents] : files)
    pristine = pristine && !expanse::slurm::HasHookWiring(contents);

  Files wired = files;
  for (const expanse::slurm::FileEdit& edit : plan->edits) {
    Require(wired[edit.path] == edit.before, "edit does not start from the file");
    wired[edit.path] = edit.after;
    const expanse::Result<std::string> restored = expanse::slurm::UnwireHooks(edit.after);
    Require(restored.ok(), "our own wiring cannot be unwired");
    if (pristine) {
      Require(*restored == edit.before, "unwiring does not restore the original bytes");
      Require(*expanse::slurm::UnwireHooks(*restored) == *restored, "unwiring is not idempotent");
    }
  }
  if (!pristine)
    return;
  const expanse::Result<expanse::slurm::SlurmConf> rewired = Parse(wired);
  Require(rewired.ok(), "wired files do not parse");
  for (const expanse::slurm::HookPlan& hook : plan->hooks) {
    if (hook.action == HookAction::kWire || hook.action == HookAction::kAlreadyWired) {
      Require(rewired->EffectiveValue(expanse::slurm::HookKey(hook.kind)) == hook.target,
              "SLURM would not run our wrapper");
    }
  }
  const expanse::Result<expanse::slurm::HookWiringPlan> again =
      expanse::slurm::PlanHookWiring(*rewired, targets);
  Require(again.ok(), "planning a wired file fails");
  Require(again->edits.empty(), "planning a wired file changes it again");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Files files = SplitFiles(std::string_view(reinterpret_cast<const char*>(data), size));
  for (const auto& [path, contents] : files) {
    for (const auto& line : expanse::slurm::conf_syntax::SplitLogicalLines(contents))
      CheckKeyValueMatchesSlurm(line.text);
    (void)expanse::slurm::UnwireHooks(contents);
  }
  const expanse::Result<expanse::slurm::SlurmConf> conf = Parse(files);
  if (!conf.ok())
    return 0;
  for (const expanse::slurm::SlurmConfAssignment& assignment : conf->assignments()) {
    Require(assignment.value.find('\n') == std::string::npos, "newline in a value");
    Require(conf->EffectiveAssignment(assignment.key)->value ==
                conf->AssignmentsOf(assignment.key).back()->value,
            "effective assignment is not the last");
  }
  CheckWiringRoundTrip(files, *conf, true);
  CheckWiringRoundTrip(files, *conf, false);
  return 0;
}
