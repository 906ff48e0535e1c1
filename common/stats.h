// Order statistics over measured samples (step times, link speeds, per-access
// compute times), shared by the worker, the profiler, the launcher's report and
// the benchmarks so that every "median" in the project means the same thing.
// Pure functions: thread-safe.
#pragma once

#include <vector>

namespace tencache {

// The median of `v`: the middle value, or the mean of the two middle values
// for an even count; 0 when `v` is empty. Takes `v` by value (it is reordered).
double Median(std::vector<double> v);

}  // namespace tencache
