// The fake dcgmi (tests/fakes/dcgm) run as the daemon will run the real one, its output read by
// this module's parsers: what the fake prints must be what the fixtures recorded, and a slow,
// hung or failing dcgmi must show up as such without a reader ever blocking on it.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/child_process.h"
#include "core/subprocess.h"
#include "core/test_temp_dir.h"
#include "dcgm/dcgmi_commands.h"
#include "dcgm/dmon_parser.h"
#include "dcgm/fixture_test_util.h"
#include "dcgm/health_parser.h"

namespace expanse::dcgm {
namespace fake_dcgmi_test {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr std::string_view kTwoH200s = R"({
  "gpus": [
    {"id": 0, "name": "NVIDIA H200", "pci_bus_id": "00000000:00:06.0",
     "uuid": "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0",
     "values": {"202": 14, "1002": 0.93, "1004": 0.5, "240": 81237609009}},
    {"id": 1, "name": "NVIDIA H200", "pci_bus_id": "00000000:00:07.0",
     "uuid": "GPU-0d3c3a2e-9b1f-4b7e-8f55-2a61c9d0e4b7",
     "values": {"230": 94, "311": 2}}
  ],
  "health": {"incidents": [
    {"entity_id": 0, "system": "PCIe system", "health": "Warning",
     "message": "Detected more than 8 PCIe replays per minute for GPU 0 : 12"},
    {"entity_id": 1, "system": "Memory system", "health": "Failure",
     "message": "Detected 2 volatile double-bit ECC error(s) in GPU 1."},
    {"entity_id": 1, "system": "Memory system", "health": "Failure",
     "message": "GPU 1 had memory errors and row remappings are pending"}]}
})";

class FakeDcgmiTest : public ::testing::Test {
 protected:
  std::string Scenario(std::string_view json) { return dir_.Write("scenario.json", json); }

  std::vector<std::string> Env() const {
    return {"EXPANSE_FAKE_DCGM_SCENARIO=" + dir_ / "scenario.json",
            "EXPANSE_FAKE_DCGM_STATE=" + dir_ / "state", "PATH=/usr/bin:/bin"};
  }

  DcgmiOptions Options() const {
    DcgmiOptions options;
    options.dcgmi = testing::FakeDcgmiPath();
    return options;
  }

  SubprocessResult Run(std::vector<std::string> argv, milliseconds timeout = milliseconds(10000)) {
    SubprocessOptions options;
    options.argv = std::move(argv);
    options.env = Env();
    options.timeout = timeout;
    options.kill_grace = milliseconds(200);
    Result<SubprocessResult> result = RunSubprocess(options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *std::move(result) : SubprocessResult{};
  }

  // `argv` with the fixture's command line: "dcgmi" replaced by the fake.
  std::vector<std::string> FixtureArgv(const testing::Fixture& fixture) {
    std::vector<std::string> argv;
    std::string_view rest = fixture.command;
    while (!rest.empty()) {
      const size_t end = rest.find(' ');
      argv.emplace_back(rest.substr(0, end));
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    }
    argv[0] = testing::FakeDcgmiPath();
    return argv;
  }

  std::unique_ptr<ChildProcess> Start(std::vector<std::string> argv) {
    Result<std::unique_ptr<ChildProcess>> child =
        ChildProcess::Start({std::move(argv), Env(), milliseconds(500)});
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  expanse::testing::TempDir dir_{"expanse_fake_dcgmi"};
};

TEST_F(FakeDcgmiTest, PrintsWhatTheFixturesRecorded) {
  Scenario(kTwoH200s);
  for (const std::string_view name : {"discovery_list.txt", "health_check_fail.txt",
                                      "health_set.txt", "dmon_invalid_field.txt"}) {
    const testing::Fixture fixture = testing::ReadFixture(name);
    const SubprocessResult result = Run(FixtureArgv(fixture));
    EXPECT_EQ(result.stdout_text + result.stderr_text, fixture.output) << name;
    EXPECT_EQ(result.exit_code, fixture.exit_status) << name;
  }
}

TEST_F(FakeDcgmiTest, FailuresPrintWhatTheFixturesRecorded) {
  struct Case {
    std::string_view scenario;
    std::string_view fixture;
  };
  const std::vector<Case> cases{
      {R"({"engine": "unreachable"})", "dmon_engine_unreachable.txt"},
      {R"({"engine": "unreachable"})", "health_engine_unreachable.txt"},
      {R"({"profiling": "module_not_loaded"})", "dmon_profiling_module_not_loaded.txt"},
      {R"({"health": {"enabled": false}})", "health_not_enabled.txt"},
  };
  for (const auto& c : cases) {
    Scenario(c.scenario);
    const testing::Fixture fixture = testing::ReadFixture(c.fixture);
    const SubprocessResult result = Run(FixtureArgv(fixture));
    // stdout first: dcgmi prints the dmon header before the watch error goes to stderr.
    EXPECT_EQ(result.stdout_text + result.stderr_text, fixture.output) << c.fixture;
    EXPECT_EQ(result.exit_code, fixture.exit_status) << c.fixture;
  }
}

TEST_F(FakeDcgmiTest, DmonRowsHaveTheRecordedLayout) {
  Scenario(kTwoH200s);
  const std::vector<uint16_t> ids = DmonFieldIds(true);
  std::vector<std::string> argv = DmonArgv(Options(), ids);
  argv.insert(argv.end(), {"-c", "1"});
  const SubprocessResult result = Run(argv);
  const testing::Fixture fixture = testing::ReadFixture("dmon_h200_dcp.txt");
  // The header pair is the fixture's, byte for byte.
  const size_t header_end = fixture.output.find('\n', fixture.output.find('\n') + 1) + 1;
  EXPECT_EQ(result.stdout_text.substr(0, header_end), fixture.output.substr(0, header_end));

  Result<DmonOutput> output = ParseDmonOutput(result.stdout_text, ids);
  ASSERT_TRUE(output.ok());
  ASSERT_EQ(output->samples.size(), 2u);
  EXPECT_EQ(output->counters.refused, 0u);
  EXPECT_EQ(output->samples[0].values[0].value, 14.0);
  EXPECT_EQ(output->samples[1].values[1].value, 94.0);  // XIDER
}

TEST_F(FakeDcgmiTest, StreamingDmonFollowsTheScenario) {
  Scenario(R"({"gpus": [{"id": 0, "values": {"1002": 0.25}}]})");
  const std::vector<uint16_t> ids{202, 1002};
  DcgmiOptions options = Options();
  options.interval = milliseconds(20);
  std::unique_ptr<ChildProcess> child = Start(DmonArgv(options, ids));
  ASSERT_NE(child, nullptr);
  Result<DmonParser> parser = DmonParser::Create(ids);
  ASSERT_TRUE(parser.ok());

  // Reads until `wanted` SM-active values arrived; each read waits at most 200 ms.
  auto read_sm_active = [&](size_t wanted) {
    std::vector<double> values;
    for (int reads = 0; reads < 100 && values.size() < wanted; ++reads) {
      for (const std::string& line : child->ReadLines(milliseconds(200), kMaxDmonLineBytes).lines) {
        DmonEvent event = parser->Feed(line);
        if (const auto* sample = std::get_if<DmonSample>(&event))
          values.push_back(sample->values[1].value.value_or(-1));
      }
    }
    return values;
  };
  const std::vector<double> before = read_sm_active(3);
  ASSERT_GE(before.size(), 3u);
  EXPECT_EQ(before[0], 0.25);

  // The fake re-reads its scenario every interval, as a GPU's counters change under dmon.
  Scenario(R"({"gpus": [{"id": 0, "values": {"1002": 0.75}}]})");
  bool changed = false;
  for (int tries = 0; tries < 20 && !changed; ++tries) {
    for (const double value : read_sm_active(1))
      changed = changed || value == 0.75;
  }
  EXPECT_TRUE(changed);
  EXPECT_EQ(parser->counters().refused, 0u);
  EXPECT_EQ(child->Stop(), 128 + 15);  // dcgmi's own SIGTERM handler: exit(128 + signum)
}

TEST_F(FakeDcgmiTest, HeaderIsSentAgainEvery14Intervals) {
  Scenario(R"({"gpus": [{"id": 0}]})");
  DcgmiOptions options = Options();
  options.interval = milliseconds(1);
  std::vector<std::string> argv = DmonArgv(options, std::vector<uint16_t>{202});
  argv.insert(argv.end(), {"-c", "30"});
  Result<DmonOutput> output = ParseDmonOutput(Run(argv).stdout_text, {202});
  ASSERT_TRUE(output.ok());
  EXPECT_EQ(output->samples.size(), 30u);
  EXPECT_EQ(output->counters.headers, 3u);  // first, after the 15th, after the 29th
}

TEST_F(FakeDcgmiTest, UnsupportedFieldIsNa) {
  Scenario(R"({"gpus": [{"id": 0}, {"id": 1}], "unsupported_fields": [1011, 1012]})");
  const std::vector<uint16_t> ids{1002, 1011, 1012};
  DcgmiOptions options = Options();
  options.interval = milliseconds(1);
  std::vector<std::string> argv = DmonArgv(options, ids);
  argv.insert(argv.end(), {"-c", "3"});
  const std::string text = Run(argv).stdout_text;
  Result<DmonParser> parser = DmonParser::Create(ids);
  ASSERT_TRUE(parser.ok());
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    (void)parser->Feed(rest.substr(0, end));
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  }
  EXPECT_EQ(parser->counters().samples, 6u);
  EXPECT_EQ(parser->field_stats()[0].present, 6u);
  EXPECT_EQ(parser->field_stats()[1].na, 6u);
  EXPECT_EQ(parser->field_stats()[2].na, 6u);
}

TEST_F(FakeDcgmiTest, GarbageLinesAreRefusedAndRowsStillRead) {
  Scenario(R"({"gpus": [{"id": 0}], "dmon": {"garbage_every": 1}})");
  DcgmiOptions options = Options();
  options.interval = milliseconds(1);
  std::vector<std::string> argv = DmonArgv(options, std::vector<uint16_t>{202, 1002});
  argv.insert(argv.end(), {"-c", "5"});
  Result<DmonOutput> output = ParseDmonOutput(Run(argv).stdout_text, {202, 1002});
  ASSERT_TRUE(output.ok());
  // The third interval's garbage is a header naming other columns ("#Entity BOGUS"): the two
  // rows after it are refused too, no header matching the fields having come since.
  EXPECT_EQ(output->samples.size(), 3u);
  EXPECT_EQ(output->counters.header_mismatches, 1u);
  EXPECT_EQ(output->counters.refused, 4u + 2u);
}

TEST_F(FakeDcgmiTest, EngineLostMidStream) {
  Scenario(R"({"gpus": [{"id": 0}], "dmon": {"lose_engine_after_rounds": 2}})");
  DcgmiOptions options = Options();
  options.interval = milliseconds(1);
  const SubprocessResult result = Run(DmonArgv(options, std::vector<uint16_t>{202}));
  EXPECT_EQ(result.exit_code, 235);
  Result<DmonOutput> output = ParseDmonOutput(result.stdout_text + result.stderr_text, {202});
  ASSERT_TRUE(output.ok());
  EXPECT_EQ(output->samples.size(), 2u);
  ASSERT_TRUE(output->error.has_value());
  EXPECT_EQ(output->error->failure, DcgmiFailure::kReadFailed);
}

TEST_F(FakeDcgmiTest, HungDcgmiIsCutOffByTheDeadline) {
  Scenario(R"({"hang": true})");
  const auto start = std::chrono::steady_clock::now();
  const SubprocessResult result = Run(HealthCheckArgv(Options()), milliseconds(300));
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.stdout_text, "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(FakeDcgmiTest, SilentDmonNeverBlocksTheReader) {
  // A dmon that prints its header and then nothing (hung in the host engine), and one that is
  // only slow: each read returns within its wait either way.
  for (const std::string_view scenario :
       {R"({"gpus": [{"id": 0}], "dmon": {"hang_after_rounds": 0}})",
        R"({"gpus": [{"id": 0}], "dmon": {"row_delay_ms": 2000}})"}) {
    Scenario(scenario);
    std::unique_ptr<ChildProcess> child = Start(DmonArgv(Options(), std::vector<uint16_t>{202}));
    ASSERT_NE(child, nullptr);
    size_t lines = 0;
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      lines += child->ReadLines(milliseconds(100), kMaxDmonLineBytes).lines.size();
      EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000)) << scenario;
    }
    EXPECT_LE(lines, 2u) << scenario;  // the header pair at most
    EXPECT_EQ(child->TryWait(), std::nullopt) << scenario;
    EXPECT_EQ(child->Stop(), 128 + 15) << scenario;
  }
}

TEST_F(FakeDcgmiTest, HealthWatchesOutliveTheClient) {
  Scenario(R"({"health": {"enabled": false}})");
  Result<HealthReport> before = ParseHealthCheck(Run(HealthCheckArgv(Options())).stdout_text);
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.status().reason(), "health_watches_not_enabled");

  const SubprocessResult set = Run(HealthSetArgv(Options()));
  EXPECT_EQ(set.exit_code, 0);
  EXPECT_THAT(set.stdout_text, HasSubstr("set successfully"));

  Result<HealthReport> after = ParseHealthCheck(Run(HealthCheckArgv(Options())).stdout_text);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->overall, Health::kPass);
}

}  // namespace
}  // namespace fake_dcgmi_test
}  // namespace expanse::dcgm
