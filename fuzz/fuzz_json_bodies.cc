// Fuzzes every parser the server runs on a JSON body, with the limits each route uses
// (server/route_util.h, docs/api.md "Limits"): console and sign-in bodies (JsonObjectBody),
// heartbeats, ingest batches (both paths) and stored JSON served back (ParseStoredJson).
// Properties: never crash, however deep or large the input; refuse only with kInvalidArgument;
// a refusal for nesting or size names the limit ("json_too_deep", "json_too_large"); an
// accepted document stays within its limits (re-parsing what the server would store or
// serve gives the same document); unknown heartbeat fields never add more than their budget.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "http/message.h"
#include "server/heartbeat.h"
#include "server/ingest_batch.h"
#include "server/route_util.h"
#include "wire/json_parse.h"

namespace {

using expanse::Status;
using expanse::StatusCode;

void Require(bool condition) {
  if (!condition)
    std::abort();
}

void RequireRefusal(const Status& s) {
  Require(s.code() == StatusCode::kInvalidArgument);
  Require(!s.reason().empty());
}

// Every value of `doc` at depth <= max_depth (containers count as a level).
bool WithinDepth(const nlohmann::json& doc, size_t max_depth) {
  if (!doc.is_structured())
    return true;
  if (max_depth == 0)
    return false;
  for (const auto& child : doc) {
    if (!WithinDepth(child, max_depth - 1))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  namespace server = expanse::server;

  // Console API and sign-in bodies.
  expanse::http::Request request;
  request.body = std::string(bytes);
  auto body = server::JsonObjectBody(request);
  if (body.ok()) {
    Require(body->is_object());
    Require(WithinDepth(*body, server::kSmallBodyJson.max_depth));
  } else {
    RequireRefusal(body.status());
  }

  // Heartbeats: what is stored parses back within the same limits.
  auto heartbeat = server::ValidateHeartbeat(bytes);
  if (heartbeat.ok()) {
    auto stored = expanse::wire::ParseJson(heartbeat->normalized_json, server::kHeartbeatJson);
    Require(stored.ok());
    Require(server::ParseStoredJson(heartbeat->normalized_json) == *stored);
  } else {
    RequireRefusal(heartbeat.status());
  }

  // Ingest batches, fast path first and the full parser alone.
  for (const bool fast : {true, false}) {
    auto batch = fast ? server::ParseIngestBatch(bytes, "cmp_fuzz")
                      : server::ParseIngestBatchWithoutFastPath(bytes, "cmp_fuzz");
    if (batch.ok()) {
      Require(batch->samples <= server::kMaxIngestSamples);
    } else {
      RequireRefusal(batch.status());
    }
  }
  auto decoded = server::DecodeIngestBody("application/zstd", bytes);
  if (decoded.ok()) {
    Require(decoded->size() <= server::kMaxIngestJsonBytes);
  } else {
    RequireRefusal(decoded.status());
  }

  // Stored JSON served back: null or a document within the heartbeat limits.
  const nlohmann::json served = server::ParseStoredJson(bytes);
  Require(WithinDepth(served, server::kHeartbeatJson.max_depth));
  return 0;
}
