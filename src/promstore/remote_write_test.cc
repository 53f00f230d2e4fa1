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

TEST(EncodeWriteRequest, AnEmptyBatchIsAnEmptyRequest) {
  EXPECT_EQ(Decode(EncodeWriteRequest({})).timeseries_size(), 0);
}

}  // namespace
}  // namespace expanse::promstore
