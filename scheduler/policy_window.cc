// The 10Cache paper's policy. The profiling step runs like plain ZeRO-3 (fetch
// on demand, release after use). From then on the first tensors in forward order
// are placed on the device for good, filling the capacity minus a window
// (a quarter of the capacity, at least the largest tensor); every other tensor
// passes through the window: released after use, and on each release the next
// not-resident tensors of the profiled order are fetched while the window has
// room. The cursor restarts at the beginning of the order every step.
#include <algorithm>

#include "scheduler/policies.h"

namespace tencache {

namespace {

class WindowPolicy : public SimPolicy {
 public:
  const char* name() const override { return "10cache-window"; }

  void BeginStep(SimContext& s) override {
    if (!window_) Init(s);
    if (s.step() == 1) Place(s);
    cursor_ = DeviceAccessIndex::At(uint64_t(s.step()), s.seq().size(), 0);
  }
  void MakeRoom(TensorId id, DeviceAccessIndex g, SimContext& s) override {
    const uint64_t need = s.seq().bytes(id);
    while (s.free_bytes() < need && !window_->empty()) {  // the latest prefetch is used last
      const TensorId v = window_->Largest();
      Untrack(v, s);
      s.Evict(v);
    }
    for (auto it = pinned_order_.rbegin(); s.free_bytes() < need && it != pinned_order_.rend(); ++it) {
      if (*it != id && s.resident(*it)) s.Evict(*it);
    }
  }
  void OnAccess(DeviceAccessIndex g, SimContext& s) override {
    const TensorId x = s.seq().tensor(g);
    if (!pinned_[x] && s.resident(x) && !window_->contains(x)) Track(x, s);
  }
  void AfterAccess(DeviceAccessIndex g, SimContext& s) override {
    const TensorId x = s.seq().tensor(g);
    if (!pinned_[x] && s.resident(x)) {
      Untrack(x, s);
      s.Evict(x);
    }
    if (s.step() >= 1) Slide(g, s);
  }

 private:
  void Init(SimContext& s) {
    const size_t n = s.seq().num_tensors();
    window_ = std::make_unique<KeyedResidents>(n);
    pinned_.assign(n, false);
    uint64_t largest = 0;
    for (TensorId id = 0; id < n; ++id) largest = std::max(largest, s.seq().bytes(id));
    window_bytes_ = std::min(s.capacity(), std::max(s.capacity() / 4, largest));
    uint64_t room = s.capacity() - window_bytes_;
    std::vector<bool> seen(n, false);
    for (DeviceAccessIndex k; k.value() < s.seq().size(); ++k) {  // forward order = first use
      const TensorId t = s.seq().tensor(k);
      if (seen[t]) continue;
      seen[t] = true;
      if (s.seq().bytes(t) > room) break;
      room -= s.seq().bytes(t);
      pinned_[t] = true;
      pinned_order_.push_back(t);
    }
  }
  void Place(SimContext& s) {
    for (TensorId t = 0; t < pinned_.size(); ++t) {
      if (!pinned_[t] && s.resident(t)) {
        Untrack(t, s);
        s.Evict(t);
      }
    }
    for (TensorId t : pinned_order_) s.Fetch(t);
  }
  void Track(TensorId x, SimContext& s) {
    window_->Set(x, order_++);
    window_used_ += s.seq().bytes(x);
  }
  void Untrack(TensorId x, SimContext& s) {
    if (!window_->contains(x)) return;
    window_->Erase(x);
    window_used_ -= s.seq().bytes(x);
  }
  void Slide(DeviceAccessIndex g, SimContext& s) {
    const DeviceAccessIndex end = DeviceAccessIndex::At(uint64_t(s.step() + 1), s.seq().size(), 0);
    cursor_ = std::max(cursor_, g + 1);
    for (; cursor_ < end; ++cursor_) {
      const TensorId t = s.seq().tensor(cursor_);
      if (pinned_[t] || s.resident(t)) continue;
      if (window_used_ + s.seq().bytes(t) > window_bytes_ || !s.Fetch(t)) break;
      Track(t, s);
    }
  }

  std::unique_ptr<KeyedResidents> window_;  // non-pinned residents, key: arrival order
  std::vector<bool> pinned_;
  std::vector<TensorId> pinned_order_;
  uint64_t window_bytes_ = 0;
  uint64_t window_used_ = 0;
  uint64_t order_ = 0;
  DeviceAccessIndex cursor_;
};

}  // namespace

std::unique_ptr<SimPolicy> MakeWindowPolicy() { return std::make_unique<WindowPolicy>(); }

}  // namespace tencache
