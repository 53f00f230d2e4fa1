// What `dcgmi` prints, as the daemon reads it: dmon lines, health JSON, discovery tables and
// error sentences. Input: any text. Properties:
// - no parser throws or crashes, whatever the text holds;
// - the dmon parser keeps nothing between lines but counters: every line is accounted for once,
//   every sample has one slot per field, and every value is finite, non-negative and within
//   its field's bound in series units;
// - an accepted health report stays within its limits and holds printable text only;
// - a recognised error message is printable ASCII of bounded length.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>
#include <vector>

#include "dcgm/dcgm_fields.h"
#include "dcgm/dcgmi_errors.h"
#include "dcgm/discovery_parser.h"
#include "dcgm/dmon_parser.h"
#include "dcgm/health_parser.h"

namespace {

using namespace expanse::dcgm;

void Check(bool ok) {
  if (!ok)
    std::abort();
}

bool IsPrintable(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
      return false;
  }
  return true;
}

void FeedDmon(std::string_view text, std::vector<uint16_t> ids) {
  auto parser = DmonParser::Create(ids);
  Check(parser.ok());
  uint64_t lines = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const DmonEvent event = parser->Feed(line);
    ++lines;
    if (const auto* sample = std::get_if<DmonSample>(&event)) {
      Check(sample->values.size() == ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        Check(sample->values[i].field_id == ids[i]);
        if (const std::optional<double> value = sample->values[i].value) {
          const FieldSpec* spec = FindField(ids[i]);
          Check(std::isfinite(*value) && *value >= 0 &&
                *value <= spec->max_raw * spec->scale * (1 + 1e-9));
        }
      }
    } else if (const auto* error = std::get_if<DcgmiError>(&event)) {
      Check(error->message.size() <= kMaxErrorMessageBytes && IsPrintable(error->message));
    }
  }
  const DmonCounters& counters = parser->counters();
  Check(counters.lines == lines);
  Check(counters.samples + counters.refused + counters.errors <= lines);
  Check(counters.oversized <= counters.refused);
}

void CheckHealth(std::string_view text) {
  const auto report = ParseHealthCheck(text);
  if (!report.ok())
    return;
  Check(report->entities.size() <= kMaxHealthEntities);
  for (const EntityHealth& entity : report->entities) {
    Check(entity.incidents.size() <= kMaxHealthIncidents);
    Check(IsPrintable(entity.entity_group));
    for (const HealthIncident& incident : entity.incidents) {
      Check(incident.message.size() <= kMaxHealthMessageBytes);
      Check(IsPrintable(incident.message) && IsPrintable(incident.system_label));
      Check(!incident.system.empty());
    }
  }
}

void CheckDiscovery(std::string_view text) {
  const auto gpus = ParseDiscoveryList(text);
  if (!gpus.ok())
    return;
  Check(gpus->size() <= kMaxDiscoveredGpus);
  for (const DiscoveredGpu& gpu : *gpus)
    Check(gpu.uuid.empty() || gpu.uuid.starts_with("GPU-"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  FeedDmon(text, DmonFieldIds(true));
  FeedDmon(text, {202, 1002});  // short rows reach the value parser too
  CheckHealth(text);
  CheckDiscovery(text);
  if (const auto error = RecognizeDcgmiError(text))
    Check(error->message.size() <= kMaxErrorMessageBytes && IsPrintable(error->message));
  return 0;
}
