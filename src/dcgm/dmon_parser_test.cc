#include "dcgm/dmon_parser.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dcgm/fixture_test_util.h"

namespace expanse::dcgm {
namespace dmon_parser_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

std::optional<double> ValueOf(const DmonSample& sample, uint16_t field_id) {
  for (const DmonValue& value : sample.values) {
    if (value.field_id == field_id)
      return value.value;
  }
  ADD_FAILURE() << "no field " << field_id;
  return std::nullopt;
}

DmonOutput ParseFixture(std::string_view name) {
  const testing::Fixture fixture = testing::ReadFixture(name);
  Result<DmonOutput> output = ParseDmonOutput(fixture.output, testing::FixtureFieldIds(fixture));
  EXPECT_TRUE(output.ok()) << output.status();
  return output.ok() ? *std::move(output) : DmonOutput{};
}

DmonParser Parser(std::vector<uint16_t> ids) {
  Result<DmonParser> parser = DmonParser::Create(std::move(ids));
  EXPECT_TRUE(parser.ok()) << parser.status();
  return *std::move(parser);
}

TEST(DmonParserTest, TwoH200sWithDcpFields) {
  const DmonOutput output = ParseFixture("dmon_h200_dcp.txt");
  ASSERT_EQ(output.samples.size(), 32u);   // 16 intervals, 2 GPUs
  EXPECT_EQ(output.counters.headers, 2u);  // the first, and again after the 15th interval
  EXPECT_EQ(output.counters.header_mismatches, 0u);
  EXPECT_EQ(output.counters.refused, 0u);
  EXPECT_EQ(output.counters.errors, 0u);
  EXPECT_EQ(output.error, std::nullopt);

  const DmonSample& busy = output.samples[0];
  EXPECT_EQ(busy.gpu_id, 0u);
  ASSERT_EQ(busy.values.size(), 26u);
  EXPECT_THAT(ValueOf(busy, 202), Optional(14.0));
  EXPECT_EQ(ValueOf(busy, 230), std::nullopt);  // no XID yet
  EXPECT_THAT(ValueOf(busy, 240), Optional(::testing::DoubleEq(81.237609009)));
  EXPECT_EQ(ValueOf(busy, 390), std::nullopt);  // Hopper retires no pages: N/A
  EXPECT_THAT(ValueOf(busy, 449), Optional(178012.0 * 1024000.0));
  EXPECT_THAT(ValueOf(busy, 1002), Optional(0.936));
  EXPECT_THAT(ValueOf(busy, 1003), Optional(0.393));
  EXPECT_THAT(ValueOf(busy, 1004), Optional(0.512));
  EXPECT_THAT(ValueOf(busy, 1005), Optional(0.609));
  EXPECT_THAT(ValueOf(busy, 1009), Optional(252616424.0));
  EXPECT_THAT(ValueOf(busy, 1011), Optional(90060607378.0));

  const DmonSample& broken = output.samples[1];
  EXPECT_EQ(broken.gpu_id, 1u);
  EXPECT_THAT(ValueOf(broken, 230), Optional(94.0));  // the last XID
  EXPECT_THAT(ValueOf(broken, 311), Optional(2.0));
  EXPECT_THAT(ValueOf(broken, 393), Optional(1.0));
  EXPECT_THAT(ValueOf(broken, 396), Optional(1.0));
  EXPECT_THAT(ValueOf(broken, 1002), Optional(0.0));
  EXPECT_EQ(output.counters.values_na, 32u * 3 + 16u);  // retired pages on both, XID on GPU 0
}

TEST(DmonParserTest, FieldStatsShowAlwaysMissingFields) {
  const testing::Fixture fixture = testing::ReadFixture("dmon_no_nvlink_na.txt");
  DmonParser parser = Parser(testing::FixtureFieldIds(fixture));
  std::string_view text = fixture.output;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    (void)parser.Feed(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  EXPECT_EQ(parser.counters().samples, 3u);
  for (const DmonFieldStats& stats : parser.field_stats()) {
    // No NVLink on this GPU, and no XID so far.
    const bool absent = (stats.field_id >= 409 && stats.field_id <= 449) || stats.field_id == 230;
    EXPECT_EQ(stats.na, absent ? 3u : 0u) << stats.field_id;
    EXPECT_EQ(stats.present, absent ? 0u : 3u) << stats.field_id;
  }
}

TEST(DmonParserTest, Dcgm33Layout) {
  // "#Entity" and the entity column 10 wide, as DCGM 3.3 printed them.
  const DmonOutput output = ParseFixture("dmon_dcgm33_layout.txt");
  ASSERT_EQ(output.samples.size(), 4u);
  EXPECT_EQ(output.counters.header_mismatches, 0u);
  EXPECT_THAT(ValueOf(output.samples[0], 1004), Optional(0.543));
  EXPECT_EQ(output.samples[3].gpu_id, 1u);
}

TEST(DmonParserTest, OldHeaderSpelling) {
  // Before 2.4: "# Entity" and an indented "Id" (NVIDIA/DCGM issue #7).
  DmonParser parser = Parser({1004, 1005});
  EXPECT_TRUE(std::holds_alternative<DmonSkipped>(parser.Feed("# Entity  TENSO  DRAMA")));
  EXPECT_TRUE(std::holds_alternative<DmonSkipped>(parser.Feed("      Id")));
  EXPECT_TRUE(std::holds_alternative<DmonSample>(parser.Feed("GPU 3     0.100  0.200")));
  EXPECT_EQ(parser.counters().headers, 1u);
  EXPECT_EQ(parser.counters().header_mismatches, 0u);
}

TEST(DmonParserTest, EngineUnreachable) {
  const DmonOutput output = ParseFixture("dmon_engine_unreachable.txt");
  EXPECT_TRUE(output.samples.empty());
  EXPECT_EQ(output.counters.errors, 2u);
  ASSERT_TRUE(output.error.has_value());
  EXPECT_EQ(output.error->failure, DcgmiFailure::kEngineUnreachable);
}

TEST(DmonParserTest, ProfilingModuleNotLoaded) {
  const DmonOutput output = ParseFixture("dmon_profiling_module_not_loaded.txt");
  EXPECT_TRUE(output.samples.empty());
  EXPECT_EQ(output.counters.headers, 1u);
  EXPECT_EQ(output.counters.refused, 0u);
  ASSERT_TRUE(output.error.has_value());
  EXPECT_EQ(output.error->failure, DcgmiFailure::kWatchFailed);
  EXPECT_EQ(output.error->dcgm_return, -33);
}

TEST(DmonParserTest, InvalidField) {
  const testing::Fixture fixture = testing::ReadFixture("dmon_invalid_field.txt");
  // 9999 is not in the catalogue, so the parser reads the line for the fields it knows.
  Result<DmonOutput> output = ParseDmonOutput(fixture.output, {202});
  ASSERT_TRUE(output.ok());
  ASSERT_TRUE(output->error.has_value());
  EXPECT_EQ(output->error->failure, DcgmiFailure::kInvalidField);
  EXPECT_EQ(fixture.exit_status, 255);
}

TEST(DmonParserTest, ConnectionLostMidStream) {
  const DmonOutput output = ParseFixture("dmon_connection_lost.txt");
  EXPECT_EQ(output.samples.size(), 6u);
  ASSERT_TRUE(output.error.has_value());
  EXPECT_EQ(output.error->failure, DcgmiFailure::kReadFailed);
  EXPECT_EQ(output.error->dcgm_return, -21);
}

TEST(DmonParserTest, OtherEntitiesAreSkipped) {
  DmonParser parser = Parser({1002});
  for (const std::string_view line :
       {"GPU-I 21  0.000", "GPU-CI 3  0.5", "GPU 0 LINK 1  12", "Switch 0  1", "CPU Core 12  1",
        "SW 1 LINK 2  0", "CX 0  1", "UNKNOWN 0  1"}) {
    EXPECT_TRUE(std::holds_alternative<DmonSkipped>(parser.Feed(line))) << line;
  }
  EXPECT_EQ(parser.counters().other_entities, 8u);
  EXPECT_EQ(parser.counters().samples, 0u);
}

TEST(DmonParserTest, HeaderMismatchIsCountedNotFatal) {
  DmonParser parser = Parser({1002, 1004});
  (void)parser.Feed("#Entity   SMACT   DRAMA");  // another field than asked for
  (void)parser.Feed("#Entity   SMACT");          // too few
  (void)parser.Feed("#Entity   SMACT   TENSO");  // right
  EXPECT_EQ(parser.counters().headers, 3u);
  EXPECT_EQ(parser.counters().header_mismatches, 2u);
  EXPECT_TRUE(std::holds_alternative<DmonSample>(parser.Feed("GPU 0  0.5  0.25")));
}

TEST(DmonParserTest, UnderAHeaderOrderingTheFieldsOtherwiseCellsAreReadByItsColumns) {
  // Cells are read by the header's columns: under one that orders them otherwise, "GPU 0 7 5"
  // is an XID of 7 and 5 PCIe replays, never 7 PCIe replays out of an XID.
  DmonParser parser = Parser({202, 230});  // PCIe replays, last XID
  (void)parser.Feed("#Entity   RPCTR   XIDER");
  DmonEvent row = parser.Feed("GPU 0  7  5");
  ASSERT_TRUE(std::holds_alternative<DmonSample>(row));
  EXPECT_THAT(ValueOf(std::get<DmonSample>(row), 202), Optional(7.0));
  (void)parser.Feed("#Entity   XIDER   RPCTR");
  row = parser.Feed("GPU 0  7  5");
  ASSERT_TRUE(std::holds_alternative<DmonSample>(row));
  const DmonSample& sample = std::get<DmonSample>(row);
  ASSERT_EQ(sample.values.size(), 2u);  // still in `-e` order
  EXPECT_EQ(sample.values[0].field_id, 202);
  EXPECT_THAT(sample.values[0].value, Optional(5.0));
  EXPECT_EQ(sample.values[1].field_id, 230);
  EXPECT_THAT(sample.values[1].value, Optional(7.0));
  EXPECT_EQ(parser.field_stats()[0].present, 2u);
  EXPECT_EQ(parser.counters().header_mismatches, 0u);
  EXPECT_EQ(parser.counters().headers_reordered, 1u);
  EXPECT_EQ(parser.counters().refused, 0u);
  EXPECT_EQ(parser.other_header(), "");
  // A row with N/A in the moved column counts against the right field.
  (void)parser.Feed("GPU 1  N/A  3");
  EXPECT_EQ(parser.field_stats()[1].na, 1u);
  EXPECT_EQ(parser.field_stats()[0].na, 0u);
}

TEST(DmonParserTest, RowsUnderAHeaderNamingOtherColumnsAreRefusedUntilTheRightOneReturns) {
  DmonParser parser = Parser({202, 230});
  (void)parser.Feed("#Entity   RPCTR   XIDER");
  EXPECT_TRUE(std::holds_alternative<DmonSample>(parser.Feed("GPU 0  7  5")));
  // Another tag for one field (another DCGM version): which column is which is not known.
  (void)parser.Feed("#Entity   RPCTR   XIDR2");
  EXPECT_THAT(std::get<DmonRefused>(parser.Feed("GPU 0  7  5")).why,
              HasSubstr("under a header naming other columns"));
  EXPECT_TRUE(std::holds_alternative<DmonRefused>(parser.Feed("GPU 1  7  5")));
  EXPECT_EQ(parser.other_header(), "RPCTR XIDR2");
  EXPECT_EQ(parser.counters().samples, 1u);
  EXPECT_EQ(parser.counters().refused, 2u);
  EXPECT_EQ(parser.counters().header_mismatches, 1u);
  // Too few or too many, or one twice, is no permutation either.
  for (std::string_view header :
       {"#Entity   RPCTR", "#Entity   RPCTR   XIDER   SMACT", "#Entity   RPCTR   RPCTR"}) {
    (void)parser.Feed(header);
    EXPECT_TRUE(std::holds_alternative<DmonRefused>(parser.Feed("GPU 0  7  5"))) << header;
  }
  EXPECT_EQ(parser.counters().header_mismatches, 4u);
  (void)parser.Feed("#Entity   RPCTR   XIDER");
  EXPECT_EQ(parser.other_header(), "");
  const DmonEvent row = parser.Feed("GPU 0  7  5");
  ASSERT_TRUE(std::holds_alternative<DmonSample>(row));
  EXPECT_THAT(ValueOf(std::get<DmonSample>(row), 202), Optional(7.0));
}

TEST(DmonParserTest, TheOtherHeaderIsKeptEscapedAndCut) {
  DmonParser parser = Parser({202});
  (void)parser.Feed("#Entity   \x1b[31mRED " + std::string(1000, 'A'));
  EXPECT_LE(parser.other_header().size(), 260u);
  EXPECT_EQ(parser.other_header().find('\x1b'), std::string::npos);
}

TEST(DmonParserTest, CellsThatAreNotValues) {
  DmonParser parser = Parser({202, 1002, 1009});
  struct Case {
    std::string_view line;
    std::optional<double> replays, sm_active, pcie_tx;
  };
  for (const Case& c : std::vector<Case>{
           {"GPU 0  1  0.500  100", 1.0, 0.5, 100.0},
           {"GPU 0  N/A  N/A  N/A", std::nullopt, std::nullopt, std::nullopt},
           {"GPU 0  12345678...  0.5  1", std::nullopt, 0.5, 1.0},  // cut to the column
           {"GPU 0  -5  0.5  1", std::nullopt, 0.5, 1.0},           // negative
           {"GPU 0  1e3  NAN  INF", std::nullopt, std::nullopt, std::nullopt},
           {"GPU 0  0x10  nan  inf", std::nullopt, std::nullopt, std::nullopt},
           {"GPU 0  1  3.500  1", 1.0, std::nullopt, 1.0},  // not a ratio any more
           {"GPU 0  1  1.004  1", 1.0, 1.004, 1.0},         // DCGM's rounding: kept
           {"GPU 0  +1  abc  1.5.5", std::nullopt, std::nullopt, std::nullopt},
           {"GPU 0  1  -0.000  1e99999", 1.0, 0.0, std::nullopt},
       }) {
    DmonEvent event = parser.Feed(c.line);
    const auto* sample = std::get_if<DmonSample>(&event);
    ASSERT_NE(sample, nullptr) << c.line;
    EXPECT_EQ(ValueOf(*sample, 202), c.replays) << c.line;
    EXPECT_EQ(ValueOf(*sample, 1002), c.sm_active) << c.line;
    EXPECT_EQ(ValueOf(*sample, 1009), c.pcie_tx) << c.line;
  }
  EXPECT_EQ(parser.counters().values_truncated, 1u);
  EXPECT_EQ(parser.counters().values_na, 3u);
  EXPECT_EQ(parser.counters().values_refused, 12u);
  EXPECT_EQ(parser.field_stats()[0].refused, 5u);  // the truncated cell too
}

TEST(DmonParserTest, GarbageIsRefusedAndCounted) {
  DmonParser parser = Parser({202, 1002});
  const std::string nul_line("\0GPU 0  1  0.5", 14);
  for (const std::string_view line :
       {std::string_view("GPU 0  1"), std::string_view("GPU 0  1  0.5  7"),
        std::string_view("GPU x  1  0.5"), std::string_view("GPU 99999999999  1  0.5"),
        std::string_view("#Entitlement"), std::string_view("\x01\x02\x03"),
        std::string_view("Segmentation fault"), std::string_view("GPU"),
        std::string_view(nul_line)}) {
    DmonEvent event = parser.Feed(line);
    const auto* refused = std::get_if<DmonRefused>(&event);
    ASSERT_NE(refused, nullptr) << line;
    EXPECT_FALSE(refused->why.empty());
  }
  EXPECT_EQ(parser.counters().refused, 9u);
  EXPECT_EQ(parser.counters().samples, 0u);
  DmonEvent event = parser.Feed("GPU 0  1  0.5");
  EXPECT_THAT(std::get<DmonRefused>(parser.Feed("GPU 0  1")).why,
              HasSubstr("has 1 values for 2 fields"));
  EXPECT_TRUE(std::holds_alternative<DmonSample>(event));  // and it carries on
}

TEST(DmonParserTest, LineEndingsAndBlanks) {
  DmonParser parser = Parser({202});
  EXPECT_TRUE(std::holds_alternative<DmonSample>(parser.Feed("GPU 0\t7\r\n")));
  EXPECT_TRUE(std::holds_alternative<DmonSkipped>(parser.Feed("")));
  EXPECT_TRUE(std::holds_alternative<DmonSkipped>(parser.Feed("   \r")));
  EXPECT_EQ(parser.counters().lines, 3u);
}

TEST(DmonParserTest, OversizedLineIsRefusedUnread) {
  DmonParser parser = Parser({202});
  const std::string line = "GPU 0 " + std::string(kMaxDmonLineBytes, '1');
  DmonEvent event = parser.Feed(line);
  ASSERT_TRUE(std::holds_alternative<DmonRefused>(event));
  EXPECT_THAT(std::get<DmonRefused>(event).why, HasSubstr("longer than 8192"));
  EXPECT_EQ(parser.counters().oversized, 1u);
  EXPECT_EQ(parser.counters().refused, 1u);
}

TEST(DmonParserTest, RefusalQuotesHostileText) {
  DmonParser parser = Parser({202});
  const std::string why = std::get<DmonRefused>(parser.Feed("\x1b[2Jboom\"")).why;
  EXPECT_EQ(why, "not dmon output: \"\\x1B[2Jboom\\\"\"");
}

TEST(DmonParserTest, CreateChecksTheFields) {
  EXPECT_FALSE(DmonParser::Create({}).ok());
  EXPECT_FALSE(DmonParser::Create({202, 202}).ok());
  Result<DmonParser> unknown = DmonParser::Create({202, 9999});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("field 9999 is not one Expanse reads"));
  EXPECT_FALSE(DmonParser::Create(std::vector<uint16_t>(kMaxDmonFields + 1, 202)).ok());
  EXPECT_TRUE(DmonParser::Create(DmonFieldIds(true)).ok());
}

}  // namespace
}  // namespace dmon_parser_test
}  // namespace expanse::dcgm
