#include "worker/adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tencache {
namespace {

TEST(AdamW, MatchesTorchOptimAdamW) {
  torch::manual_seed(3);
  for (int threads : {1, 2}) {
    const int64_t n = 300000;  // large enough to split over threads
    torch::Tensor init = torch::randn({n});
    torch::Tensor p = init.clone().requires_grad_(true);
    torch::optim::AdamW opt({p}, torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
    std::vector<float> mine(init.data_ptr<float>(), init.data_ptr<float>() + n), m(n, 0), v(n, 0);
    AdamWConfig c;
    c.lr = 1e-2;
    c.weight_decay = 0.1;
    for (int step = 1; step <= 5; ++step) {
      torch::Tensor g = torch::randn({n});
      p.mutable_grad() = g.clone();
      opt.step();
      AdamWStep(c, step, n, mine.data(), g.data_ptr<float>(), m.data(), v.data(), threads);
    }
    torch::Tensor ours = torch::from_blob(mine.data(), {n});
    EXPECT_TRUE(torch::allclose(ours, p.detach(), 1e-5, 1e-6)) << "threads " << threads << " max diff "
                                                                << (ours - p.detach()).abs().max().item<float>();
  }
}

TEST(AdamW, ThreadCountDoesNotChangeTheResult) {
  const size_t n = 1 << 18;
  std::vector<float> p1(n), p2(n), g(n), m1(n, 0), m2(n, 0), v1(n, 0), v2(n, 0);
  for (size_t i = 0; i < n; ++i) {
    p1[i] = p2[i] = float(i % 97) / 97;
    g[i] = float(i % 13) - 6;
  }
  AdamWConfig c;
  AdamWStep(c, 1, n, p1.data(), g.data(), m1.data(), v1.data(), 1);
  AdamWStep(c, 1, n, p2.data(), g.data(), m2.data(), v2.data(), 4);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(v1, v2);
}

}  // namespace
}  // namespace tencache
