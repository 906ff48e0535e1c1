// StepOrder: the order in which a step uses tensors, repeated step after step,
// indexed for the questions an eviction rule asks: when is this tensor next
// used, when was it last used.
//
// `Index` is the kind of position the order counts (a StepIndex: AcquireIndex
// for the cache's acquires, scheduler/trace.h's DeviceAccessIndex for device
// accesses). Position k of step s is the global position s·size() + k; every
// query answers in global positions, so a next use may fall in a later step.
// A StepOrder<AcquireIndex> is the cache's NextUseOracle. Immutable after
// construction and safe to share across threads; queries are O(log uses of
// that tensor).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cachemgr/types.h"

namespace tencache {

template <class Index>
class StepOrder final : public NextUseLookup<Index> {
 public:
  StepOrder() = default;
  // `order[k]` is the tensor used at position k of every step.
  // REQUIRES: every id in `order` is below `num_tensors`.
  StepOrder(std::vector<TensorId> order, size_t num_tensors) : order_(std::move(order)), uses_(num_tensors) {
    for (size_t k = 0; k < order_.size(); ++k) uses_[order_[k]].push_back(uint32_t(k));
  }

  size_t size() const { return order_.size(); }  // positions per step
  size_t num_tensors() const { return uses_.size(); }
  // The tensor at global position `g`. REQUIRES: size() > 0.
  TensorId tensor(Index g) const { return order_[g.in_step(order_.size())]; }
  // Whether a step uses `id` at all (false for ids at or past num_tensors()).
  bool used(TensorId id) const { return id < uses_.size() && !uses_[id].empty(); }

  // First use of `id` strictly after global position `g`, or Index::Never().
  Index NextUse(TensorId id, Index g) const override {
    if (!used(id)) return Index::Never();
    const std::vector<uint32_t>& u = uses_[id];
    const uint64_t n = size(), step = g.step(n);
    const auto it = std::upper_bound(u.begin(), u.end(), g.in_step(n));
    return it != u.end() ? Index::At(step, n, *it) : Index::At(step + 1, n, u.front());
  }
  Index UseAfter(TensorId id, uint64_t uses_done) const override {
    if (!used(id)) return Index::Never();
    const std::vector<uint32_t>& u = uses_[id];
    return uses_done < u.size() ? Index::At(0, size(), u[uses_done]) : Index::At(1, size(), u.front());
  }
  // Last use of `id` strictly before global position `g`, or Index::Never().
  Index PrevUse(TensorId id, Index g) const {
    if (!used(id)) return Index::Never();
    const std::vector<uint32_t>& u = uses_[id];
    const uint64_t n = size(), step = g.step(n);
    const auto it = std::lower_bound(u.begin(), u.end(), g.in_step(n));
    if (it != u.begin()) return Index::At(step, n, *(it - 1));
    return step == 0 ? Index::Never() : Index::At(step - 1, n, u.back());
  }

 private:
  std::vector<TensorId> order_;
  std::vector<std::vector<uint32_t>> uses_;  // per tensor, ascending positions in the step
};

}  // namespace tencache
