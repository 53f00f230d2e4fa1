#include "dcgm/health_parser.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dcgm/fixture_test_util.h"

namespace expanse::dcgm {
namespace health_parser_test {
namespace {

using ::testing::HasSubstr;

HealthReport ParseOk(std::string_view text) {
  Result<HealthReport> report = ParseHealthCheck(text);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *std::move(report) : HealthReport{};
}

// The message of a malformed document (kInvalidArgument, reason dcgmi_health_output).
std::string Malformed(std::string_view text) {
  Result<HealthReport> report = ParseHealthCheck(text);
  if (report.ok())
    return "<parsed>";
  EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument) << report.status();
  EXPECT_EQ(report.status().reason(), "dcgmi_health_output");
  return report.status().message();
}

// {"body": {<body>, "Overall Health": {"value": "Warning"}}} with <body> spliced in.
std::string Document(std::string_view body) {
  std::string text = R"({"body": {)";
  text += body;
  if (!body.empty())
    text += ", ";
  text += R"("Overall Health": {"value": "Warning"}}, "header": ["Health Monitor Report"]})";
  return text;
}

TEST(HealthParserTest, FailingCheck) {
  const testing::Fixture fixture = testing::ReadFixture("health_check_fail.txt");
  const HealthReport report = ParseOk(fixture.output);
  EXPECT_EQ(report.overall, Health::kFail);
  ASSERT_EQ(report.entities.size(), 2u);

  const EntityHealth& gpu0 = report.entities[0];
  EXPECT_EQ(gpu0.entity_group, "GPU");
  EXPECT_EQ(gpu0.entity_id, 0u);
  EXPECT_EQ(gpu0.health, Health::kWarn);
  ASSERT_EQ(gpu0.incidents.size(), 1u);
  EXPECT_EQ(gpu0.incidents[0].system, "pcie");
  EXPECT_EQ(gpu0.incidents[0].system_label, "PCIe system");
  EXPECT_EQ(gpu0.incidents[0].health, Health::kWarn);
  // dcgmi broke the sentence in two; joined back it is whole again.
  EXPECT_EQ(gpu0.incidents[0].message,
            "Detected more than 8 PCIe replays per minute for GPU 0 : 12");

  const EntityHealth& gpu1 = report.entities[1];
  EXPECT_EQ(gpu1.entity_id, 1u);
  EXPECT_EQ(gpu1.health, Health::kFail);
  ASSERT_EQ(gpu1.incidents.size(), 1u);
  EXPECT_EQ(gpu1.incidents[0].system, "memory");
  EXPECT_EQ(gpu1.incidents[0].health, Health::kFail);
  EXPECT_EQ(gpu1.incidents[0].message,
            "Detected 2 volatile double-bit ECC error(s) in GPU 1., GPU 1 had memory errors and "
            "row remappings are pending");
}

TEST(HealthParserTest, PassingCheck) {
  const HealthReport report = ParseOk(testing::ReadFixture("health_check_pass.txt").output);
  EXPECT_EQ(report.overall, Health::kPass);
  EXPECT_TRUE(report.entities.empty());
}

TEST(HealthParserTest, WatchesNotEnabled) {
  const testing::Fixture fixture = testing::ReadFixture("health_not_enabled.txt");
  Result<HealthReport> report = ParseHealthCheck(fixture.output);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(report.status().reason(), "health_watches_not_enabled");
  EXPECT_THAT(report.status().message(), HasSubstr("Please enable watches"));
  EXPECT_EQ(fixture.exit_status, 253);
}

TEST(HealthParserTest, EngineUnreachable) {
  Result<HealthReport> report =
      ParseHealthCheck(testing::ReadFixture("health_engine_unreachable.txt").output);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(report.status().reason(), "engine_unreachable");
}

TEST(HealthParserTest, OtherPrintedErrors) {
  Result<HealthReport> report =
      ParseHealthCheck("Error: Unable to check health watches. Return: The Group is not found\n");
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(report.status().reason(), "health_check_failed");
}

TEST(HealthParserTest, HealthWordsAndSystems) {
  const HealthReport report = ParseOk(Document(R"(
    "GPU": {"children": {
      "10": {"value": "Failure", "children": {"Errors": {"children": {
        "Thermal system": {"value": "Warning", "overflow": ["too", "hot"]},
        "Internal error": {"value": "Internal error"},
        "Driver": {"value": "Failure", "overflow": []}}}}},
      "2": {"value": "Healthy"}}},
    "Switch": {"children": {"0": {"value": "Warning", "extra": 1}}},
    "ConnectX": {})"));
  EXPECT_EQ(report.overall, Health::kWarn);
  ASSERT_EQ(report.entities.size(), 3u);
  EXPECT_EQ(report.entities[0].entity_id, 2u);  // by number, not "10" < "2"
  EXPECT_TRUE(report.entities[0].incidents.empty());
  const EntityHealth& ten = report.entities[1];
  EXPECT_EQ(ten.entity_id, 10u);
  ASSERT_EQ(ten.incidents.size(), 3u);
  EXPECT_EQ(ten.incidents[0].system, "driver");
  EXPECT_EQ(ten.incidents[0].message, "");
  EXPECT_EQ(ten.incidents[1].system, "other");
  EXPECT_EQ(ten.incidents[1].health, Health::kUnknown);
  EXPECT_EQ(ten.incidents[2].system, "thermal");
  EXPECT_EQ(ten.incidents[2].message, "too hot");
  EXPECT_EQ(report.entities[2].entity_group, "Switch");
  EXPECT_EQ(HealthName(Health::kWarn), "warn");
  EXPECT_EQ(HealthName(Health::kUnknown), "unknown");
}

TEST(HealthParserTest, MalformedDocuments) {
  EXPECT_THAT(Malformed(""), HasSubstr("empty"));
  EXPECT_THAT(Malformed("Health Monitor Report\n"), HasSubstr("expected a JSON document"));
  EXPECT_THAT(Malformed("{\"body\": "), HasSubstr("dcgmi health JSON:"));
  EXPECT_THAT(Malformed("{\"header\": []}"), HasSubstr("body is required"));
  EXPECT_THAT(Malformed("{\"body\": []}"), HasSubstr("body must be an object"));
  EXPECT_THAT(Malformed("{\"body\": {}}"), HasSubstr("\"Overall Health\" must be an object"));
  EXPECT_THAT(Malformed(R"({"body": {"Overall Health": {"value": 2}}})"),
              HasSubstr("body.\"Overall Health\".value must be a string"));
  EXPECT_THAT(Malformed(Document(R"("GPU": [])")), HasSubstr("body.\"GPU\" must be an object"));
  EXPECT_THAT(Malformed(Document(R"("GPU": {"children": {"x": {"value": "Healthy"}}})")),
              HasSubstr("body.\"GPU\".children.\"x\" is not an entity id"));
  EXPECT_THAT(Malformed(Document(R"("GPU": {"children": {"-1": {"value": "Healthy"}}})")),
              HasSubstr("is not an entity id"));
  EXPECT_THAT(Malformed(Document(R"("GPU": {"children": {"7": {}}})")),
              HasSubstr("body.\"GPU\".children.\"7\".value must be a string"));
  EXPECT_THAT(Malformed(Document(R"("GPU": {"children": {"7": {"value": "Failure",
                "children": {"Errors": {"children": {"Power system": {"value": "Failure",
                "overflow": [1]}}}}}}})")),
              HasSubstr(".\"Power system\".overflow must be an array of strings"));
  EXPECT_THAT(Malformed(Document(R"("GPU": {"children": {"7": {"value": "Failure",
                "children": {"Errors": {"children": {"Power system": {"value": "Failure",
                "overflow": ["\u001b[31m"]}}}}}}})")),
              HasSubstr("must hold printable text"));
  EXPECT_THAT(Malformed(Document(R"("GPU": {"children": {"7": {"value": "Failure",
                "children": []}}})")),
              HasSubstr("children must be an object"));
  EXPECT_THAT(Malformed("{\"body\": {\"Overall Health\": {\"value\": \"ok\"}}} trailing"),
              HasSubstr("dcgmi health JSON:"));
}

TEST(HealthParserTest, LimitsAreEnforced) {
  // Nesting far past the format's ten levels stops at the parser's limit.
  std::string deep = "{\"body\": ";
  for (int i = 0; i < 100; ++i)
    deep += "[";
  EXPECT_THAT(Malformed(deep), HasSubstr("dcgmi health JSON:"));

  EXPECT_THAT(Malformed(std::string(kMaxHealthOutputBytes + 1, ' ')), HasSubstr("longer than"));

  std::string many;
  for (size_t i = 0; i <= kMaxHealthEntities; ++i)
    many += (i ? "," : "") + ("\"" + std::to_string(i) + R"(": {"value": "Warning"})");
  EXPECT_THAT(Malformed(Document("\"GPU\": {\"children\": {" + many + "}}")),
              HasSubstr("more than 1024 entities"));

  std::string pieces;
  for (int i = 0; i < 100; ++i)
    pieces += std::string(i ? "," : "") + "\"" + std::string(60, 'm') + "\"";
  EXPECT_THAT(Malformed(Document(R"("GPU": {"children": {"1": {"value": "Failure",
                "children": {"Errors": {"children": {"Memory system": {"value": "Failure",
                "overflow": [)" + pieces +
                                 "]}}}}}}}")),
              HasSubstr("longer than 4096 bytes"));
}

}  // namespace
}  // namespace health_parser_test
}  // namespace expanse::dcgm
