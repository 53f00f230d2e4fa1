// Every spool record kind through the controller's sink path, against the server's parser.
// Input: one byte choosing the kind, the rest the payload a worker wrote. Properties:
// - AddSpoolRecord and RenameJobs never throw or crash, whatever the payload;
// - whatever the controller keeps, rendered as an ingest batch, the server's full parser
//   accepts: one worker's bad record can never make the server refuse a batch that carries
//   other workers' samples.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "agent/batch_builder.h"
#include "server/ingest_batch.h"

namespace {

void Require(bool condition) {
  if (!condition)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  static constexpr std::string_view kKinds[] = {"gpu_series",         "job_event",
                                                "gpu_allocation",     "py_stacks",
                                                "capture_aggregates", "future_kind"};
  const std::string_view kind = kKinds[data[0] % std::size(kKinds)];
  const std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  expanse::agent::BatchBuilder batch;
  const expanse::agent::BatchBuilder::Intake intake = batch.AddSpoolRecord(kind, payload);
  Require(intake.refused == 0 || !intake.first_refusal.ok());
  // Array job renames, as the controller applies them, must keep the batch valid.
  batch.RenameJobs([](const std::string& id) -> std::optional<std::string> {
    return id.size() < 20 ? std::optional<std::string>(id + "_1") : std::nullopt;
  });
  if (batch.empty())
    return 0;
  const std::string document = batch.Render(7, "telemetry").dump();
  auto parsed = expanse::server::ParseIngestBatch(document, "cmp_fuzz");
  Require(parsed.ok());
  return 0;
}
