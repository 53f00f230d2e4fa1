#include "gpu/nvidia_smi_parse.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/nvidia_smi_test_util.h"

namespace expanse::gpu {
namespace nvidia_smi_parse_test {
namespace {

using ::testing::ElementsAre;
using testing::FixtureOutput;
using testing::FixtureQueryFields;
using ::testing::IsEmpty;
using ::testing::Optional;

constexpr std::string_view kUuid = "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0";

std::vector<GpuQueryRow> ParseOk(std::string_view text, std::span<const std::string_view> fields,
                                 CsvHeader header) {
  Result<std::vector<GpuQueryRow>> rows = ParseGpuQueryCsv(text, fields, header);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *std::move(rows) : std::vector<GpuQueryRow>{};
}

// The message of a parse that must fail with kInvalidArgument, reason nvidia_smi_output.
std::string ParseError(std::string_view text, CsvHeader header = CsvHeader::kAbsent,
                       std::span<const std::string_view> fields = kGpuQueryFields) {
  Result<std::vector<GpuQueryRow>> rows = ParseGpuQueryCsv(text, fields, header);
  if (rows.ok())
    return "<parsed>";
  EXPECT_EQ(rows.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rows.status().reason(), "nvidia_smi_output");
  return rows.status().message();
}

// A noheader,nounits line for kGpuQueryFields: the busy fixture's values, with `column`
// replaced by `value` when given.
std::string BusyLine(std::string_view column = "", std::string_view value = "") {
  std::vector<std::string> cells = {"0",           std::string(kUuid),
                                    "NVIDIA H200", "00000000:00:06.0",
                                    "580.159.04",  "143771",
                                    "31859",       "100",
                                    "24",          "53",
                                    "694.77",      "1455",
                                    "3201",        "0x0000000000000004",
                                    "0",           "0"};
  for (size_t i = 0; i < kGpuQueryFields.size(); ++i) {
    if (kGpuQueryFields[i] == column)
      cells[i] = std::string(value);
  }
  std::string line;
  for (const std::string& cell : cells)
    line += (line.empty() ? "" : ", ") + cell;
  return line + "\n";
}

void ExpectBusy(const GpuQueryRow& row) {
  EXPECT_EQ(row.info.index, 0u);
  EXPECT_FALSE(row.info.minor.has_value());
  EXPECT_EQ(row.info.uuid, kUuid);
  EXPECT_EQ(row.info.name, "NVIDIA H200");
  EXPECT_EQ(row.info.pci_bus_id, "00000000:00:06.0");
  EXPECT_THAT(row.info.memory_total_mib, Optional(143771u));
  EXPECT_EQ(row.driver_version, "580.159.04");
  const GpuReading& r = row.reading;
  EXPECT_EQ(r.uuid, kUuid);
  EXPECT_THAT(r.mem_used_mib, Optional(31859.0));
  EXPECT_THAT(r.sm_util, Optional(100.0));
  EXPECT_THAT(r.mem_util, Optional(24.0));
  EXPECT_THAT(r.temp_c, Optional(53.0));
  EXPECT_THAT(r.power_w, Optional(694.77));
  EXPECT_THAT(r.sm_clock_mhz, Optional(1455.0));
  EXPECT_THAT(r.mem_clock_mhz, Optional(3201.0));
  EXPECT_THAT(r.clock_event_reasons, Optional(0x4u));
  EXPECT_THAT(r.ecc_uncorrected, Optional(0u));
  EXPECT_THAT(r.ecc_corrected, Optional(0u));
}

TEST(NvidiaSmiParseTest, BusyCsvWithHeaderAndUnits) {
  // The capture queried 23 fields; the 7 this parser does not read (memory.free, power.limit,
  // clocks.max.sm, pstate, fan.speed "[N/A]", compute_mode, mig.mode.current) are skipped.
  const std::vector<GpuQueryRow> rows =
      ParseOk(FixtureOutput("nvsmi_query_busy.csv"), kGpuQueryFields, CsvHeader::kPresent);
  ASSERT_EQ(rows.size(), 1u);
  ExpectBusy(rows[0]);
}

TEST(NvidiaSmiParseTest, IdleCsvWithHeaderAndUnits) {
  const std::vector<GpuQueryRow> rows =
      ParseOk(FixtureOutput("nvsmi_query_idle.csv"), kGpuQueryFields, CsvHeader::kPresent);
  ASSERT_EQ(rows.size(), 1u);
  const GpuReading& r = rows[0].reading;
  EXPECT_THAT(r.mem_used_mib, Optional(0.0));
  EXPECT_THAT(r.sm_util, Optional(0.0));
  EXPECT_THAT(r.mem_util, Optional(0.0));
  EXPECT_THAT(r.temp_c, Optional(33.0));
  EXPECT_THAT(r.power_w, Optional(81.72));
  EXPECT_THAT(r.sm_clock_mhz, Optional(345.0));
  EXPECT_THAT(r.mem_clock_mhz, Optional(3201.0));
  EXPECT_THAT(r.clock_event_reasons, Optional(0x1u));  // GPU idle
}

TEST(NvidiaSmiParseTest, IdleNoHeaderNoUnitsByQueryOrder) {
  const std::vector<std::string> names = FixtureQueryFields("nvsmi_query_idle_nounits.csv");
  ASSERT_EQ(names.size(), 23u);
  const std::vector<std::string_view> fields(names.begin(), names.end());
  const std::vector<GpuQueryRow> rows =
      ParseOk(FixtureOutput("nvsmi_query_idle_nounits.csv"), fields, CsvHeader::kAbsent);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].info.uuid, kUuid);
  EXPECT_THAT(rows[0].info.memory_total_mib, Optional(143771u));
  EXPECT_THAT(rows[0].reading.power_w, Optional(81.68));
  EXPECT_THAT(rows[0].reading.sm_clock_mhz, Optional(345.0));
  EXPECT_THAT(rows[0].reading.clock_event_reasons, Optional(0x1u));
  EXPECT_THAT(rows[0].reading.ecc_corrected, Optional(0u));
}

TEST(NvidiaSmiParseTest, NoHeaderForm) {
  const std::vector<GpuQueryRow> rows = ParseOk(BusyLine(), kGpuQueryFields, CsvHeader::kAbsent);
  ASSERT_EQ(rows.size(), 1u);
  ExpectBusy(rows[0]);
}

TEST(NvidiaSmiParseTest, NoHeaderWithUnits) {
  // --format=csv,noheader keeps the units.
  const std::vector<GpuQueryRow> rows =
      ParseOk(BusyLine("memory.used", "31859 MiB"), kGpuQueryFields, CsvHeader::kAbsent);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0].reading.mem_used_mib, Optional(31859.0));
}

TEST(NvidiaSmiParseTest, HeaderColumnsAreFoundByNameNotPosition) {
  std::string text = FixtureOutput("nvsmi_query_busy.csv");
  // Reverse the columns of both lines.
  std::string reversed;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    std::vector<std::string> cells = testing::SplitCsvLine(text.substr(start, end - start));
    std::reverse(cells.begin(), cells.end());
    std::string line;
    for (const std::string& cell : cells)
      line += (line.empty() ? "" : ", ") + cell;
    reversed += line + "\n";
    start = end + 1;
  }
  const std::vector<GpuQueryRow> rows = ParseOk(reversed, kGpuQueryFields, CsvHeader::kPresent);
  ASSERT_EQ(rows.size(), 1u);
  ExpectBusy(rows[0]);
}

TEST(NvidiaSmiParseTest, AbsentValues) {
  for (const std::string_view absent : {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}) {
    std::string text = BusyLine("power.draw", absent);
    text = BusyLine("clocks_throttle_reasons.active", absent) + text;
    const std::vector<GpuQueryRow> rows = ParseOk(text, kGpuQueryFields, CsvHeader::kAbsent);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_FALSE(rows[0].reading.clock_event_reasons.has_value()) << absent;
    EXPECT_THAT(rows[0].reading.power_w, Optional(694.77));
    EXPECT_FALSE(rows[1].reading.power_w.has_value()) << absent;
  }
  const std::vector<GpuQueryRow> rows =
      ParseOk(BusyLine("memory.total", "[N/A]") + BusyLine("name", "[N/A]"), kGpuQueryFields,
              CsvHeader::kAbsent);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[0].info.memory_total_mib.has_value());
  EXPECT_EQ(rows[1].info.name, "");
}

TEST(NvidiaSmiParseTest, EmptyOutputsAndLineEndings) {
  EXPECT_THAT(ParseOk("", kGpuQueryFields, CsvHeader::kAbsent), IsEmpty());
  EXPECT_THAT(ParseOk("\n", kGpuQueryFields, CsvHeader::kPresent), IsEmpty());
  EXPECT_THAT(ParseOk("No devices were found\n", kGpuQueryFields, CsvHeader::kAbsent), IsEmpty());
  std::string crlf = BusyLine();
  crlf.insert(crlf.size() - 1, "\r");
  EXPECT_EQ(ParseOk(crlf + "\n" + crlf, kGpuQueryFields, CsvHeader::kAbsent).size(), 2u);
}

TEST(NvidiaSmiParseTest, BadNumberNamesLineAndColumn) {
  EXPECT_EQ(ParseError(BusyLine() + BusyLine("memory.used", "abc")),
            "nvidia-smi line 2 column memory.used: expected a number, got \"abc\"");
  EXPECT_EQ(ParseError(BusyLine("power.draw", "")),
            "nvidia-smi line 1 column power.draw: expected a number, got \"\"");
  EXPECT_EQ(ParseError(BusyLine("power.draw", "nan")),
            "nvidia-smi line 1 column power.draw: expected a number, got \"nan\"");
  EXPECT_EQ(ParseError(BusyLine("memory.used", "31859 GiB")),
            "nvidia-smi line 1 column memory.used: expected a number, got \"31859 GiB\"");
  EXPECT_EQ(ParseError(BusyLine("index", "-1")),
            "nvidia-smi line 1 column index: expected a whole number up to 4294967295, got "
            "\"-1\"");
  EXPECT_EQ(ParseError(BusyLine("ecc.errors.corrected.volatile.total", "1.5")),
            "nvidia-smi line 1 column ecc.errors.corrected.volatile.total: expected a whole "
            "number up to 18446744073709551615, got \"1.5\"");
}

TEST(NvidiaSmiParseTest, BadBitmask) {
  const std::string expected =
      "nvidia-smi line 1 column clocks_throttle_reasons.active: expected a hexadecimal bitmask "
      "like 0x0000000000000004, got ";
  EXPECT_EQ(ParseError(BusyLine("clocks_throttle_reasons.active", "4")), expected + "\"4\"");
  EXPECT_EQ(ParseError(BusyLine("clocks_throttle_reasons.active", "0x")), expected + "\"0x\"");
  EXPECT_EQ(ParseError(BusyLine("clocks_throttle_reasons.active", "0x10000000000000000")),
            expected + "\"0x10000000000000000\"");
  EXPECT_EQ(ParseError(BusyLine("clocks_throttle_reasons.active", "0xfffffffffffffffg")),
            expected + "\"0xfffffffffffffffg\"");
}

TEST(NvidiaSmiParseTest, RequiredValues) {
  EXPECT_EQ(ParseError(BusyLine("uuid", "[N/A]")),
            "nvidia-smi line 1 column uuid: expected a value, got \"[N/A]\"");
  EXPECT_EQ(ParseError(BusyLine("index", "N/A")),
            "nvidia-smi line 1 column index: expected a value, got \"N/A\"");
  const std::vector<std::string_view> no_uuid = {"index", "name"};
  EXPECT_EQ(ParseError("0, NVIDIA H200\n", CsvHeader::kAbsent, no_uuid),
            "nvidia-smi output has no column uuid");
}

TEST(NvidiaSmiParseTest, ColumnCount) {
  EXPECT_EQ(ParseError("0, GPU-1\n"), "nvidia-smi line 1: expected 16 columns, got 2");
  EXPECT_EQ(ParseError("index, uuid\n0, GPU-1, extra\n", CsvHeader::kPresent),
            "nvidia-smi line 2: expected 2 columns, got 3");
}

TEST(NvidiaSmiParseTest, HeaderChecks) {
  EXPECT_EQ(ParseError("index, uuid\n0, GPU-1\n", CsvHeader::kPresent),
            "nvidia-smi line 1: the header has no column name");
  const std::vector<std::string_view> fields = {"index", "uuid", "memory.used"};
  EXPECT_EQ(
      ParseError("index, uuid, memory.used [GiB]\n0, GPU-1, 31 GiB\n", CsvHeader::kPresent, fields),
      "nvidia-smi line 1 column memory.used: header says unit \"GiB\", expected \"MiB\"");
  EXPECT_EQ(ParseError("index, uuid, memory.used\n0, GPU-1, 31\n", CsvHeader::kPresent, fields),
            "nvidia-smi line 1 column memory.used: header says unit \"\", expected \"MiB\"");
  // A header that names a unit makes it required in the values.
  EXPECT_EQ(
      ParseError("index, uuid, memory.used [MiB]\n0, GPU-1, 31\n", CsvHeader::kPresent, fields),
      "nvidia-smi line 2 column memory.used: expected a number in MiB, got \"31\"");
}

// Every field the backend queries is in this driver's catalogue, under the name it uses.
TEST(NvidiaSmiParseTest, QueriedFieldsAreInTheDriverCatalogue) {
  const std::string gpu_help = testing::ReadFixture("nvsmi_help_query_gpu.txt");
  for (std::string_view field : kGpuQueryFields)
    EXPECT_NE(gpu_help.find("\"" + std::string(field) + "\""), std::string::npos) << field;
  // No energy field: why ReadEnergy is unsupported with nvidia-smi.
  EXPECT_EQ(gpu_help.find("energy"), std::string::npos);
  const std::string apps_help = testing::ReadFixture("nvsmi_help_query_apps.txt");
  for (std::string_view field : kComputeAppsFields)
    EXPECT_NE(apps_help.find("\"" + std::string(field) + "\""), std::string::npos) << field;
}

std::vector<GpuProcess> AppsOk(std::string_view text, CsvHeader header) {
  Result<std::vector<GpuProcess>> apps = ParseComputeAppsCsv(text, kComputeAppsFields, header);
  EXPECT_TRUE(apps.ok()) << apps.status();
  return apps.ok() ? *std::move(apps) : std::vector<GpuProcess>{};
}

MATCHER_P3(IsProcess, pid, uuid, memory, "") {
  return arg.pid == pid && arg.gpu_uuid == uuid && arg.used_memory_mib == memory;
}

TEST(NvidiaSmiParseTest, ComputeAppsWithHeader) {
  // The header prints used_memory as "used_gpu_memory [MiB]"; process_name and gpu_bus_id are
  // not read.
  EXPECT_THAT(AppsOk(FixtureOutput("nvsmi_apps_busy.csv"), CsvHeader::kPresent),
              ElementsAre(IsProcess(521u, kUuid, std::optional<uint64_t>(31850))));
}

TEST(NvidiaSmiParseTest, ComputeAppsNoHeader) {
  const std::string uuid(kUuid);
  EXPECT_THAT(
      AppsOk(std::string("521, ") + uuid + ", 31850\n7, " + uuid + ", [N/A]\n", CsvHeader::kAbsent),
      ElementsAre(IsProcess(521u, kUuid, std::optional<uint64_t>(31850)),
                  IsProcess(7u, kUuid, std::optional<uint64_t>())));
  EXPECT_THAT(AppsOk("", CsvHeader::kAbsent), IsEmpty());
  EXPECT_THAT(AppsOk("No running processes found\n", CsvHeader::kAbsent), IsEmpty());
  EXPECT_THAT(AppsOk("pid, gpu_uuid, used_gpu_memory [MiB]\nNo running processes found\n",
                     CsvHeader::kPresent),
              IsEmpty());
  const Result<std::vector<GpuProcess>> bad =
      ParseComputeAppsCsv("x, GPU-1, 5\n", kComputeAppsFields, CsvHeader::kAbsent);
  EXPECT_EQ(bad.status().message(),
            "nvidia-smi line 1 column pid: expected a whole number up to 4294967295, got \"x\"");
}

}  // namespace
}  // namespace nvidia_smi_parse_test
}  // namespace expanse::gpu
