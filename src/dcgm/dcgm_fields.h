// The DCGM fields Expanse asks `dcgmi dmon` for, and the series each becomes
// (docs/formats/dcgmi.md, docs/formats/metrics.md).
//
// Field ids, dmon short names and widths are DCGM's (dcgmlib/dcgm_fields.h and
// dcgmlib/src/dcgm_fields.cpp in NVIDIA/DCGM; unchanged from 2.4 to 4.6, see
// tests/fixtures/dcgm/README.md). Only the ids are sent to dcgmi; the short names let the parser
// check the header dmon prints.
//
// Series names: every series read from DCGM is named `gpu.dcgm.<what it measures>`, never the
// bare `gpu.<what>` that NVML and expanse-cupti-helper write. DCP fields measure the same things
// as the helper's Light set (`gpu.dcgm.sm_active` beside `gpu.sm_active`), so one name for both
// would make a chart unable to say where a point came from, and the two can run at once (on
// Hopper and later DCGM reads these through NVML GPM, which does not compete with CUPTI). The
// suffix after `gpu.dcgm.` is the helper's name wherever one exists, so a consumer that wants
// "SM activity from whichever source" strips the prefix. The same rule holds for the health
// and interconnect counters only DCGM gives, so a series' source is always in its name.
#ifndef EXPANSE_DCGM_DCGM_FIELDS_H_
#define EXPANSE_DCGM_DCGM_FIELDS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace expanse::dcgm {

enum class FieldKind {
  kGauge,    // a reading of now (a ratio, a rate, a 0/1 flag)
  kCounter,  // a cumulative total that only grows while the driver stays loaded
  kLastXid,  // the code of the most recent XID error; N/A until the first one
};

struct FieldSpec {
  uint16_t id = 0;              // DCGM field id, what `dmon -e` takes
  std::string_view short_name;  // the column name dmon prints, e.g. "SMACT"
  std::string_view series;      // "gpu.dcgm.sm_active"
  std::string_view unit;        // unit of the series value: "ratio", "bytes/s", "s", "count"...
  double scale = 1.0;           // dmon value × scale = series value
  double max_raw = 0;           // a dmon value above this is implausible and refused
  FieldKind kind = FieldKind::kGauge;
  bool dcp = false;  // a profiling (DCP) field: watched only while CUPTI does not own the counters
};

// Every field Expanse reads, health and interconnect fields first, then the DCP fields.
std::span<const FieldSpec> Fields();

// nullptr when Expanse does not know the id.
const FieldSpec* FindField(uint16_t id);

// The ids for `dmon -e`, in catalogue order; DCP fields only when include_dcp.
std::vector<uint16_t> DmonFieldIds(bool include_dcp);

// "202,230,..." as `dmon -e` takes it.
std::string FieldIdList(std::span<const uint16_t> ids);

}  // namespace expanse::dcgm

#endif  // EXPANSE_DCGM_DCGM_FIELDS_H_
