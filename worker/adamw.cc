#include "worker/adamw.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace tencache {
namespace {

void Update(const AdamWConfig& c, float step_size, float inv_sqrt_bc2, float decay, size_t begin, size_t end,
            float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v) {
  const float b1 = float(c.beta1), b2 = float(c.beta2), eps = float(c.eps);
  const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
  for (size_t i = begin; i < end; ++i) {  // vectorised by the compiler
    const float gi = g[i];
    const float mi = b1 * m[i] + one_minus_b1 * gi;
    const float vi = b2 * v[i] + one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * inv_sqrt_bc2 + eps;
    p[i] = p[i] * decay - step_size * mi / denom;
  }
}

}  // namespace

void AdamWStep(const AdamWConfig& c, int64_t step, size_t n, float* param, const float* grad, float* m, float* v,
               int threads) {
  const double bc1 = 1.0 - std::pow(c.beta1, double(step));
  const double bc2 = 1.0 - std::pow(c.beta2, double(step));
  const float step_size = float(c.lr / bc1);
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  const float decay = float(1.0 - c.lr * c.weight_decay);
  constexpr size_t kMinChunk = 1 << 16;  // below this a thread costs more than it saves
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(size_t(std::max(threads, 1)), n / kMinChunk));
  if (chunks == 1) {
    Update(c, step_size, inv_sqrt_bc2, decay, 0, n, param, grad, m, v);
    return;
  }
  const size_t per = ((n + chunks - 1) / chunks + 15) & ~size_t{15};  // 64-byte aligned chunk edges
  std::vector<std::thread> pool;
  for (size_t t = 1; t < chunks; ++t) {
    const size_t b = std::min(n, t * per), e = std::min(n, (t + 1) * per);
    pool.emplace_back(Update, std::cref(c), step_size, inv_sqrt_bc2, decay, b, e, param, grad, m, v);
  }
  Update(c, step_size, inv_sqrt_bc2, decay, 0, std::min(n, per), param, grad, m, v);
  for (std::thread& t : pool) t.join();
}

}  // namespace tencache
