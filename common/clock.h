// Seconds on the monotonic clock (std::chrono::steady_clock): the one clock
// every duration the launcher, the worker and the benchmarks measure is read
// from. Thread-safe.
#pragma once

#include <chrono>

namespace tencache {

inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace tencache
