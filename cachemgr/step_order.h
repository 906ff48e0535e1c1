// StepOrder: the order in which a step uses tensors, repeated step after step,
// indexed for the questions an eviction rule asks: when is this tensor next
// used, when was it last used.
//
// Position k of step s is the global position s·size() + k; every query answers
// in global positions, so a next use may fall in a later step. It is the cache's
// next-use oracle for the order it is built from. Immutable after construction
// and safe to share across threads; queries are O(log uses of that tensor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cachemgr/types.h"

namespace tencache {

class StepOrder : public NextUseOracle {
 public:
  StepOrder() = default;
  // `order[k]` is the tensor used at position k of every step.
  // REQUIRES: every id in `order` is below `num_tensors`.
  StepOrder(std::vector<TensorId> order, size_t num_tensors);

  size_t size() const { return order_.size(); }  // positions per step
  size_t num_tensors() const { return uses_.size(); }
  // The tensor at global position `g`. REQUIRES: size() > 0.
  TensorId tensor(uint64_t g) const { return order_[g % order_.size()]; }
  // Whether a step uses `id` at all (false for ids at or past num_tensors()).
  bool used(TensorId id) const { return id < uses_.size() && !uses_[id].empty(); }

  // First use of `id` strictly after global position `g`, or kNeverUsed.
  AccessIndex NextUse(TensorId id, AccessIndex g) const override;
  // Last use of `id` strictly before global position `g`, or kNeverUsed.
  AccessIndex PrevUse(TensorId id, AccessIndex g) const;

 private:
  std::vector<TensorId> order_;
  std::vector<std::vector<uint32_t>> uses_;  // per tensor, ascending positions in the step
};

}  // namespace tencache
