// Percentiles for the benchmark programs that print tables (softrnic_lossbench,
// softrnic_scalebench): the value at rank p % of the sorted samples (p 50: the median).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace softrnic::bench {

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const auto k = std::min(v.size() - 1, static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}
inline double median(const std::vector<double>& v) {
  return percentile(v, 50);
}

}  // namespace softrnic::bench
