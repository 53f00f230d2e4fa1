// libFuzzer target for the nvidia-smi output parsers (src/gpu/nvidia_smi_parse.h, pmon and
// minor-number parsers). nvidia-smi's output is outside input: a new driver, a GPU in a bad
// state or a stand-in script may print anything. Properties, checked on every input:
//  - no parser crashes or trips a sanitizer;
//  - a failure is kInvalidArgument with reason "nvidia_smi_output" (never kInternal, which
//    would mean a field the parser reads has no handler);
//  - what parses keeps its promises: every GPU and every process has a UUID.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "gpu/nvidia_smi_minor.h"
#include "gpu/nvidia_smi_parse.h"
#include "gpu/nvidia_smi_pmon.h"

namespace {

using expanse::StatusCode;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_nvidia_smi_csv: property violated: %s\n", what);
    std::abort();
  }
}

void RequireParseError(const expanse::Status& status) {
  Require(status.code() == StatusCode::kInvalidArgument, "failure is kInvalidArgument");
  Require(status.reason() == "nvidia_smi_output", "failure has reason nvidia_smi_output");
}

void CheckGpuQuery(std::string_view text, expanse::gpu::CsvHeader header) {
  const auto rows = expanse::gpu::ParseGpuQueryCsv(text, expanse::gpu::kGpuQueryFields, header);
  if (!rows.ok()) {
    RequireParseError(rows.status());
    return;
  }
  for (const expanse::gpu::GpuQueryRow& row : *rows) {
    Require(!row.info.uuid.empty(), "every GPU has a UUID");
    Require(row.reading.uuid == row.info.uuid, "reading and info agree on the UUID");
  }
}

void CheckComputeApps(std::string_view text, expanse::gpu::CsvHeader header) {
  const auto apps =
      expanse::gpu::ParseComputeAppsCsv(text, expanse::gpu::kComputeAppsFields, header);
  if (!apps.ok()) {
    RequireParseError(apps.status());
    return;
  }
  for (const expanse::gpu::GpuProcess& process : *apps)
    Require(!process.gpu_uuid.empty(), "every process has a GPU UUID");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto header : {expanse::gpu::CsvHeader::kAbsent, expanse::gpu::CsvHeader::kPresent}) {
    CheckGpuQuery(text, header);
    CheckComputeApps(text, header);
  }
  if (const auto pmon = expanse::gpu::ParsePmon(text); !pmon.ok())
    RequireParseError(pmon.status());
  if (const auto minor = expanse::gpu::ParseProcfsDeviceMinor(text); !minor.ok())
    RequireParseError(minor.status());
  if (const auto minors = expanse::gpu::ParseXmlMinorNumbers(text); !minors.ok())
    RequireParseError(minors.status());
  return 0;
}
