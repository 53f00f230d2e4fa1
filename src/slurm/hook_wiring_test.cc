#include "slurm/hook_wiring.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "slurm/slurm_conf_test_util.h"

namespace expanse::slurm {
namespace hook_wiring_test {
namespace {

using testing::ConfFiles;
using testing::ParseFiles;

constexpr char kMain[] = "/etc/slurm/slurm.conf";
constexpr char kProlog[] = "/srv/expanse/libexec/expanse-prolog";
constexpr char kEpilog[] = "/srv/expanse/libexec/expanse-epilog";
constexpr char kTaskProlog[] = "/srv/expanse/libexec/expanse-taskprolog";

HookTargets Targets(bool taskprolog = true) {
  HookTargets targets;
  targets.prolog = kProlog;
  targets.epilog = kEpilog;
  targets.taskprolog = kTaskProlog;
  targets.taskprolog_enabled = taskprolog;
  return targets;
}

Result<HookWiringPlan> Plan(const ConfFiles& files, const HookTargets& targets = Targets()) {
  EXPANSE_ASSIGN_OR_RETURN(const SlurmConf conf, ParseFiles(files));
  return PlanHookWiring(conf, targets);
}

// `files` with the plan's edits applied; each edit must start from the file as it is.
ConfFiles Apply(ConfFiles files, const HookWiringPlan& plan) {
  for (const FileEdit& edit : plan.edits) {
    EXPECT_EQ(files[edit.path], edit.before) << edit.path;
    files[edit.path] = edit.after;
  }
  return files;
}

// Wires `files`, checks that wiring again changes nothing and that unwiring every file gives the
// original bytes back (twice: it is idempotent), and returns the wired files.
ConfFiles WireAndCheckRoundTrip(const ConfFiles& files, const HookTargets& targets = Targets()) {
  const Result<HookWiringPlan> plan = Plan(files, targets);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok())
    return files;
  const ConfFiles wired = Apply(files, *plan);
  const Result<HookWiringPlan> again = Plan(wired, targets);
  EXPECT_TRUE(again.ok()) << again.status();
  if (again.ok()) {
    EXPECT_TRUE(again->edits.empty()) << DescribePlan(*again);
    for (const HookPlan& hook : again->hooks) {
      EXPECT_TRUE(hook.action == HookAction::kAlreadyWired || hook.action == HookAction::kNotWired)
          << DescribePlan(*again);
    }
  }
  for (const auto& [path, contents] : wired) {
    const Result<std::string> restored = UnwireHooks(contents);
    EXPECT_TRUE(restored.ok()) << restored.status();
    if (!restored.ok())
      continue;
    EXPECT_EQ(*restored, files.at(path)) << path;
    EXPECT_EQ(*UnwireHooks(*restored), *restored) << path;
  }
  return wired;
}

TEST(PlanHookWiringTest, AppendsHooksAFileDoesNotSet) {
  const ConfFiles files = {{kMain, "ClusterName=c\nSlurmctldHost=h\n"}};
  const Result<HookWiringPlan> plan = Plan(files);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->hooks.size(), 3u);
  for (const HookPlan& hook : plan->hooks) {
    EXPECT_EQ(hook.action, HookAction::kWire);
    EXPECT_FALSE(hook.site.has_value());
    EXPECT_TRUE(hook.warnings.empty());
  }
  EXPECT_EQ(plan->hooks[2].target, kTaskProlog);
  ASSERT_EQ(plan->edits.size(), 1u);
  EXPECT_EQ(plan->edits[0].path, kMain);
  EXPECT_EQ(plan->edits[0].after,
            "ClusterName=c\n"
            "SlurmctldHost=h\n"
            "#expanse-wiring:v1:begin:Prolog managed by expanse compute install; uninstall "
            "restores the lines below\n"
            "Prolog=/srv/expanse/libexec/expanse-prolog\n"
            "#expanse-wiring:v1:end:Prolog\n"
            "#expanse-wiring:v1:begin:Epilog managed by expanse compute install; uninstall "
            "restores the lines below\n"
            "Epilog=/srv/expanse/libexec/expanse-epilog\n"
            "#expanse-wiring:v1:end:Epilog\n"
            "#expanse-wiring:v1:begin:TaskProlog managed by expanse compute install; uninstall "
            "restores the lines below\n"
            "TaskProlog=/srv/expanse/libexec/expanse-taskprolog\n"
            "#expanse-wiring:v1:end:TaskProlog\n");
  const ConfFiles wired = WireAndCheckRoundTrip(files);
  EXPECT_EQ(*ParseFiles(wired)->EffectiveValue("Epilog"), kEpilog);
}

TEST(PlanHookWiringTest, ReplacesTheEffectiveAssignmentInWhicheverFileHoldsIt) {
  const ConfFiles files = {
      {kMain, "Prolog=/etc/slurm/old.sh\nInclude hooks.conf\n"},
      {"/etc/slurm/hooks.conf", "prolog = /etc/slurm/prolog.d/*   \nEpilog=/e # site epilog\n"}};
  const Result<HookWiringPlan> plan = Plan(files, Targets(false));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const HookPlan& prolog = plan->hooks[0];
  EXPECT_EQ(prolog.action, HookAction::kWire);
  ASSERT_TRUE(prolog.site.has_value());
  EXPECT_EQ(prolog.site->value, "/etc/slurm/prolog.d/*");
  EXPECT_EQ(prolog.site->path, "/etc/slurm/hooks.conf");
  EXPECT_EQ(prolog.site->line, 1);
  EXPECT_FALSE(prolog.site->is_expanse_wrapper);
  EXPECT_EQ(prolog.warnings,
            std::vector<std::string>{"Prolog=\"/etc/slurm/old.sh\" at /etc/slurm/slurm.conf:1 is "
                                     "ignored by SLURM: the last assignment, at "
                                     "/etc/slurm/hooks.conf:1, wins"});
  EXPECT_EQ(plan->hooks[1].site->value, "/e");
  EXPECT_EQ(plan->hooks[2].action, HookAction::kNotWired);
  // Only the included file changes; the ignored assignment stays.
  ASSERT_EQ(plan->edits.size(), 1u);
  EXPECT_EQ(plan->edits[0].path, "/etc/slurm/hooks.conf");
  EXPECT_EQ(plan->edits[0].after,
            "#expanse-wiring:v1:begin:Prolog managed by expanse compute install; uninstall "
            "restores the lines below\n"
            "#expanse-wiring:v1:orig:prolog = /etc/slurm/prolog.d/*   \n"
            "Prolog=/srv/expanse/libexec/expanse-prolog\n"
            "#expanse-wiring:v1:end:Prolog\n"
            "#expanse-wiring:v1:begin:Epilog managed by expanse compute install; uninstall "
            "restores the lines below\n"
            "#expanse-wiring:v1:orig:Epilog=/e # site epilog\n"
            "Epilog=/srv/expanse/libexec/expanse-epilog\n"
            "#expanse-wiring:v1:end:Epilog\n");
  WireAndCheckRoundTrip(files, Targets(false));

  EXPECT_EQ(DescribePlan(*plan),
            "Prolog: the site's \"/etc/slurm/prolog.d/*\" (/etc/slurm/hooks.conf:1) runs first, "
            "then Expanse; that line becomes Prolog=/srv/expanse/libexec/expanse-prolog\n"
            "Epilog: the site's \"/e\" (/etc/slurm/hooks.conf:2) runs first, then Expanse; that "
            "line becomes Epilog=/srv/expanse/libexec/expanse-epilog\n"
            "TaskProlog: left as it is (profiling agent off)\n"
            "warning: Prolog=\"/etc/slurm/old.sh\" at /etc/slurm/slurm.conf:1 is ignored by "
            "SLURM: the last assignment, at /etc/slurm/hooks.conf:1, wins\n"
            "changes /etc/slurm/hooks.conf\n");
  EXPECT_EQ(ManualInstructions(*plan),
            "# slurm.conf was not changed (--patch-slurm-conf=false). Make these changes, by hand "
            "or\n"
            "# through your configuration management, on every host that reads slurm.conf, then\n"
            "# run: scontrol reconfigure\n"
            "# /etc/slurm/hooks.conf line 1: replace \"Prolog=/etc/slurm/prolog.d/*\" with\n"
            "Prolog=/srv/expanse/libexec/expanse-prolog\n"
            "# /etc/slurm/hooks.conf line 2: replace \"Epilog=/e\" with\n"
            "Epilog=/srv/expanse/libexec/expanse-epilog\n");
}

TEST(PlanHookWiringTest, RestoresAwkwardFilesByteForByte) {
  const std::vector<std::string> cases = {
      "",
      "# only a comment, no newline",
      "A=1",
      "Prolog=/p",
      "Epilog=/e\nProlog=/p",
      "ClusterName=c\r\nProlog=/p\r\nEpilog=/e\r\n",
      "ClusterName=c\r\nTaskProlog=/t",
      "  Prolog   =   /p   # the site's prolog\n\n\n",
      "Prolog=\\\n/p\nEpilog=/a \\\n  \\\n\n",
      "Prolog=\"/p q\"\nEpilog=/e\\#x\n",
      "Prolog=/a\nProlog=/b\nprolog=/c\nTaskProlog=/t\n",
      "\n\n\t\n",
  };
  for (const std::string& contents : cases) {
    SCOPED_TRACE(contents);
    WireAndCheckRoundTrip({{kMain, contents}});
    WireAndCheckRoundTrip({{kMain, contents}}, Targets(false));
  }
}

TEST(PlanHookWiringTest, ChainsTheValueSlurmReads) {
  const Result<HookWiringPlan> plan =
      Plan({{kMain, "Prolog=\"/site/my prolog\"\nEpilog=/e\\#x \\\n\nTaskProlog=/t\r\n"}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hooks[0].site->value, "/site/my prolog");
  EXPECT_EQ(plan->hooks[1].site->value, "/e#x");
  EXPECT_EQ(plan->hooks[2].site->value, "/t");
  EXPECT_EQ(plan->hooks[2].site->line, 4);
}

TEST(PlanHookWiringTest, NeverChainsOurOwnWrappers) {
  HookTargets targets = Targets();
  targets.is_expanse_wrapper = [](const std::string& path) {
    return path == "/old/libexec/expanse-prolog";
  };
  const ConfFiles files = {{kMain,
                            "Prolog=/old/libexec/expanse-prolog\n"
                            "Epilog=/srv/expanse/libexec/expanse-epilog\n"}};
  const Result<HookWiringPlan> plan = Plan(files, targets);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // An earlier install's wrapper is replaced, and flagged so its chain is kept rather than it.
  EXPECT_EQ(plan->hooks[0].action, HookAction::kWire);
  EXPECT_TRUE(plan->hooks[0].site->is_expanse_wrapper);
  // Wiring done by hand, as ManualInstructions asked: nothing to change.
  EXPECT_EQ(plan->hooks[1].action, HookAction::kAlreadyWired);
  EXPECT_TRUE(plan->hooks[1].site->is_expanse_wrapper);
  EXPECT_EQ(plan->hooks[2].action, HookAction::kWire);
  const ConfFiles wired = WireAndCheckRoundTrip(files, targets);
  // Re-planning the wired file still knows the replaced value is ours.
  const Result<HookWiringPlan> again = Plan(wired, targets);
  EXPECT_TRUE(again->hooks[0].site->is_expanse_wrapper);
  EXPECT_EQ(again->hooks[0].site->value, "/old/libexec/expanse-prolog");
}

TEST(PlanHookWiringTest, AlreadyWiredFileReportsTheSiteHookItReplaced) {
  const ConfFiles wired = WireAndCheckRoundTrip({{kMain, "A=1\nProlog=/site/prolog\n"}});
  const Result<HookWiringPlan> plan = Plan(wired);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hooks[0].action, HookAction::kAlreadyWired);
  ASSERT_TRUE(plan->hooks[0].site.has_value());
  EXPECT_EQ(plan->hooks[0].site->value, "/site/prolog");
  EXPECT_FALSE(plan->hooks[1].site.has_value());
  EXPECT_EQ(ManualInstructions(*plan),
            "# SLURM already runs the Expanse hooks; nothing to add to slurm.conf.\n");
  EXPECT_EQ(DescribePlan(*plan),
            "Prolog: already runs /srv/expanse/libexec/expanse-prolog, chaining the site's "
            "\"/site/prolog\"\n"
            "Epilog: already runs /srv/expanse/libexec/expanse-epilog\n"
            "TaskProlog: already runs /srv/expanse/libexec/expanse-taskprolog\n"
            "No SLURM file changes.\n");
}

TEST(PlanHookWiringTest, RetargetsOurBlockWhenTheWrapperMoved) {
  const ConfFiles original = {{kMain, "Prolog=/site/prolog\r\n"}};
  const ConfFiles wired = WireAndCheckRoundTrip(original);
  HookTargets moved = Targets();
  moved.prolog = "/new/expanse-prolog";
  const Result<HookWiringPlan> plan = Plan(wired, moved);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hooks[0].action, HookAction::kRetarget);
  EXPECT_EQ(plan->hooks[0].site->value, "/site/prolog");
  EXPECT_EQ(plan->hooks[1].action, HookAction::kAlreadyWired);
  const ConfFiles retargeted = Apply(wired, *plan);
  EXPECT_EQ(ParseFiles(retargeted)->EffectiveValue("Prolog"), "/new/expanse-prolog");
  EXPECT_NE(retargeted.at(kMain).find("Prolog=/new/expanse-prolog\r\n"), std::string::npos);
  EXPECT_EQ(*UnwireHooks(retargeted.at(kMain)), original.at(kMain));
  EXPECT_TRUE(Plan(retargeted, moved)->edits.empty());
}

TEST(PlanHookWiringTest, UnwiresTaskPrologWhenTheAgentIsOff) {
  for (const std::string& contents : {std::string("A=1\nTaskProlog=/site/tp\nB=2\n"),
                                      std::string("A=1"), std::string("TaskProlog=/tp")}) {
    SCOPED_TRACE(contents);
    const ConfFiles wired = WireAndCheckRoundTrip({{kMain, contents}});
    const Result<HookWiringPlan> plan = Plan(wired, Targets(false));
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->hooks[2].action, HookAction::kUnwire);
    const ConfFiles unwired = Apply(wired, *plan);
    const Result<SlurmConf> conf = ParseFiles(unwired);
    EXPECT_EQ(conf->EffectiveValue("TaskProlog"),
              ParseFiles({{kMain, contents}})->EffectiveValue("TaskProlog"));
    EXPECT_EQ(conf->EffectiveValue("Prolog"), kProlog);
    EXPECT_EQ(*UnwireHooks(unwired.at(kMain)), contents);
    const Result<HookWiringPlan> again = Plan(unwired, Targets(false));
    EXPECT_EQ(again->hooks[2].action, HookAction::kNotWired);
    EXPECT_TRUE(again->edits.empty());
  }
}

TEST(PlanHookWiringTest, WarnsOfATaskPrologWiredByHandWhenTheAgentIsOff) {
  const Result<HookWiringPlan> plan =
      Plan({{kMain, "TaskProlog=/srv/expanse/libexec/expanse-taskprolog\n"}}, Targets(false));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hooks[2].action, HookAction::kNotWired);
  EXPECT_EQ(plan->hooks[2].warnings,
            std::vector<std::string>{"TaskProlog at /etc/slurm/slurm.conf:1 still names the "
                                     "Expanse wrapper /srv/expanse/libexec/expanse-taskprolog, "
                                     "set by hand: keep that script or remove the line"});
}

TEST(PlanHookWiringTest, WiresOverAnAssignmentAddedAfterOurBlock) {
  const ConfFiles wired = WireAndCheckRoundTrip({{kMain, "Prolog=/first\n"}});
  ConfFiles edited = wired;
  edited[kMain] += "Prolog=/second\n";
  const Result<HookWiringPlan> plan = Plan(edited);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hooks[0].action, HookAction::kWire);
  EXPECT_EQ(plan->hooks[0].site->value, "/second");
  ASSERT_EQ(plan->hooks[0].warnings.size(), 1u);
  EXPECT_EQ(plan->hooks[0].warnings[0],
            "an earlier Expanse wiring of Prolog at /etc/slurm/slurm.conf:3 is overridden by the "
            "assignment at /etc/slurm/slurm.conf:11");
  const ConfFiles rewired = Apply(edited, *plan);
  EXPECT_EQ(*UnwireHooks(rewired.at(kMain)), "Prolog=/first\nProlog=/second\n");
}

TEST(PlanHookWiringTest, RefusesDamagedBlocks) {
  ConfFiles wired = WireAndCheckRoundTrip({{kMain, "Prolog=/p\n"}});
  std::string& contents = wired[kMain];
  contents.erase(contents.find("#expanse-wiring:v1:end:Prolog\n"),
                 std::string_view("#expanse-wiring:v1:end:Prolog\n").size());
  const Result<HookWiringPlan> plan = Plan(wired);
  EXPECT_EQ(plan.status().reason(), "slurm_conf_wiring_damaged");
  EXPECT_EQ(plan.status().message(),
            "/etc/slurm/slurm.conf: line 4: damaged Expanse hook wiring block (a marker after the "
            "assignment); restore the original lines by hand");
  EXPECT_EQ(
      Plan({{kMain, "#expanse-wiring:v1:begin:Epilog\nProlog=/p\n#expanse-wiring:v1:end:Epilog\n"}})
          .status()
          .message(),
      "/etc/slurm/slurm.conf:2: Prolog assigned inside the Expanse wiring block of "
      "\"Epilog\"; restore the file by hand");
  EXPECT_EQ(UnwireHooks("#expanse-wiring:v1:begin:Prolog x\nProlog=/p\n").status().message(),
            "line 1: damaged Expanse hook wiring block (no end marker); restore the original "
            "lines by hand");
  EXPECT_EQ(UnwireHooks("A=1\n#expanse-wiring:v1:orig:Prolog=/p\n").status().message(),
            "line 2: damaged Expanse hook wiring block (a marker outside a block); restore the "
            "original lines by hand");
  EXPECT_EQ(UnwireHooks("#expanse-wiring:v1:begin:Prolog\nProlog=/p\nEpilog=/e\n"
                        "#expanse-wiring:v1:end:Prolog\n")
                .status()
                .message(),
            "line 3: damaged Expanse hook wiring block (a second line between the markers); "
            "restore the original lines by hand");
}

TEST(PlanHookWiringTest, RefusesUnusableTargetsAndHookLines) {
  HookTargets relative = Targets();
  relative.epilog = "libexec/expanse-epilog";
  EXPECT_EQ(Plan({{kMain, ""}}, relative).status().message(),
            "Epilog wrapper path \"libexec/expanse-epilog\" is not an absolute path");
  HookTargets spaced = Targets();
  spaced.taskprolog = "/srv/my expanse/tp";
  EXPECT_EQ(Plan({{kMain, ""}}, spaced).status().reason(), "hook_target_invalid");
  spaced.taskprolog_enabled = false;  // then the TaskProlog path is not used
  EXPECT_TRUE(Plan({{kMain, ""}}, spaced).ok());

  const Result<HookWiringPlan> trailing = Plan({{kMain, "Prolog=/a /b\n"}});
  EXPECT_EQ(trailing.status().reason(), "slurm_conf_hook_line");
  EXPECT_EQ(trailing.status().message(),
            "/etc/slurm/slurm.conf:1: text after the Prolog value: \"/b\"; SLURM refuses such a "
            "line, so it cannot be in use");
}

TEST(PlanHookWiringTest, WarnsOfAGlobInTaskProlog) {
  const Result<HookWiringPlan> plan = Plan({{kMain, "TaskProlog=/etc/slurm/tp.d/*\n"}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hooks[2].warnings,
            std::vector<std::string>{"TaskProlog \"/etc/slurm/tp.d/*\" looks like a glob, but "
                                     "SLURM runs TaskProlog as one literal path"});
}

TEST(UnwireHooksTest, KeepsLinesAddedAfterABlock) {
  // The operator appended a line after our wiring of a file that had no final newline: the
  // newline before their line stays.
  const ConfFiles wired = WireAndCheckRoundTrip({{kMain, "Prolog=/p"}}, Targets(false));
  EXPECT_EQ(*UnwireHooks(wired.at(kMain) + "B=2\n"), "Prolog=/p\nB=2\n");
  const ConfFiles appended = WireAndCheckRoundTrip({{kMain, "A=1"}}, Targets(false));
  EXPECT_EQ(*UnwireHooks(appended.at(kMain) + "B=2\n"), "A=1\nB=2\n");
}

TEST(UnwireHooksTest, HasHookWiringFindsMarkersAtLineStarts) {
  EXPECT_FALSE(HasHookWiring("Prolog=/p\n"));
  EXPECT_FALSE(HasHookWiring("A=1 #expanse-wiring:v1:begin:Prolog\n"));
  EXPECT_TRUE(HasHookWiring("#expanse-wiring:v1:begin:Prolog\n"));
  EXPECT_TRUE(HasHookWiring("A=1\n#expanse-wiring:v1:begin:Prolog\n"));
}

}  // namespace
}  // namespace hook_wiring_test
}  // namespace expanse::slurm
