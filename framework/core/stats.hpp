// Small statistics shared by the benchmarks and the trainer's timings.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace tri {

// The median (the mean of the middle two for an even count); NaN for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tri
