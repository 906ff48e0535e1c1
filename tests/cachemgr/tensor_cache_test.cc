#include "cachemgr/tensor_cache.h"

#include <gtest/gtest.h>

#include <map>

#include "cachemgr/step_order.h"

#include "cache_fixture.h"

namespace tencache {
namespace {

using std::chrono::milliseconds;
using testing::MakeCache;
using testing::UniformSpecs;
constexpr milliseconds kWait(10000);
constexpr uint64_t kBytes = 64 << 10;

TensorCacheOptions Budgets(uint64_t device_slots, uint64_t host_slots) {
  TensorCacheOptions o;
  o.device_budget = device_slots * kBytes;
  o.host_budget = host_slots * kBytes;
  return o;
}

void WriteTensor(TensorCache* c, TensorId id, uint32_t seed, Tier tier = Tier::kDevice) {
  auto h = c->Acquire(id, tier, AccessMode::kWrite, kWait);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  testing::FillPattern(static_cast<uint8_t*>(h->data()), h->bytes(), seed);
  ASSERT_TRUE(c->Release(&*h).ok());
}

bool ReadMatches(TensorCache* c, TensorId id, uint32_t seed, Tier tier = Tier::kDevice) {
  auto h = c->Acquire(id, tier, AccessMode::kRead, kWait);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return h.ok() && testing::CheckPattern(static_cast<uint8_t*>(h->data()), h->bytes(), seed);
}

class MapOracle : public NextUseOracle {
 public:
  explicit MapOracle(std::map<TensorId, uint64_t> next) : next_(std::move(next)) {}
  AcquireIndex NextUse(TensorId id, AcquireIndex) const override {
    auto it = next_.find(id);
    return it == next_.end() ? kNeverAcquired : AcquireIndex(it->second);
  }
  AcquireIndex UseAfter(TensorId id, uint64_t) const override { return NextUse(id, AcquireIndex()); }

 private:
  std::map<TensorId, uint64_t> next_;  // next acquire index, per tensor
};

class TensorCacheTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(TensorCacheTest, NeverWrittenTensorsReadAsZeros) {
  auto c = MakeCache(dir_, Budgets(2, 2), UniformSpecs(3, kBytes));
  auto h = c->Acquire(1, Tier::kDevice, AccessMode::kRead, kWait);
  ASSERT_TRUE(h.ok());
  const auto* p = static_cast<const uint8_t*>(h->data());
  for (uint64_t i = 0; i < kBytes; ++i) ASSERT_EQ(p[i], 0);
  EXPECT_NE(c->Describe().find("device(simulated-host)"), std::string::npos);
}

TEST_F(TensorCacheTest, DataSurvivesEvictionThroughAllTiers) {
  auto c = MakeCache(dir_, Budgets(2, 3), UniformSpecs(8, kBytes));
  for (TensorId i = 0; i < 8; ++i) WriteTensor(c.get(), i, 100 + i);
  for (TensorId i = 0; i < 8; ++i) EXPECT_TRUE(ReadMatches(c.get(), i, 100 + i)) << "tensor " << i;
  CacheMetrics m = c->EndStep();
  EXPECT_GT(m.link(Link::kD2H).bytes, 0u);
  EXPECT_GT(m.link(Link::kNvmeWrite).bytes, 0u);
  EXPECT_GT(m.link(Link::kNvmeRead).bytes, 0u);
  EXPECT_GT(m.link(Link::kH2D).bytes, 0u);
  EXPECT_GT(m.tier(Tier::kDevice).evictions, 0u);
  EXPECT_GT(m.tier(Tier::kHost).evictions, 0u);
  EXPECT_EQ(m.allocations_after_setup, 0u);
  EXPECT_EQ(m.tier(Tier::kHost).reserved_bytes, 3 * kBytes);
  EXPECT_LE(m.tier(Tier::kHost).peak_used_bytes, 3 * kBytes);
}

TEST_F(TensorCacheTest, DirtyTensorIsWrittenBackOnEviction) {
  auto c = MakeCache(dir_, Budgets(1, 2), UniformSpecs(2, kBytes));
  WriteTensor(c.get(), 0, 7);
  c->EndStep();
  WriteTensor(c.get(), 1, 8);  // evicts 0 from the device: its only copy
  CacheMetrics m = c->EndStep();
  EXPECT_FALSE(c->IsResident(0, Tier::kDevice));
  EXPECT_EQ(m.link(Link::kD2H).bytes, kBytes);
  EXPECT_TRUE(ReadMatches(c.get(), 0, 7, Tier::kHost));
}

TEST_F(TensorCacheTest, TensorWithLiveHandleIsNeverEvicted) {
  auto c = MakeCache(dir_, Budgets(1, 2), UniformSpecs(2, kBytes));
  auto h0 = c->Acquire(0, Tier::kDevice, AccessMode::kWrite, kWait);
  ASSERT_TRUE(h0.ok());
  auto h1 = c->Acquire(1, Tier::kDevice, AccessMode::kRead, kWait);
  ASSERT_TRUE(h1.ok()) << h1.status().ToString();
  EXPECT_TRUE(c->IsResident(0, Tier::kDevice));
  EXPECT_NE(h0->data(), h1->data());
  EXPECT_EQ(c->Snapshot().allocations_after_setup, 1u);  // the pool had to grow by one slot
}

// A budget the job sets below its tier's least slot plan is the job's error:
// InvalidArgument (exit 2) naming the key, the budget and what it needs.
TEST_F(TensorCacheTest, ABudgetBelowTheLeastSlotPlanIsAnErrorNamingItsKey) {
  TensorCacheOptions o = Budgets(2, 2);
  o.min_host_slots_per_class = 3;
  o.host_budget_key = "cache.host_budget";
  StatusOr<std::unique_ptr<TensorCache>> c = testing::TryMakeCache(dir_, o, UniformSpecs(4, kBytes));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(ExitCodeFor(c.status()), 2) << c.status().ToString();
  EXPECT_NE(c.status().message().find("cache.host_budget"), std::string::npos) << c.status().ToString();
  EXPECT_NE(c.status().message().find("host tier"), std::string::npos) << c.status().ToString();
  o = Budgets(0, 4);
  o.device_budget = kBytes / 2;
  o.device_budget_key = "cache.device_budget";
  c = testing::TryMakeCache(dir_, o, UniformSpecs(4, kBytes));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
  EXPECT_NE(c.status().message().find("cache.device_budget"), std::string::npos) << c.status().ToString();
}

TEST_F(TensorCacheTest, AllSlotsPinnedWithoutGrowthIsResourceExhausted) {
  TensorCacheOptions o = Budgets(1, 2);
  o.grow_when_pinned = false;
  auto c = MakeCache(dir_, o, UniformSpecs(2, kBytes));
  auto h0 = c->Acquire(0, Tier::kDevice, AccessMode::kWrite, kWait);
  ASSERT_TRUE(h0.ok());
  auto h1 = c->Acquire(1, Tier::kDevice, AccessMode::kRead, kWait);
  EXPECT_EQ(h1.status().code(), StatusCode::kResourceExhausted) << h1.status().ToString();
  EXPECT_NE(h1.status().message().find("'t1'"), std::string::npos) << h1.status().ToString();
}

TEST_F(TensorCacheTest, LruEvictsLeastRecentlyUsedWithoutAPlan) {
  auto c = MakeCache(dir_, Budgets(3, 4), UniformSpecs(4, kBytes));
  for (TensorId i = 0; i < 3; ++i) WriteTensor(c.get(), i, i);
  ASSERT_TRUE(ReadMatches(c.get(), 0, 0));  // 1 is now the least recently used
  WriteTensor(c.get(), 3, 3);
  EXPECT_TRUE(c->IsResident(0, Tier::kDevice));
  EXPECT_FALSE(c->IsResident(1, Tier::kDevice));
  EXPECT_TRUE(c->IsResident(2, Tier::kDevice));
}

TEST_F(TensorCacheTest, OracleEvictsFurthestNextUse) {
  auto c = MakeCache(dir_, Budgets(3, 4), UniformSpecs(4, kBytes));
  for (TensorId i = 0; i < 3; ++i) WriteTensor(c.get(), i, i);
  ASSERT_TRUE(ReadMatches(c.get(), 0, 0));
  MapOracle oracle({{0, 100}, {1, 5}, {2, 50}, {3, 6}});  // LRU would pick 1; the plan says 0
  c->SetNextUseOracle(&oracle);
  WriteTensor(c.get(), 3, 3);
  EXPECT_FALSE(c->IsResident(0, Tier::kDevice));
  EXPECT_TRUE(c->IsResident(1, Tier::kDevice));
  EXPECT_TRUE(c->IsResident(2, Tier::kDevice));
  c->SetNextUseOracle(nullptr);
}

// The order's uses made in another order (an update on another thread behind
// the training thread): a tensor whose use this step is still to come keeps
// its slot. Counting every acquire as a position would place the step past A's
// use, call A used and evict it first.
TEST_F(TensorCacheTest, AUseStillToComeKeepsItsSlotWhenThreadsAcquireOutOfOrder) {
  constexpr TensorId kA = 0, kB = 1, kZ = 2, kC = 3;
  auto c = MakeCache(dir_, Budgets(2, 4), UniformSpecs(4, kBytes));
  WriteTensor(c.get(), kB, 3);
  WriteTensor(c.get(), kA, 1);
  WriteTensor(c.get(), kZ, 2);  // the device's two slots: A and Z (B left for the host)
  ASSERT_FALSE(c->IsResident(kB, Tier::kDevice));
  c->EndStep();
  StepOrder<AcquireIndex> oracle({kA, kB, kZ, kC}, 4);
  c->SetNextUseOracle(&oracle);
  ASSERT_TRUE(ReadMatches(c.get(), kB, 3));  // B before A: the miss takes Z's slot (Z at 2, A still at 0)
  EXPECT_TRUE(c->IsResident(kA, Tier::kDevice));
  EXPECT_FALSE(c->IsResident(kZ, Tier::kDevice));
  const uint64_t hits = c->Snapshot().tier(Tier::kDevice).hits;
  ASSERT_TRUE(ReadMatches(c.get(), kA, 1));
  EXPECT_EQ(c->Snapshot().tier(Tier::kDevice).hits, hits + 1);
  c->SetNextUseOracle(nullptr);
}

TEST_F(TensorCacheTest, PrefetchedTensorIsAHitWithoutStall) {
  auto c = MakeCache(dir_, Budgets(2, 3), UniformSpecs(4, kBytes));
  for (TensorId i = 0; i < 4; ++i) WriteTensor(c.get(), i, 50 + i);
  c->EndStep();
  ASSERT_FALSE(c->IsResident(0, Tier::kDevice));
  PrefetchHandle p = c->Prefetch(0, Tier::kDevice);
  ASSERT_TRUE(p.Wait(kWait).ok());
  EXPECT_TRUE(p.ready());
  EXPECT_TRUE(ReadMatches(c.get(), 0, 50));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.tier(Tier::kDevice).hits, 1u);
  EXPECT_EQ(m.tier(Tier::kDevice).misses, 0u);
  EXPECT_EQ(m.stall_seconds, 0.0);
  EXPECT_EQ(m.prefetches, 1u);
}

TEST_F(TensorCacheTest, MissWaitsAndRecordsStall) {
  auto c = MakeCache(dir_, Budgets(1, 1), UniformSpecs(2, kBytes));
  WriteTensor(c.get(), 0, 1, Tier::kHost);
  WriteTensor(c.get(), 1, 2, Tier::kHost);  // pushes 0 down to NVMe
  c->EndStep();
  EXPECT_TRUE(ReadMatches(c.get(), 0, 1));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.tier(Tier::kDevice).misses, 1u);
  EXPECT_EQ(m.tier(Tier::kDevice).late, 0u);  // nothing was on its way: no prefetch
  EXPECT_GT(m.stall_seconds, 0.0);
  EXPECT_EQ(m.link(Link::kNvmeRead).bytes, kBytes);
}

TEST_F(TensorCacheTest, PrefetchToNvmeWritesBack) {
  auto c = MakeCache(dir_, Budgets(2, 2), UniformSpecs(2, kBytes));
  WriteTensor(c.get(), 0, 9, Tier::kHost);
  EXPECT_FALSE(c->IsResident(0, Tier::kNvme));
  ASSERT_TRUE(c->Prefetch(0, Tier::kNvme).Wait(kWait).ok());
  EXPECT_TRUE(c->IsResident(0, Tier::kNvme));
  EXPECT_EQ(c->Snapshot().link(Link::kNvmeWrite).bytes, kBytes);
}

TEST_F(TensorCacheTest, CorruptNvmeCopyIsNeverHandedOut) {
  FaultInjectionFileEnv faulty(PosixFileEnv());
  auto c = MakeCache(dir_, Budgets(1, 1), UniformSpecs(2, kBytes), &faulty);
  WriteTensor(c.get(), 0, 21, Tier::kHost);
  WriteTensor(c.get(), 1, 22, Tier::kHost);  // 0 goes to NVMe
  ASSERT_TRUE(c->IsResident(0, Tier::kNvme));
  faulty.AddFault({FaultKind::kCorruptRead, IoOp::kRead, 0, ~0ull, 1});
  auto h = c->Acquire(0, Tier::kHost, AccessMode::kRead, kWait);
  ASSERT_EQ(h.status().code(), StatusCode::kCorruption) << h.status().ToString();
  EXPECT_NE(h.status().message().find("tensor t0"), std::string::npos) << h.status().ToString();
  EXPECT_NE(h.status().message().find(dir_.path()), std::string::npos) << h.status().ToString();
  EXPECT_FALSE(c->IsResident(0, Tier::kHost));
  EXPECT_TRUE(ReadMatches(c.get(), 0, 21, Tier::kHost));  // the fault was one-shot
}

TEST_F(TensorCacheTest, EioOnWriteBackNamesTheTensor) {
  FaultInjectionFileEnv faulty(PosixFileEnv());
  auto c = MakeCache(dir_, Budgets(1, 1), UniformSpecs(2, kBytes), &faulty);
  WriteTensor(c.get(), 0, 31, Tier::kHost);
  faulty.AddFault({FaultKind::kEio, IoOp::kWrite, 0, ~0ull, 1});
  auto h = c->Acquire(1, Tier::kHost, AccessMode::kWrite, kWait);
  ASSERT_EQ(h.status().code(), StatusCode::kIoError) << h.status().ToString();
  EXPECT_NE(h.status().message().find("t0"), std::string::npos) << h.status().ToString();
  EXPECT_TRUE(ReadMatches(c.get(), 0, 31, Tier::kHost));  // the dirty copy was kept
}

TEST_F(TensorCacheTest, SlowNvmeTimesOutNamingTensorAndFile) {
  FaultInjectionFileEnv faulty(PosixFileEnv());
  TensorCacheOptions o = Budgets(1, 1);
  // Long enough for the write-back below on a busy disk; the read never
  // completes within it: it does not start until released.
  o.io_timeout = milliseconds(1000);
  auto c = MakeCache(dir_, o, UniformSpecs(2, kBytes), &faulty);
  WriteTensor(c.get(), 0, 41, Tier::kHost);
  WriteTensor(c.get(), 1, 42, Tier::kHost);
  faulty.AddFault({FaultKind::kHeld, IoOp::kRead, 0, ~0ull, 1});
  auto h = c->Acquire(0, Tier::kHost, AccessMode::kRead, kWait);
  ASSERT_EQ(h.status().code(), StatusCode::kTimeout) << h.status().ToString();
  EXPECT_NE(h.status().message().find("tensor t0"), std::string::npos) << h.status().ToString();
  EXPECT_NE(h.status().message().find(dir_.path()), std::string::npos) << h.status().ToString();
  EXPECT_EQ(c->Snapshot().quarantined_slots, 1u);
  faulty.ReleaseHeld();  // the late read ends; its slot is freed with the cache
}

// A write-back that times out may still be read by the kernel later: its host
// slot must not be reused or modified, and no newer write-back of the tensor may
// start (it could be overtaken by the late one) until it ends.
TEST_F(TensorCacheTest, ATimedOutWriteBackKeepsItsSlotAndIsNeverOvertaken) {
  FaultInjectionFileEnv faulty(PosixFileEnv());
  TensorCacheOptions o = Budgets(1, 1);
  o.io_timeout = milliseconds(1000);  // the reads and the late write below finish within it on a busy disk
  auto c = MakeCache(dir_, o, UniformSpecs(2, kBytes), &faulty);
  WriteTensor(c.get(), 0, 51, Tier::kHost);
  faulty.AddFault({FaultKind::kHeld, IoOp::kWrite, 0, ~0ull, 1});  // t0's write-back does not start
  auto h = c->Acquire(1, Tier::kHost, AccessMode::kWrite, kWait);
  ASSERT_EQ(h.status().code(), StatusCode::kTimeout) << h.status().ToString();
  EXPECT_NE(h.status().message().find("t0"), std::string::npos) << h.status().ToString();
  EXPECT_EQ(c->Snapshot().quarantined_slots, 1u);

  // While it is held: t0 cannot be written (a writer would change what the late
  // write carries), and t1 does not get t0's slot.
  auto w = c->Acquire(0, Tier::kHost, AccessMode::kWrite, milliseconds(50));
  EXPECT_FALSE(w.ok());
  WriteTensor(c.get(), 1, 52, Tier::kHost);
  EXPECT_TRUE(c->IsResident(0, Tier::kHost)) << "t0's slot was taken while its write-back may still read it";

  faulty.ReleaseHeld();  // the late write starts now, with the bytes in t0's slot
  EXPECT_TRUE(ReadMatches(c.get(), 0, 51, Tier::kHost));  // waits for it to end
  ASSERT_TRUE(c->IsResident(0, Tier::kNvme));
  ASSERT_TRUE(c->Discard(0, Tier::kHost).ok());
  EXPECT_TRUE(ReadMatches(c.get(), 0, 51, Tier::kHost));  // from NVMe: the late write's bytes are t0's
  EXPECT_TRUE(ReadMatches(c.get(), 1, 52, Tier::kHost));
}

TEST_F(TensorCacheTest, MisuseIsReportedAsStatus) {
  auto c = MakeCache(dir_, Budgets(2, 2), UniformSpecs(2, kBytes));
  EXPECT_EQ(c->Acquire(7, Tier::kDevice, AccessMode::kRead, kWait).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->Acquire(0, Tier::kNvme, AccessMode::kRead, kWait).status().code(), StatusCode::kInvalidArgument);
  auto h = c->Acquire(0, Tier::kDevice, AccessMode::kRead, kWait);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(c->Release(&*h).ok());
  EXPECT_EQ(c->Release(&*h).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->Prefetch(9, Tier::kHost).Wait(kWait).code(), StatusCode::kNotFound);
}

TEST_F(TensorCacheTest, HomeTierPlacementAndMixedSizes) {
  std::vector<TensorSpec> specs = {{0, "embed", 3 * kBytes, ElementType::kFloat16, Tier::kDevice},
                                   {1, "w1", kBytes, ElementType::kFloat16, Tier::kHost},
                                   {2, "w2", kBytes, ElementType::kFloat16, Tier::kNvme},
                                   {3, "bias", 1000, ElementType::kFloat32, Tier::kNvme}};
  TensorCacheOptions o;
  o.device_budget = 3 * kBytes + kBytes + 4096;
  o.host_budget = 3 * kBytes + 2 * kBytes + 4096;
  auto c = MakeCache(dir_, o, specs);
  EXPECT_TRUE(c->IsResident(0, Tier::kDevice));
  EXPECT_TRUE(c->IsResident(1, Tier::kHost));
  EXPECT_FALSE(c->IsResident(2, Tier::kHost));
  EXPECT_EQ(c->spec(3).dtype, ElementType::kFloat32);
  WriteTensor(c.get(), 3, 5);
  EXPECT_TRUE(ReadMatches(c.get(), 3, 5));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.step, 0u);
  EXPECT_EQ(c->EndStep().step, 1u);
}

TEST_F(TensorCacheTest, ArrivalsCountCopiesIntoEachTier) {
  auto c = MakeCache(dir_, Budgets(1, 3), UniformSpecs(2, kBytes));
  EXPECT_EQ(c->Arrivals(0, Tier::kDevice), 0u);
  WriteTensor(c.get(), 0, 7, Tier::kHost);  // zero fill into the host
  const uint64_t host0 = c->Arrivals(0, Tier::kHost);
  EXPECT_EQ(host0, 1u);
  EXPECT_TRUE(ReadMatches(c.get(), 0, 7));
  EXPECT_EQ(c->Arrivals(0, Tier::kDevice), 1u);
  EXPECT_TRUE(ReadMatches(c.get(), 0, 7));  // a hit: nothing arrived
  EXPECT_EQ(c->Arrivals(0, Tier::kDevice), 1u);
  EXPECT_TRUE(c->Prefetch(0, Tier::kDevice).Wait(kWait).ok());  // already there: no copy
  EXPECT_EQ(c->Arrivals(0, Tier::kDevice), 1u);
  {
    auto h1 = c->Acquire(1, Tier::kDevice, AccessMode::kRead, kWait);  // one device slot: evicts 0
    ASSERT_TRUE(h1.ok()) << h1.status().ToString();
  }
  EXPECT_FALSE(c->IsResident(0, Tier::kDevice));
  EXPECT_TRUE(ReadMatches(c.get(), 0, 7));
  EXPECT_EQ(c->Arrivals(0, Tier::kDevice), 2u);
  WriteTensor(c.get(), 0, 8, Tier::kHost);  // drops the device copy; a prefetch refreshes it
  EXPECT_TRUE(c->Prefetch(0, Tier::kDevice).Wait(kWait).ok());
  EXPECT_EQ(c->Arrivals(0, Tier::kDevice), 3u);
  EXPECT_EQ(c->Arrivals(0, Tier::kHost), host0);  // the host copy never left
  CacheMetrics m = c->EndStep();
  EXPECT_GT(m.link(Link::kH2D).seconds, 0.0);
  EXPECT_EQ(m.link(Link::kH2D).bytes, 4 * kBytes);
  EXPECT_EQ(m.link(Link::kNvmeRead).seconds, 0.0);  // a zero fill is not an NVMe read
  // One copy at a time here: the link was busy as long as its copies ran (its
  // intervals also cover taking the lock around each copy).
  EXPECT_GE(m.link(Link::kH2D).busy_seconds, m.link(Link::kH2D).seconds);
  EXPECT_LT(m.link(Link::kH2D).busy_seconds, m.link(Link::kH2D).seconds + 0.05);
  EXPECT_EQ(m.link(Link::kNvmeRead).busy_seconds, 0.0);
  EXPECT_EQ(c->EndStep().link(Link::kH2D).busy_seconds, 0.0);  // a new step starts from zero
}

TEST_F(TensorCacheTest, DiscardEvictsNowAndWritesBackTheOnlyCopy) {
  auto c = MakeCache(dir_, Budgets(2, 2), UniformSpecs(2, kBytes));
  WriteTensor(c.get(), 0, 11);  // dirty on the device: the only valid copy
  using Discarded = TensorCache::Discarded;
  StatusOr<Discarded> absent = c->Discard(1, Tier::kDevice);  // not there: nothing to do
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_EQ(*absent, Discarded::kGone);
  {
    auto h = c->Acquire(0, Tier::kDevice, AccessMode::kRead, kWait);
    ASSERT_TRUE(h.ok());
    StatusOr<Discarded> pinned = c->Discard(0, Tier::kDevice);  // kept, not a failure
    ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
    EXPECT_EQ(*pinned, Discarded::kKept);
    EXPECT_TRUE(c->IsResident(0, Tier::kDevice));
  }
  StatusOr<Discarded> gone = c->Discard(0, Tier::kDevice);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(*gone, Discarded::kGone);
  EXPECT_FALSE(c->IsResident(0, Tier::kDevice));
  EXPECT_TRUE(c->IsResident(0, Tier::kHost));  // written back
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.link(Link::kD2H).bytes, kBytes);
  EXPECT_EQ(m.tier(Tier::kDevice).evictions, 1u);
  EXPECT_EQ(c->Discard(0, Tier::kNvme).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ReadMatches(c.get(), 0, 11, Tier::kHost));
}


TEST_F(TensorCacheTest, OverwriteTakesASlotWithoutFetchingTheOldBytes) {
  auto c = MakeCache(dir_, Budgets(1, 1), UniformSpecs(2, kBytes));
  WriteTensor(c.get(), 0, 21, Tier::kHost);
  WriteTensor(c.get(), 1, 22, Tier::kHost);  // 0 goes to NVMe
  ASSERT_FALSE(c->IsResident(0, Tier::kHost));
  c->EndStep();
  {
    auto h = c->Acquire(0, Tier::kHost, AccessMode::kOverwrite, kWait);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    testing::FillPattern(static_cast<uint8_t*>(h->data()), h->bytes(), 23);
  }
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.link(Link::kNvmeRead).bytes, 0u);        // the old bytes were not read
  EXPECT_EQ(m.link(Link::kNvmeWrite).bytes, kBytes);    // 1 was written back to make room
  EXPECT_EQ(m.tier(Tier::kHost).misses, 0u);  // and nobody waited for an arrival
  EXPECT_FALSE(c->IsResident(0, Tier::kNvme));  // the NVMe copy is stale now
  EXPECT_TRUE(ReadMatches(c.get(), 0, 23, Tier::kHost));
  EXPECT_TRUE(ReadMatches(c.get(), 1, 22, Tier::kHost));  // back from NVMe, evicting 0 (written back)
  EXPECT_TRUE(ReadMatches(c.get(), 0, 23, Tier::kDevice));
}

TEST_F(TensorCacheTest, InvalidateDropsEveryCopyWithoutWritingBack) {
  auto c = MakeCache(dir_, Budgets(1, 1), UniformSpecs(2, kBytes));
  WriteTensor(c.get(), 0, 31, Tier::kHost);  // dirty: the only copy
  {
    auto h = c->Acquire(0, Tier::kHost, AccessMode::kRead, kWait);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(c->Invalidate(0).code(), StatusCode::kFailedPrecondition);  // pinned: kept
  }
  ASSERT_TRUE(c->Invalidate(0).ok());
  EXPECT_FALSE(c->IsResident(0, Tier::kHost));
  EXPECT_EQ(c->Invalidate(7).code(), StatusCode::kNotFound);
  WriteTensor(c.get(), 1, 32, Tier::kHost);  // the slot is free: nothing to write back
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.link(Link::kNvmeWrite).bytes, 0u);
  EXPECT_EQ(m.tier(Tier::kHost).evictions, 0u);
  auto h = c->Acquire(0, Tier::kDevice, AccessMode::kRead, kWait);  // reads as zeros again
  ASSERT_TRUE(h.ok());
  const auto* p = static_cast<const uint8_t*>(h->data());
  for (uint64_t i = 0; i < kBytes; ++i) ASSERT_EQ(p[i], 0) << i;
}

// A prefetch never evicts a tensor needed before the one it brings: with every
// slot holding something needed sooner it is declined, and the demand acquire
// still works (and may evict, as a demand miss must).
TEST_F(TensorCacheTest, PrefetchNeverEvictsATensorNeededSooner) {
  auto c = MakeCache(dir_, Budgets(2, 2), UniformSpecs(4, kBytes));
  WriteTensor(c.get(), 0, 40, Tier::kHost);
  WriteTensor(c.get(), 1, 41, Tier::kHost);
  WriteTensor(c.get(), 2, 42, Tier::kHost);  // 0 to NVMe
  WriteTensor(c.get(), 3, 43, Tier::kHost);  // 1 to NVMe: the host holds 2 and 3
  c->EndStep();
  MapOracle oracle({{0, 30}, {1, 10}, {2, 20}, {3, 5}});
  c->SetNextUseOracle(&oracle);
  // 0 (next use 30) would have to evict 2 (20) or 3 (5): both needed sooner.
  Status declined = c->Prefetch(0, Tier::kHost).Wait(kWait);
  EXPECT_EQ(declined.code(), StatusCode::kResourceExhausted) << declined.ToString();
  EXPECT_NE(declined.message().find("declined"), std::string::npos) << declined.ToString();
  EXPECT_TRUE(c->IsResident(2, Tier::kHost));
  EXPECT_TRUE(c->IsResident(3, Tier::kHost));
  // 1 (next use 10) may evict 2 (20), and only 2.
  ASSERT_TRUE(c->Prefetch(1, Tier::kHost).Wait(kWait).ok());
  EXPECT_TRUE(c->IsResident(1, Tier::kHost));
  EXPECT_FALSE(c->IsResident(2, Tier::kHost));
  EXPECT_TRUE(c->IsResident(3, Tier::kHost));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.prefetches, 2u);
  EXPECT_EQ(m.prefetches_declined, 1u);
  EXPECT_EQ(m.link(Link::kNvmeRead).bytes, kBytes);  // only 1 was read
  // A demand miss is not bound by the rule.
  EXPECT_TRUE(ReadMatches(c.get(), 0, 40, Tier::kHost));
  // Without an oracle a prefetch evicts as before (LRU).
  c->SetNextUseOracle(nullptr);
  ASSERT_TRUE(c->Prefetch(2, Tier::kHost).Wait(kWait).ok());
  EXPECT_TRUE(ReadMatches(c.get(), 2, 42, Tier::kHost));
}

TEST_F(TensorCacheTest, HostOnlyTensorsStayOutOfTheDevicePool) {
  // Two device-eligible tensors of kBytes and two host-only ones four times larger:
  // a device budget of two small slots is enough because the large class is not
  // carved there.
  std::vector<TensorSpec> specs = {{0, "w", kBytes, ElementType::kFloat32, Tier::kNvme, true},
                                   {1, "w2", kBytes, ElementType::kFloat32, Tier::kNvme, true},
                                   {2, "adam_m", 4 * kBytes, ElementType::kFloat32, Tier::kNvme, false},
                                   {3, "adam_v", 4 * kBytes, ElementType::kFloat32, Tier::kNvme, false}};
  TensorCacheOptions o;
  o.device_budget = 2 * kBytes;
  o.host_budget = 8 * kBytes + 2 * kBytes;
  o.min_host_slots_per_class = 2;  // both moments pinned at once
  auto c = MakeCache(dir_, o, specs);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->pool(Tier::kDevice).reserved_bytes(), 2 * kBytes);
  Status s = c->Acquire(2, Tier::kDevice, AccessMode::kRead, kWait).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("adam_m"), std::string::npos) << s.message();
  EXPECT_EQ(c->Prefetch(3, Tier::kDevice).Wait(kWait).code(), StatusCode::kInvalidArgument);
  auto m = c->Acquire(2, Tier::kHost, AccessMode::kWrite, kWait);
  auto v = c->Acquire(3, Tier::kHost, AccessMode::kWrite, kWait);
  ASSERT_TRUE(m.ok() && v.ok());
  EXPECT_EQ(c->Snapshot().allocations_after_setup, 0u);  // two slots were carved for the class
  specs[2].home = Tier::kDevice;  // contradicts device = false
  TierSet tiers;
  tiers.device = std::move(MakeDeviceTier(DeviceBackend::kSimulatedHost).value());
  HostTierOptions ho;
  ho.pin = false;
  tiers.host = std::make_unique<HostTier>(ho);
  NvmeTierOptions no;
  no.dir = dir_.path() + "/home-check";
  tiers.nvme = std::move(NvmeTier::Open(no).value());
  Status bad = TensorCache::Create(o, specs, std::move(tiers)).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("adam_m"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace tencache
