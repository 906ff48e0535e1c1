#include "worker/adamw.h"

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

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

struct State {
  std::vector<float> p, g, m, v;
};

// Deterministic, varied values: gradients of both signs over several decades.
State MakeState(size_t n, uint32_t seed) {
  State s{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n, 0), std::vector<float>(n, 0)};
  uint32_t x = seed;
  auto next = [&x] {
    x = x * 1664525u + 1013904223u;
    return float(x >> 8) / float(1 << 24) - 0.5f;
  };
  for (size_t i = 0; i < n; ++i) {
    s.p[i] = next();
    s.g[i] = next() * std::pow(10.0f, float(int(i % 7)) - 4);
  }
  return s;
}

void Steps(State* s, size_t offset, int steps, int threads) {
  AdamWConfig c;
  c.lr = 1e-2;
  c.weight_decay = 0.1;
  const size_t n = s->p.size() - offset;
  for (int step = 1; step <= steps; ++step) {
    AdamWStep(c, step, n, s->p.data() + offset, s->g.data() + offset, s->m.data() + offset, s->v.data() + offset,
              threads);
  }
}

// Sizes below one chunk, at chunk edges, odd, and several chunks per thread;
// start pointers off the 64-byte grid, as a decay run inside a shard is.
TEST(AdamW, ThreadedEqualsSingleThreadedBitwise) {
  for (size_t n : {size_t{1}, size_t{15}, size_t{17}, size_t{65535}, size_t{65536 + 3}, size_t{131071},
                   size_t{(1 << 20) + 13}}) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      State one = MakeState(n + offset, uint32_t(n));
      Steps(&one, offset, 3, 1);
      for (int threads : {2, 3, 4, 8}) {
        State many = MakeState(n + offset, uint32_t(n));
        Steps(&many, offset, 3, threads);
        ASSERT_EQ(one.p, many.p) << "n " << n << " offset " << offset << " threads " << threads;
        ASSERT_EQ(one.m, many.m) << "n " << n << " offset " << offset << " threads " << threads;
        ASSERT_EQ(one.v, many.v) << "n " << n << " offset " << offset << " threads " << threads;
      }
    }
  }
}

// torch.optim.AdamW's definition, in double precision.
TEST(AdamW, MatchesADoublePrecisionReference) {
  const size_t n = (1 << 18) + 5;
  State s = MakeState(n, 11);
  std::vector<double> p(s.p.begin(), s.p.end()), m(n, 0), v(n, 0);
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  for (int step = 1; step <= 4; ++step) {
    for (size_t i = 0; i < n; ++i) {
      const double g = s.g[i];
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, step)), vhat = v[i] / (1 - std::pow(b2, step));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  Steps(&s, 0, 4, 3);
  // The betas are fp32 (1 - float(0.999) is 1.3e-5 off 0.001), which bounds the
  // agreement to a few 1e-7 after four updates of about lr each.
  double worst = 0;
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(s.p[i]) - p[i]));
  EXPECT_LT(worst, 1e-6);
}

TEST(AdamW, ChunksCoverEveryIndexOnceOnAtMostThreadsThreads) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{65536}, size_t{200001}, size_t{(1 << 21) + 7}}) {
    for (int threads : {1, 2, 5}) {
      std::vector<std::atomic<int>> seen(n);
      std::mutex mu;
      std::set<std::thread::id> ids;
      ForEachAdamWChunk(n, threads, [&](size_t b, size_t e) {
        EXPECT_LT(b, e);
        EXPECT_TRUE(b % 16 == 0) << "chunk starts at " << b;
        for (size_t i = b; i < e; ++i) seen[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << "n " << n << " index " << i;
      EXPECT_LE(ids.size(), size_t(threads)) << "n " << n;
    }
  }
}

// Ranks run as threads in one process call the optimizer at the same time.
TEST(AdamW, ConcurrentCallersGetTheSingleThreadedResult) {
  const size_t n = (1 << 19) + 9;
  State reference = MakeState(n, 5);
  Steps(&reference, 0, 2, 1);
  std::vector<State> states(4, MakeState(n, 5));
  std::vector<std::thread> callers;
  for (State& s : states) callers.emplace_back([&s] { Steps(&s, 0, 2, 2); });
  for (std::thread& t : callers) t.join();
  for (const State& s : states) {
    EXPECT_EQ(s.p, reference.p);
    EXPECT_EQ(s.v, reference.v);
  }
}

}  // namespace
}  // namespace tencache
