// One coordinator, two caches: the tiny preset's trace replayed through the
// simulator's zero-infinity policy and through the worker's prefetcher over a
// real cached shard store gives the same prefetch / keep / release decisions,
// access for access, over four steps. Both caches hold every parameter, and
// every prefetch completes before the next access (the simulated compute is far
// longer than the copies; the replay waits for them), so the views agree.
#include "worker/zero_infinity_prefetcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "common/byte_size.h"
#include "common/model_shape.h"
#include "scheduler/policies.h"
#include "scheduler/synth.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;
using Decisions = std::vector<ZeroInfinityDecision>;
constexpr auto kWait = std::chrono::milliseconds(60000);

ZeroInfinityKnobs TightKnobs() {  // the tiny model has 842,496 parameters in 52 tensors
  ZeroInfinityKnobs k;
  k.prefetch_bucket_size = 20'000;
  k.max_live_parameters = 100'000;
  k.max_reuse_distance = 40'000;
  k.max_in_flight = 2;
  return k;
}

Trace TinyTrace() {
  SynthOptions o;
  o.device_flops = 1e9;  // compute of milliseconds against copies of microseconds
  StatusOr<Trace> t = SynthesizeTrace(*FindPreset("tiny"), o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

Decisions Simulate(const Trace& trace, int steps) {
  SimConfig config;
  config.budgets.device = kGiB;
  config.budgets.host = kGiB;
  config.warmup_steps = 1;
  config.steps = steps - 1;
  StatusOr<CacheSimulator> sim = CacheSimulator::Create(trace, config);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  Decisions log;
  auto policy = MakeZeroInfinityPolicy(TightKnobs(), [&](const ZeroInfinityDecision& d) { log.push_back(d); });
  sim->Run(*policy);
  return log;
}

class ZeroInfinityPrefetcherTest : public ::testing::Test {
 protected:
  ZeroInfinityPrefetcherTest()
      : dir_((fs::temp_directory_path() / ("tencache_zi_prefetcher_test_" + std::to_string(::getpid()))).string()) {}
  ~ZeroInfinityPrefetcherTest() override { fs::remove_all(dir_); }

  // A cached store with one block per tensor of `seq`, every shard written once on the host.
  std::unique_ptr<ShardStore> MakeStore(const AccessSequence& seq) {
    layout_.mixed = true;
    for (uint64_t bytes : seq.all_bytes()) layout_.counts.push_back(bytes / 2);
    CachedStoreOptions o;
    o.device_budget = 64 * kMiB;
    o.host_budget = 256 * kMiB;
    o.nvme_budget = 0;
    o.nvme_dir = dir_;
    auto store = MakeCachedShardStore(layout_, o);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    for (int b = 0; b < int(layout_.num_blocks()); ++b) {
      EXPECT_TRUE((*store)->Acquire(b, ShardKind::kParam, 0, Tier::kHost, AccessMode::kOverwrite).ok());
    }
    return std::move(*store);
  }

  std::string dir_;
  ShardLayout layout_;
};

TEST_F(ZeroInfinityPrefetcherTest, SameTraceSameDecisionsAsTheSimulator) {
  const Trace trace = TinyTrace();
  StatusOr<AccessSequence> seq = AccessSequence::FromTrace(trace);
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  constexpr int kSteps = 4;
  const Decisions simulated = Simulate(trace, kSteps);

  std::unique_ptr<ShardStore> store = MakeStore(*seq);
  ASSERT_NE(store, nullptr);
  Decisions log;
  ZeroInfinityPrefetcher prefetcher(layout_.counts, TightKnobs(),
                                    [&](const ZeroInfinityDecision& d) { log.push_back(d); });
  for (int step = 0; step < kSteps; ++step) {
    prefetcher.BeginStep();
    for (DeviceAccessIndex k; k.value() < seq->size(); ++k) {
      const int block = int(seq->tensor(k));
      {
        StatusOr<ShardRef> p = store->Acquire(block, ShardKind::kParam, 0, Tier::kDevice, AccessMode::kRead);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        const size_t before = log.size();
        const Status on = prefetcher.OnAccess(k, block, store.get());
        ASSERT_TRUE(on.ok()) << on.ToString();
        for (size_t i = before; i < log.size(); ++i) {  // the compute outlasts this access's prefetches
          ASSERT_TRUE(store->Prefetch(int(log[i].key), ShardKind::kParam, 0, Tier::kDevice).Wait(kWait).ok());
        }
      }
      const Status after = prefetcher.AfterAccess(k, block, store.get());
      ASSERT_TRUE(after.ok()) << after.ToString();
    }
  }
  ASSERT_EQ(log.size(), simulated.size());
  for (size_t i = 0; i < log.size(); ++i) {
    ASSERT_EQ(log[i], simulated[i]) << "decision " << i << ": worker kind " << int(log[i].kind) << " at "
                                    << log[i].position << " key " << log[i].key << ", simulator kind "
                                    << int(simulated[i].kind) << " at " << simulated[i].position << " key "
                                    << simulated[i].key;
  }
  int prefetches = 0, keeps = 0;
  for (const ZeroInfinityDecision& d : log) {
    prefetches += d.kind == ZeroInfinityDecision::Kind::kPrefetch;
    keeps += d.kind == ZeroInfinityDecision::Kind::kKeep;
  }
  EXPECT_GT(prefetches, 0);
  EXPECT_GT(keeps, 0);
  EXPECT_EQ(prefetcher.fetches_issued(), prefetches);
}

}  // namespace
}  // namespace tencache
