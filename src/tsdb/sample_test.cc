#include "tsdb/sample.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::tsdb {
namespace {

std::vector<Sample> Copy(std::span<const Sample> samples) {
  return std::vector<Sample>(samples.begin(), samples.end());
}

TEST(Batch, GivesBackEachSeriesInOrder) {
  Batch batch;
  batch.Add(SeriesKey{"cmp_a", "node01", "GPU-0", "gpu.sm_util"}, {{{1000, 1.5}, {2000, 2.5}}});
  batch.Add(SeriesKey{"cmp_a", "node01", "", "host.cpu_used_cores"}, {});
  batch.Add(SeriesKey{"cmp_b", "node02", "GPU-1", "gpu.power_w"}, {{{3000, -1}}});
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch.sample_count(), 3u);
  EXPECT_EQ(batch[0].key, (SeriesKey{"cmp_a", "node01", "GPU-0", "gpu.sm_util"}));
  EXPECT_EQ(Copy(batch[0].samples), (std::vector<Sample>{{1000, 1.5}, {2000, 2.5}}));
  EXPECT_EQ(batch[1].key.device, "");
  EXPECT_TRUE(batch[1].samples.empty());
  EXPECT_EQ(batch[2].key, (SeriesKey{"cmp_b", "node02", "GPU-1", "gpu.power_w"}));
  std::vector<std::string> metrics;
  for (const auto& [key, samples] : batch)
    metrics.emplace_back(key.metric);
  EXPECT_EQ(metrics,
            (std::vector<std::string>{"gpu.sm_util", "host.cpu_used_cores", "gpu.power_w"}));
}

TEST(Batch, EqualsABatchOfTheSameSeriesHoweverBuilt) {
  const Batch listed = {{{"c", "h", "d", "m1"}, {{1, 1}}}, {{"c", "h", "d", "m2"}, {{2, 2}}}};
  Batch added;
  for (Sample& s : added.AddToFill(SeriesKey{"c", "h", "d", "m1"}, 1))
    s = {1, 1};
  added.Add(SeriesKey{"c", "h", "d", "m2"}, {{{2, 2}}});
  EXPECT_TRUE(listed == added);
  Batch other_value = listed;
  other_value.Add(SeriesKey{"c", "h", "d", "m3"}, {});
  EXPECT_FALSE(listed == other_value);
  const Batch other_key = {{{"c", "h", "d", "m1"}, {{1, 1}}}, {{"c", "h", "e", "m2"}, {{2, 2}}}};
  EXPECT_FALSE(listed == other_key);
  const Batch other_sample = {{{"c", "h", "d", "m1"}, {{1, 1}}}, {{"c", "h", "d", "m2"}, {{2, 3}}}};
  EXPECT_FALSE(listed == other_sample);
}

// A batch's own series added again: its strings and samples are copied out first, since
// adding may move the buffers they view.
TEST(Batch, TakesItsOwnSeriesAgain) {
  Batch batch;
  batch.Add(SeriesKey{"cmp_0fodNRgJwGRl", "node01", "GPU-aaaaaaaa-0000", "gpu.mem_used_bytes"},
            {{{1, 1}, {2, 2}}});
  for (int i = 0; i < 100; ++i)
    batch.Add(batch.front().key, batch.front().samples);
  ASSERT_EQ(batch.size(), 101u);
  for (const auto& [key, samples] : batch) {
    EXPECT_EQ(key, batch.front().key);
    EXPECT_EQ(Copy(samples), (std::vector<Sample>{{1, 1}, {2, 2}}));
  }
}

TEST(Batch, CopiesOwnTheirStrings) {
  Batch copy;
  {
    std::string host = "node-with-a-long-name-01";
    Batch batch;
    batch.Add(SeriesKey{"cmp_a", host, "GPU-0", "gpu.sm_util"}, {{{1, 1}}});
    host.assign(host.size(), 'x');
    copy = batch;
  }
  EXPECT_EQ(copy.front().key.host, "node-with-a-long-name-01");
  EXPECT_EQ(OwnedKey(copy.front().key),
            (SeriesKey{"cmp_a", "node-with-a-long-name-01", "GPU-0", "gpu.sm_util"}));
}

TEST(Batch, GivesBackWhatAReservationOvershot) {
  Batch batch;
  batch.Reserve(10'000, 100'000, 100'000);
  batch.Add(SeriesKey{"cmp_a", "node01", "GPU-0", "gpu.sm_util"}, {{{1, 1}, {2, 2}}});
  EXPECT_GT(batch.capacity_bytes(), 1'000'000u);
  batch.TrimExcess();
  EXPECT_LT(batch.capacity_bytes(), 4'096u);
  EXPECT_EQ(batch, (Batch{{{"cmp_a", "node01", "GPU-0", "gpu.sm_util"}, {{1, 1}, {2, 2}}}}));
  // Within twice its contents, a buffer is kept as it is.
  Batch full;
  full.Reserve(1, 1'000, 0);
  full.Add(SeriesKey{"c", "h", "d", "m"}, std::vector<Sample>(900, Sample{1, 1}));
  const size_t before = full.capacity_bytes();
  full.TrimExcess();
  EXPECT_EQ(full.capacity_bytes(), before);
}

}  // namespace
}  // namespace expanse::tsdb
