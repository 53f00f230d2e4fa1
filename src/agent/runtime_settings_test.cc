#include "agent/runtime_settings.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::agent {
namespace runtime_settings_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RuntimeSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/expanse-settings-XXXXXX";
    dir_ = mkdtemp(dir);
    path_ = dir_ + "/daemon.env";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  void WriteFile(const std::string& text) { std::ofstream(path_) << text; }

  std::string dir_;
  std::string path_;
};

TEST_F(RuntimeSettingsTest, DefaultsWithoutFileOrEnvironment) {
  char* env[] = {nullptr};
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_TRUE(settings->cupti_enable);
  EXPECT_TRUE(settings->profiling_enable);
  EXPECT_TRUE(settings->profiling_agent_enable);
  EXPECT_EQ(settings->dcgm_host, "localhost:5555");
  EXPECT_EQ(settings->segment_upload_mode, "auto");
  EXPECT_TRUE(settings->pyspy.empty());
}

TEST_F(RuntimeSettingsTest, FileOverridesTheUnitEnvironment) {
  // The unit rendered for --profiling-agent=false sets 0; an operator's file turns it back on.
  std::string unit_value = "EXPANSE_PROFILING_AGENT_ENABLE=0";
  std::string proxy = "HTTPS_PROXY=http://proxy.example:3128";
  std::string unrelated = "PATH=/usr/bin";
  char* env[] = {unit_value.data(), proxy.data(), unrelated.data(), nullptr};
  WriteFile(
      "# seeded by the installer\n"
      "NO_PROXY=localhost,10.0.0.0/8\n"
      "EXPANSE_PROFILING_AGENT_ENABLE=1\n"
      "EXPANSE_CUPTI_ENABLE=0\n"
      "EXPANSE_DCGM_HOST=127.0.0.1:5555\n"
      "EXPANSE_DCGMI=/usr/bin/dcgmi\n"
      "EXPANSE_PYSPY=/opt/py-spy\n"
      "EXPANSE_SEGMENT_UPLOAD_MODE=relay\n"
      "SSL_CERT_FILE=/etc/ssl/private-ca.pem\n");
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_TRUE(settings->profiling_agent_enable);
  EXPECT_FALSE(settings->cupti_enable);
  EXPECT_EQ(settings->dcgm_host, "127.0.0.1:5555");
  EXPECT_EQ(settings->dcgmi, "/usr/bin/dcgmi");
  EXPECT_EQ(settings->pyspy, "/opt/py-spy");
  EXPECT_EQ(settings->segment_upload_mode, "relay");
  EXPECT_EQ(settings->https_proxy, "http://proxy.example:3128");
  EXPECT_EQ(settings->no_proxy, "localhost,10.0.0.0/8");
  EXPECT_EQ(settings->ssl_cert_file, "/etc/ssl/private-ca.pem");
  EXPECT_TRUE(settings->unknown_keys.empty());
}

TEST_F(RuntimeSettingsTest, UnitValueStandsWithoutFile) {
  std::string unit_value = "EXPANSE_PROFILING_AGENT_ENABLE=0";
  char* env[] = {unit_value.data(), nullptr};
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_FALSE(settings->profiling_agent_enable);
}

TEST_F(RuntimeSettingsTest, BadValuesNameKeyAndFile) {
  char* env[] = {nullptr};
  WriteFile("EXPANSE_CUPTI_ENABLE=yes\n");
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_FALSE(settings.ok());
  EXPECT_EQ(settings.status().reason(), "invalid_setting");
  EXPECT_THAT(settings.status().message(), HasSubstr(path_));
  EXPECT_THAT(settings.status().message(),
              HasSubstr("EXPANSE_CUPTI_ENABLE=\"yes\": expected 0 or 1"));

  WriteFile("EXPANSE_SEGMENT_UPLOAD_MODE=direct\n");
  settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status().message();
  EXPECT_EQ(settings->segment_upload_mode, "direct");

  WriteFile("EXPANSE_SEGMENT_UPLOAD_MODE=s3\n");
  settings = LoadRuntimeSettings(path_, env);
  ASSERT_FALSE(settings.ok());
  EXPECT_THAT(settings.status().message(), HasSubstr("expected auto, direct or relay"));

  WriteFile("EXPANSE_CUPTI_ENABLE\n");
  settings = LoadRuntimeSettings(path_, env);
  ASSERT_FALSE(settings.ok());
  EXPECT_THAT(settings.status().message(), HasSubstr("line 1"));
}

TEST_F(RuntimeSettingsTest, PythonStackDefaults) {
  char* env[] = {nullptr};
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_TRUE(settings->pystacks_enable);
  EXPECT_EQ(settings->pystacks_backend, "auto");
  EXPECT_DOUBLE_EQ(settings->pystacks_hz, 1.0);
  EXPECT_DOUBLE_EQ(settings->pystacks_burst_hz, 10.0);
  EXPECT_EQ(settings->pystacks_burst_seconds, 20);
  EXPECT_DOUBLE_EQ(settings->pystacks_cpu_percent, 1.0);
  EXPECT_EQ(settings->pystacks_window_seconds, 60);
}

TEST_F(RuntimeSettingsTest, PythonStackSettingsFromTheFile) {
  char* env[] = {nullptr};
  WriteFile(
      "EXPANSE_PYSTACKS_ENABLE=0\n"
      "EXPANSE_PYSTACKS_BACKEND=py-spy\n"
      "EXPANSE_PYSTACKS_HZ=0.5\n"
      "EXPANSE_PYSTACKS_BURST_HZ=4\n"
      "EXPANSE_PYSTACKS_BURST_SECONDS=0\n"
      "EXPANSE_PYSTACKS_CPU_PERCENT=2.5\n"
      "EXPANSE_PYSTACKS_WINDOW_SECONDS=300\n");
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_FALSE(settings->pystacks_enable);
  EXPECT_EQ(settings->pystacks_backend, "py-spy");
  EXPECT_DOUBLE_EQ(settings->pystacks_hz, 0.5);
  EXPECT_DOUBLE_EQ(settings->pystacks_burst_hz, 4.0);
  EXPECT_EQ(settings->pystacks_burst_seconds, 0);
  EXPECT_DOUBLE_EQ(settings->pystacks_cpu_percent, 2.5);
  EXPECT_EQ(settings->pystacks_window_seconds, 300);
  EXPECT_TRUE(settings->unknown_keys.empty());

  WriteFile("EXPANSE_PYSTACKS_BACKEND=native\nEXPANSE_PYSTACKS_HZ=10\n");
  settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->pystacks_backend, "native");
  EXPECT_DOUBLE_EQ(settings->pystacks_hz, 10.0);
}

TEST_F(RuntimeSettingsTest, PythonStackValuesOutOfRangeNameKeyAndRange) {
  char* env[] = {nullptr};
  const std::pair<const char*, const char*> cases[] = {
      {"EXPANSE_PYSTACKS_ENABLE=on", "EXPANSE_PYSTACKS_ENABLE=\"on\": expected 0 or 1"},
      {"EXPANSE_PYSTACKS_BACKEND=pyspy",
       "EXPANSE_PYSTACKS_BACKEND=\"pyspy\": expected auto, native or py-spy"},
      {"EXPANSE_PYSTACKS_HZ=0.05",
       "EXPANSE_PYSTACKS_HZ=\"0.05\": expected a number from 0.1 to 10"},
      {"EXPANSE_PYSTACKS_HZ=fast",
       "EXPANSE_PYSTACKS_HZ=\"fast\": expected a number from 0.1 to 10"},
      {"EXPANSE_PYSTACKS_HZ=nan", "expected a number from 0.1 to 10"},
      {"EXPANSE_PYSTACKS_HZ=", "EXPANSE_PYSTACKS_HZ=\"\": expected a number"},
      {"EXPANSE_PYSTACKS_HZ=1Hz", "EXPANSE_PYSTACKS_HZ=\"1Hz\": expected a number"},
      {"EXPANSE_PYSTACKS_BURST_HZ=20",
       "EXPANSE_PYSTACKS_BURST_HZ=\"20\": expected a number from 0.1 to 10"},
      {"EXPANSE_PYSTACKS_BURST_SECONDS=601",
       "EXPANSE_PYSTACKS_BURST_SECONDS=\"601\": expected a whole number from 0 to 600"},
      {"EXPANSE_PYSTACKS_BURST_SECONDS=2.5", "expected a whole number from 0 to 600"},
      {"EXPANSE_PYSTACKS_BURST_SECONDS=-1", "expected a whole number from 0 to 600"},
      {"EXPANSE_PYSTACKS_CPU_PERCENT=50",
       "EXPANSE_PYSTACKS_CPU_PERCENT=\"50\": expected a number from 0.1 to 10"},
      {"EXPANSE_PYSTACKS_WINDOW_SECONDS=5",
       "EXPANSE_PYSTACKS_WINDOW_SECONDS=\"5\": expected a whole number from 10 to 3600"},
      {"EXPANSE_PYSTACKS_WINDOW_SECONDS=99999999999", "expected a whole number from 10 to 3600"},
  };
  for (const auto& [line, message] : cases) {
    WriteFile(std::string(line) + "\n");
    auto settings = LoadRuntimeSettings(path_, env);
    ASSERT_FALSE(settings.ok()) << line;
    EXPECT_EQ(settings.status().reason(), "invalid_setting") << line;
    EXPECT_THAT(settings.status().message(), HasSubstr(path_)) << line;
    EXPECT_THAT(settings.status().message(), HasSubstr(message)) << line;
  }
}

TEST_F(RuntimeSettingsTest, LiveDetectionSettings) {
  char* env[] = {nullptr};
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_TRUE(settings->live_detection);
  EXPECT_EQ(settings->live_stuck_after_s, 600);
  EXPECT_EQ(settings->live_no_process_after_s, 600);
  WriteFile(
      "EXPANSE_LIVE_DETECTION=0\nEXPANSE_LIVE_STUCK_AFTER_S=10\n"
      "EXPANSE_LIVE_NO_PROCESS_AFTER_S=86400\n");
  settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_FALSE(settings->live_detection);
  EXPECT_EQ(settings->live_stuck_after_s, 10);
  EXPECT_EQ(settings->live_no_process_after_s, 86400);
  EXPECT_TRUE(settings->unknown_keys.empty());
  for (const char* line : {"EXPANSE_LIVE_STUCK_AFTER_S=9", "EXPANSE_LIVE_NO_PROCESS_AFTER_S=1h",
                           "EXPANSE_LIVE_DETECTION=yes"}) {
    WriteFile(std::string(line) + "\n");
    settings = LoadRuntimeSettings(path_, env);
    ASSERT_FALSE(settings.ok()) << line;
    EXPECT_EQ(settings.status().reason(), "invalid_setting") << line;
  }
}

TEST_F(RuntimeSettingsTest, UnknownExpanseKeysAreReported) {
  char* env[] = {nullptr};
  WriteFile("EXPANSE_CUPTI_ENABEL=0\nOTHER_TOOL=1\n");
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_THAT(settings->unknown_keys, ElementsAre("EXPANSE_CUPTI_ENABEL (" + path_ + ")"));
}

TEST_F(RuntimeSettingsTest, NvmlLibraryPath) {
  char* env[] = {nullptr};
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->nvml_library, "");  // the loader's libnvidia-ml.so.1

  WriteFile("EXPANSE_NVML_LIBRARY=/opt/fake-nvml/libnvidia-ml.so.1\n");
  settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->nvml_library, "/opt/fake-nvml/libnvidia-ml.so.1");
  EXPECT_TRUE(settings->unknown_keys.empty());
  EXPECT_THAT(settings->sources,
              ElementsAre(std::pair<std::string, std::string>("EXPANSE_NVML_LIBRARY", path_)));

  // From the environment alone (a unit's Environment=, a shell) when the file has none.
  std::string from_unit = "EXPANSE_NVML_LIBRARY=/usr/lib/other/libnvidia-ml.so.1";
  char* unit_env[] = {from_unit.data(), nullptr};
  unlink(path_.c_str());
  settings = LoadRuntimeSettings(path_, unit_env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->nvml_library, "/usr/lib/other/libnvidia-ml.so.1");

  for (const char* bad : {"libnvidia-ml.so.1", "", "fakes/nvml/libnvidia-ml.so.1"}) {
    WriteFile("EXPANSE_NVML_LIBRARY=" + std::string(bad) + "\n");
    settings = LoadRuntimeSettings(path_, env);
    ASSERT_FALSE(settings.ok()) << bad;
    EXPECT_EQ(settings.status().reason(), "invalid_setting");
    EXPECT_THAT(settings.status().message(),
                HasSubstr("EXPANSE_NVML_LIBRARY=\"" + std::string(bad) +
                          "\": expected the absolute path of libnvidia-ml.so.1"));
  }
}

// The daemon runs the CUPTI helper it names: a relative path would resolve against whatever
// directory the daemon was started in. Such a path is kept, not refused: the settings load (a
// typo must not stop all monitoring), and the counter helper refuses to run it, its `cupti`
// capability saying why (CounterHelper::Describe).
TEST_F(RuntimeSettingsTest, ARelativeCuptiHelperPathLoadsForTheHelperToRefuse) {
  char* env[] = {nullptr};
  WriteFile("EXPANSE_CUPTI_HELPER=/opt/expanse/bin/expanse-cupti-helper\n");
  auto settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->cupti_helper, "/opt/expanse/bin/expanse-cupti-helper");
  WriteFile("EXPANSE_CUPTI_HELPER=\n");  // empty: the per-node install
  settings = LoadRuntimeSettings(path_, env);
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->cupti_helper, "");
  for (const char* relative : {"expanse-cupti-helper", "bin/expanse-cupti-helper", "./helper"}) {
    WriteFile("EXPANSE_CUPTI_HELPER=" + std::string(relative) + "\nEXPANSE_DCGM_HOST=h:1\n");
    settings = LoadRuntimeSettings(path_, env);
    ASSERT_TRUE(settings.ok()) << relative << ": " << settings.status();
    EXPECT_EQ(settings->cupti_helper, relative);
    EXPECT_EQ(settings->dcgm_host, "h:1");  // the rest of the file still applies
  }
}

TEST_F(RuntimeSettingsTest, UnreadableFileIsAnError) {
  char* env[] = {nullptr};
  // A directory where the file should be cannot be read as one.
  const std::string as_dir = dir_ + "/dir.env";
  mkdir(as_dir.c_str(), 0700);
  auto settings = LoadRuntimeSettings(as_dir, env);
  rmdir(as_dir.c_str());
  ASSERT_FALSE(settings.ok());
  EXPECT_THAT(settings.status().message(), HasSubstr(as_dir));
}

}  // namespace
}  // namespace runtime_settings_test
}  // namespace expanse::agent
