#include "dcgm/dcgm_fields.h"

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::dcgm {
namespace dcgm_fields_test {
namespace {

using ::testing::ElementsAre;

TEST(DcgmFieldsTest, EverySeriesIsNamedForDcgm) {
  std::set<uint16_t> ids;
  std::set<std::string_view> series;
  for (const FieldSpec& field : Fields()) {
    EXPECT_TRUE(ids.insert(field.id).second) << field.id;
    EXPECT_TRUE(series.insert(field.series).second) << field.series;
    EXPECT_TRUE(field.series.starts_with("gpu.dcgm.")) << field.series;
    EXPECT_GE(field.short_name.size(), 3u);
    EXPECT_LE(field.short_name.size(), 5u);
    EXPECT_GT(field.max_raw, 0);
    EXPECT_GT(field.scale, 0);
    EXPECT_FALSE(field.unit.empty());
  }
}

TEST(DcgmFieldsTest, DcpFieldsAreTheProfilingOnes) {
  std::vector<uint16_t> dcp;
  for (const FieldSpec& field : Fields()) {
    if (field.dcp)
      dcp.push_back(field.id);
  }
  // SM active, SM occupancy, tensor active, DRAM active, PCIe tx/rx, NVLink tx/rx (issue 18).
  EXPECT_THAT(dcp, ElementsAre(1002, 1003, 1004, 1005, 1009, 1010, 1011, 1012));
}

TEST(DcgmFieldsTest, DcpSeriesMirrorTheHelpersNames) {
  EXPECT_EQ(FindField(1002)->series, "gpu.dcgm.sm_active");
  EXPECT_EQ(FindField(1004)->series, "gpu.dcgm.tensor_active");
  EXPECT_EQ(FindField(1005)->series, "gpu.dcgm.dram_active");
  EXPECT_EQ(FindField(1009)->series, "gpu.dcgm.pcie_tx_bytes_per_s");
  EXPECT_EQ(FindField(1012)->series, "gpu.dcgm.nvlink_rx_bytes_per_s");
  EXPECT_EQ(FindField(1002)->short_name, "SMACT");
}

TEST(DcgmFieldsTest, UnitConversions) {
  EXPECT_DOUBLE_EQ(FindField(240)->scale, 1e-9);             // ns of throttling -> s
  EXPECT_DOUBLE_EQ(FindField(449)->scale, 1000.0 * 1024.0);  // DCGM's "MB/s" -> bytes/s
  EXPECT_DOUBLE_EQ(FindField(1009)->scale, 1.0);             // already bytes per second
  EXPECT_EQ(FindField(230)->kind, FieldKind::kLastXid);
  EXPECT_EQ(FindField(202)->kind, FieldKind::kCounter);
  EXPECT_EQ(FindField(1), nullptr);
}

TEST(DcgmFieldsTest, DmonFieldIdsPutDcpLast) {
  const std::vector<uint16_t> base = DmonFieldIds(false);
  const std::vector<uint16_t> all = DmonFieldIds(true);
  EXPECT_EQ(base.size(), 18u);
  EXPECT_EQ(all.size(), 26u);
  EXPECT_TRUE(std::equal(base.begin(), base.end(), all.begin()));
  for (const uint16_t id : base)
    EXPECT_FALSE(FindField(id)->dcp) << id;
}

TEST(DcgmFieldsTest, FieldIdList) {
  const std::vector<uint16_t> ids{202, 1002, 1012};
  EXPECT_EQ(FieldIdList(ids), "202,1002,1012");
  EXPECT_EQ(FieldIdList({}), "");
  EXPECT_EQ(FieldIdList(DmonFieldIds(true)),
            "202,230,240,241,310,311,390,391,392,393,394,395,396,409,419,429,439,449,1002,1003,"
            "1004,1005,1009,1010,1011,1012");
}

}  // namespace
}  // namespace dcgm_fields_test
}  // namespace expanse::dcgm
