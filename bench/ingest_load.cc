// Load generator for bench/ingest_vs_victoriametrics.sh: the same synthetic H200 telemetry
// (tsdb_telemetry.h, N nodes x 8 GPUs x 20 fields at 1 Hz) sent to expanse-server's
// POST /dp/v1/ingest (zstd JSON batches), to VictoriaMetrics' /api/v1/import (gzip JSON
// lines, same series, values and batching), or inserted into plain SQLite rows. One batch
// holds one node's 10 seconds (1,600 samples), the way the controller daemon uploads;
// every body is encoded before the clock starts, so the figure is the server's rate.
//
//   ingest_load expanse --port P --credential C [--nodes 8] [--hours 2] [--conns 4]
//                       [--ack durable|received]   (Expanse-Ack; received: keep until synced)
//                       [--batches-per-request 1]  (more: an envelope of that many batches)
//   ingest_load vm      --port P [--nodes 8] [--hours 2] [--conns 4]
//                       [--batches-per-request 1]  (more: their lines in one import body)
//   ingest_load sqlite  --dir D [--nodes 8] [--hours 2]
//   ingest_load job     --port P --credential C     (24 h of gpu.sm_util, 8 GPUs, a job)
//   ingest_load query   --port P --api-token A --compute ID [--repeat 9]
//   every mode: [--start-ms T], the first timestamp of the load (the job ends 24 h before it)
//
// Prints one line of key=value figures for the script.
#include <sqlite3.h>
#include <sys/resource.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http_client.h"
#include "ingest_documents.h"
#include "tsdb_telemetry.h"
#include "wire/ingest_envelope.h"

namespace {

using expanse::bench::Device;
using expanse::bench::ExpanseJson;
using expanse::bench::Generate;
using expanse::bench::HttpConnection;
using expanse::bench::kBatchSeconds;
using expanse::bench::kFieldCount;
using expanse::bench::kFields;
using expanse::bench::kGpusPerNode;
using expanse::bench::NodeWindow;
using expanse::bench::TelemetryGenerator;
using expanse::bench::VmJsonLines;

constexpr int64_t kDayMs = 86'400'000;
// First timestamp of the load (--start-ms): VictoriaMetrics refuses samples outside its
// retention or more than 2 days ahead, so the script passes a recent, 2-hour-aligned time.
int64_t g_start_ms = 0;
constexpr const char* kJobId = "bench-24h";

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "ingest_load: %s\n", message.c_str());
  std::exit(1);
}

struct Flags {
  std::map<std::string, std::string> values;
  std::string Get(const std::string& key, const std::string& fallback = "") const {
    auto it = values.find(key);
    if (it != values.end())
      return it->second;
    if (fallback.empty())
      Die("missing --" + key);
    return fallback;
  }
  int Int(const std::string& key, int fallback) const {
    return std::stoi(Get(key, std::to_string(fallback)));
  }
};

std::string Zstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  if (ZSTD_isError(n))
    Die("zstd");
  out.resize(n);
  return out;
}

std::string Gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    Die("deflateInit2");
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END)
    Die("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sends bodies[c] on connection c, all connections at once; returns the wall seconds.
// Connection c goes to ports[c % ports.size()] (several replicas behind one load).
double SendAll(const std::vector<int>& ports, const std::vector<std::vector<std::string>>& bodies,
               const std::string& target, const std::vector<std::string>& headers,
               int expect_status) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t c = 0; c < bodies.size(); ++c) {
    const std::vector<std::string>& list = bodies[c];
    const int port = ports[c % ports.size()];
    threads.emplace_back([&, port] {
      HttpConnection conn("127.0.0.1", port);
      for (const std::string& body : list) {
        const auto r = conn.Request("POST", target, headers, body);
        if (r.status != expect_status)
          Die(target + ": HTTP " + std::to_string(r.status) + " " + r.body);
        // An envelope's batches are answered one by one: each must be stored too.
        if (r.body.starts_with("{\"answers\"")) {
          for (const auto& answer : nlohmann::json::parse(r.body).at("answers")) {
            if (answer.at("status") != 200)
              Die(target + ": a batch answered " + answer.dump());
          }
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return SecondsSince(start);
}

// Sends bodies[c] on connection c with `Expanse-Ack: received`, the way a sender that keeps
// each batch until the store reports it durable does (docs/formats/ingest-batch.md): a batch
// answered before its sync is kept with its (store_epoch, mark); kept batches are let go
// when an answer's durable_mark covers them, sent again when the epoch changed (a restart),
// and each connection ends with POST /dp/v1/sync. Returns the wall seconds to the last sync;
// `resent` counts batches sent twice.
double SendAllOnReceipt(int port, const std::vector<std::vector<std::string>>& bodies,
                        const std::string& credential, uint64_t* resent) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::vector<uint64_t> resent_by(bodies.size(), 0);
  for (size_t c = 0; c < bodies.size(); ++c) {
    threads.emplace_back([&, c, port] {
      const std::vector<std::string> headers = {"Authorization: Bearer " + credential,
                                                "Content-Type: application/zstd",
                                                "Expanse-Ack: received"};
      struct Kept {
        std::string epoch;
        uint64_t mark;
        const std::string* body;
      };
      std::vector<Kept> kept;
      HttpConnection conn("127.0.0.1", port);
      // Lets go of what `answer` reports durable; returns the batches to send again.
      auto settle = [&kept](const nlohmann::json& answer) {
        const std::string epoch = answer.at("store_epoch");
        const uint64_t durable = answer.at("durable_mark");
        std::vector<const std::string*> again;
        std::erase_if(kept, [&](const Kept& k) {
          if (k.epoch != epoch)
            again.push_back(k.body);
          return k.epoch != epoch || k.mark <= durable;
        });
        return again;
      };
      std::vector<const std::string*> queue;
      for (const std::string& body : bodies[c])
        queue.push_back(&body);
      for (size_t i = 0; i < queue.size(); ++i) {
        const auto r = conn.Request("POST", "/dp/v1/ingest", headers, *queue[i]);
        if (r.status != 200)
          Die("/dp/v1/ingest: HTTP " + std::to_string(r.status) + " " + r.body);
        const auto answer = nlohmann::json::parse(r.body);
        if (!answer.at("durable").get<bool>())
          kept.push_back({answer.at("store_epoch"), answer.at("mark"), queue[i]});
        for (const std::string* body : settle(answer)) {
          queue.push_back(body);
          ++resent_by[c];
        }
        if (i + 1 == queue.size()) {  // all sent: wait until the store has them durably
          const auto synced =
              conn.Request("POST", "/dp/v1/sync", {"Authorization: Bearer " + credential}, "");
          if (synced.status != 200)
            Die("/dp/v1/sync: HTTP " + std::to_string(synced.status) + " " + synced.body);
          for (const std::string* body : settle(nlohmann::json::parse(synced.body))) {
            queue.push_back(body);
            ++resent_by[c];
          }
          if (!kept.empty() && i + 1 == queue.size())
            Die("/dp/v1/sync left batches undurable");
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (uint64_t n : resent_by)
    *resent += n;
  return SecondsSince(start);
}

// User and system CPU seconds of this process so far.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

void RunHttpLoad(const Flags& flags, bool expanse) {
  const int nodes = flags.Int("nodes", 8), conns = flags.Int("conns", 4);
  // Batches per request: Expanse's in one envelope (wire/ingest_envelope.h), VictoriaMetrics'
  // as one body of their JSON lines, so both get the same samples in the same requests.
  const int per_request = flags.Int("batches-per-request", 1);
  if (per_request < 1 || per_request > 64)
    Die("--batches-per-request must be 1 to 64");
  const std::vector<NodeWindow> windows = Generate(nodes, flags.Int("hours", 2), g_start_ms);
  std::vector<std::vector<std::string>> docs(static_cast<size_t>(conns));
  uint64_t raw_bytes = 0, sent_bytes = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    // A node always goes over the same connection, so its batches arrive in order.
    std::string doc = expanse ? ExpanseJson(windows[i], i + 1) : VmJsonLines(windows[i]);
    raw_bytes += doc.size();
    docs[static_cast<size_t>(windows[i].node % conns)].push_back(std::move(doc));
  }
  std::vector<std::vector<std::string>> bodies(static_cast<size_t>(conns));
  for (size_t c = 0; c < docs.size(); ++c) {
    for (size_t first = 0; first < docs[c].size(); first += static_cast<size_t>(per_request)) {
      const size_t end = std::min(docs[c].size(), first + static_cast<size_t>(per_request));
      std::string body;
      if (!expanse) {
        std::string lines;
        for (size_t i = first; i < end; ++i)
          lines += docs[c][i];
        body = Gzip(lines);
      } else if (per_request == 1) {
        body = Zstd(docs[c][first]);
      } else {
        for (size_t i = first; i < end; ++i)
          expanse::wire::AppendEnvelopeFrame(body, "application/zstd", Zstd(docs[c][i]));
      }
      sent_bytes += body.size();
      bodies[c].push_back(std::move(body));
    }
  }
  docs.clear();
  const uint64_t samples = windows.size() * kGpusPerNode * kFieldCount * kBatchSeconds;
  const std::string ack = flags.Get("ack", "durable");
  if (ack != "durable" && ack != "received")
    Die("--ack must be durable or received");
  if (ack == "received" && per_request > 1)
    Die("--ack received sends one batch per request");
  uint64_t resent = 0;
  // --port2: every other connection goes there (a second replica).
  std::vector<int> ports = {flags.Int("port", 0)};
  if (flags.Int("port2", 0) != 0)
    ports.push_back(flags.Int("port2", 0));
  const double cpu_before = CpuSeconds();
  const double seconds =
      !expanse ? SendAll(ports, bodies, "/api/v1/import",
                         {"Content-Encoding: gzip", "Content-Type: application/json"}, 204)
      : ack == "received"
          ? SendAllOnReceipt(flags.Int("port", 0), bodies, flags.Get("credential"), &resent)
          : SendAll(ports, bodies, "/dp/v1/ingest",
                    {"Authorization: Bearer " + flags.Get("credential"),
                     per_request == 1 ? "Content-Type: application/zstd"
                                      : std::string("Content-Type: ") +
                                            expanse::wire::kIngestEnvelopeContentType},
                    200);
  // The load's own CPU while sending (its bodies were made before), so a script can tell the
  // server's share of a CPU both use.
  const double send_cpu_s = CpuSeconds() - cpu_before;
  std::printf(
      "samples=%llu seconds=%.3f samples_per_s=%.0f send_cpu_s=%.3f json_bytes=%llu "
      "sent_bytes=%llu resent=%llu\n",
      static_cast<unsigned long long>(samples), seconds, samples / seconds, send_cpu_s,
      static_cast<unsigned long long>(raw_bytes), static_cast<unsigned long long>(sent_bytes),
      static_cast<unsigned long long>(resent));
}

void Exec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
    Die(std::string(sql) + ": " + sqlite3_errmsg(db));
}

// The obvious alternative: one row per sample, one transaction per batch, durable commits.
void RunSqlite(const Flags& flags) {
  const int nodes = flags.Int("nodes", 8);
  const std::vector<NodeWindow> windows = Generate(nodes, flags.Int("hours", 2), g_start_ms);
  sqlite3* db = nullptr;
  if (sqlite3_open((flags.Get("dir") + "/rows.sqlite").c_str(), &db) != SQLITE_OK)
    Die("sqlite open");
  Exec(db, "PRAGMA journal_mode=WAL");
  Exec(db, "PRAGMA synchronous=FULL");
  Exec(db,
       "CREATE TABLE samples (series_id INTEGER NOT NULL, t_ms INTEGER NOT NULL, v REAL NOT "
       "NULL, PRIMARY KEY (series_id, t_ms)) WITHOUT ROWID");
  sqlite3_stmt* insert = nullptr;
  if (sqlite3_prepare_v2(db, "INSERT INTO samples VALUES (?, ?, ?)", -1, &insert, nullptr) !=
      SQLITE_OK)
    Die("prepare");
  uint64_t samples = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const NodeWindow& win : windows) {
    Exec(db, "BEGIN");
    for (int g = 0; g < kGpusPerNode; ++g) {
      for (int f = 0; f < kFieldCount; ++f) {
        const int64_t series = (int64_t{win.node} * kGpusPerNode + g) * kFieldCount + f;
        for (int s = 0; s < kBatchSeconds; ++s) {
          sqlite3_bind_int64(insert, 1, series);
          sqlite3_bind_int64(insert, 2, win.t0_ms + s * 1000);
          sqlite3_bind_double(insert, 3, win.At(g, f, s));
          if (sqlite3_step(insert) != SQLITE_DONE)
            Die("insert");
          sqlite3_reset(insert);
          ++samples;
        }
      }
    }
    Exec(db, "COMMIT");
  }
  const double seconds = SecondsSince(start);
  Exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  sqlite3_finalize(insert);
  sqlite3_close(db);
  std::printf("samples=%llu seconds=%.3f samples_per_s=%.0f\n",
              static_cast<unsigned long long>(samples), seconds, samples / seconds);
}

// A finished 24-hour job on the 8 GPUs of host qnode0: its record, its GPU allocations
// and 24 h of 1 Hz gpu.sm_util per GPU (8 x 86,400 samples), in one-hour batches.
void RunJob(const Flags& flags) {
  TelemetryGenerator gen(1, 7, "qnode");
  const int64_t job_start_ms = g_start_ms - 2 * kDayMs;  // apart from the load's series
  HttpConnection conn("127.0.0.1", flags.Int("port", 0));
  const std::vector<std::string> headers = {"Authorization: Bearer " + flags.Get("credential"),
                                            "Content-Type: application/zstd"};
  double reading[kFieldCount];
  uint64_t samples = 0;
  for (int hour = 0; hour < 24; ++hour) {
    std::vector<std::vector<double>> util(kGpusPerNode);
    for (int s = 0; s < 3600; ++s) {
      for (int g = 0; g < kGpusPerNode; ++g) {
        gen.NextGpu(static_cast<size_t>(g), reading);
        util[g].push_back(reading[0]);
      }
    }
    nlohmann::json doc = {{"version", 1}, {"stream", "job"}, {"sequence", hour + 1}};
    const int64_t t0 = job_start_ms + int64_t{hour} * 3'600'000;
    for (int g = 0; g < kGpusPerNode; ++g) {
      std::vector<int64_t> dt(3600, 1000);
      dt[0] = 0;
      doc["series"].push_back({{"host", "qnode0"},
                               {"device", Device(0, g)},
                               {"metric", "gpu.sm_util"},
                               {"t0", t0},
                               {"dt", dt},
                               {"v", util[g]}});
      samples += 3600;
    }
    if (hour == 0) {
      doc["jobs"] = {{{"job_id", kJobId},
                      {"state", "COMPLETED"},
                      {"user", "ana"},
                      {"req_gpus", 8},
                      {"req_nodes", 1},
                      {"start_ms", job_start_ms},
                      {"end_ms", job_start_ms + kDayMs},
                      {"observed_ms", job_start_ms + kDayMs}}};
      for (int g = 0; g < kGpusPerNode; ++g) {
        doc["gpu_allocations"].push_back({{"job_id", kJobId},
                                          {"host", "qnode0"},
                                          {"gpu_uuid", Device(0, g)},
                                          {"gpu_index", g},
                                          {"from_ms", job_start_ms},
                                          {"to_ms", job_start_ms + kDayMs}});
      }
    }
    const auto r = conn.Request("POST", "/dp/v1/ingest", headers, Zstd(doc.dump()));
    if (r.status != 200)
      Die("job ingest: HTTP " + std::to_string(r.status) + " " + r.body);
  }
  std::printf("job_samples=%llu\n", static_cast<unsigned long long>(samples));
}

void RunQuery(const Flags& flags) {
  HttpConnection conn("127.0.0.1", flags.Int("port", 0));
  const std::string target =
      "/api/v1/computes/" + flags.Get("compute") + "/jobs/" + kJobId + "/timeline?points=1000";
  std::vector<double> ms;
  size_t points = 0, series = 0;
  for (int i = 0; i < flags.Int("repeat", 9); ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto r =
        conn.Request("GET", target, {"Authorization: Bearer " + flags.Get("api-token")}, "");
    ms.push_back(SecondsSince(start) * 1000);
    if (r.status != 200)
      Die("timeline: HTTP " + std::to_string(r.status) + " " + r.body);
    const auto doc = nlohmann::json::parse(r.body, nullptr, false);
    if (doc.is_discarded() || !doc.contains("series"))
      Die("timeline: unexpected body");
    series = doc["series"].size();
    points = series > 0 ? doc["series"][0]["points"].size() : 0;
  }
  const double first = ms.front();
  std::sort(ms.begin(), ms.end());
  std::printf("query_first_ms=%.1f query_median_ms=%.1f series=%zu points=%zu\n", first,
              ms[ms.size() / 2], series, points);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    Die("usage: ingest_load expanse|vm|sqlite|job|query --flag value ...");
  const std::string mode = argv[1];
  Flags flags;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (!key.starts_with("--"))
      Die("expected --flag, got " + key);
    flags.values[key.substr(2)] = argv[i + 1];
  }
  g_start_ms = std::stoll(flags.Get("start-ms", "1767225600000"));  // 2026-01-01
  if (mode == "expanse" || mode == "vm") {
    RunHttpLoad(flags, mode == "expanse");
  } else if (mode == "sqlite") {
    RunSqlite(flags);
  } else if (mode == "job") {
    RunJob(flags);
  } else if (mode == "query") {
    RunQuery(flags);
  } else {
    Die("unknown mode " + mode);
  }
  return 0;
}
