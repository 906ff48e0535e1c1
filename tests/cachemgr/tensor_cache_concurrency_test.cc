// Many threads acquiring, writing, releasing and prefetching over a cache much
// smaller than its tensors; run under ThreadSanitizer in CI. Then one test per
// handle/mover interleaving, forced deterministically: a single mover thread
// runs jobs in order, so waiting on a later prefetch proves an earlier job was
// processed, and a GatedTierStore holds a mover in the middle of a copy.
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
  EXPECT_GT(m.link(Link::kNvmeRead).bytes, 0u);
  EXPECT_GT(m.tier(Tier::kDevice).hits + m.tier(Tier::kDevice).misses, 0u);
}

// ---- deterministic interleavings of handles and movers ----

constexpr milliseconds kShort(50);  // for acquires that must time out

TensorCacheOptions OneMover(uint64_t device_slots, uint64_t host_slots) {
  TensorCacheOptions o;
  o.device_budget = device_slots * kBytes;
  o.host_budget = host_slots * kBytes;
  o.mover_threads = 1;
  return o;
}

// A cache of `tensors` tensors of kBytes whose device tier is gated (*gate).
std::unique_ptr<TensorCache> GatedCache(const testing::TempDir& dir, const TensorCacheOptions& o, int tensors,
                                        testing::GatedTierStore** gate) {
  return testing::MakeGatedCache(dir, o, testing::UniformSpecs(tensors, kBytes), gate);
}

void WriteTensor(TensorCache* c, TensorId id, uint32_t seed, Tier tier) {
  testing::WriteTensor(c, id, seed, tier, kWait);
}
bool ReadMatches(TensorCache* c, TensorId id, uint32_t seed, Tier tier) {
  return testing::ReadMatches(c, id, seed, tier, kWait);
}

// With one mover, jobs run in order: once a prefetch queued after `earlier`
// jobs has completed, those jobs have been processed (done or parked).
void DrainMover(TensorCache* c, TensorId unused_id) {
  ASSERT_TRUE(c->Prefetch(unused_id, Tier::kHost).Wait(kWait).ok());
}

// The TSan race: a prefetch must not copy a host copy while a handle writes it.
TEST(TensorCacheInterleavingTest, MoveOfCopyPinnedForWriteWaitsForReleaseAndCarriesNewBytes) {
  testing::TempDir dir;
  auto c = testing::MakeCache(dir, OneMover(2, 3), testing::UniformSpecs(3, kBytes));
  ASSERT_NE(c, nullptr);
  auto w = c->Acquire(0, Tier::kHost, AccessMode::kWrite, kWait);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  testing::FillPattern(static_cast<uint8_t*>(w->data()), kBytes / 2, 1);  // half-written
  PrefetchHandle to_device = c->Prefetch(0, Tier::kDevice);
  PrefetchHandle to_nvme = c->Prefetch(0, Tier::kNvme);
  DrainMover(c.get(), 2);
  EXPECT_FALSE(to_device.ready());
  EXPECT_FALSE(to_nvme.ready());
  EXPECT_FALSE(c->IsResident(0, Tier::kDevice));
  EXPECT_FALSE(c->IsResident(0, Tier::kNvme));
  // A reader of another tier waits for the writer too instead of seeing half-written bytes.
  EXPECT_EQ(c->Acquire(0, Tier::kDevice, AccessMode::kRead, kShort).status().code(), StatusCode::kTimeout);
  testing::FillPattern(static_cast<uint8_t*>(w->data()), kBytes, 2);
  ASSERT_TRUE(c->Release(&*w).ok());
  ASSERT_TRUE(to_device.Wait(kWait).ok());
  ASSERT_TRUE(to_nvme.Wait(kWait).ok());
  EXPECT_TRUE(c->IsResident(0, Tier::kNvme));
  EXPECT_TRUE(ReadMatches(c.get(), 0, 2, Tier::kDevice));
}

// A mover must not write into a stale copy that a reader still holds.
TEST(TensorCacheInterleavingTest, MoveIntoSlotPinnedByReaderWaitsForRelease) {
  testing::TempDir dir;
  auto c = testing::MakeCache(dir, OneMover(2, 3), testing::UniformSpecs(3, kBytes));
  ASSERT_NE(c, nullptr);
  WriteTensor(c.get(), 0, 1, Tier::kHost);
  auto reader = c->Acquire(0, Tier::kHost, AccessMode::kRead, kWait);
  ASSERT_TRUE(reader.ok());
  WriteTensor(c.get(), 0, 2, Tier::kDevice);  // the reader's host copy is now stale
  ASSERT_FALSE(c->IsResident(0, Tier::kHost));
  PrefetchHandle back = c->Prefetch(0, Tier::kHost);  // device -> host: into the reader's slot
  DrainMover(c.get(), 2);
  EXPECT_FALSE(back.ready());
  EXPECT_TRUE(testing::CheckPattern(static_cast<uint8_t*>(reader->data()), kBytes, 1));
  ASSERT_TRUE(c->Release(&*reader).ok());
  ASSERT_TRUE(back.Wait(kWait).ok());
  EXPECT_TRUE(ReadMatches(c.get(), 0, 2, Tier::kHost));
}

// Eviction must not write a dirty device copy back into a host slot a reader holds.
TEST(TensorCacheInterleavingTest, EvictionSkipsVictimWhoseWriteBackSlotIsPinned) {
  testing::TempDir dir;
  auto c = testing::MakeCache(dir, OneMover(1, 3), testing::UniformSpecs(3, kBytes));
  ASSERT_NE(c, nullptr);
  WriteTensor(c.get(), 0, 1, Tier::kHost);
  auto reader = c->Acquire(0, Tier::kHost, AccessMode::kRead, kWait);
  ASSERT_TRUE(reader.ok());
  WriteTensor(c.get(), 0, 2, Tier::kDevice);  // only valid copy: the device's one slot
  ASSERT_TRUE(c->Acquire(1, Tier::kDevice, AccessMode::kRead, kWait).ok());  // needs that slot
  EXPECT_TRUE(testing::CheckPattern(static_cast<uint8_t*>(reader->data()), kBytes, 1));
  EXPECT_TRUE(c->IsResident(0, Tier::kDevice));
  EXPECT_EQ(c->Snapshot().allocations_after_setup, 1u);  // grew instead of overwriting
  ASSERT_TRUE(c->Release(&*reader).ok());
  EXPECT_TRUE(ReadMatches(c.get(), 0, 2, Tier::kHost));
}

// Acquiring for write waits for a move that is reading the copy.
TEST(TensorCacheInterleavingTest, WriteAcquireWaitsForMoveInFlight) {
  testing::TempDir dir;
  testing::GatedTierStore* gate = nullptr;
  auto c = GatedCache(dir, OneMover(2, 3), 3, &gate);
  ASSERT_NE(c, nullptr);
  WriteTensor(c.get(), 0, 1, Tier::kHost);
  gate->Close();
  PrefetchHandle p = c->Prefetch(0, Tier::kDevice);
  ASSERT_TRUE(gate->WaitEntered(1, kWait));  // the mover is copying host -> device
  EXPECT_EQ(c->Acquire(0, Tier::kHost, AccessMode::kWrite, kShort).status().code(), StatusCode::kTimeout);
  EXPECT_EQ(c->Acquire(0, Tier::kDevice, AccessMode::kWrite, kShort).status().code(), StatusCode::kTimeout);
  gate->Open();
  ASSERT_TRUE(p.Wait(kWait).ok());
  EXPECT_TRUE(ReadMatches(c.get(), 0, 1, Tier::kDevice));
  WriteTensor(c.get(), 0, 3, Tier::kHost);
  EXPECT_FALSE(c->IsResident(0, Tier::kDevice));
  EXPECT_TRUE(ReadMatches(c.get(), 0, 3, Tier::kDevice));
}

// Acquiring for read a copy that a mover is still filling waits for the copy.
TEST(TensorCacheInterleavingTest, ReadAcquireOfCopyBeingFilledWaits) {
  testing::TempDir dir;
  testing::GatedTierStore* gate = nullptr;
  auto c = GatedCache(dir, OneMover(2, 3), 3, &gate);
  ASSERT_NE(c, nullptr);
  WriteTensor(c.get(), 0, 4, Tier::kHost);
  gate->Close();
  PrefetchHandle p = c->Prefetch(0, Tier::kDevice);
  ASSERT_TRUE(gate->WaitEntered(1, kWait));
  EXPECT_FALSE(c->IsResident(0, Tier::kDevice));
  EXPECT_EQ(c->Acquire(0, Tier::kDevice, AccessMode::kRead, kShort).status().code(), StatusCode::kTimeout);
  gate->Open();
  ASSERT_TRUE(p.Wait(kWait).ok());
  EXPECT_TRUE(ReadMatches(c.get(), 0, 4, Tier::kDevice));
}

// A prefetch that would be declined (every victim is needed sooner) but that
// an Acquire starts waiting on while it is still queued becomes a demand miss:
// it evicts as a miss must, and the acquire gets the tensor.
TEST(TensorCacheInterleavingTest, AcquiredPrefetchIsADemandMissNotDeclined) {
  class Oracle : public NextUseOracle {
   public:
    AcquireIndex NextUse(TensorId id, AcquireIndex) const override {
      static const uint64_t next[] = {30, 40, 20, 5};
      return AcquireIndex(next[id]);
    }
    AcquireIndex UseAfter(TensorId id, uint64_t) const override { return NextUse(id, AcquireIndex()); }
  } oracle;
  testing::TempDir dir;
  testing::GatedTierStore* gate = nullptr;
  auto c = GatedCache(dir, OneMover(2, 2), 4, &gate);
  ASSERT_NE(c, nullptr);
  WriteTensor(c.get(), 2, 7, Tier::kHost);
  WriteTensor(c.get(), 3, 8, Tier::kHost);  // the host's two slots: 2 (next use 20) and 3 (5)
  c->SetNextUseOracle(&oracle);
  gate->Close();
  PrefetchHandle hold = c->Prefetch(2, Tier::kDevice);  // the one mover, held in its copy
  ASSERT_TRUE(gate->WaitEntered(1, kWait));
  PrefetchHandle p = c->Prefetch(0, Tier::kHost);  // queued; alone it would be declined
  const uint64_t misses_before = c->Snapshot().tier(Tier::kHost).misses;
  Status acquired = Status::Internal("not run");
  std::thread reader([&] { acquired = c->Acquire(0, Tier::kHost, AccessMode::kRead, kWait).status(); });
  // The reader has promoted the queued prefetch once it counts as a miss (both
  // happen under the cache's lock, which Snapshot takes).
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (c->Snapshot().tier(Tier::kHost).misses == misses_before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(c->Snapshot().tier(Tier::kHost).misses, misses_before + 1);
  EXPECT_EQ(c->Snapshot().tier(Tier::kHost).late, 1u);  // the prefetch was issued, not yet arrived
  gate->Open();
  reader.join();
  EXPECT_TRUE(acquired.ok()) << acquired.ToString();
  EXPECT_TRUE(hold.Wait(kWait).ok());
  EXPECT_TRUE(p.Wait(kWait).ok());  // it completed as the demand move
  CacheMetrics m = c->Snapshot();
  EXPECT_EQ(m.prefetches_declined, 0u);
  EXPECT_TRUE(c->IsResident(0, Tier::kHost));
  EXPECT_TRUE(c->IsResident(3, Tier::kHost));  // the miss evicted the furthest next use: 2
  c->SetNextUseOracle(nullptr);
  EXPECT_TRUE(ReadMatches(c.get(), 2, 7, Tier::kHost));
}

}  // namespace
}  // namespace tencache
