#include "server/ingest_capture.h"

#include <string>

#include "wire/capture_records.h"

namespace expanse::server {

Status ParseCaptureAggregates(const nlohmann::json& list, std::string_view compute_id,
                              std::vector<store::CaptureWindow>* out) {
  if (!list.is_array()) {
    return InvalidArgumentError("batch.capture_aggregates must be an array")
        .WithReason("invalid_batch");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "batch.capture_aggregates[" + std::to_string(i) + "]";
    EXPANSE_ASSIGN_OR_RETURN(wire::CaptureAggregateRecord r,
                             wire::DecodeCaptureAggregate(list[i], path, "invalid_batch"));
    store::CaptureWindow w;
    w.compute_id = std::string(compute_id);
    w.job_id = r.job_id;
    w.host = r.host;
    w.pid = r.pid;
    w.window_start_ms = r.window_start_ms;
    w.window_end_ms = r.window_end_ms;
    w.doc = wire::Encode(r).dump();
    if (w.doc.size() > store::kMaxCaptureWindowBytes) {
      return InvalidArgumentError(path + " is " + std::to_string(w.doc.size()) +
                                  " bytes; at most " +
                                  std::to_string(store::kMaxCaptureWindowBytes))
          .WithReason("invalid_batch");
    }
    out->push_back(std::move(w));
  }
  return OkStatus();
}

}  // namespace expanse::server
