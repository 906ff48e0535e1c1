#include "common/suggest.h"

#include <algorithm>

namespace tencache {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  size_t best = std::max<size_t>(2, word.size() / 3) + 1;
  const std::string* match = nullptr;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best) {
      best = d;
      match = &c;
    }
  }
  return match ? " (did you mean '" + *match + "'?)" : "";
}

}  // namespace tencache
