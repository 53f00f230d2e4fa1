// SecondMeans: PM samples (many per second) folded into one mean per series per report.
//
// PM sampling delivers short samples whose lengths vary with decode timing; each value is
// weighted by its sample's duration so a mean is the share of the reporting period, not of
// the sample count. A value CUPTI could not evaluate (NaN, infinity) is left out of that
// series' mean rather than poisoning it.
#ifndef EXPANSE_CUPTI_SECOND_MEANS_H_
#define EXPANSE_CUPTI_SECOND_MEANS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace expanse::cupti {

class SecondMeans {
 public:
  explicit SecondMeans(size_t series) : sums_(series, 0.0), weights_(series, 0.0) {}

  // One sample covering [start_ns, end_ns); `values` has one entry per series (extra entries
  // are ignored, missing ones count as not evaluated). A zero or negative span weighs 1 ns.
  void Add(uint64_t start_ns, uint64_t end_ns, std::span<const double> values);

  struct Means {
    std::vector<std::optional<double>> values;  // nullopt: no evaluated sample for the series
    size_t samples = 0;
  };
  // The means since the previous Take, then starts over.
  Means Take();

  size_t series() const { return sums_.size(); }

 private:
  std::vector<double> sums_;
  std::vector<double> weights_;
  size_t samples_ = 0;
};

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_SECOND_MEANS_H_
