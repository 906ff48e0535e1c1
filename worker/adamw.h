// AdamW over flat fp32 shards, as torch.optim.AdamW defines it (decoupled
// weight decay, bias-corrected moments), written as one fused loop per shard so
// that a step streams each parameter's state once: the shard's master weights,
// gradient and both moments are read and written in a single pass, split over
// threads in cache-line-aligned chunks. Pure function of its arguments; callers
// may run different shards concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tencache {

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

}  // namespace tencache
