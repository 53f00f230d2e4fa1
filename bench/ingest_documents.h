// The load's documents, shared by ingest_load (which sends them) and bench_ingest_parse (which
// times what a replica does with one): each of `nodes` nodes' readings (tsdb_telemetry.h) cut
// into batches of kBatchSeconds, and each batch as the daemon's ingest JSON
// (docs/formats/ingest-batch.md) or as VictoriaMetrics' /api/v1/import JSON lines of the same
// series and values. A plain header.
#ifndef EXPANSE_BENCH_INGEST_DOCUMENTS_H_
#define EXPANSE_BENCH_INGEST_DOCUMENTS_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

#include "tsdb_telemetry.h"

namespace expanse::bench {

inline constexpr int kBatchSeconds = 10;

inline void AppendNumber(std::string& out, double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// One node's readings over one batch: [gpu][field][second].
struct NodeWindow {
  int node = 0;
  int64_t t0_ms = 0;
  std::vector<double> v;  // kGpusPerNode * kFieldCount * kBatchSeconds
  double At(int gpu, int field, int s) const {
    return v[(static_cast<size_t>(gpu) * kFieldCount + field) * kBatchSeconds + s];
  }
};

// The whole load, batch by batch in time order; the generator runs second by second
// over every GPU, so each series sees exactly the values bench_tsdb's Append would.
inline std::vector<NodeWindow> Generate(int nodes, int hours, int64_t start_ms) {
  TelemetryGenerator gen(nodes, 1);
  std::vector<NodeWindow> out;
  out.reserve(static_cast<size_t>(hours * 3600 / kBatchSeconds * nodes));
  double reading[kFieldCount];
  for (int64_t w = 0; w < int64_t{hours} * 3600 / kBatchSeconds; ++w) {
    std::vector<NodeWindow> step(static_cast<size_t>(nodes));
    for (int n = 0; n < nodes; ++n) {
      step[n].node = n;
      step[n].t0_ms = start_ms + w * kBatchSeconds * 1000;
      step[n].v.resize(size_t{kGpusPerNode} * kFieldCount * kBatchSeconds);
    }
    for (int s = 0; s < kBatchSeconds; ++s) {
      for (int g = 0; g < nodes * kGpusPerNode; ++g) {
        gen.NextGpu(static_cast<size_t>(g), reading);
        NodeWindow& win = step[g / kGpusPerNode];
        for (int f = 0; f < kFieldCount; ++f)
          win.v[(static_cast<size_t>(g % kGpusPerNode) * kFieldCount + f) * kBatchSeconds + s] =
              reading[f];
      }
    }
    for (NodeWindow& win : step)
      out.push_back(std::move(win));
  }
  return out;
}

inline std::string Device(int node, int gpu) {
  return "GPU-" + std::to_string(node) + "-" + std::to_string(gpu);
}

inline std::string ExpanseJson(const NodeWindow& win, uint64_t sequence) {
  std::string out = R"({"version":1,"stream":"telemetry","sequence":)";
  out += std::to_string(sequence) + R"(,"series":[)";
  for (int g = 0; g < kGpusPerNode; ++g) {
    for (int f = 0; f < kFieldCount; ++f) {
      if (g + f > 0)
        out += ',';
      out += R"({"host":"node)" + std::to_string(win.node) + R"(","device":")" +
             Device(win.node, g) + R"(","metric":")" + kFields[f] + R"(","t0":)" +
             std::to_string(win.t0_ms) + R"(,"dt":[0)";
      for (int s = 1; s < kBatchSeconds; ++s)
        out += ",1000";
      out += R"(],"v":[)";
      for (int s = 0; s < kBatchSeconds; ++s) {
        if (s > 0)
          out += ',';
        AppendNumber(out, win.At(g, f, s));
      }
      out += "]}";
    }
  }
  return out + "]}";
}

inline std::string VmJsonLines(const NodeWindow& win) {
  std::string out;
  for (int g = 0; g < kGpusPerNode; ++g) {
    for (int f = 0; f < kFieldCount; ++f) {
      out += R"({"metric":{"__name__":")" + std::string(kFields[f]) +
             R"(","compute":"cluster-a","host":"node)" + std::to_string(win.node) +
             R"(","device":")" + Device(win.node, g) + R"("},"values":[)";
      for (int s = 0; s < kBatchSeconds; ++s) {
        if (s > 0)
          out += ',';
        AppendNumber(out, win.At(g, f, s));
      }
      out += R"(],"timestamps":[)";
      for (int s = 0; s < kBatchSeconds; ++s) {
        if (s > 0)
          out += ',';
        out += std::to_string(win.t0_ms + s * 1000);
      }
      out += "]}\n";
    }
  }
  return out;
}

}  // namespace expanse::bench

#endif  // EXPANSE_BENCH_INGEST_DOCUMENTS_H_
