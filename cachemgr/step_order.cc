#include "cachemgr/step_order.h"

#include <algorithm>

namespace tencache {

StepOrder::StepOrder(std::vector<TensorId> order, size_t num_tensors)
    : order_(std::move(order)), uses_(num_tensors) {
  for (size_t k = 0; k < order_.size(); ++k) uses_[order_[k]].push_back(uint32_t(k));
}

AccessIndex StepOrder::NextUse(TensorId id, AccessIndex g) const {
  if (!used(id)) return kNeverUsed;
  const std::vector<uint32_t>& u = uses_[id];
  const AccessIndex n = size(), step = g / n;
  const auto it = std::upper_bound(u.begin(), u.end(), g % n);
  return it != u.end() ? step * n + *it : (step + 1) * n + u.front();
}

AccessIndex StepOrder::PrevUse(TensorId id, AccessIndex g) const {
  if (!used(id)) return kNeverUsed;
  const std::vector<uint32_t>& u = uses_[id];
  const AccessIndex n = size(), step = g / n;
  const auto it = std::lower_bound(u.begin(), u.end(), g % n);
  if (it != u.begin()) return step * n + *(it - 1);
  return step == 0 ? kNeverUsed : (step - 1) * n + u.back();
}

}  // namespace tencache
