// Many threads acquiring, writing, releasing and prefetching over a cache much
// smaller than its tensors; run under ThreadSanitizer in CI.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "cache_fixture.h"

namespace tencache {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait(20000);
constexpr uint64_t kBytes = 16 << 10;
constexpr int kThreads = 6;
constexpr int kPerThread = 3;  // tensors each thread owns and writes
constexpr int kTensors = kThreads * kPerThread;

TEST(TensorCacheConcurrencyTest, ThreadsAcquireReleasePrefetchWithoutLosingData) {
  testing::TempDir dir;
  TensorCacheOptions o;
  o.device_budget = 5 * kBytes;
  o.host_budget = 8 * kBytes;
  o.mover_threads = 3;
  auto cache = testing::MakeCache(dir, o, testing::UniformSpecs(kTensors, kBytes));
  ASSERT_NE(cache, nullptr);
  std::atomic<int> failures{0};
  std::vector<uint32_t> final_seed(kTensors, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int iter = 0; iter < 60; ++iter) {
        const TensorId mine = static_cast<TensorId>(t * kPerThread + rng() % kPerThread);
        const TensorId any = static_cast<TensorId>(rng() % kTensors);
        const Tier tier = rng() % 3 == 0 ? Tier::kHost : Tier::kDevice;
        PrefetchHandle p = cache->Prefetch(static_cast<TensorId>(rng() % kTensors), tier);
        {
          auto h = cache->Acquire(mine, tier, AccessMode::kWrite, kWait);
          if (!h.ok()) { ++failures; continue; }
          const uint32_t seed = mine * 1000 + iter + 1;
          testing::FillPattern(static_cast<uint8_t*>(h->data()), kBytes, seed);
          final_seed[mine] = seed;  // only this thread writes `mine`
        }
        {
          auto h = cache->Acquire(any, Tier::kDevice, AccessMode::kRead, kWait);
          if (!h.ok()) ++failures;
        }
        if (!p.Wait(kWait).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (TensorId id = 0; id < kTensors; ++id) {
    auto h = cache->Acquire(id, Tier::kDevice, AccessMode::kRead, kWait);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    if (final_seed[id] == 0) continue;
    EXPECT_TRUE(testing::CheckPattern(static_cast<uint8_t*>(h->data()), kBytes, final_seed[id])) << "tensor " << id;
  }
  CacheMetrics m = cache->EndStep();
  EXPECT_GT(m.bytes_nvme_to_host, 0u);
  EXPECT_GT(m.tier(Tier::kDevice).hits + m.tier(Tier::kDevice).misses, 0u);
}

}  // namespace
}  // namespace tencache
