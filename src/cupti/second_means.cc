#include "cupti/second_means.h"

#include <algorithm>
#include <cmath>

namespace expanse::cupti {

void SecondMeans::Add(uint64_t start_ns, uint64_t end_ns, std::span<const double> values) {
  const double weight = end_ns > start_ns ? static_cast<double>(end_ns - start_ns) : 1.0;
  const size_t n = std::min(values.size(), sums_.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i]))
      continue;
    sums_[i] += values[i] * weight;
    weights_[i] += weight;
  }
  ++samples_;
}

SecondMeans::Means SecondMeans::Take() {
  Means means;
  means.samples = samples_;
  means.values.resize(sums_.size());
  for (size_t i = 0; i < sums_.size(); ++i) {
    if (weights_[i] > 0)
      means.values[i] = sums_[i] / weights_[i];
  }
  std::fill(sums_.begin(), sums_.end(), 0.0);
  std::fill(weights_.begin(), weights_.end(), 0.0);
  samples_ = 0;
  return means;
}

}  // namespace expanse::cupti
