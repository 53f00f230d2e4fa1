#include "wire/records.h"

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::wire {
namespace {

using nlohmann::json;

json GoodSeries() {
  return {{"host", "w1"}, {"device", "GPU-1"}, {"metric", "gpu.sm_util"},
          {"t0", 1000},   {"dt", {0, 1000}},   {"v", {1.5, 2}}};
}

std::string SeriesRefusal(const std::string& key, const json& value) {
  json s = GoodSeries();
  if (value.is_discarded())
    s.erase(key);
  else
    s[key] = value;
  Result<SeriesRecord> r = DecodeSeries(s, "batch.series[3]", "invalid_batch");
  if (r.ok())
    return "accepted";
  EXPECT_EQ(r.status().reason(), "invalid_batch");
  return r.status().message();
}

TEST(SeriesRecordTest, RoundTrips) {
  Result<SeriesRecord> r = DecodeSeries(GoodSeries(), "s", "x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->host, "w1");
  EXPECT_EQ(r->dt, (std::vector<int64_t>{0, 1000}));
  EXPECT_EQ(r->v, (std::vector<double>{1.5, 2}));
  EXPECT_EQ(Encode(*r), GoodSeries());
  SeriesRecord host_level = *r;
  host_level.device.clear();
  EXPECT_FALSE(Encode(host_level).contains("device"));
}

TEST(SeriesRecordTest, RefusesEachBadFieldByPath) {
  const json absent = json::value_t::discarded;
  EXPECT_EQ(SeriesRefusal("host", 5), "batch.series[3].host must be a string");
  EXPECT_EQ(SeriesRefusal("host", absent), "batch.series[3].host is required");
  EXPECT_EQ(SeriesRefusal("host", "a b"), "batch.series[3].host may contain only [A-Za-z0-9._-]");
  EXPECT_EQ(SeriesRefusal("device", "GPU 1"),
            "batch.series[3].device may contain only [A-Za-z0-9._:/+-]");
  EXPECT_EQ(SeriesRefusal("metric", "GPU"), "batch.series[3].metric may contain only [a-z0-9._]");
  // t0 as a string passed the controller and made the server refuse the whole batch.
  EXPECT_EQ(SeriesRefusal("t0", "1000"),
            "batch.series[3].t0 must be an integer from 0 to 253402300799999");
  // Near INT64_MAX, t0 plus the offsets overflowed into a negative chunk start.
  EXPECT_EQ(SeriesRefusal("t0", std::numeric_limits<int64_t>::max() - 5),
            "batch.series[3].t0 must be an integer from 0 to 253402300799999");
  EXPECT_EQ(SeriesRefusal("dt", "x"), "batch.series[3].dt must be an array");
  EXPECT_EQ(SeriesRefusal("dt", json::array({0, -1})),
            "batch.series[3].dt[1] must be an integer 0..86400000");
  EXPECT_EQ(SeriesRefusal("v", json::array({1})),
            "batch.series[3].v must have as many entries as dt");
  EXPECT_EQ(SeriesRefusal("v", json::array({1, "2"})),
            "batch.series[3].v[1] must be a finite number");
  EXPECT_EQ(SeriesRefusal("v", json::array({1, nullptr})),
            "batch.series[3].v[1] must be a finite number");
  EXPECT_EQ(DecodeSeries(json::array({5, "x", nullptr}), "gpu_series[0]", "bad_record")
                .status()
                .message(),
            "gpu_series[0] must be an object");
}

TEST(JobEventRecordTest, DecodesAndRefuses) {
  const json good = {{"job_id", "7_1"}, {"host", "w1"}, {"kind", "start"}, {"at_ms", 5}};
  Result<JobEventRecord> r = DecodeJobEvent(good, "e", "x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Encode(*r), good);
  json bad = good;
  bad["at_ms"] = "5";
  EXPECT_EQ(DecodeJobEvent(bad, "e", "x").status().message(),
            "e.at_ms must be an integer from 1 to 253402300799999");
  bad = good;
  bad["kind"] = "middle";
  EXPECT_EQ(DecodeJobEvent(bad, "e", "x").status().message(), "e.kind must be start or end");
}

TEST(GpuAllocationRecordTest, DecodesAndRefuses) {
  json good = {{"job_id", "8"},  {"host", "w1"},   {"gpu_uuid", "GPU-a"}, {"gpu_index", 0},
               {"gpu_minor", 2}, {"from_ms", 100}, {"to_ms", 0},          {"slurm_job_id", 8}};
  Result<GpuAllocationRecord> r = DecodeGpuAllocation(good, "a", "x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->slurm_job_id, 8);
  EXPECT_EQ(Encode(*r), good);
  json sparse = {{"job_id", "8"}, {"host", "w1"}, {"gpu_uuid", "GPU-a"}, {"from_ms", 100}};
  r = DecodeGpuAllocation(sparse, "a", "x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpu_index, -1);
  EXPECT_EQ(r->gpu_minor, -1);
  json bad = good;
  bad["to_ms"] = 50;
  EXPECT_EQ(DecodeGpuAllocation(bad, "a", "x").status().message(), "a.to_ms is before from_ms");
  bad = good;
  bad["slurm_job_id"] = -1;
  EXPECT_FALSE(DecodeGpuAllocation(bad, "a", "x").ok());
}

TEST(StackRecordTest, DecodesAndRefuses) {
  const json good = {{"job_id", "8"},
                     {"host", "w1"},
                     {"window_start_ms", 1000},
                     {"window_end_ms", 2000},
                     {"folded", "a.py:f:1;b.py:g:2"},
                     {"thread_state", "gil"},
                     {"count", 3},
                     {"gpu_idle", true}};
  Result<StackRecord> r = DecodeStack(good, "s", "x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Encode(*r), good);
  json bad = good;
  bad["window_start_ms"] = 0;
  EXPECT_EQ(DecodeStack(bad, "s", "x").status().message(),
            "s.window_start_ms must be an integer from 1 to 253402300799998");
  bad = good;
  bad["folded"] = "a;;b";
  EXPECT_EQ(DecodeStack(bad, "s", "x").status().message(),
            "s.folded has an empty frame (frames are separated by one ';')");
  bad = good;
  bad["gpu_idle"] = 1;
  EXPECT_EQ(DecodeStack(bad, "s", "x").status().message(), "s.gpu_idle must be true or false");
}

TEST(JobRecordTest, RoundTripsAndRefusesByPath) {
  const json good = {
      {"job_id", "77_3"},   {"name", "train"},      {"user", "ana"},        {"account", "ml"},
      {"partition", "gpu"}, {"state", "RUNNING"},   {"nodes", "g[1-2]"},    {"submit_ms", 1000},
      {"start_ms", 2000},   {"end_ms", 0},          {"req_nodes", 2},       {"req_cpus", 16},
      {"req_gpus", 8},      {"req_mem_mib", 65536}, {"time_limit_s", 3600}, {"observed_ms", 2500}};
  Result<JobRecord> j = DecodeJob(good, "batch.jobs[0]", "invalid_batch");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->job_id, "77_3");
  EXPECT_EQ(j->req_gpus, 8);
  EXPECT_EQ(Encode(*j), good);
  // Only job_id and state are required; the rest reads as unknown.
  Result<JobRecord> bare = DecodeJob({{"job_id", "1"}, {"state", "PENDING"}}, "j", "x");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->start_ms, 0);
  for (const auto& [key, value, expected] : std::vector<std::tuple<std::string, json, std::string>>{
           {"job_id", "", "batch.jobs[0].job_id is empty"},
           {"state", nullptr, "batch.jobs[0].state is required"},
           {"name", 5, "batch.jobs[0].name must be a string"},
           {"req_gpus", -2, "batch.jobs[0].req_gpus must be an integer from 0 to"},
           {"start_ms", "soon", "batch.jobs[0].start_ms must be an integer from 0 to"},
           {"nodes", std::string(4097, 'n'), "batch.jobs[0].nodes is longer than 4096 bytes"},
       }) {
    json bad = good;
    bad[key] = value;
    Result<JobRecord> refused = DecodeJob(bad, "batch.jobs[0]", "invalid_batch");
    ASSERT_FALSE(refused.ok()) << key;
    EXPECT_EQ(refused.status().message().substr(0, expected.size()), expected) << key;
    EXPECT_EQ(refused.status().reason(), "invalid_batch");
  }
}

TEST(BatchHeaderTest, RoundTripsAndRefusesByPath) {
  const json good = EncodeBatchHeader({.stream = "telemetry", .sequence = UINT64_MAX});
  Result<FieldReader> r = FieldReader::Object(good, "batch", "invalid_batch");
  ASSERT_TRUE(r.ok());
  Result<BatchHeader> h = DecodeBatchHeader(*r);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->stream, "telemetry");
  EXPECT_EQ(h->sequence, UINT64_MAX);
  for (const auto& [key, value, expected] : std::vector<std::tuple<std::string, json, std::string>>{
           {"version", 2, "batch.version is 2; this build reads version 1"},
           {"stream", "Tele metry", "batch.stream may contain only [a-z0-9-_]"},
           {"sequence", -1, "batch.sequence must be an integer from 0 to"},
           {"sequence", 1.5, "batch.sequence must be an integer from 0 to"},
       }) {
    json bad = good;
    bad[key] = value;
    Result<FieldReader> reader = FieldReader::Object(bad, "batch", "invalid_batch");
    ASSERT_TRUE(reader.ok());
    Result<BatchHeader> refused = DecodeBatchHeader(*reader);
    ASSERT_FALSE(refused.ok()) << key;
    EXPECT_EQ(refused.status().message().substr(0, expected.size()), expected) << key;
  }
}

}  // namespace
}  // namespace expanse::wire
