#include "deploy/templates.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file_util.h"
#include "core/subprocess.h"

namespace expanse::deploy {
namespace templates_test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TemplateValues Values() {
  TemplateValues v;
  v.daemon_version = "1.8.0";
  v.shared_prefix = "/srv/expanse";
  v.control_plane_url = "https://expanse.example";
  v.data_plane_url = "https://ingest.expanse.example:8443/dp";
  return v;
}

// Quotes, command substitution, backticks and a would-be placeholder: none may be run or
// substituted, and each must reach the installer as exactly one argument.
TemplateValues HostileValues() {
  TemplateValues v;
  v.daemon_version = "v2.0.0-rc.1+build.5";
  v.shared_prefix = R"(/srv/it's "shared" $(touch PWNED) `touch PWNED2` @DATA_PLANE_URL@ \)";
  v.control_plane_url = "https://cp.example/a'b$(touch$IFS'PWNED3')";
  v.data_plane_url = "http://127.0.0.1:8080/x;touch$IFS'PWNED4'&";
  return v;
}

std::string ValidationError(const TemplateValues& values) {
  const Status status = ValidateTemplateValues(values);
  if (status.ok())
    return "<valid>";
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.reason(), "invalid_template_value");
  return status.message();
}

// --- Validation -----------------------------------------------------------------

TEST(ValidateTemplateValuesTest, AcceptsRealisticValues) {
  EXPECT_EQ(ValidationError(Values()), "<valid>");
  TemplateValues v = Values();
  v.control_plane_url = "http://localhost:8080";
  v.data_plane_url = "http://[::1]:9000/";
  v.daemon_version = "v0.10.2-beta.1";
  EXPECT_EQ(ValidationError(v), "<valid>");
}

TEST(ValidateTemplateValuesTest, RefusesBadVersions) {
  TemplateValues v = Values();
  for (const char* version : {"", "latest", "1.8.0; rm -rf /", "1.2.3 ", "1.2.3\n", "1.8.0+"}) {
    v.daemon_version = version;
    EXPECT_THAT(ValidationError(v), StartsWith("--daemon-version")) << version;
  }
  v.daemon_version = "1.8.x";
  EXPECT_EQ(ValidationError(v),
            R"(--daemon-version "1.8.x" is not a release version such as 1.8.0 or v1.8.0-rc.1)");
}

// A rendered script must never carry a version the installer refuses, nor refuse one it takes:
// both apply core/version_compare.h's CanonicalVersion.
TEST(ValidateTemplateValuesTest, AcceptsExactlyWhatTheInstallerAccepts) {
  TemplateValues v = Values();
  for (const char* version : {"1.8.0", "v1.8.0", "1.8", "1.8.0-rc.1", "v1.8.0+build.7"}) {
    v.daemon_version = version;
    EXPECT_EQ(ValidationError(v), "<valid>") << version;
  }
}

TEST(ValidateTemplateValuesTest, RefusesBadPrefixes) {
  TemplateValues v = Values();
  v.shared_prefix = "srv/expanse";
  EXPECT_EQ(ValidationError(v), R"(--shared-prefix "srv/expanse" is not an absolute path)");
  v.shared_prefix = "/srv/x\ny";
  EXPECT_THAT(ValidationError(v), HasSubstr("contains a control character"));
}

TEST(ValidateTemplateValuesTest, RefusesBadUrls) {
  TemplateValues v = Values();
  v.control_plane_url = "http://expanse.example";
  EXPECT_THAT(ValidationError(v), HasSubstr("must use https://; plain http:// is accepted only"));
  v.control_plane_url = "ftp://expanse.example";
  EXPECT_EQ(ValidationError(v),
            R"(--control-plane "ftp://expanse.example" must start with https://)");
  v.control_plane_url = "https://admin:pw@expanse.example";
  EXPECT_EQ(ValidationError(v), "--control-plane has a user part: URLs must not carry credentials");
  v.control_plane_url = "https://expanse.example/a b";
  EXPECT_THAT(ValidationError(v), HasSubstr("contains a character a URL cannot hold"));
  v.control_plane_url = "https://expanse.example/#x";
  EXPECT_THAT(ValidationError(v), HasSubstr("has a fragment"));
  v.control_plane_url = "https://";
  EXPECT_THAT(ValidationError(v), HasSubstr("has no host name"));
  v.control_plane_url = "https://exa_mple.com";
  EXPECT_THAT(ValidationError(v), HasSubstr("has an invalid host name"));
  v.control_plane_url = "https://expanse.example:99999";
  EXPECT_THAT(ValidationError(v), HasSubstr("has an invalid port"));
  v = Values();
  v.data_plane_url = "";
  EXPECT_THAT(ValidationError(v), StartsWith("--data-plane is empty"));
  v.data_plane_url = "http://localhost.evil.example";
  EXPECT_THAT(ValidationError(v), HasSubstr("must use https://"));
  // The same loopback rule as the daemon's own URL check (core/loopback.h): an install
  // script never accepts a URL its daemon would then refuse, or the other way round.
  v.data_plane_url = "http://[::2]:9000/";
  EXPECT_THAT(ValidationError(v), HasSubstr("must use https://"));
  v.data_plane_url = "http://127.0.0.2:9000/";
  EXPECT_EQ(ValidationError(v), "<valid>");
}

// --- Rendered text --------------------------------------------------------------

TEST(RenderInstallScriptTest, FillsQuotedValuesAndHoldsNoPlaceholder) {
  const Result<std::string> script = RenderInstallScript(Values());
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_THAT(*script, StartsWith("#!/usr/bin/env bash\n"));
  EXPECT_THAT(*script, HasSubstr("\ndaemon_version='1.8.0'\n"));
  EXPECT_THAT(*script, HasSubstr("\nshared_prefix='/srv/expanse'\n"));
  EXPECT_THAT(*script, HasSubstr("\ncontrol_plane='https://expanse.example'\n"));
  EXPECT_THAT(*script, HasSubstr("\ndata_plane='https://ingest.expanse.example:8443/dp'\n"));
  EXPECT_THAT(*script, Not(HasSubstr("@DAEMON_VERSION@")));
  EXPECT_THAT(*script, Not(HasSubstr("EXPANSE_INSTALL_TOKEN=\"")));
  EXPECT_THAT(*script, HasSubstr("sudo --preserve-env=EXPANSE_INSTALL_TOKEN,"));
}

TEST(RenderInstallScriptTest, RefusesInvalidValues) {
  TemplateValues v = Values();
  v.data_plane_url = "http://example.com";
  EXPECT_FALSE(RenderInstallScript(v).ok());
  EXPECT_FALSE(RenderAssistantPrompt(v).ok());
}

TEST(RenderAssistantPromptTest, GuidesTheWholeInstallWithoutTheToken) {
  const Result<std::string> prompt = RenderAssistantPrompt(Values());
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  const Result<std::string> script = RenderInstallScript(Values());
  ASSERT_TRUE(script.ok());
  EXPECT_THAT(*prompt, HasSubstr("----- install-expanse.sh -----\n" + *script +
                                 "----- end of install-expanse.sh -----"));
  EXPECT_THAT(*prompt, HasSubstr("Never ask\n  for it, and never type, print, echo, log or store"));
  EXPECT_THAT(*prompt, HasSubstr("type the token at its hidden prompt"));
  EXPECT_THAT(*prompt, HasSubstr("sudo expanse compute install --type slurm --role sampler "
                                 "--shared-prefix '/srv/expanse'"));
  EXPECT_THAT(*prompt, HasSubstr("never on the controller"));
  EXPECT_THAT(*prompt, HasSubstr("sudo systemctl status expanse-daemon --no-pager"));
  EXPECT_THAT(*prompt, HasSubstr("sudo systemctl status expanse-sampler --no-pager"));
  EXPECT_THAT(*prompt,
              HasSubstr("test -f '/srv/expanse/.expanse-preflight-sentinel' && echo shared"));
  EXPECT_THAT(*prompt, HasSubstr("diagnostics --shared-prefix '/srv/expanse'"));
  EXPECT_THAT(*prompt,
              HasSubstr("curl -sS -o /dev/null -w '%{http_code}\\n' 'https://expanse.example'"));
  for (const char* placeholder : {"@DAEMON_VERSION@", "@SHARED_PREFIX@", "@CONTROL_PLANE_URL@",
                                  "@DATA_PLANE_URL@", "@SENTINEL_PATH@", "@INSTALL_SCRIPT@"}) {
    EXPECT_THAT(*prompt, Not(HasSubstr(placeholder))) << placeholder;
  }
}

TEST(RenderAssistantPromptTest, ValueWithAPlaceholderNameIsNotSubstitutedAgain) {
  const Result<std::string> prompt = RenderAssistantPrompt(HostileValues());
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_THAT(*prompt, HasSubstr(R"(shared prefix:   '/srv/it'\''s "shared" $(touch PWNED) )"
                                 "`touch PWNED2` @DATA_PLANE_URL@ \\'"));
}

// --- Running the script ---------------------------------------------------------
//
// The rendered script runs under bash with fake `sudo` and `expanse` first on PATH. The fake sudo
// behaves like sudo's env_reset: the command gets PATH, the test's RECORD_DIR, the variables
// named in --preserve-env and NAME=value arguments. Both fakes record their argv and environment as
// NUL-separated lists.

constexpr char kFakeSudo[] = R"(#!/bin/bash
printf '%s\0' "$@" > "$RECORD_DIR/sudo.argv"
env -0 > "$RECORD_DIR/sudo.env"
keep=" PATH RECORD_DIR "
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --preserve-env=*) keep+="${1#--preserve-env=}"; keep="${keep//,/ } " ;;
    *) echo "fake sudo: unexpected option $1" >&2; exit 2 ;;
  esac
  shift
done
for name in $(compgen -e); do
  [[ $keep == *" $name "* ]] || unset "$name"
done
# Like sudo, NAME=value arguments before the command set variables for it.
while [[ $# -gt 0 && $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
  export "$1"
  shift
done
exec "$@"
)";

constexpr char kFakeExpanse[] = R"(#!/bin/bash
printf '%s\0' "$@" > "$RECORD_DIR/expanse.argv"
env -0 > "$RECORD_DIR/expanse.env"
)";

constexpr char kToken[] = "exp_it_Zm9vYmFyYmF6cXV4";

std::vector<std::string> ReadNulList(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> items;
  std::string item;
  while (std::getline(in, item, '\0'))
    items.push_back(item);
  return items;
}

class ScriptRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "script-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ASSERT_TRUE(fs::MakeDirectories(dir_ + "/bin", 0755).ok());
    ASSERT_TRUE(fs::MakeDirectories(dir_ + "/work", 0755).ok());
    ASSERT_TRUE(fs::WriteFileAtomically(dir_ + "/bin", "sudo", kFakeSudo, 0755).ok());
    ASSERT_TRUE(fs::WriteFileAtomically(dir_ + "/bin", "expanse", kFakeExpanse, 0755).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs the script for `values` in dir_/work with `stdin_text` as its standard input.
  Result<SubprocessResult> Run(const TemplateValues& values, const std::string& stdin_text) {
    EXPANSE_ASSIGN_OR_RETURN(std::string script, RenderInstallScript(values));
    EXPANSE_RETURN_IF_ERROR(fs::WriteFileAtomically(dir_, "install-expanse.sh", script, 0644));
    EXPANSE_RETURN_IF_ERROR(fs::WriteFileAtomically(dir_, "stdin", stdin_text, 0600));
    SubprocessOptions run;
    // RunSubprocess gives the child /dev/null as stdin; a redirection feeds it the file instead,
    // so the token is never an argument of this command either.
    run.argv = {"/bin/bash", "-c", R"(cd "$1/work" && exec bash ../install-expanse.sh < ../stdin)",
                "runner", dir_};
    run.env = std::vector<std::string>{
        "PATH=" + dir_ + "/bin:/usr/bin:/bin",    "RECORD_DIR=" + dir_,
        "HTTPS_PROXY=http://proxy.internal:3128", "no_proxy=.cluster.internal",
        "SSL_CERT_FILE=/etc/ssl/private-ca.pem",  "UNRELATED_SETTING=must-not-pass-sudo"};
    run.timeout = std::chrono::seconds(60);
    return RunSubprocess(run);
  }

  std::string dir_;
};

TEST_F(ScriptRunTest, ScriptIsValidBash) {
  for (const TemplateValues& values : {Values(), HostileValues()}) {
    Result<std::string> script = RenderInstallScript(values);
    ASSERT_TRUE(script.ok());
    ASSERT_TRUE(fs::WriteFileAtomically(dir_, "check.sh", *script, 0644).ok());
    SubprocessOptions run;
    run.argv = {"/bin/bash", "-n", dir_ + "/check.sh"};
    Result<SubprocessResult> result = RunSubprocess(run);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->Succeeded()) << result->stderr_text;
  }
}

TEST_F(ScriptRunTest, TokenReachesTheInstallerOnlyThroughTheEnvironment) {
  const TemplateValues values = HostileValues();
  Result<SubprocessResult> result = Run(values, std::string(kToken) + "\n");
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->Succeeded()) << result->stderr_text;

  const std::vector<std::string> sudo_argv = ReadNulList(dir_ + "/sudo.argv");
  const std::vector<std::string> expanse_argv = ReadNulList(dir_ + "/expanse.argv");
  ASSERT_FALSE(sudo_argv.empty());
  for (const std::string& arg : sudo_argv)
    EXPECT_THAT(arg, Not(HasSubstr(kToken)));
  for (const std::string& arg : expanse_argv)
    EXPECT_THAT(arg, Not(HasSubstr(kToken)));
  EXPECT_THAT(result->stdout_text + result->stderr_text, Not(HasSubstr(kToken)));

  const std::vector<std::string> expanse_env = ReadNulList(dir_ + "/expanse.env");
  EXPECT_THAT(expanse_env, Contains(std::string("EXPANSE_INSTALL_TOKEN=") + kToken));
  EXPECT_THAT(expanse_env, Contains("HTTPS_PROXY=http://proxy.internal:3128"));
  EXPECT_THAT(expanse_env, Contains("no_proxy=.cluster.internal"));
  EXPECT_THAT(expanse_env, Contains("SSL_CERT_FILE=/etc/ssl/private-ca.pem"));
  // The fake sudo really resets the environment, so the token got through --preserve-env.
  EXPECT_THAT(expanse_env, Not(Contains("UNRELATED_SETTING=must-not-pass-sudo")));

  // The hostile values arrive verbatim, one argument each, and nothing in them was run.
  const std::vector<std::string> expected = {"compute",
                                             "install",
                                             "--type",
                                             "slurm",
                                             "--role",
                                             "controller",
                                             "--daemon-version",
                                             values.daemon_version,
                                             "--shared-prefix",
                                             values.shared_prefix,
                                             "--control-plane",
                                             values.control_plane_url,
                                             "--data-plane",
                                             values.data_plane_url,
                                             "--user",
                                             "slurm",
                                             "--patch-slurm-conf=true",
                                             "--reconfigure=true",
                                             "--systemd=true",
                                             "--sampler-bootstrap",
                                             "prolog",
                                             "--cupti-mode",
                                             "perfmon",
                                             "--profiling-agent=true",
                                             "--bundled-pyspy=true",
                                             "--heartbeat-timeout",
                                             "1m"};
  EXPECT_THAT(expanse_argv, ElementsAreArray(expected));
  for (const char* marker : {"PWNED", "PWNED2", "PWNED3", "PWNED4"}) {
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/work/" + marker)) << marker;
  }
}

TEST_F(ScriptRunTest, EmptyTokenStopsBeforeSudo) {
  Result<SubprocessResult> result = Run(Values(), "\n");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->stderr_text, HasSubstr("no install token given"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/sudo.argv"));
}

TEST_F(ScriptRunTest, MissingCliIsReported) {
  std::filesystem::remove(dir_ + "/bin/expanse");
  Result<SubprocessResult> result = Run(Values(), std::string(kToken) + "\n");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->stderr_text, HasSubstr("the expanse CLI is not on PATH"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/sudo.argv"));
}

TEST_F(ScriptRunTest, InstallerFailureIsTheScriptsFailure) {
  ASSERT_TRUE(
      fs::WriteFileAtomically(dir_ + "/bin", "expanse", "#!/bin/bash\nexit 7\n", 0755).ok());
  Result<SubprocessResult> result = Run(Values(), std::string(kToken) + "\n");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 7);
}

}  // namespace
}  // namespace templates_test
}  // namespace expanse::deploy
