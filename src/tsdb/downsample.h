// Downsampling of one series' samples into fixed-width time buckets.
//
// [from_ms, to_ms) is cut into buckets of width ceil((to_ms - from_ms) / points) ms
// starting at from_ms, so there are at most `points` of them, all of equal width (the
// last may extend past to_ms, but only samples before to_ms count). A bucket without
// samples is omitted. NaN samples propagate into mean and may into min/max.
#ifndef EXPANSE_TSDB_DOWNSAMPLE_H_
#define EXPANSE_TSDB_DOWNSAMPLE_H_

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "tsdb/sample.h"

namespace expanse::tsdb {

inline constexpr int kMaxQueryPoints = 100'000;

struct Bucket {
  int64_t start_ms;
  // The bucket's end, clipped to the query's to_ms: what callers measure durations with.
  int64_t end_ms;
  double min, max, mean, last;
  uint32_t count;
};

// Accumulates samples given in non-decreasing time order.
class Downsampler {
 public:
  // kInvalidArgument unless from_ms < to_ms and 1 <= points <= kMaxQueryPoints.
  static Result<Downsampler> Create(int64_t from_ms, int64_t to_ms, int points);

  // Samples outside [from_ms, to_ms) are ignored.
  void Add(const Sample& sample);
  std::vector<Bucket> Finish() &&;

 private:
  Downsampler(int64_t from_ms, int64_t to_ms, uint64_t width_ms)
      : from_ms_(from_ms), to_ms_(to_ms), width_ms_(width_ms) {}

  int64_t from_ms_;
  int64_t to_ms_;
  uint64_t width_ms_;
  std::vector<Bucket> buckets_;
  double sum_ = 0;  // of the last bucket in buckets_
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_DOWNSAMPLE_H_
