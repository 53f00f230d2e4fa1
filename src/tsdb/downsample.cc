#include "tsdb/downsample.h"

#include <algorithm>
#include <string>

namespace expanse::tsdb {

Result<Downsampler> Downsampler::Create(int64_t from_ms, int64_t to_ms, int points) {
  if (from_ms >= to_ms) {
    return InvalidArgumentError("query range is empty: from " + std::to_string(from_ms) +
                                " ms is not before to " + std::to_string(to_ms) + " ms");
  }
  if (points < 1 || points > kMaxQueryPoints) {
    return InvalidArgumentError("points must be between 1 and " + std::to_string(kMaxQueryPoints) +
                                ", got " + std::to_string(points));
  }
  // Unsigned: the span of any two int64 values with from < to fits in uint64.
  const uint64_t span = static_cast<uint64_t>(to_ms) - static_cast<uint64_t>(from_ms);
  const auto n = static_cast<uint64_t>(points);
  return Downsampler(from_ms, to_ms, span / n + (span % n != 0 ? 1 : 0));
}

void Downsampler::Add(const Sample& sample) {
  if (sample.t_ms < from_ms_ || sample.t_ms >= to_ms_)
    return;
  const uint64_t index =
      (static_cast<uint64_t>(sample.t_ms) - static_cast<uint64_t>(from_ms_)) / width_ms_;
  // Cannot overflow: from + index * width <= t.
  const auto start = static_cast<int64_t>(static_cast<uint64_t>(from_ms_) + index * width_ms_);
  if (buckets_.empty() || buckets_.back().start_ms != start) {
    if (!buckets_.empty())
      buckets_.back().mean = sum_ / buckets_.back().count;
    // In unsigned arithmetic, like the index: start < to_ms, so the step never passes to_ms.
    const uint64_t step =
        std::min(width_ms_, static_cast<uint64_t>(to_ms_) - static_cast<uint64_t>(start));
    const auto end = static_cast<int64_t>(static_cast<uint64_t>(start) + step);
    buckets_.push_back({.start_ms = start,
                        .end_ms = end,
                        .min = sample.v,
                        .max = sample.v,
                        .mean = sample.v,
                        .last = sample.v,
                        .count = 1});
    sum_ = sample.v;
    return;
  }
  Bucket& b = buckets_.back();
  b.min = std::min(b.min, sample.v);
  b.max = std::max(b.max, sample.v);
  b.last = sample.v;
  ++b.count;
  sum_ += sample.v;
}

std::vector<Bucket> Downsampler::Finish() && {
  if (!buckets_.empty())
    buckets_.back().mean = sum_ / buckets_.back().count;
  return std::move(buckets_);
}

}  // namespace expanse::tsdb
