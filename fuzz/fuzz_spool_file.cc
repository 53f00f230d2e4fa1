// Fuzzes the spool file decoder (src/spool/spool_file.h), which the controller runs on bytes
// any worker, or anyone who can write to the shared directory, controls. Properties:
//  - decoding arbitrary bytes never crashes and fails only with kDataLoss and a known reason;
//  - a file that decodes re-encodes (stored and zstd) to one that decodes to the same file;
//  - the input cut into records encodes and decodes back exactly;
//  - the aggregator's delivery state parser never crashes and round-trips what it accepts;
//  - a spool file name (a worker chooses it) parses only when it is exactly the name the writer
//    makes for its parts.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "spool/delivery_state.h"
#include "spool/reasons.h"
#include "spool/spool_file.h"
#include "spool/spool_names.h"

namespace {

using expanse::spool::DecodeSpoolFile;
using expanse::spool::EncodeSpoolFile;
using expanse::spool::SpoolFile;

void Require(bool condition) {
  if (!condition)
    std::abort();
}

bool KnownReason(const std::string& reason) {
  namespace r = expanse::spool::reason;
  static const std::set<std::string> kReasons = {r::kBadMagic,      r::kBadVersion,  r::kTruncated,
                                                 r::kTrailingBytes, r::kBadChecksum, r::kMalformed,
                                                 r::kTooLarge};
  return kReasons.contains(reason);
}

void RequireRoundTrip(const SpoolFile& file) {
  for (int level : {0, 1}) {
    auto encoded = EncodeSpoolFile(file, {.zstd_level = level});
    Require(encoded.ok());
    auto back = DecodeSpoolFile(*encoded);
    Require(back.ok() && *back == file);
  }
}

// The input as records: pieces separated by '\n' become payloads, kinds picked by length.
SpoolFile FileFromBytes(std::string_view bytes) {
  static const char* const kKinds[] = {"gpu_series", "job_event", "gpu_allocation", "worker_health",
                                       "process_map"};
  SpoolFile file{"fuzz-node01", "0f1e2d3c-aaaa", bytes.size(), -1, {}};
  while (!bytes.empty() && file.records.size() < 64) {
    const size_t end = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, end);
    file.records.push_back({kKinds[piece.size() % 5], std::string(piece)});
    bytes.remove_prefix(end == std::string_view::npos ? bytes.size() : end + 1);
  }
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  auto decoded = DecodeSpoolFile(bytes);
  if (decoded.ok()) {
    RequireRoundTrip(*decoded);
  } else {
    Require(decoded.status().code() == expanse::StatusCode::kDataLoss);
    Require(KnownReason(decoded.status().reason()));
  }

  RequireRoundTrip(FileFromBytes(bytes));

  if (const auto name = expanse::spool::ParseSpoolFileName(bytes))
    Require(expanse::spool::SpoolFileName(name->sequence, name->boot_id) == bytes);

  auto state = expanse::spool::DeliveryState::Parse(bytes);
  if (state.ok()) {
    auto again = expanse::spool::DeliveryState::Parse(state->Serialize());
    Require(again.ok() && *again == *state);
  }
  return 0;
}
