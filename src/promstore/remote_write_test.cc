// The remote-write body: what a receiver decodes from it (snappy, then the protobuf).
#include "promstore/remote_write.h"

#include <snappy.h>

#include <gtest/gtest.h>

#include "remote_write.pb.h"

namespace expanse::promstore {
namespace {

wire::WriteRequest Decode(const std::string& body) {
  std::string raw;
  EXPECT_TRUE(snappy::Uncompress(body.data(), body.size(), &raw));
  wire::WriteRequest request;
  EXPECT_TRUE(request.ParseFromString(raw));
  return request;
}

std::string Labels(const wire::TimeSeries& series) {
  std::string out;
  for (const wire::Label& label : series.labels())
    out += label.name() + "=" + label.value() + ";";
  return out;
}

TEST(MetricName, PrefixedWithDotsAsUnderscores) {
  EXPECT_EQ(MetricName("gpu.sm_util"), "expanse_gpu_sm_util");
  EXPECT_EQ(MetricName("job.cpu_wait_cores"), "expanse_job_cpu_wait_cores");
  EXPECT_EQ(MetricName("x"), "expanse_x");
}

TEST(EncodeWriteRequest, SeriesWithSortedLabelsAndTheirSamples) {
  const tsdb::Batch batch = {
      {{"cmp_a", "node01", "GPU-1", "gpu.sm_util"}, {{1000, 95.5}, {2000, 0}}},
      {{"cmp_a", "node01", "", "host.cpu_used_cores"}, {{1000, 3.25}}},
      {{"cmp_a", "node02", "GPU-2", "gpu.power_w"}, {}},  // nothing to send
  };
  const wire::WriteRequest request = Decode(EncodeWriteRequest(batch));
  ASSERT_EQ(request.timeseries_size(), 2);
  EXPECT_EQ(Labels(request.timeseries(0)),
            "__name__=expanse_gpu_sm_util;compute=cmp_a;device=GPU-1;host=node01;");
  ASSERT_EQ(request.timeseries(0).samples_size(), 2);
  EXPECT_EQ(request.timeseries(0).samples(0).timestamp(), 1000);
  EXPECT_EQ(request.timeseries(0).samples(0).value(), 95.5);
  EXPECT_EQ(request.timeseries(0).samples(1).timestamp(), 2000);
  EXPECT_EQ(request.timeseries(0).samples(1).value(), 0);
  // A host-level metric has no device label at all (not an empty one).
  EXPECT_EQ(Labels(request.timeseries(1)),
            "__name__=expanse_host_cpu_used_cores;compute=cmp_a;host=node01;");
  EXPECT_EQ(request.timeseries(1).samples(0).value(), 3.25);
}

// What protoc's generated code serialises for the same batches: the encoder must write exactly
// these bytes (any receiver decodes them the same way).
std::string GeneratedBytes(const std::vector<const tsdb::Batch*>& batches) {
  wire::WriteRequest request;
  for (const tsdb::Batch* batch : batches) {
    for (const auto& [key, samples] : *batch) {
      if (samples.empty())
        continue;
      wire::TimeSeries* series = request.add_timeseries();
      auto add = [&](const std::string& name, std::string_view value) {
        wire::Label* label = series->add_labels();
        label->set_name(name);
        label->set_value(std::string(value));
      };
      add("__name__", MetricName(key.metric));
      add(kComputeLabel, key.compute_id);
      if (!key.device.empty())
        add(kDeviceLabel, key.device);
      add(kHostLabel, key.host);
      for (const tsdb::Sample& s : samples) {
        wire::Sample* out = series->add_samples();
        out->set_value(s.v);
        out->set_timestamp(s.t_ms);
      }
    }
  }
  return request.SerializeAsString();
}

std::string Uncompressed(const std::string& body) {
  std::string raw;
  EXPECT_TRUE(snappy::Uncompress(body.data(), body.size(), &raw));
  return raw;
}

TEST(EncodeWriteRequest, WritesTheBytesOfTheGeneratedCodeForSeveralBatches) {
  // Defaults that proto3 leaves out (0.0, timestamp 0) beside -0.0 (kept: its bits are not
  // zero), negative and large timestamps, long label values (two-byte lengths), an empty host.
  const tsdb::Batch first = {
      {{"cmp_a", "node01", "GPU-1", "gpu.sm_util"}, {{1000, 95.5}, {0, 0.0}, {-5, -0.0}}},
      {{"cmp_a", "node01", "", "host.cpu_used_cores"}, {{1'700'000'000'000, 1e300}}},
      {{"cmp_a", std::string(300, 'h'), std::string(200, 'd'), "gpu.power_w"}, {}},
      {{"cmp_a", "", "job/42", "job.cpu_used_cores"}, {{1, 2}}},
  };
  tsdb::Batch second;
  for (int i = 0; i < 50; ++i) {
    std::vector<tsdb::Sample> samples;
    for (int t = 0; t < 200; ++t)
      samples.push_back({1'700'000'000'000 + t * 1000, t * 1.5 - 40});
    second.Add(tsdb::SeriesKey{"cmp_b", "node" + std::to_string(i), "GPU-" + std::to_string(i),
                               "gpu.mem_used_bytes"},
               samples);
  }
  for (const std::vector<const tsdb::Batch*>& batches :
       {std::vector<const tsdb::Batch*>{&first}, std::vector<const tsdb::Batch*>{&first, &second},
        std::vector<const tsdb::Batch*>{&second, &first, &second}}) {
    const std::string raw = Uncompressed(EncodeWriteRequest(batches));
    EXPECT_EQ(raw, GeneratedBytes(batches));
  }
}

TEST(EncodeWriteRequest, AnEmptyBatchIsAnEmptyRequest) {
  EXPECT_EQ(Decode(EncodeWriteRequest(tsdb::Batch{})).timeseries_size(), 0);
  EXPECT_EQ(Decode(EncodeWriteRequest(std::vector<const tsdb::Batch*>{})).timeseries_size(), 0);
}

}  // namespace
}  // namespace expanse::promstore
