#include "tsdb/decimal.h"

#include <bit>
#include <cmath>

#include "tsdb/chunk_format.h"

namespace expanse::tsdb {
namespace {

constexpr double kPowersOfTen[kMaxDecimalScale + 1] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

// Mantissa of `v` at `scale` if v == mantissa / 10^scale exactly (bit for bit).
std::optional<int64_t> MantissaAt(double v, int scale) {
  const double scaled = v * kPowersOfTen[scale];
  // The range check also rejects NaN and inf (comparisons with NaN are false).
  if (!(std::fabs(scaled) < static_cast<double>(kMaxDecimalMantissa)))
    return std::nullopt;
  const auto mantissa = static_cast<int64_t>(std::llround(scaled));
  // Dividing two exact integers is correctly rounded, so this reproduces the decoder.
  const double back = static_cast<double>(mantissa) / kPowersOfTen[scale];
  if (std::bit_cast<uint64_t>(back) != std::bit_cast<uint64_t>(v))
    return std::nullopt;
  return mantissa;
}

}  // namespace

double PowerOfTen(int scale) { return kPowersOfTen[scale]; }

std::optional<DecimalRun> ToDecimal(std::span<const double> values) {
  DecimalRun run;
  run.mantissas.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    std::optional<int64_t> mantissa = MantissaAt(values[i], run.scale);
    if (!mantissa) {
      // Find the value's own scale; then every earlier mantissa is rescaled (exactly,
      // since they stay below 2^53 or the run is refused).
      int scale = run.scale + 1;
      for (; scale <= kMaxDecimalScale; ++scale) {
        mantissa = MantissaAt(values[i], scale);
        if (mantissa)
          break;
      }
      if (!mantissa)
        return std::nullopt;
      const auto factor = static_cast<int64_t>(kPowersOfTen[scale - run.scale]);
      for (int64_t& m : run.mantissas) {
        if (m > kMaxDecimalMantissa / factor || m < -kMaxDecimalMantissa / factor) {
          return std::nullopt;
        }
        m *= factor;
      }
      run.scale = scale;
    }
    run.mantissas.push_back(*mantissa);
  }
  // A rescaled mantissa m*10^k / 10^s can round differently from m / 10^(s-k) only if
  // it is not exact; re-check so the decoder's result is guaranteed bit-identical.
  for (size_t i = 0; i < values.size(); ++i) {
    const double back = static_cast<double>(run.mantissas[i]) / kPowersOfTen[run.scale];
    if (std::bit_cast<uint64_t>(back) != std::bit_cast<uint64_t>(values[i])) {
      return std::nullopt;
    }
  }
  return run;
}

}  // namespace expanse::tsdb
