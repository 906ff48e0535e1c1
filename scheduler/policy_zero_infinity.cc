// zero-infinity in the simulator: the ZeroInfinityCoordinator's decisions over
// a SimContext. The coordinator walks after the access's tensor has arrived
// (OnAccess), as DeepSpeed prefetches after waiting for the current module; when
// DeepSpeed's copies are synchronous (ZeroInfinityKnobs::pin_memory) the access's
// compute waits for the walk's fetches. A demand fetch that does not fit evicts
// the least recently used tensors (DeepSpeed would run out of memory instead).
#include "scheduler/policies.h"

namespace tencache {

namespace {

// The simulated device as the coordinator sees it. Valid during one call.
class SimCacheView : public ZeroInfinityCacheView {
 public:
  SimCacheView(SimContext& s, KeyedResidents& lru, DeviceAccessIndex g) : s_(s), lru_(lru), g_(g) {}
  bool OnDevice(uint32_t key) const override { return s_.resident(key); }
  bool InFlight(uint32_t key) const override { return s_.in_flight(key); }
  bool OnlyOnNvme(uint32_t key) const override { return !s_.host_resident(key); }
  bool StartFetch(uint32_t key) override {
    if (!s_.Fetch(key)) return false;
    lru_.Set(key, g_.value());
    started.push_back(key);
    return true;
  }
  uint64_t LiveElements() const override { return (s_.capacity() - s_.free_bytes()) / s_.elem_bytes(); }

  std::vector<TensorId> started;  // the fetches started through this view

 private:
  SimContext& s_;
  KeyedResidents& lru_;
  const DeviceAccessIndex g_;
};

class ZeroInfinityPolicy : public SimPolicy {
 public:
  ZeroInfinityPolicy(const ZeroInfinityKnobs& knobs, ZeroInfinityCoordinator::Observer observer)
      : knobs_(knobs), observer_(std::move(observer)) {}
  const char* name() const override { return "zero-infinity"; }

  void BeginStep(SimContext& s) override {
    if (!coordinator_) {
      std::vector<uint64_t> elements;
      for (uint64_t b : s.seq().all_bytes()) elements.push_back(b / s.elem_bytes());
      coordinator_ = std::make_unique<ZeroInfinityCoordinator>(std::move(elements), knobs_, observer_);
      lru_ = std::make_unique<KeyedResidents>(s.seq().num_tensors());
    }
    step_start_ = DeviceAccessIndex::At(uint64_t(s.step()), s.seq().size(), 0);
    coordinator_->BeginStep();
  }
  void MakeRoom(TensorId id, DeviceAccessIndex g, SimContext& s) override {
    EvictUntilFits(id, /*largest=*/false, *lru_, s);
  }
  void OnAccess(DeviceAccessIndex g, SimContext& s) override {
    const TensorId x = s.seq().tensor(g);
    if (s.resident(x)) lru_->Set(x, g.value());
    SimCacheView view(s, *lru_, g);
    coordinator_->OnAccess(g - step_start_, x, view);
    if (knobs_.pin_memory && s.ranks() == 1) return;
    for (TensorId t : view.started) s.WaitForArrival(t);
  }
  void AfterAccess(DeviceAccessIndex g, SimContext& s) override {
    const TensorId x = s.seq().tensor(g);
    if (!coordinator_->ReleaseAfter(g - step_start_, x) || !s.resident(x)) return;
    lru_->Erase(x);
    s.Evict(x);
  }

 private:
  const ZeroInfinityKnobs knobs_;
  const ZeroInfinityCoordinator::Observer observer_;
  std::unique_ptr<ZeroInfinityCoordinator> coordinator_;
  std::unique_ptr<KeyedResidents> lru_;
  DeviceAccessIndex step_start_;
};

}  // namespace

std::unique_ptr<SimPolicy> MakeZeroInfinityPolicy(const ZeroInfinityKnobs& knobs,
                                                  ZeroInfinityCoordinator::Observer observer) {
  return std::make_unique<ZeroInfinityPolicy>(knobs, std::move(observer));
}

}  // namespace tencache
