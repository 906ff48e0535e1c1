// Helpers for the cachemgr tests: a temporary directory under /tmp removed on
// destruction, and 4 KiB-aligned buffers for O_DIRECT.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

namespace tencache::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tencache-cachemgr-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

inline AlignedBuffer MakeAligned(uint64_t bytes) {
  return AlignedBuffer(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
}

inline void FillPattern(uint8_t* p, uint64_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<uint8_t>(x >> 24);
  }
}

inline bool CheckPattern(const uint8_t* p, uint64_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    if (p[i] != static_cast<uint8_t>(x >> 24)) return false;
  }
  return true;
}

// Polls `done` (yielding between tries) until it holds or `limit` passes: for
// conditions another thread makes true, with no sleep standing in for order.
template <typename Pred>
bool WaitFor(Pred done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace tencache::testing
