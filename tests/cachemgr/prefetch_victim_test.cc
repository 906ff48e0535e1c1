// A prefetch takes the victim a demand miss at its tensor's use would take, and
// waits for that victim's last use before then instead of evicting a tensor that
// is needed again soon after (which would cost a second read of it).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "cache_fixture.h"
#include "cachemgr/fault_injection_file_env.h"
#include "cachemgr/step_order.h"

namespace tencache {
namespace {

using std::chrono::milliseconds;
using testing::MakeCache;
using testing::UniformSpecs;
constexpr milliseconds kWait(10000);
constexpr uint64_t kBytes = 64 << 10;
constexpr TensorId kX = 0;  // on NVMe, prefetched to the host
constexpr TensorId kA = 1;  // on the host: used before X, then not until the next step
constexpr TensorId kB = 2;  // on the host: not used before X, but right after it

void Write(TensorCache* c, TensorId id, uint32_t seed) {
  auto h = c->Acquire(id, Tier::kHost, AccessMode::kWrite, kWait);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  testing::FillPattern(static_cast<uint8_t*>(h->data()), h->bytes(), seed);
}

bool Read(TensorCache* c, TensorId id, uint32_t seed) {
  auto h = c->Acquire(id, Tier::kHost, AccessMode::kRead, kWait);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return h.ok() && testing::CheckPattern(static_cast<const uint8_t*>(h->data()), h->bytes(), seed);
}

// Spins (no sleep) until the cache has parked `n` prefetches; false at the deadline.
bool WaitParked(const TensorCache& c, uint64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (c.Snapshot().prefetches_deferred < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

class PrefetchVictimTest : public ::testing::Test {
 protected:
  // Host slots: 2, holding A and B; X on NVMe. Each step reads B, A, X, B.
  void SetUp() override {
    TensorCacheOptions o;
    o.device_budget = kBytes;
    o.host_budget = 2 * kBytes;
    cache_ = MakeCache(dir_, o, UniformSpecs(3, kBytes));
    ASSERT_NE(cache_, nullptr);
    Write(cache_.get(), kX, 10);
    Write(cache_.get(), kA, 11);
    Write(cache_.get(), kB, 12);  // X (least recently used, no oracle yet) goes to NVMe
    ASSERT_FALSE(cache_->IsResident(kX, Tier::kHost));
    cache_->EndStep();
    cache_->SetNextUseOracle(&oracle_);
    ASSERT_TRUE(Read(cache_.get(), kB, 12));  // access 0
  }

  testing::TempDir dir_;
  StepOrder<AcquireIndex> oracle_{{kB, kA, kX, kB}, 3};  // the steps repeat this order
  std::unique_ptr<TensorCache> cache_;
};

// At X's use (access 2) a demand miss would evict A (next used at 5), not B (3).
// Issued at access 0, the prefetch waits for A's read at access 1, then evicts
// A: one NVMe read in the step. (Evicting B at once would read B back at 3.)
TEST_F(PrefetchVictimTest, WaitsForTheVictimsLastUseThenEvictsIt) {
  PrefetchHandle p = cache_->Prefetch(kX, Tier::kHost);
  ASSERT_TRUE(WaitParked(*cache_, 1));
  EXPECT_FALSE(p.ready());
  EXPECT_TRUE(cache_->IsResident(kA, Tier::kHost));
  EXPECT_TRUE(cache_->IsResident(kB, Tier::kHost));
  ASSERT_TRUE(Read(cache_.get(), kA, 11));  // access 1: A's last use this step releases the prefetch
  ASSERT_TRUE(p.Wait(kWait).ok());
  EXPECT_FALSE(cache_->IsResident(kA, Tier::kHost));
  EXPECT_TRUE(cache_->IsResident(kB, Tier::kHost));
  EXPECT_TRUE(Read(cache_.get(), kX, 10));  // access 2
  EXPECT_TRUE(Read(cache_.get(), kB, 12));  // access 3
  CacheMetrics m = cache_->EndStep();
  EXPECT_EQ(m.prefetches, 1u);
  EXPECT_EQ(m.prefetches_deferred, 1u);
  EXPECT_EQ(m.prefetches_declined, 0u);
  EXPECT_EQ(m.link(Link::kNvmeRead).bytes, kBytes);  // X only
  EXPECT_EQ(m.tier(Tier::kHost).misses, 0u);
  EXPECT_EQ(m.allocations_after_setup, 0u);
}

// Acquiring X while its prefetch is parked makes it a demand move at once.
TEST_F(PrefetchVictimTest, AcquireOfAParkedPrefetchMovesItAtOnce) {
  PrefetchHandle p = cache_->Prefetch(kX, Tier::kHost);
  ASSERT_TRUE(WaitParked(*cache_, 1));
  EXPECT_TRUE(Read(cache_.get(), kX, 10));
  EXPECT_TRUE(p.Wait(kWait).ok());
  EXPECT_EQ(cache_->EndStep().tier(Tier::kHost).misses, 1u);
}

// The victim leaving the tier for another reason frees a slot: the parked
// prefetch goes then, and takes the free slot.
TEST_F(PrefetchVictimTest, AParkedPrefetchGoesWhenItsVictimLeaves) {
  PrefetchHandle p = cache_->Prefetch(kX, Tier::kHost);
  ASSERT_TRUE(WaitParked(*cache_, 1));
  ASSERT_TRUE(cache_->Discard(kA, Tier::kHost).ok());
  ASSERT_TRUE(p.Wait(kWait).ok());
  EXPECT_TRUE(cache_->IsResident(kX, Tier::kHost));
  EXPECT_TRUE(cache_->IsResident(kB, Tier::kHost));
  EXPECT_TRUE(Read(cache_.get(), kA, 11));  // written back by the discard
}

// A victim with no use left before X goes at once: nothing is parked.
TEST_F(PrefetchVictimTest, AVictimAlreadyDoneGoesAtOnce) {
  ASSERT_TRUE(Read(cache_.get(), kA, 11));  // access 1
  ASSERT_TRUE(cache_->Prefetch(kX, Tier::kHost).Wait(kWait).ok());
  EXPECT_FALSE(cache_->IsResident(kA, Tier::kHost));
  EXPECT_TRUE(cache_->IsResident(kB, Tier::kHost));
  EXPECT_EQ(cache_->Snapshot().prefetches_deferred, 0u);
}

// A caller that pins two tensors of a class at once acquires them in a row: A,
// used the access before X, is taken to be still pinned at X's use, so the
// victim a demand miss would take then is B, and the prefetch takes it at once.
TEST(PrefetchVictimHeldTest, ATensorUsedRightBeforeTheUseCountsAsPinnedThen) {
  testing::TempDir dir;
  TensorCacheOptions o;
  o.device_budget = kBytes;
  o.host_budget = 2 * kBytes;
  o.min_host_slots_per_class = 2;
  auto c = MakeCache(dir, o, UniformSpecs(3, kBytes));
  ASSERT_NE(c, nullptr);
  Write(c.get(), kX, 10);
  Write(c.get(), kA, 11);
  Write(c.get(), kB, 12);
  c->EndStep();
  StepOrder<AcquireIndex> oracle({kB, kA, kX, kB}, 3);
  c->SetNextUseOracle(&oracle);
  ASSERT_TRUE(Read(c.get(), kB, 12));  // access 0
  ASSERT_TRUE(c->Prefetch(kX, Tier::kHost).Wait(kWait).ok());
  EXPECT_EQ(c->Snapshot().prefetches_deferred, 0u);
  EXPECT_TRUE(c->IsResident(kA, Tier::kHost));
  EXPECT_FALSE(c->IsResident(kB, Tier::kHost));
}

// A prefetch must not evict a tensor an Acquire is waiting for. The oracle
// counts that acquire's use as past (the tensor's next use is a step away), so
// once its read lands the tensor looks like the best victim until the waiting
// thread wakes and pins it. With one mover the next job runs in exactly that
// window: evicting X for Y there would read X again at once.
TEST(PrefetchVictim, ATensorAnAcquireWaitsForIsNotEvictedWhenItArrives) {
  testing::TempDir dir;
  FaultInjectionFileEnv faulty(PosixFileEnv());
  TensorCacheOptions o;
  o.device_budget = kBytes;
  o.host_budget = 2 * kBytes;
  o.mover_threads = 1;
  constexpr TensorId kY = 1;  // on NVMe, prefetched while X's acquire waits
  StepOrder<AcquireIndex> oracle({kX, kY, kB}, 3);  // outlives the cache
  std::unique_ptr<TensorCache> c = MakeCache(dir, o, UniformSpecs(3, kBytes), &faulty);
  ASSERT_NE(c, nullptr);
  Write(c.get(), kX, 10);
  Write(c.get(), kY, 11);
  Write(c.get(), kB, 12);  // X to NVMe
  ASSERT_TRUE(c->Discard(kY, Tier::kHost).ok());  // Y to NVMe: host holds B, one slot free
  c->EndStep();
  c->SetNextUseOracle(&oracle);

  faulty.AddFault({FaultKind::kHeld, IoOp::kRead, 0, ~0ull, 1});
  PrefetchHandle px = c->Prefetch(kX, Tier::kHost);  // into the free slot; its read is held
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (faulty.held_requests() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_EQ(faulty.held_requests(), 1u);
  bool x_ok = false;
  std::thread reader([&] { x_ok = Read(c.get(), kX, 10); });  // access 0: waits for the read
  while (c->Snapshot().tier(Tier::kHost).misses == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  PrefetchHandle py = c->Prefetch(kY, Tier::kHost);  // queued behind X's read on the one mover
  faulty.ReleaseHeld();
  reader.join();
  EXPECT_TRUE(x_ok);
  ASSERT_TRUE(py.Wait(kWait).ok());
  EXPECT_TRUE(Read(c.get(), kY, 11));  // access 1
  EXPECT_TRUE(Read(c.get(), kB, 12));  // access 2
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.link(Link::kNvmeRead).bytes, 2 * kBytes);  // X and Y once each (X twice had Y evicted it)
  EXPECT_EQ(m.tier(Tier::kHost).misses, 1u);    // X's acquire only: Y took X's slot after its use, B stayed
  c->SetNextUseOracle(nullptr);
}

// A mover that finds no victim while a holder is in flight waits out
// slot_wait; releasing the handle that pinned a victim wakes it then, well
// before the grace (here ten minutes) ends. Before the fix the release woke
// nobody and the mover slept the whole grace.
TEST(SlotWait, ReleasingAVictimsLastPinWakesAMoverWaitingForASlot) {
  testing::TempDir dir;
  TensorCacheOptions o;
  o.device_budget = 2 * kBytes;
  o.host_budget = 4 * kBytes;
  o.mover_threads = 2;
  o.slot_wait = std::chrono::minutes(10);
  constexpr TensorId kPinned = 0, kGated = 1, kY = 2;
  testing::GatedTierStore* gate = nullptr;
  std::unique_ptr<TensorCache> c = testing::MakeGatedCache(dir, o, UniformSpecs(3, kBytes), &gate);
  ASSERT_NE(c, nullptr);
  Write(c.get(), kPinned, 10);
  Write(c.get(), kGated, 11);
  Write(c.get(), kY, 12);
  auto pinned = c->Acquire(kPinned, Tier::kDevice, AccessMode::kRead, kWait);  // one device slot, pinned
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  ASSERT_TRUE(gate->WaitEntered(1, kWait));

  gate->Close();
  PrefetchHandle held = c->Prefetch(kGated, Tier::kDevice);  // the other slot; its copy waits at the gate
  ASSERT_TRUE(gate->WaitEntered(2, kWait));
  PrefetchHandle py = c->Prefetch(kY, Tier::kDevice);  // the second mover: no victim, a holder in flight
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (c->Snapshot().slot_waits == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_EQ(c->Snapshot().slot_waits, 1u);

  ASSERT_TRUE(c->Release(&*pinned).ok());  // the pinned tensor is a victim now
  // Y's copy reaches the gate in its freed slot well before the grace ends.
  EXPECT_TRUE(gate->WaitEntered(3, kWait));
  EXPECT_FALSE(c->IsResident(kPinned, Tier::kDevice));
  gate->Open();
  EXPECT_TRUE(py.Wait(kWait).ok());
  EXPECT_TRUE(held.Wait(kWait).ok());
  EXPECT_TRUE(testing::ReadMatches(c.get(), kY, 12, Tier::kDevice));
  EXPECT_TRUE(testing::ReadMatches(c.get(), kGated, 11, Tier::kDevice));
}

}  // namespace
}  // namespace tencache
