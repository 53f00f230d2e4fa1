#include "slurm/hook_wiring.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "core/quote.h"
#include "slurm/hook_wiring_block.h"
#include "slurm/slurm_conf_syntax.h"

namespace expanse::slurm {
namespace {

using wiring_block::Block;
using Replacement = wiring_block::Splice;

Status TargetError(HookKind kind, const std::string& target, const std::string& what) {
  return InvalidArgumentError(std::string(HookKey(kind)) + " wrapper path " +
                              QuoteForMessage(target, 200) + " " + what)
      .WithReason("hook_target_invalid");
}

// The value goes into slurm.conf unquoted, so it must be one word SLURM reads back unchanged.
Status CheckTarget(HookKind kind, const std::string& target) {
  if (!target.starts_with('/'))
    return TargetError(kind, target, "is not an absolute path");
  for (const char c : target) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F || c == ' ' || c == '#' || c == '"' || c == '\\')
      return TargetError(kind, target, "holds a character slurm.conf cannot carry unquoted");
  }
  return OkStatus();
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; };
    return lower(x) == lower(y);
  });
}

std::string Where(const std::string& path, int line) { return path + ":" + std::to_string(line); }

// "\r\n" when the line starting at `offset` ends so, else "\n": our lines follow the file's.
std::string LineEndingAt(std::string_view contents, std::size_t offset) {
  const std::size_t newline = contents.find('\n', offset);
  return newline != std::string_view::npos && newline > offset && contents[newline - 1] == '\r'
             ? "\r\n"
             : "\n";
}

class Planner {
 public:
  Planner(const SlurmConf& conf, const HookTargets& targets) : conf_(conf), targets_(targets) {}

  Status FindAllBlocks();
  Result<HookPlan> PlanHook(HookKind kind);
  Result<std::vector<FileEdit>> Edits() const;

 private:
  const std::string& TargetOf(HookKind kind) const;
  bool IsOurs(const std::string& value) const;
  const Block* BlockHolding(const SlurmConfAssignment& assignment) const;
  std::optional<SiteHook> SiteFromBlock(const Block& block, const std::string& path) const;
  void Warn(HookPlan& plan, const std::vector<const SlurmConfAssignment*>& all) const;

  const SlurmConf& conf_;
  const HookTargets& targets_;
  std::map<std::string, std::vector<Block>> blocks_;  // per file path
  std::map<std::string, std::vector<Replacement>> replacements_;
  std::vector<std::pair<std::string, std::string>> appends_;  // key, target for the main file
};

Status Planner::FindAllBlocks() {
  for (const SlurmConfFile& file : conf_.files()) {
    Result<std::vector<Block>> blocks = wiring_block::FindBlocks(file.contents);
    if (!blocks.ok()) {
      return Status(blocks.status().code(), file.path + ": " + blocks.status().message())
          .WithReason(blocks.status().reason());
    }
    blocks_[file.path] = std::move(*blocks);
  }
  return OkStatus();
}

const std::string& Planner::TargetOf(HookKind kind) const {
  switch (kind) {
    case HookKind::kProlog:
      return targets_.prolog;
    case HookKind::kEpilog:
      return targets_.epilog;
    case HookKind::kTaskProlog:
      break;
  }
  return targets_.taskprolog;
}

bool Planner::IsOurs(const std::string& value) const {
  if (value.empty())
    return false;
  if (value == targets_.prolog || value == targets_.epilog || value == targets_.taskprolog)
    return true;
  return targets_.is_expanse_wrapper && targets_.is_expanse_wrapper(value);
}

const Block* Planner::BlockHolding(const SlurmConfAssignment& assignment) const {
  const auto file = blocks_.find(assignment.path);
  if (file == blocks_.end())
    return nullptr;
  for (const Block& block : file->second) {
    if (block.assignment_begin == assignment.begin && block.assignment_end == assignment.end)
      return &block;
  }
  return nullptr;
}

std::optional<SiteHook> Planner::SiteFromBlock(const Block& block, const std::string& path) const {
  for (const auto& line : conf_syntax::SplitLogicalLines(block.OriginalText())) {
    if (conf_syntax::IsBlank(line.text))
      continue;
    const std::optional<conf_syntax::KeyValue> match = conf_syntax::MatchKeyValue(line.text);
    if (!match.has_value() || match->value.empty())
      return std::nullopt;
    return SiteHook{match->value, path, block.begin_line, IsOurs(match->value)};
  }
  return std::nullopt;
}

void Planner::Warn(HookPlan& plan, const std::vector<const SlurmConfAssignment*>& all) const {
  if (all.empty())
    return;
  const SlurmConfAssignment& effective = *all.back();
  const std::string wins = Where(effective.path, effective.line);
  for (std::size_t i = 0; i + 1 < all.size(); ++i) {
    const SlurmConfAssignment& earlier = *all[i];
    const std::string where = Where(earlier.path, earlier.line);
    if (BlockHolding(earlier) != nullptr) {
      plan.warnings.push_back("an earlier Expanse wiring of " + std::string(HookKey(plan.kind)) +
                              " at " + where + " is overridden by the assignment at " + wins);
    } else {
      plan.warnings.push_back(earlier.key + "=" + QuoteForMessage(earlier.value, 200) + " at " +
                              where + " is ignored by SLURM: the last assignment, at " + wins +
                              ", wins");
    }
  }
}

Result<HookPlan> Planner::PlanHook(HookKind kind) {
  HookPlan plan;
  plan.kind = kind;
  const std::string key(HookKey(kind));
  const bool enabled = kind != HookKind::kTaskProlog || targets_.taskprolog_enabled;
  const std::vector<const SlurmConfAssignment*> all = conf_.AssignmentsOf(key);
  const SlurmConfAssignment* effective = all.empty() ? nullptr : all.back();
  const Block* block = effective == nullptr ? nullptr : BlockHolding(*effective);
  Warn(plan, all);

  if (block != nullptr) {
    if (!EqualsIgnoreCase(block->key, key)) {
      return InvalidArgumentError(Where(effective->path, effective->line) + ": " + key +
                                  " assigned inside the Expanse wiring block of " +
                                  QuoteForMessage(block->key) + "; restore the file by hand")
          .WithReason("slurm_conf_wiring_damaged");
    }
    plan.site = SiteFromBlock(*block, effective->path);
    if (!enabled) {
      plan.action = HookAction::kUnwire;
      const std::vector<Block>& blocks = blocks_.at(effective->path);
      replacements_[effective->path].push_back(
          wiring_block::RestoreOne(conf_.FindFile(effective->path)->contents, blocks,
                                   static_cast<std::size_t>(block - blocks.data())));
      return plan;
    }
    plan.target = TargetOf(kind);
    if (effective->value == plan.target) {
      plan.action = HookAction::kAlreadyWired;
      return plan;
    }
    plan.action = HookAction::kRetarget;
    std::string line = key + "=" + plan.target;
    if (block->assignment.ends_with('\r'))
      line += '\r';
    if (block->assignment_end > block->assignment_begin + block->assignment.size())
      line += '\n';
    replacements_[effective->path].push_back(
        {block->assignment_begin, block->assignment_end, std::move(line)});
    return plan;
  }

  if (effective != nullptr) {
    if (!effective->rest.empty()) {
      return InvalidArgumentError(Where(effective->path, effective->line) + ": text after the " +
                                  key + " value: " + QuoteForMessage(effective->rest) +
                                  "; SLURM refuses such a line, so it cannot be in use")
          .WithReason("slurm_conf_hook_line");
    }
    if (!effective->value.empty()) {
      plan.site =
          SiteHook{effective->value, effective->path, effective->line, IsOurs(effective->value)};
    }
    if (kind == HookKind::kTaskProlog &&
        effective->value.find_first_of("*?[") != std::string::npos) {
      plan.warnings.push_back("TaskProlog " + QuoteForMessage(effective->value, 200) +
                              " looks like a glob, but SLURM runs TaskProlog as one literal path");
    }
  }
  if (!enabled) {
    plan.action = HookAction::kNotWired;
    if (plan.site.has_value() && plan.site->is_expanse_wrapper) {
      plan.warnings.push_back(key + " at " + Where(plan.site->path, plan.site->line) +
                              " still names the Expanse wrapper " + plan.site->value +
                              ", set by hand: keep that script or remove the line");
    }
    return plan;
  }
  plan.target = TargetOf(kind);
  if (effective != nullptr && effective->value == plan.target) {
    plan.action = HookAction::kAlreadyWired;  // wired by hand, as ManualInstructions says
    return plan;
  }
  plan.action = HookAction::kWire;
  if (effective == nullptr) {
    appends_.emplace_back(key, plan.target);
    return plan;
  }
  const std::string_view contents = conf_.FindFile(effective->path)->contents;
  const std::string_view original =
      contents.substr(effective->begin, effective->end - effective->begin);
  replacements_[effective->path].push_back(
      {effective->begin, effective->end,
       wiring_block::RenderReplacement(key, plan.target, original,
                                       LineEndingAt(contents, effective->begin))});
  return plan;
}

Result<std::vector<FileEdit>> Planner::Edits() const {
  std::vector<FileEdit> edits;
  for (const SlurmConfFile& file : conf_.files()) {
    const auto found = replacements_.find(file.path);
    const bool appends_here = file.path == conf_.main_path() && !appends_.empty();
    if (found == replacements_.end() && !appends_here)
      continue;
    std::string after = file.contents;
    if (found != replacements_.end()) {
      std::vector<Replacement> ordered = found->second;
      // From the end backwards, so earlier offsets stay valid.
      std::sort(ordered.begin(), ordered.end(),
                [](const Replacement& a, const Replacement& b) { return a.begin > b.begin; });
      for (std::size_t i = 0; i < ordered.size(); ++i) {
        if (i > 0 && ordered[i].end > ordered[i - 1].begin) {
          return InternalError(file.path + ": overlapping hook wiring edits; edit it by hand")
              .WithReason("slurm_conf_wiring_damaged");
        }
        after.replace(ordered[i].begin, ordered[i].end - ordered[i].begin, ordered[i].text);
      }
    }
    if (appends_here) {
      const std::string eol = LineEndingAt(file.contents, 0);
      for (const auto& [key, target] : appends_)
        after += wiring_block::RenderAppended(key, target, after, eol);
    }
    if (after != file.contents)
      edits.push_back({file.path, file.contents, std::move(after)});
  }
  return edits;
}

}  // namespace

Result<HookWiringPlan> PlanHookWiring(const SlurmConf& conf, const HookTargets& targets) {
  EXPANSE_RETURN_IF_ERROR(CheckTarget(HookKind::kProlog, targets.prolog));
  EXPANSE_RETURN_IF_ERROR(CheckTarget(HookKind::kEpilog, targets.epilog));
  if (targets.taskprolog_enabled)
    EXPANSE_RETURN_IF_ERROR(CheckTarget(HookKind::kTaskProlog, targets.taskprolog));
  Planner planner(conf, targets);
  EXPANSE_RETURN_IF_ERROR(planner.FindAllBlocks());
  HookWiringPlan plan;
  plan.main_path = conf.main_path();
  for (const HookKind kind : kAllHookKinds) {
    EXPANSE_ASSIGN_OR_RETURN(HookPlan hook, planner.PlanHook(kind));
    plan.hooks.push_back(std::move(hook));
  }
  EXPANSE_ASSIGN_OR_RETURN(plan.edits, planner.Edits());
  return plan;
}

Result<std::string> UnwireHooks(std::string_view contents) {
  return wiring_block::Restore(contents, [](const Block&) { return true; });
}

bool HasHookWiring(std::string_view contents) {
  const std::string_view prefix = wiring_block::kPrefix;
  return contents.starts_with(prefix) ||
         contents.find("\n" + std::string(prefix)) != std::string_view::npos;
}

}  // namespace expanse::slurm
