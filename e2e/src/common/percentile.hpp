// Percentiles as numpy.percentile computes them by default (linear between order statistics).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dsv4::eval {

// q in [0, 100] of an ascending sample; NaN for an empty one.
inline double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

// The same for a sample in any order.
inline double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return percentile_sorted(v, q);
}

}  // namespace dsv4::eval
