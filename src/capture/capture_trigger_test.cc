#include "capture/capture_trigger.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace expanse::capture {
namespace {

TEST(ParseTrigger, ReadsWhatTriggerJsonWrites) {
  const CaptureTrigger t{"trig-7", 1700000000000, "gpu_idle", {"GPU-a", "GPU-b"}};
  std::string error;
  const auto parsed = ParseTrigger(TriggerJson(t), &error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->id, "trig-7");
  EXPECT_EQ(parsed->until_ms, 1700000000000u);
  EXPECT_EQ(parsed->reason, "gpu_idle");
  EXPECT_EQ(parsed->gpus, (std::vector<std::string>{"GPU-a", "GPU-b"}));
}

TEST(ParseTrigger, RefusesWhatIsNotATrigger) {
  for (const char* text : {"", "[]", "not json", R"({"until_ms": 5})",
                           R"({"id": "", "until_ms": 5})", R"({"id": "x", "until_ms": -5})",
                           R"({"id": "x", "until_ms": "5"})", R"({"id": 7, "until_ms": 5})"}) {
    std::string error;
    EXPECT_FALSE(ParseTrigger(text, &error)) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
  std::string error;
  EXPECT_FALSE(
      ParseTrigger(R"({"id": ")" + std::string(200, 'x') + R"(", "until_ms": 1})", &error));
}

// The reason and GPUs are cut to 64 bytes at a character's start, never through one: half a
// character would make the JSON written of the trigger invalid (TriggerJson threw on it).
TEST(ParseTrigger, CutsLongTextAtACharactersStartAndRefusesAnIdThatIsNotText) {
  const std::string long_text = std::string(63, 'a') + "\xC3\xA9";  // 65 bytes, 'é' across 64
  const nlohmann::json doc = {
      {"id", "t"}, {"until_ms", 5}, {"reason", long_text}, {"gpus", {long_text}}};
  std::string error;
  const auto parsed = ParseTrigger(doc.dump(), &error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->reason, std::string(63, 'a'));
  EXPECT_EQ(parsed->gpus, (std::vector<std::string>{std::string(63, 'a')}));
  EXPECT_NO_THROW(EXPECT_TRUE(ParseTrigger(TriggerJson(*parsed), &error)));

  EXPECT_FALSE(ParseTrigger(R"({"id": "a\tb", "until_ms": 5})", &error));
  EXPECT_FALSE(error.empty());
}

class ReadTriggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/capture_trigger_XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directory(dir_ + "/phase-b");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/phase-b/" + name) << text;
  }
  std::string dir_;
};

TEST_F(ReadTriggerTest, NoFileIsNoTriggerAndNoError) {
  std::string error;
  EXPECT_FALSE(ReadTrigger(dir_, "42", &error));
  EXPECT_EQ(error, "");
}

TEST_F(ReadTriggerTest, ReadsTheJobsFile) {
  Write("42", R"({"id": "a", "until_ms": 99, "reason": "throughput_drop"})");
  std::string error;
  const auto t = ReadTrigger(dir_, "42", &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->reason, "throughput_drop");
  EXPECT_FALSE(ReadTrigger(dir_, "43", &error));
}

TEST_F(ReadTriggerTest, RefusesLinksOversizedFilesAndBadContent) {
  Write("real", R"({"id": "a", "until_ms": 99})");
  ASSERT_EQ(symlink((dir_ + "/phase-b/real").c_str(), (dir_ + "/phase-b/42").c_str()), 0);
  std::string error;
  EXPECT_FALSE(ReadTrigger(dir_, "42", &error));
  EXPECT_NE(error.find("phase-b/42"), std::string::npos) << error;

  Write("43", std::string(kMaxTriggerBytes + 1, ' '));
  error.clear();
  EXPECT_FALSE(ReadTrigger(dir_, "43", &error));
  EXPECT_NE(error.find("at most"), std::string::npos) << error;

  Write("44", "{broken");
  error.clear();
  EXPECT_FALSE(ReadTrigger(dir_, "44", &error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
}

TEST_F(ReadTriggerTest, AJobIdThatIsNotSlurmsIsNeverAPath) {
  Write("x", R"({"id": "a", "until_ms": 99})");
  std::string error;
  for (const char* job : {"", "../phase-b/x", "x", "42/..", "4 2"})
    EXPECT_FALSE(ReadTrigger(dir_, job, &error)) << job;
  EXPECT_EQ(error, "");
}

}  // namespace
}  // namespace expanse::capture
