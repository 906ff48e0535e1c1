// AdamW over flat fp32 shards, as torch.optim.AdamW defines it (decoupled
// weight decay, bias-corrected moments), written as one fused loop per shard so
// that a step streams each parameter's state once: the shard's master weights,
// gradient and both moments are read and written in a single pass, split over
// threads in cache-line-aligned chunks. Pure function of its arguments; callers
// may run different shards concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace tencache {

// Elements [begin, end) of a shard that weight decay applies to (`decay`) or
// not (norms, biases, padding).
struct DecayRun {
  size_t begin = 0, end = 0;
  bool decay = false;
};

struct AdamWConfig {
  double lr = 3.0e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1.0e-8;
  double weight_decay = 0.0;
};

// One update of `n` parameters at optimizer step `step` (1-based).
// REQUIRES: step >= 1; the four arrays do not overlap.
void AdamWStep(const AdamWConfig& config, int64_t step, size_t n, float* param, const float* grad, float* m, float* v,
               int threads);

// Runs body(begin, end) over [0, n) in the chunks, and on the threads, that
// AdamWStep uses for `n` parameters and `threads`; returns once every chunk is
// done. Chunks are never empty, start at multiples of 16 elements and run on at
// most `threads` threads, the caller's one of them; the others are persistent,
// shared by all callers. Exposed so that a benchmark can stream the same bytes
// the same way. REQUIRES: body does not throw.
void ForEachAdamWChunk(size_t n, int threads, const std::function<void(size_t begin, size_t end)>& body);

}  // namespace tencache
