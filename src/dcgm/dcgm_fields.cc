#include "dcgm/dcgm_fields.h"

#include <array>

namespace expanse::dcgm {
namespace {

// dmon prints 64-bit integers with fmt::to_string, so no counter can exceed this.
constexpr double kInt64Max = 9.223372036854775807e18;
// DCP ratios are 0..1; DCGM's rounding may overshoot a little, and a value past 2 is not a
// ratio any more.
constexpr double kRatioMax = 2.0;
// Far above any PCIe or NVLink link (bytes per second): 100 TB/s.
constexpr double kBytesPerSecondMax = 1e14;
// DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL: NVML's KiB counters, differenced per second and divided
// by 1000 (DcgmCacheManager::ReadAndCacheNvLinkBandwidth), so one unit is 1000 KiB/s.
constexpr double kNvlinkThroughputUnitBytes = 1000.0 * 1024.0;
// The violation counters are nanoseconds of throttling (dcgm_fields.h); the series is seconds.
constexpr double kNanosecond = 1e-9;

constexpr std::array kFields{
    FieldSpec{202, "RPCTR", "gpu.dcgm.pcie_replays", "count", 1, kInt64Max, FieldKind::kCounter},
    FieldSpec{230, "XIDER", "gpu.dcgm.last_xid", "xid", 1, 1e6, FieldKind::kLastXid},
    FieldSpec{240, "PVIOL", "gpu.dcgm.power_violation_s", "s", kNanosecond, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{241, "TVIOL", "gpu.dcgm.thermal_violation_s", "s", kNanosecond, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{310, "ESVTL", "gpu.dcgm.ecc_sbe_volatile", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{311, "EDVTL", "gpu.dcgm.ecc_dbe_volatile", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{390, "RPSBE", "gpu.dcgm.retired_pages_sbe", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{391, "RPDBE", "gpu.dcgm.retired_pages_dbe", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{392, "RPPEN", "gpu.dcgm.retired_pages_pending", "flag", 1, 1, FieldKind::kGauge},
    FieldSpec{393, "URMPS", "gpu.dcgm.remapped_rows_uncorrectable", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{394, "CRMPS", "gpu.dcgm.remapped_rows_correctable", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{395, "RRF", "gpu.dcgm.row_remap_failed", "flag", 1, 1, FieldKind::kGauge},
    FieldSpec{396, "RRP", "gpu.dcgm.row_remap_pending", "flag", 1, 1, FieldKind::kGauge},
    FieldSpec{409, "NFELT", "gpu.dcgm.nvlink_crc_flit_errors", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{419, "NDELT", "gpu.dcgm.nvlink_crc_data_errors", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{429, "NRELT", "gpu.dcgm.nvlink_replay_errors", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{439, "NRCLT", "gpu.dcgm.nvlink_recovery_errors", "count", 1, kInt64Max,
              FieldKind::kCounter},
    FieldSpec{449, "NBWLT", "gpu.dcgm.nvlink_bytes_per_s", "bytes/s", kNvlinkThroughputUnitBytes,
              kBytesPerSecondMax / kNvlinkThroughputUnitBytes, FieldKind::kGauge},
    FieldSpec{1002, "SMACT", "gpu.dcgm.sm_active", "ratio", 1, kRatioMax, FieldKind::kGauge, true},
    FieldSpec{1003, "SMOCC", "gpu.dcgm.sm_occupancy", "ratio", 1, kRatioMax, FieldKind::kGauge,
              true},
    FieldSpec{1004, "TENSO", "gpu.dcgm.tensor_active", "ratio", 1, kRatioMax, FieldKind::kGauge,
              true},
    FieldSpec{1005, "DRAMA", "gpu.dcgm.dram_active", "ratio", 1, kRatioMax, FieldKind::kGauge,
              true},
    FieldSpec{1009, "PCITX", "gpu.dcgm.pcie_tx_bytes_per_s", "bytes/s", 1, kBytesPerSecondMax,
              FieldKind::kGauge, true},
    FieldSpec{1010, "PCIRX", "gpu.dcgm.pcie_rx_bytes_per_s", "bytes/s", 1, kBytesPerSecondMax,
              FieldKind::kGauge, true},
    FieldSpec{1011, "NVLTX", "gpu.dcgm.nvlink_tx_bytes_per_s", "bytes/s", 1, kBytesPerSecondMax,
              FieldKind::kGauge, true},
    FieldSpec{1012, "NVLRX", "gpu.dcgm.nvlink_rx_bytes_per_s", "bytes/s", 1, kBytesPerSecondMax,
              FieldKind::kGauge, true},
};

}  // namespace

std::span<const FieldSpec> Fields() { return kFields; }

const FieldSpec* FindField(uint16_t id) {
  for (const FieldSpec& field : kFields) {
    if (field.id == id)
      return &field;
  }
  return nullptr;
}

std::vector<uint16_t> DmonFieldIds(bool include_dcp) {
  std::vector<uint16_t> ids;
  for (const FieldSpec& field : kFields) {
    if (include_dcp || !field.dcp)
      ids.push_back(field.id);
  }
  return ids;
}

std::string FieldIdList(std::span<const uint16_t> ids) {
  std::string list;
  for (const uint16_t id : ids) {
    if (!list.empty())
      list += ',';
    list += std::to_string(id);
  }
  return list;
}

}  // namespace expanse::dcgm
