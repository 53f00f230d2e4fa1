// The rendered scripts really run here, under bash, with an environment like the one slurmd
// gives a Prolog (no PATH at all), fake site hooks and a fake expanse-daemon.
#include "slurm/hook_script.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/subprocess.h"
#include "slurm/slurm_conf_test_util.h"

namespace expanse::slurm {
namespace hook_script_test {
namespace {

using std::filesystem::perms;

constexpr perms kExecutable = perms::owner_all | perms::group_read | perms::group_exec;

class HookScriptTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  std::string Read(const std::string& name) const {
    std::ifstream file(Path(name), std::ios::binary);
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
  }

  // A bash script at `name` running `body`.
  std::string Script(const std::string& name, const std::string& body,
                     perms mode = kExecutable) const {
    return dir_.Write(name, "#!/bin/bash\n" + body + "\n", mode);
  }

  // A fake expanse-daemon that records its arguments and the job id it saw, says something on
  // both streams, then runs `tail`.
  std::string FakeDaemon(const std::string& tail = "exit 0") const {
    return Script("bin/expanse-daemon", "printf '%s\\n' \"$@\" >" + Path("daemon.args") +
                                            "\necho \"job=$SLURM_JOB_ID\" >" + Path("daemon.env") +
                                            "\necho daemon-stdout\necho daemon-stderr >&2\n" +
                                            tail);
  }

  HookScriptOptions Options(HookKind kind, const std::string& site_hook = "") const {
    HookScriptOptions options;
    options.kind = kind;
    options.daemon_path = Path("bin/expanse-daemon");
    options.shared_prefix = "/srv/expanse";
    options.user = "slurm";
    options.site_hook = site_hook;
    options.time_limit = std::chrono::seconds(1);
    return options;
  }

  // Renders the wrapper, writes it 0750 and runs it as slurmd would: by its path, with the
  // job's environment only.
  SubprocessResult Run(const HookScriptOptions& options) {
    const Result<std::string> script = RenderHookScript(options);
    EXPECT_TRUE(script.ok()) << script.status();
    const std::string path = dir_.Write("wrapper", script.ok() ? *script : "", kExecutable);
    SubprocessOptions run;
    run.argv = {path};
    run.env = std::vector<std::string>{"SLURM_JOB_ID=42", "SLURM_JOB_USER=alice"};
    run.timeout = std::chrono::seconds(60);  // a safety net; the wrapper must end long before
    Result<SubprocessResult> result = RunSubprocess(run);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SubprocessResult{};
  }

  testing::TempDir dir_;
};

TEST_F(HookScriptTest, PrologKeepsTheSiteHooksOutputEnvironmentAndStatus) {
  FakeDaemon();
  const std::string site = Script("site-prolog",
                                  "echo \"site out job=$SLURM_JOB_ID user=$SLURM_JOB_USER\"\n"
                                  "echo \"site err\" >&2\nexit 3");
  const SubprocessResult result = Run(Options(HookKind::kProlog, site));
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.stdout_text, "site out job=42 user=alice\n");  // the daemon's is dropped
  EXPECT_EQ(result.stderr_text, "site err\n");
  EXPECT_EQ(Read("daemon.args"),
            "hook\nprolog\n--shared-prefix\n/srv/expanse\n--user\nslurm\n--sampler-bootstrap\n"
            "prolog\n");
  EXPECT_EQ(Read("daemon.env"), "job=42\n");
}

TEST_F(HookScriptTest, EpilogWithoutSiteHookExitsZeroAndPassesItsArguments) {
  FakeDaemon();
  HookScriptOptions options = Options(HookKind::kEpilog);
  options.shared_prefix = "";
  options.extra_daemon_args = {"--events-dir", "/var/lib/expanse/events with space"};
  const SubprocessResult result = Run(options);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, "");
  EXPECT_EQ(result.stderr_text, "");
  EXPECT_EQ(Read("daemon.args"),
            "hook\nepilog\n--user\nslurm\n--events-dir\n/var/lib/expanse/events with space\n");
}

TEST_F(HookScriptTest, GlobRunsInReverseOrderAndStopsAtTheFirstFailure) {
  FakeDaemon();
  const std::string log = Path("order.log");
  for (const std::string name : {"10-a", "20-b", "30-c"})
    Script("pro log.d/" + name, "echo " + name + " >>'" + log + "'");
  Script("pro log.d/.hidden", "echo hidden >>'" + log + "'");
  SubprocessResult result = Run(Options(HookKind::kProlog, Path("pro log.d/*")));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(Read("order.log"), "30-c\n20-b\n10-a\n");

  std::filesystem::remove(log);
  Script("pro log.d/20-b", "echo 20-b >>'" + log + "'\nexit 5");
  result = Run(Options(HookKind::kProlog, Path("pro log.d/[0-9]*")));
  EXPECT_EQ(result.exit_code, 5);
  EXPECT_EQ(Read("order.log"), "30-c\n20-b\n");
  EXPECT_NE(Read("daemon.args"), "");  // Expanse's hook still ran
}

TEST_F(HookScriptTest, NoMatchOrAnUnrunnableHookFailsAsInSlurm) {
  FakeDaemon();
  dir_.Write("empty.d/.keep", "");
  SubprocessResult result = Run(Options(HookKind::kProlog, Path("empty.d/*")));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.stderr_text,
            "expanse prolog wrapper: no file matches " + Path("empty.d/*") + "\n");
  EXPECT_EQ(Read("daemon.env"), "job=42\n");

  result = Run(Options(HookKind::kEpilog, Path("missing-epilog")));
  EXPECT_EQ(result.exit_code, 1);

  Script("not-executable", "exit 0", perms::owner_read | perms::owner_write);
  result = Run(Options(HookKind::kEpilog, Path("not-executable")));
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(result.stderr_text,
            "expanse epilog wrapper: cannot execute " + Path("not-executable") + "\n");
}

TEST_F(HookScriptTest, MissingOrNonExecutableDaemonIsSkippedSilently) {
  const std::string site = Script("site", "echo site");
  SubprocessResult result = Run(Options(HookKind::kProlog, site));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, "site\n");
  EXPECT_EQ(result.stderr_text, "");

  Script("bin/expanse-daemon", "echo ran >" + Path("daemon.args"),
         perms::owner_read | perms::owner_write);
  result = Run(Options(HookKind::kTaskProlog, site));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, "site\n");
  EXPECT_EQ(result.stderr_text, "");
  EXPECT_FALSE(std::filesystem::exists(Path("daemon.args")));
}

TEST_F(HookScriptTest, HangingDaemonIsStoppedByTheTimeLimit) {
  // It ignores SIGTERM, so only timeout's SIGKILL a second later ends it.
  FakeDaemon("trap '' TERM\n/bin/sleep 100");
  SubprocessResult result = Run(Options(HookKind::kProlog, Script("site", "exit 0")));
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0);

  FakeDaemon("/bin/sleep 100");
  result = Run(Options(HookKind::kTaskProlog, Script("site", "echo export A=1")));
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, "export A=1\ndaemon-stdout\n");
}

TEST_F(HookScriptTest, FailingDaemonNeverChangesTheStatus) {
  FakeDaemon("exit 7");
  EXPECT_EQ(Run(Options(HookKind::kEpilog)).exit_code, 0);
  EXPECT_EQ(Run(Options(HookKind::kProlog, Script("site", "exit 4"))).exit_code, 4);
}

TEST_F(HookScriptTest, TaskPrologPrintsTheSitesLinesBeforeOurs) {
  Script("bin/expanse-daemon",
         "printf '%s\\n' \"$@\" >" + Path("daemon.args") +
             "\necho 'export LD_PRELOAD=/srv/expanse/lib/libexpanse-agent.so'\necho noise >&2");
  const std::string site = Script("task prolog", "echo 'export SITE=1'\necho 'print hello' >&2");
  HookScriptOptions options = Options(HookKind::kTaskProlog, site);
  options.agent_library = "/srv/expanse/lib/libexpanse-agent.so";
  SubprocessResult result = Run(options);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text,
            "export SITE=1\nexport LD_PRELOAD=/srv/expanse/lib/libexpanse-agent.so\n");
  EXPECT_EQ(result.stderr_text, "print hello\n");  // the site's stderr is untouched
  EXPECT_EQ(Read("daemon.args"),
            "hook\ntaskprolog\n--shared-prefix\n/srv/expanse\n--user\nslurm\n--agent-library\n"
            "/srv/expanse/lib/libexpanse-agent.so\n");

  // A site TaskProlog injecting its own tool keeps it: ours, printed after, would replace it.
  std::filesystem::remove(Path("daemon.args"));
  result = Run(Options(HookKind::kTaskProlog,
                       Script("task prolog",
                              "echo 'export SITE=1'\n"
                              "echo 'export CUDA_INJECTION64_PATH=/opt/site/tool.so'")));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, "export SITE=1\nexport CUDA_INJECTION64_PATH=/opt/site/tool.so\n");
  EXPECT_FALSE(std::filesystem::exists(Path("daemon.args")));
  // Nor with the blanks slurmstepd allows around the name.
  std::filesystem::remove(Path("daemon.args"));
  result =
      Run(Options(HookKind::kTaskProlog,
                  Script("task prolog", "printf 'export \\t CUDA_INJECTION64_PATH = /t.so\\n'")));
  EXPECT_EQ(result.stdout_text, "export \t CUDA_INJECTION64_PATH = /t.so\n");
  EXPECT_FALSE(std::filesystem::exists(Path("daemon.args")));
  // One that only mentions it in another line does not.
  result = Run(Options(HookKind::kTaskProlog,
                       Script("task prolog", "echo 'print no export CUDA_INJECTION64_PATH=x'")));
  EXPECT_TRUE(std::filesystem::exists(Path("daemon.args")));

  // A failed TaskProlog ends the task: its status stays and nothing of ours follows.
  std::filesystem::remove(Path("daemon.args"));
  result =
      Run(Options(HookKind::kTaskProlog, Script("task prolog", "echo 'export SITE=1'\nexit 2")));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.stdout_text, "export SITE=1\n");
  EXPECT_FALSE(std::filesystem::exists(Path("daemon.args")));
}

TEST_F(HookScriptTest, TaskPrologIsOneLiteralPath) {
  FakeDaemon();
  Script("tp-1", "echo ran");
  const SubprocessResult result = Run(Options(HookKind::kTaskProlog, Path("tp-*")));
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(result.stdout_text, "");
}

TEST_F(HookScriptTest, QuotesHostileValues) {
  FakeDaemon();
  const std::string name = "it's $(touch pwned) `touch pwned` \"q\"";
  const std::string site = Script(name, "echo ran");
  const SubprocessResult result = Run(Options(HookKind::kProlog, site));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, "ran\n");
  EXPECT_FALSE(std::filesystem::exists(Path("pwned")));
  EXPECT_FALSE(std::filesystem::exists("pwned"));
}

TEST(RenderHookScriptTest, HeaderNamesTheKindAndTheChainedHook) {
  HookScriptOptions options;
  options.kind = HookKind::kEpilog;
  options.daemon_path = "/srv/expanse/bin/expanse-daemon";
  options.site_hook = "/etc/slurm/epilog.d/*";
  const Result<std::string> script = RenderHookScript(options);
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_TRUE(script->starts_with(
      "#!/bin/bash\n"
      "# Expanse SLURM Epilog wrapper, managed by expanse compute install (hook-script format 1).\n"
      "# expanse-hook-kind: epilog\n"
      "# expanse-site-hook: /etc/slurm/epilog.d/*\n"))
      << *script;
  const std::optional<ManagedHookScript> parsed = ParseManagedHookScript(*script);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->format_version, kHookScriptFormatVersion);
  EXPECT_EQ(parsed->kind, "epilog");
  EXPECT_EQ(parsed->site_hook, "/etc/slurm/epilog.d/*");

  options.site_hook = "";
  const std::optional<ManagedHookScript> none = ParseManagedHookScript(*RenderHookScript(options));
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->site_hook, "");
}

TEST(RenderHookScriptTest, RecognisesOnlyOurScripts) {
  EXPECT_FALSE(ParseManagedHookScript("#!/bin/bash\necho site prolog\n").has_value());
  EXPECT_FALSE(ParseManagedHookScript("").has_value());
  EXPECT_FALSE(ParseManagedHookScript("#!/bin/bash\n# managed by expanse compute install\n"
                                      "# expanse-hook-kind: prolog\n# expanse-site-hook:\n")
                   .has_value());
  const std::optional<ManagedHookScript> future = ParseManagedHookScript(
      "#!/bin/bash\n# x, managed by expanse compute install "
      "(hook-script format 7).\n# expanse-hook-kind: prolog\n"
      "# expanse-site-hook: /a b\n");
  ASSERT_TRUE(future.has_value());
  EXPECT_EQ(future->format_version, 7);
  EXPECT_EQ(future->site_hook, "/a b");
}

TEST(RenderHookScriptTest, RefusesBadOptions) {
  HookScriptOptions options;
  options.daemon_path = "bin/expanse-daemon";
  EXPECT_EQ(RenderHookScript(options).status().message(),
            "hook script: daemon path \"bin/expanse-daemon\" is not absolute");
  options.daemon_path = "/srv/expanse/bin/expanse-daemon";
  options.time_limit = std::chrono::seconds(0);
  EXPECT_EQ(RenderHookScript(options).status().reason(), "hook_script_invalid");
  options.time_limit = std::chrono::seconds(5);
  options.site_hook = "/a\nrm -rf /";
  EXPECT_EQ(RenderHookScript(options).status().message(),
            "hook script: site hook \"/a\\x0Arm -rf /\" holds a control character");
  options.site_hook = "";
  options.user = std::string("sl\0urm", 6);
  EXPECT_EQ(RenderHookScript(options).status().message(),
            "hook script: a daemon argument holds a NUL byte");
}

}  // namespace
}  // namespace hook_script_test
}  // namespace expanse::slurm
