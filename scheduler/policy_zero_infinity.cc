// DeepSpeed ZeRO-3 / ZeRO-Infinity's PartitionedParameterCoordinator, as the
// simulator sees it. Until its trace is COMPLETE (step 2) it fetches on demand
// and releases every parameter after use. Then, after each fetch, it walks its
// parameter queue (the trace from the current position) and prefetches while
// the prefetched elements stay below min(max_live - live, prefetch_bucket_size),
// stopping at the first parameter whose home is NVMe and when two fetches are in
// flight. After use a parameter is released unless the elements accessed before
// its next use stay within max_reuse_distance, or the prefetcher already walked
// past its next use while it was available.
#include <deque>

#include "scheduler/policies.h"

namespace tencache {

namespace {

class ZeroInfinityPolicy : public SimPolicy {
 public:
  explicit ZeroInfinityPolicy(const ZeroInfinityKnobs& knobs) : knobs_(knobs) {}
  const char* name() const override { return "zero-infinity"; }

  void BeginStep(SimContext& s) override {
    if (!lru_) {
      lru_ = std::make_unique<KeyedResidents>(s.seq().num_tensors());
      keep_until_.assign(s.seq().num_tensors(), 0);
    }
    queue_pos_ = AccessIndex(s.step()) * s.seq().size();
  }
  void MakeRoom(TensorId id, AccessIndex g, SimContext& s) override {
    EvictUntilFits(id, /*largest=*/false, *lru_, s);
  }
  void OnAccess(AccessIndex g, SimContext& s) override {
    const TensorId x = s.seq().tensor(g);
    if (s.resident(x)) lru_->Set(x, g);
    if (complete(s)) Prefetch(g, s);
  }
  void AfterAccess(AccessIndex g, SimContext& s) override {
    const TensorId x = s.seq().tensor(g);
    if (!s.resident(x) || (complete(s) && Reused(x, g, s))) return;
    lru_->Erase(x);
    s.Evict(x);
  }

 private:
  bool complete(const SimContext& s) const { return s.step() >= knobs_.trace_complete_step; }

  bool Reused(TensorId x, AccessIndex g, const SimContext& s) const {
    if (keep_until_[x] > g) return true;
    const AccessIndex next = s.seq().NextUse(x, g);
    if (next == kNeverUsed) return false;
    return s.seq().BytesBetween(g, next) / s.elem_bytes() <= knobs_.max_reuse_distance;
  }

  void Prefetch(AccessIndex g, SimContext& s) {
    while (!in_flight_.empty() && !s.in_flight(in_flight_.front())) in_flight_.pop_front();
    const uint64_t elem = s.elem_bytes();
    const uint64_t live = (s.capacity() - s.free_bytes()) / elem;
    const uint64_t room = live >= knobs_.max_live_parameters ? 0 : knobs_.max_live_parameters - live;
    const uint64_t budget = std::min(room, knobs_.prefetch_bucket_size);
    const AccessIndex end = AccessIndex(s.step() + 1) * s.seq().size();
    AccessIndex pos = std::max(queue_pos_, g + 1);
    uint64_t prefetching = 0;
    for (; pos < end && prefetching < budget; ++pos) {
      const TensorId t = s.seq().tensor(pos);
      if (s.resident(t)) {
        keep_until_[t] = std::max(keep_until_[t], pos);
        continue;
      }
      if (s.layout().home[t] == Tier::kNvme) break;
      if (int(in_flight_.size()) >= knobs_.max_in_flight) break;
      if (!s.Fetch(t)) break;
      lru_->Set(t, g);
      in_flight_.push_back(t);
      prefetching += s.seq().bytes(t) / elem;
    }
    queue_pos_ = pos;
  }

  ZeroInfinityKnobs knobs_;
  std::unique_ptr<KeyedResidents> lru_;
  std::vector<AccessIndex> keep_until_;
  std::deque<TensorId> in_flight_;
  AccessIndex queue_pos_ = 0;
};

}  // namespace

std::unique_ptr<SimPolicy> MakeZeroInfinityPolicy(const ZeroInfinityKnobs& knobs) {
  return std::make_unique<ZeroInfinityPolicy>(knobs);
}

}  // namespace tencache
