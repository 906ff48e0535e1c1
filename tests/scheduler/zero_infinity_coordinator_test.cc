// DeepSpeed's rules, one per test, against an in-memory cache whose fetches
// complete only when the test says so: the trace modes, the in-flight cap, the
// stop at NVMe, the bucket and max_live bounds, reuse distance and keep-until.
#include "scheduler/zero_infinity_coordinator.h"

#include <gtest/gtest.h>

#include <set>

namespace tencache {
namespace {

using Kind = ZeroInfinityDecision::Kind;

class FakeCache : public ZeroInfinityCacheView {
 public:
  explicit FakeCache(std::vector<uint64_t> elements) : elements_(std::move(elements)) {}
  bool OnDevice(uint32_t k) const override { return on_device.count(k) || in_flight.count(k); }
  bool InFlight(uint32_t k) const override { return in_flight.count(k) > 0; }
  bool OnlyOnNvme(uint32_t k) const override { return on_nvme.count(k) > 0; }
  bool StartFetch(uint32_t k) override {
    if (refuse) return false;
    in_flight.insert(k);
    started.push_back(k);
    return true;
  }
  uint64_t LiveElements() const override {
    uint64_t live = 0;
    for (uint32_t k = 0; k < elements_.size(); ++k) live += OnDevice(k) ? elements_[k] : 0;
    return live;
  }
  // The fetch of `k` (demand or prefetch) completes.
  void Arrive(uint32_t k) {
    in_flight.erase(k);
    on_device.insert(k);
  }
  void ArriveAll() {
    for (uint32_t k : std::set<uint32_t>(in_flight)) Arrive(k);
  }

  std::set<uint32_t> on_device, in_flight, on_nvme;
  bool refuse = false;
  std::vector<uint32_t> started;

 private:
  std::vector<uint64_t> elements_;
};

// One access as the adapters run it: demand fetch, walk, compute, release rule.
void Access(ZeroInfinityCoordinator& c, FakeCache& cache, size_t pos, uint32_t key) {
  cache.Arrive(key);
  c.OnAccess(pos, key, cache);
  if (c.ReleaseAfter(pos, key)) cache.on_device.erase(key);
}

// Records `order` in one step, so that the next BeginStep completes the trace.
void Record(ZeroInfinityCoordinator& c, FakeCache& cache, const std::vector<uint32_t>& order) {
  c.BeginStep();
  for (size_t p = 0; p < order.size(); ++p) Access(c, cache, p, order[p]);
  c.BeginStep();
}

struct Fixture {
  Fixture(std::vector<uint64_t> elements, ZeroInfinityKnobs knobs)
      : cache(elements), c(elements, knobs, [this](const ZeroInfinityDecision& d) { log.push_back(d); }) {}
  FakeCache cache;
  std::vector<ZeroInfinityDecision> log;
  ZeroInfinityCoordinator c;
};

ZeroInfinityKnobs Unbounded() {
  ZeroInfinityKnobs k;
  k.prefetch_bucket_size = 1'000'000;
  k.max_live_parameters = 1'000'000;
  k.max_reuse_distance = 0;
  k.max_in_flight = 100;
  return k;
}

TEST(ZeroInfinityCoordinator, RecordsTheFirstStepAndPrefetchesFromTheSecond) {
  Fixture f(std::vector<uint64_t>(4, 10), ZeroInfinityKnobs{});
  EXPECT_EQ(f.c.mode(), ZeroTraceMode::kInvalid);
  f.c.BeginStep();
  EXPECT_EQ(f.c.mode(), ZeroTraceMode::kRecord);
  for (uint32_t k : {0u, 1u, 2u, 3u, 2u}) Access(f.c, f.cache, f.c.order().size(), k);
  EXPECT_TRUE(f.cache.started.empty());
  EXPECT_TRUE(f.cache.on_device.empty());  // released after every use while recording
  f.c.BeginStep();
  EXPECT_EQ(f.c.mode(), ZeroTraceMode::kComplete);
  EXPECT_EQ(f.c.order(), (std::vector<uint32_t>{0, 1, 2, 3, 2}));
  f.cache.Arrive(0);
  f.c.OnAccess(0, 0, f.cache);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 2}));  // max_in_flight 2
}

TEST(ZeroInfinityCoordinator, AnAccessOffTheTraceInvalidatesIt) {
  Fixture f(std::vector<uint64_t>(3, 10), ZeroInfinityKnobs{});
  Record(f.c, f.cache, {0, 1, 2});
  Access(f.c, f.cache, 0, 0);
  f.cache.ArriveAll();
  f.cache.started.clear();
  f.cache.Arrive(2);
  f.c.OnAccess(1, 2, f.cache);  // the trace says 1
  EXPECT_EQ(f.c.mode(), ZeroTraceMode::kInvalid);
  EXPECT_TRUE(f.c.ReleaseAfter(1, 2));
  EXPECT_TRUE(f.cache.started.empty());
  f.c.BeginStep();
  EXPECT_EQ(f.c.mode(), ZeroTraceMode::kRecord);
  Access(f.c, f.cache, 0, 2);
  f.c.BeginStep();
  EXPECT_EQ(f.c.order(), (std::vector<uint32_t>{2}));
}

TEST(ZeroInfinityCoordinator, AtMostMaxInFlightFetchesAreOutstanding) {
  ZeroInfinityKnobs knobs = Unbounded();
  knobs.max_in_flight = 2;
  Fixture f(std::vector<uint64_t>(6, 10), knobs);
  Record(f.c, f.cache, {0, 1, 2, 3, 4, 5});
  Access(f.c, f.cache, 0, 0);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 2}));
  Access(f.c, f.cache, 1, 1);  // 1 arrived on demand, 2 still in flight: one more
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 2, 3}));
  f.cache.ArriveAll();
  Access(f.c, f.cache, 2, 2);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 2, 3, 4, 5}));
}

TEST(ZeroInfinityCoordinator, TheWalkStopsAtTheFirstTensorOnlyOnNvme) {
  Fixture f(std::vector<uint64_t>(5, 10), Unbounded());
  Record(f.c, f.cache, {0, 1, 2, 3, 4});
  f.cache.on_nvme = {2};
  Access(f.c, f.cache, 0, 0);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1}));  // 3 and 4 are on the host, behind 2
  f.cache.ArriveAll();
  Access(f.c, f.cache, 1, 1);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1}));
  f.cache.on_nvme.clear();  // swapped in elsewhere
  f.cache.Arrive(2);
  f.c.OnAccess(2, 2, f.cache);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 3, 4}));
}

TEST(ZeroInfinityCoordinator, PrefetchedElementsStayBelowTheBucket) {
  ZeroInfinityKnobs knobs = Unbounded();
  knobs.prefetch_bucket_size = 25;  // the walk goes on while below: 10, 20, then 30
  Fixture f(std::vector<uint64_t>(6, 10), knobs);
  Record(f.c, f.cache, {0, 1, 2, 3, 4, 5});
  Access(f.c, f.cache, 0, 0);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 2, 3}));
}

TEST(ZeroInfinityCoordinator, PrefetchedElementsStayBelowMaxLiveMinusLive) {
  ZeroInfinityKnobs knobs = Unbounded();
  knobs.max_live_parameters = 30;
  Fixture f(std::vector<uint64_t>(6, 10), knobs);
  Record(f.c, f.cache, {0, 1, 2, 3, 4, 5});
  Access(f.c, f.cache, 0, 0);  // live 10: room 20
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 2}));
  f.cache.ArriveAll();
  f.cache.on_device.insert(5);  // live 30 at the next access: no room
  f.cache.Arrive(1);
  f.c.OnAccess(1, 1, f.cache);
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{1, 2}));
}

TEST(ZeroInfinityCoordinator, ARefusedFetchStopsTheWalk) {
  Fixture f(std::vector<uint64_t>(4, 10), Unbounded());
  Record(f.c, f.cache, {0, 1, 2, 3});
  f.cache.refuse = true;
  Access(f.c, f.cache, 0, 0);
  EXPECT_TRUE(f.cache.started.empty());
  f.cache.refuse = false;
  Access(f.c, f.cache, 1, 1);  // the walk resumes where it stopped
  EXPECT_EQ(f.cache.started, (std::vector<uint32_t>{2, 3}));
}

TEST(ZeroInfinityCoordinator, KeptWhenReusedWithinMaxReuseDistance) {
  for (uint64_t distance : {20u, 21u}) {
    ZeroInfinityKnobs knobs = Unbounded();
    knobs.prefetch_bucket_size = 0;  // no walk: no keep-until
    knobs.max_reuse_distance = distance;
    Fixture f(std::vector<uint64_t>(3, 10), knobs);
    Record(f.c, f.cache, {0, 1, 2, 0});
    f.log.clear();
    for (size_t p = 0; p < 4; ++p) Access(f.c, f.cache, p, f.c.order()[p]);
    // 20 elements lie between the two uses of 0; DeepSpeed keeps it when that is below the distance.
    const Kind first = distance > 20 ? Kind::kKeep : Kind::kRelease;
    EXPECT_EQ(f.log, (std::vector<ZeroInfinityDecision>{
                         {first, 0, 0}, {Kind::kRelease, 1, 1}, {Kind::kRelease, 2, 2}, {Kind::kRelease, 3, 0}}))
        << "max_reuse_distance " << distance;
  }
}

TEST(ZeroInfinityCoordinator, TheReuseWindowEndsWithTheStep) {
  ZeroInfinityKnobs knobs = Unbounded();
  knobs.prefetch_bucket_size = 0;
  knobs.max_reuse_distance = 1'000'000;
  Fixture f(std::vector<uint64_t>(2, 10), knobs);
  Record(f.c, f.cache, {0, 1});
  EXPECT_TRUE(f.c.ReleaseAfter(1, 1));  // used again only in the next step: released
}

TEST(ZeroInfinityCoordinator, KeptWhenTheWalkPassedALaterUse) {
  Fixture f(std::vector<uint64_t>(4, 10), Unbounded());  // max_reuse_distance 0
  Record(f.c, f.cache, {0, 1, 2, 3, 0});
  f.cache.ArriveAll();
  f.log.clear();
  Access(f.c, f.cache, 0, 0);  // the walk reaches position 4 while 0 is on the device
  EXPECT_EQ(f.log.back(), (ZeroInfinityDecision{Kind::kKeep, 0, 0}));

  ZeroInfinityKnobs short_walk = Unbounded();
  short_walk.prefetch_bucket_size = 15;  // stops after 1 and 2
  Fixture g(std::vector<uint64_t>(4, 10), short_walk);
  Record(g.c, g.cache, {0, 1, 2, 3, 0});
  Access(g.c, g.cache, 0, 0);
  EXPECT_EQ(g.log.back(), (ZeroInfinityDecision{Kind::kRelease, 0, 0}));
}

TEST(ZeroInfinityCoordinator, AUseRightAfterIsNotAKeepUntil) {
  // DeepSpeed's step id is already k + 1 when it releases access k: only a
  // passed use at k + 2 or later keeps the tensor.
  Fixture f(std::vector<uint64_t>(2, 10), Unbounded());
  Record(f.c, f.cache, {0, 0, 1});
  f.cache.Arrive(0);
  f.c.OnAccess(0, 0, f.cache);
  EXPECT_TRUE(f.c.ReleaseAfter(0, 0));
}

}  // namespace
}  // namespace tencache
