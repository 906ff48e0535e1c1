// "Did you mean" suggestions for misspelt keys, presets and instance types.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tencache {

// Levenshtein distance between a and b (case-sensitive).
size_t EditDistance(std::string_view a, std::string_view b);

// " (did you mean 'x'?)" for the closest candidate within a distance of
// max(2, |word|/3), or "" when none is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace tencache
