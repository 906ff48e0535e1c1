#include "scheduler/zero_infinity_coordinator.h"

#include <algorithm>
#include <cassert>

namespace tencache {

namespace {
constexpr size_t kNone = static_cast<size_t>(-1);
}  // namespace

ZeroInfinityCoordinator::ZeroInfinityCoordinator(std::vector<uint64_t> elements, ZeroInfinityKnobs knobs,
                                                 Observer observer)
    : elements_(std::move(elements)), knobs_(knobs), observer_(std::move(observer)) {
  keep_until_.assign(elements_.size(), 0);
}

void ZeroInfinityCoordinator::BeginStep() {
  if (mode_ == ZeroTraceMode::kInvalid) {
    mode_ = ZeroTraceMode::kRecord;
    order_.clear();
  } else if (mode_ == ZeroTraceMode::kRecord && !order_.empty()) {
    Complete();
  }
  std::fill(keep_until_.begin(), keep_until_.end(), 0);
  in_flight_.clear();  // a step's prefetches are all used within it
  cursor_ = 0;
}

void ZeroInfinityCoordinator::Complete() {
  mode_ = ZeroTraceMode::kComplete;
  const size_t n = order_.size();
  prefix_.assign(n + 1, 0);
  for (size_t p = 0; p < n; ++p) prefix_[p + 1] = prefix_[p] + elements_[order_[p]];
  next_use_.assign(n, kNone);
  std::vector<size_t> later(elements_.size(), kNone);  // per key: its first position after p
  for (size_t p = n; p-- > 0;) {
    next_use_[p] = later[order_[p]];
    later[order_[p]] = p;
  }
}

void ZeroInfinityCoordinator::Invalidate() {
  mode_ = ZeroTraceMode::kInvalid;
  order_.clear();
  next_use_.clear();
  prefix_.clear();
  in_flight_.clear();
}

void ZeroInfinityCoordinator::OnAccess(size_t position, uint32_t key, ZeroInfinityCacheView& cache) {
  assert(key < elements_.size());
  switch (mode_) {
    case ZeroTraceMode::kInvalid:
      return;
    case ZeroTraceMode::kRecord:
      if (position == order_.size()) {
        order_.push_back(key);
      } else {
        Invalidate();  // accesses out of order cannot be a trace
      }
      return;
    case ZeroTraceMode::kComplete:
      if (position >= order_.size() || order_[position] != key) {
        Invalidate();
        return;
      }
      Prefetch(position, cache);
      return;
  }
}

void ZeroInfinityCoordinator::Prefetch(size_t position, ZeroInfinityCacheView& cache) {
  while (!in_flight_.empty() && !cache.InFlight(in_flight_.front())) in_flight_.pop_front();
  const uint64_t live = cache.LiveElements();
  const uint64_t room = live >= knobs_.max_live_parameters ? 0 : knobs_.max_live_parameters - live;
  const uint64_t budget = std::min(room, knobs_.prefetch_bucket_size);
  uint64_t prefetching = 0;
  size_t pos = std::max(cursor_, position + 1);
  for (; pos < order_.size() && prefetching < budget; ++pos) {
    const uint32_t key = order_[pos];
    if (!cache.OnDevice(key)) {
      if (cache.OnlyOnNvme(key)) break;  // DeepSpeed keeps the fetch order: NVMe is swapped in elsewhere
      if (int(in_flight_.size()) >= knobs_.max_in_flight) break;
      if (!cache.StartFetch(key)) break;
      in_flight_.push_back(key);
      prefetching += elements_[key];
      ++fetches_issued_;
      Note(ZeroInfinityDecision::Kind::kPrefetch, position, key);
    }
    keep_until_[key] = std::max(keep_until_[key], pos);
  }
  cursor_ = pos;
}

bool ZeroInfinityCoordinator::Reused(size_t position, uint32_t key) const {
  if (keep_until_[key] > position + 1) return true;
  const size_t next = next_use_[position];
  if (next == kNone) return false;
  return prefix_[next] - prefix_[position + 1] < knobs_.max_reuse_distance;
}

bool ZeroInfinityCoordinator::ReleaseAfter(size_t position, uint32_t key) {
  const bool traced = mode_ == ZeroTraceMode::kComplete && position < order_.size() && order_[position] == key;
  const bool release = !traced || !Reused(position, key);
  Note(release ? ZeroInfinityDecision::Kind::kRelease : ZeroInfinityDecision::Kind::kKeep, position, key);
  return release;
}

void ZeroInfinityCoordinator::Note(ZeroInfinityDecision::Kind kind, size_t position, uint32_t key) const {
  if (observer_) observer_({kind, position, key});
}

}  // namespace tencache
