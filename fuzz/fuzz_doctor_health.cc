// A worker's health report as `expanse-daemon doctor` reads it (src/doctor/health_report.h),
// then judged with every check. Input: the report's payload as a worker wrote it. Properties:
// - parsing and checking never throw or crash, whatever the report holds;
// - every finding's text is valid UTF-8 that the strict JSON encoder accepts: a hostile report
//   cannot break the doctor's --json output or reach a terminal raw.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "doctor/checks.h"
#include "doctor/health_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace expanse::doctor;
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  expanse::Result<NodeFacts> node = ParseHealthPayload(payload, "w1", 1'800'000'000'000);
  if (!node.ok())
    return 0;
  node->arrived_ms = 1'800'000'000'000;
  node->gres = GresFacts{"", false, {0, 1}, 0};
  DeploymentFacts facts;
  facts.now_ms = 1'800'000'001'000;
  facts.nodes = {*node, *node};
  facts.nodes[1].host = "w2";
  const std::vector<Finding> findings = RunChecks(facts);
  try {
    (void)FindingsJson(findings, "", facts.now_ms).dump();  // throws on invalid UTF-8
  } catch (const nlohmann::json::exception&) {
    std::abort();
  }
  (void)FindingsText(findings);
  return 0;
}
