// What a replica spends on one ingest batch besides its round trips, per sample: undoing the
// batch's zstd, parsing it (the single-pass reader the endpoint tries first, and the DOM parser
// it stands in front of, which decides everything else), and encoding groups of parsed batches
// as one remote-write body (protobuf and snappy). The documents are ingest_load's
// (ingest_documents.h): one node's 10 seconds, 1,600 samples, as the daemon uploads them.
// Google Benchmark's items/s are samples/s. Prints figures; asserts none.
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "ingest_documents.h"
#include "promstore/remote_write.h"
#include "server/ingest_batch.h"

namespace {

using expanse::bench::ExpanseJson;
using expanse::bench::Generate;
using expanse::bench::NodeWindow;

constexpr char kComputeId[] =
    "cmp_3f9d2a8c41b7";  // a compute id's length (control_plane_computes.cc)
constexpr size_t kDocuments = 256;
constexpr int kSamplesPerDocument = 1600;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "bench_ingest_parse: %s\n", what);
  std::exit(1);
}

// The first kDocuments batches of a 16-node hour, as JSON and as the zstd bodies sent.
struct Documents {
  std::vector<std::string> json;
  std::vector<std::string> zstd;
};
const Documents& TheDocuments() {
  static const Documents docs = [] {
    Documents d;
    const std::vector<NodeWindow> windows = Generate(16, 1, 1'767'225'600'000);
    for (size_t i = 0; i < kDocuments; ++i) {
      d.json.push_back(ExpanseJson(windows[i], i + 1));
      std::string z(ZSTD_compressBound(d.json.back().size()), '\0');
      const size_t n = ZSTD_compress(z.data(), z.size(), d.json.back().data(), d.json.back().size(),
                                     3);  // the daemon's level
      if (ZSTD_isError(n))
        Die("zstd failed");
      z.resize(n);
      d.zstd.push_back(std::move(z));
    }
    return d;
  }();
  return docs;
}

void BM_DecodeZstd(benchmark::State& state) {
  const Documents& docs = TheDocuments();
  size_t i = 0;
  for (auto _ : state) {
    auto json = expanse::server::DecodeIngestBody("application/zstd", docs.zstd[i++ % kDocuments]);
    if (!json.ok())
      Die("a body did not decode");
    benchmark::DoNotOptimize(json->data());
  }
  state.SetItemsProcessed(state.iterations() * kSamplesPerDocument);
}
BENCHMARK(BM_DecodeZstd);

void BM_ParseSinglePass(benchmark::State& state) {
  const Documents& docs = TheDocuments();
  size_t i = 0;
  for (auto _ : state) {
    auto batch = expanse::server::ParseCommonIngestBatch(docs.json[i++ % kDocuments], kComputeId);
    if (!batch.has_value())
      Die("the single-pass reader declined a document");
    benchmark::DoNotOptimize(batch->series);
  }
  state.SetItemsProcessed(state.iterations() * kSamplesPerDocument);
}
BENCHMARK(BM_ParseSinglePass);

void BM_ParseDom(benchmark::State& state) {
  const Documents& docs = TheDocuments();
  size_t i = 0;
  for (auto _ : state) {
    auto batch =
        expanse::server::ParseIngestBatchWithoutFastPath(docs.json[i++ % kDocuments], kComputeId);
    if (!batch.ok())
      Die("the DOM parser refused a document");
    benchmark::DoNotOptimize(batch->series);
  }
  state.SetItemsProcessed(state.iterations() * kSamplesPerDocument);
}
BENCHMARK(BM_ParseDom);

// A group of `range(0)` batches as one remote write (2-3 is what a busy replica groups).
void BM_EncodeRemoteWrite(benchmark::State& state) {
  const Documents& docs = TheDocuments();
  const auto group = static_cast<size_t>(state.range(0));
  std::vector<expanse::tsdb::Batch> parsed;
  for (size_t i = 0; i < group; ++i) {
    auto batch = expanse::server::ParseCommonIngestBatch(docs.json[i], kComputeId);
    if (!batch.has_value())
      Die("the single-pass reader declined a document");
    parsed.push_back(std::move(batch->series));
  }
  std::vector<const expanse::tsdb::Batch*> batches;
  for (const expanse::tsdb::Batch& b : parsed)
    batches.push_back(&b);
  for (auto _ : state) {
    std::string body = expanse::promstore::EncodeWriteRequest(batches);
    benchmark::DoNotOptimize(body.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(group) * kSamplesPerDocument);
}
BENCHMARK(BM_EncodeRemoteWrite)->Arg(1)->Arg(3)->Arg(8);

}  // namespace
