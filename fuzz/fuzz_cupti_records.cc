// The lines expanse-cupti-helper writes to the sampler, and the commands the sampler writes to
// it. Input: one line. Properties:
// - ParseRecord and ParseCommand never throw or crash, whatever the line holds;
// - a record they accept renders and parses back to the same record (the sampler may re-emit
//   what it accepted), with only gpu.* series and finite values;
// - the node facts the probe reads (/proc/<pid>/status, /proc/driver/nvidia/params and version)
//   never crash their parsers, and RmProfilingAdminOnly is only ever 0 or 1.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cupti/helper_records.h"
#include "cupti/node_facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  namespace cupti = expanse::cupti;
  (void)cupti::ParseEffectiveCapabilities(line);
  if (const auto admin_only = cupti::ParseRmProfilingAdminOnly(line);
      admin_only && *admin_only != 0 && *admin_only != 1)
    std::abort();
  (void)cupti::ParseNvidiaDriverVersion(line);
  if (auto record = cupti::ParseRecord(line); record.ok()) {
    if (const auto* counters = std::get_if<cupti::CounterRecord>(&*record)) {
      for (const auto& [name, value] : counters->values) {
        if (name.rfind("gpu.", 0) != 0 || !std::isfinite(value))
          std::abort();
      }
    }
    const std::string rendered = cupti::RenderRecord(*record);
    auto again = cupti::ParseRecord(rendered);
    if (!again.ok() || cupti::RenderRecord(*again) != rendered)
      std::abort();
  }
  if (auto command = cupti::ParseCommand(line); command.ok()) {
    if (!cupti::IsGpuUuid(command->uuid) || command->window > cupti::kMaxEscalation)
      std::abort();
    auto again = cupti::ParseCommand(cupti::RenderCommand(*command));
    if (!again.ok() || again->uuid != command->uuid || again->window != command->window)
      std::abort();
  }
  return 0;
}
