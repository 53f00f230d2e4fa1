#include "deploy/cli_installer.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file_util.h"
#include "core/subprocess.h"
#include "core/test_temp_dir.h"

namespace expanse::deploy {
namespace cli_installer_test {
namespace {

using ::testing::HasSubstr;

constexpr char kKey[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEmjF7ae0cRW+8BZvtUwMGd/DdNhPz\n"
    "uPFY4Yh9WpxDxoKKJWH6jdMQjUzDMg0qDAx3gXCwHTbS50pytGpyxUbibw==\n"
    "-----END PUBLIC KEY-----\n";

CliInstallerValues Values(const std::string& url = "https://expanse.example:8443") {
  return {.base_url = url,
          .key_pem = kKey,
          .archives = {{"amd64", "1.2.0", "expanse_1.2.0_linux_amd64.tar.gz"}}};
}

TEST(PickCliArchivesTest, NewestSignedArchivePerArchitecture) {
  const std::vector<CliArchive> picked = PickCliArchives(
      {"expanse_1.2.0_linux_amd64.tar.gz", "expanse_1.2.0_linux_amd64.tar.gz.sig",
       "expanse_1.10.0_linux_amd64.tar.gz", "expanse_1.10.0_linux_amd64.tar.gz.sig",
       "expanse_2.0.0_linux_amd64.tar.gz",  // no signature: never offered
       "expanse_1.3.0_linux_arm64.tar.gz", "expanse_1.3.0_linux_arm64.tar.gz.sig",
       "expanse-daemon_3.0.0_linux_amd64.tar.gz", "expanse-daemon_3.0.0_linux_amd64.tar.gz.sig",
       "expanse_x.y_linux_amd64.tar.gz", "expanse_x.y_linux_amd64.tar.gz.sig",
       "expanse_3.0.0_darwin_amd64.tar.gz", "expanse_3.0.0_darwin_amd64.tar.gz.sig",
       "manifest.json", "release.pub"});
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].arch, "amd64");
  EXPECT_EQ(picked[0].version, "1.10.0");
  EXPECT_EQ(picked[0].file, "expanse_1.10.0_linux_amd64.tar.gz");
  EXPECT_EQ(picked[1].arch, "arm64");
  EXPECT_EQ(picked[1].file, "expanse_1.3.0_linux_arm64.tar.gz");
}

TEST(RenderCliInstallerTest, RefusesWhatItCannotServeSafely) {
  EXPECT_EQ(RenderCliInstaller(Values("http://expanse.example:8443")).status().reason(),
            "invalid_url");
  CliInstallerValues v = Values();
  v.key_pem = "-----BEGIN PUBLIC KEY-----\n'; rm -rf /; '\n-----END PUBLIC KEY-----\n";
  EXPECT_EQ(RenderCliInstaller(v).status().reason(), "key_invalid");
  v = Values();
  v.archives.clear();
  EXPECT_EQ(RenderCliInstaller(v).status().reason(), "no_cli_archive");
}

// Placeholders are filled in one pass: a value holding a placeholder's name stays text, so a
// quote in the URL can never escape its quoted word (and '@' is refused outright).
TEST(RenderCliInstallerTest, AValueIsNeverFilledTwice) {
  EXPECT_EQ(RenderCliInstaller(Values("https://h/x'$(touch$IFS/tmp/p)'@BASE@")).status().reason(),
            "invalid_url");
  Result<std::string> script = RenderCliInstaller(Values("https://h/x'$(id)'"));
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_THAT(*script, HasSubstr(R"(default_base='https://h/x'\''$(id)'\''')"
                                 "\n"));
}

TEST(CliInstallLineTest, QuotesTheUrlOnlyWhenTheShellWouldReadIt) {
  EXPECT_EQ(CliInstallLine("https://expanse.example:8443/"),
            "curl -fsSL https://expanse.example:8443/install | sh");
  EXPECT_EQ(CliInstallLine("https://h/a&b"), "curl -fsSL 'https://h/a&b/install' | sh");
}

class CliInstallerRunTest : public ::testing::Test {
 protected:
  // Runs the rendered script with dash (Debian's sh) and `path` as PATH.
  SubprocessResult Run(const CliInstallerValues& values, const std::string& path,
                       std::vector<std::string> env = {}) {
    Result<std::string> script = RenderCliInstaller(values);
    EXPECT_TRUE(script.ok()) << script.status();
    EXPECT_TRUE(fs::WriteFileAtomically(tmp_.path(), "install.sh", *script, 0644).ok());
    SubprocessOptions run;
    run.argv = {"/bin/dash", tmp_ / "install.sh"};
    env.push_back("PATH=" + path);
    env.push_back("PREFIX=" + (tmp_ / "prefix"));
    run.env = env;
    run.timeout = std::chrono::seconds(30);
    Result<SubprocessResult> result = RunSubprocess(run);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SubprocessResult{};
  }

  expanse::testing::TempDir tmp_{"expanse_cli_installer"};
};

TEST_F(CliInstallerRunTest, IsValidPosixShellEvenForAHostileUrl) {
  for (const std::string url :
       {"https://expanse.example:8443", "https://h/$(touch$IFS/tmp/pwned)';id;x='&y=1"}) {
    Result<std::string> script = RenderCliInstaller(Values(url));
    ASSERT_TRUE(script.ok()) << url << ": " << script.status();
    ASSERT_TRUE(fs::WriteFileAtomically(tmp_.path(), "check.sh", *script, 0644).ok());
    SubprocessOptions run;
    run.argv = {"/bin/dash", "-n", tmp_ / "check.sh"};
    Result<SubprocessResult> result = RunSubprocess(run);
    ASSERT_TRUE(result.ok());
    EXPECT_TRUE(result->Succeeded()) << result->stderr_text;
  }
  // Run for real with such a URL: it is one word, never code; the download fails (nothing
  // listens on port 1), and nothing is installed.
  SubprocessResult r =
      Run(Values("https://127.0.0.1:1/$(touch$IFS" + (tmp_ / "pwned") + ")"), "/usr/bin:/bin");
  EXPECT_FALSE(r.Succeeded());
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "pwned"));
  EXPECT_THAT(r.stderr_text, HasSubstr("nothing was installed"));
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "prefix/bin/expanse"));
}

TEST_F(CliInstallerRunTest, RefusesPlainHttpOffLoopbackBeforeAnyDownload) {
  SubprocessResult r = Run(Values(), "/usr/bin:/bin", {"EXPANSE_URL=http://192.0.2.1:8443"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("refusing http://192.0.2.1:8443: not an https:// URL"));
  EXPECT_THAT(r.stderr_text, HasSubstr("nothing was installed"));
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "prefix"));
  // Loopback in front of a user part is another host to curl.
  r = Run(Values(), "/usr/bin:/bin", {"EXPANSE_URL=http://127.0.0.1:1@evil.example"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("a URL with a user part (@)"));
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "prefix"));
}

TEST_F(CliInstallerRunTest, RefusesToInstallWithoutOpenssl) {
  // A PATH with every tool the script needs but openssl.
  std::filesystem::create_directories(tmp_ / "bin");
  for (const char* tool : {"curl", "tar", "base64", "mktemp", "uname", "install", "mkdir", "rm",
                           "mv", "gzip", "cat", "cmp"}) {
    for (const char* dir : {"/usr/bin/", "/bin/"}) {
      if (access((std::string(dir) + tool).c_str(), X_OK) == 0) {
        std::filesystem::create_symlink(std::string(dir) + tool,
                                        tmp_ / ("bin/" + std::string(tool)));
        break;
      }
    }
  }
  SubprocessResult r = Run(Values(), tmp_ / "bin");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("openssl is needed to check the CLI's signature"));
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "prefix"));
}

}  // namespace
}  // namespace cli_installer_test
}  // namespace expanse::deploy
