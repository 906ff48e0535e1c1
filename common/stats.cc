#include "common/stats.h"

#include <algorithm>

namespace tencache {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const double upper = v[n / 2];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + n / 2);
  return 0.5 * (lower + upper);
}

}  // namespace tencache
