#include "cachemgr/size_class_pool.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "common/byte_size.h"

namespace tencache {
namespace {

uint64_t ResidentBytes(const SlotPlan& plan) { return plan.total_bytes(); }

uint64_t MinimumBytes(const std::vector<SizeClass>& classes, uint64_t min_slots) {
  uint64_t need = 0;
  for (const SizeClass& c : classes) need += std::min(min_slots, c.tensors) * c.slot_bytes;
  return need;
}

// Mandatory slots; ResourceExhausted when they alone exceed the budget.
StatusOr<std::vector<uint64_t>> MinimumSlots(const std::vector<SizeClass>& classes, uint64_t budget,
                                             uint64_t min_slots) {
  std::vector<uint64_t> slots;
  for (const SizeClass& c : classes) slots.push_back(std::min(min_slots, c.tensors));
  const uint64_t need = MinimumBytes(classes, min_slots);
  if (need > budget)
    return Status::ResourceExhausted("slot plan: the minimum of " + std::to_string(min_slots) +
                                     " slot(s) per size class needs " + FormatBytes(need) +
                                     " but the tier budget is " + FormatBytes(budget));
  return slots;
}

SlotPlan Proportional(const std::vector<SizeClass>& classes, uint64_t budget, std::vector<uint64_t> slots) {
  const std::vector<uint64_t> minimum = slots;
  long double weight = 0;
  for (const SizeClass& c : classes) weight += static_cast<long double>(c.slot_bytes) * c.tensors;
  for (size_t i = 0; i < classes.size(); ++i) {
    const long double share = budget * (static_cast<long double>(classes[i].slot_bytes) * classes[i].tensors) / weight;
    const uint64_t n = static_cast<uint64_t>(share / classes[i].slot_bytes);
    slots[i] = std::min(classes[i].tensors, std::max(slots[i], n));
  }
  SlotPlan plan{classes, slots};
  // The minimums can push the shares over budget: take back from the biggest
  // classes, never below a class's minimum (which fits: MinimumSlots).
  for (size_t i = classes.size(); plan.total_bytes() > budget && i > 0; --i) {
    const size_t k = i - 1;
    while (plan.total_bytes() > budget && plan.slots[k] > minimum[k]) --plan.slots[k];
  }
  return plan;
}

// Bounded subset sum: the largest fill of `room` with at most `extra[i]` more
// slots of class i, at granularity `g` (weights rounded up, so always feasible).
std::vector<uint64_t> FillExactly(const std::vector<SizeClass>& classes, const std::vector<uint64_t>& extra,
                                  uint64_t room) {
  const size_t k = classes.size();
  const uint64_t max_cells = std::max<uint64_t>(1 << 14, (uint64_t{1} << 26) / std::max<size_t>(k, 1));
  uint64_t g = kSlotAlignment;
  while (room / g > std::min<uint64_t>(max_cells, uint64_t{1} << 20)) g *= 2;
  const size_t W = static_cast<size_t>(room / g);
  std::vector<std::vector<bool>> layer(k + 1, std::vector<bool>(W + 1, false));
  layer[0][0] = true;
  std::vector<uint64_t> used(W + 1);
  std::vector<size_t> weight(k);
  for (size_t i = 0; i < k; ++i) {
    weight[i] = static_cast<size_t>((classes[i].slot_bytes + g - 1) / g);
    const size_t w = weight[i];
    for (size_t c = 0; c <= W; ++c) {
      if (layer[i][c]) {
        layer[i + 1][c] = true;
        used[c] = 0;
      } else if (c >= w && layer[i + 1][c - w] && used[c - w] < extra[i]) {
        layer[i + 1][c] = true;
        used[c] = used[c - w] + 1;
      }
    }
  }
  size_t best = W;
  while (!layer[k][best]) --best;
  std::vector<uint64_t> take(k, 0);
  for (size_t i = k; i > 0; --i) {
    const size_t w = weight[i - 1];
    uint64_t n = 0;
    while (!layer[i - 1][best]) {  // layer[i][best] holds, so some n <= extra works
      best -= w;
      ++n;
    }
    take[i - 1] = n;
  }
  return take;
}

SlotPlan MaxResident(const std::vector<SizeClass>& classes, uint64_t budget, std::vector<uint64_t> slots) {
  SlotPlan plan{classes, slots};
  std::vector<uint64_t> extra(classes.size());
  for (size_t i = 0; i < classes.size(); ++i) extra[i] = classes[i].tensors - slots[i];
  const std::vector<uint64_t> take = FillExactly(classes, extra, budget - plan.total_bytes());
  for (size_t i = 0; i < classes.size(); ++i) plan.slots[i] += take[i];
  // Top up what the coarse granularity left, biggest slots first.
  for (size_t i = classes.size(); i > 0; --i) {
    const size_t k = i - 1;
    while (plan.slots[k] < classes[k].tensors && plan.total_bytes() + classes[k].slot_bytes <= budget)
      ++plan.slots[k];
  }
  return plan;
}

}  // namespace

uint64_t ExtentBytes(const std::vector<uint64_t>& tensor_bytes) {
  uint64_t sum = 0;
  for (uint64_t b : tensor_bytes) sum += SlotBytesFor(b);
  return sum;
}

uint64_t MinimumSlotBytes(const std::vector<uint64_t>& tensor_bytes, uint64_t min_slots) {
  return MinimumBytes(BuildHistogram(tensor_bytes), min_slots);
}

const char* SlotPlannerName(SlotPlanner planner) {
  return planner == SlotPlanner::kProportional ? "proportional" : "max-resident";
}

uint64_t SlotPlan::total_bytes() const {
  uint64_t t = 0;
  for (size_t i = 0; i < classes.size(); ++i) t += slots[i] * classes[i].slot_bytes;
  return t;
}

std::vector<SizeClass> BuildHistogram(const std::vector<uint64_t>& tensor_bytes) {
  std::map<uint64_t, uint64_t> counts;
  for (uint64_t b : tensor_bytes) ++counts[SlotBytesFor(b)];
  std::vector<SizeClass> classes;
  for (const auto& [bytes, n] : counts) classes.push_back({bytes, n});
  return classes;
}

StatusOr<SlotPlan> PlanSlots(SlotPlanner planner, const std::vector<SizeClass>& classes, uint64_t budget,
                             uint64_t min_slots) {
  for (const SizeClass& c : classes)
    if (c.slot_bytes == 0 || c.slot_bytes % kSlotAlignment != 0 || c.tensors == 0)
      return Status::InvalidArgument("slot plan: size class of " + std::to_string(c.slot_bytes) +
                                     " bytes x " + std::to_string(c.tensors) +
                                     " is not a positive multiple of 4 KiB with tensors");
  TC_ASSIGN_OR_RETURN(std::vector<uint64_t> minimum, MinimumSlots(classes, budget, min_slots));
  SlotPlan proportional = Proportional(classes, budget, minimum);
  if (planner == SlotPlanner::kProportional) return proportional;
  SlotPlan ours = MaxResident(classes, budget, minimum);
  return ResidentBytes(ours) >= ResidentBytes(proportional) ? ours : proportional;
}

StatusOr<std::unique_ptr<SizeClassPool>> SizeClassPool::Create(TierStore* store, const SlotPlan& plan) {
  std::unique_ptr<SizeClassPool> pool(new SizeClassPool(store, plan));
  const uint64_t total = plan.total_bytes();
  pool->free_.resize(plan.classes.size());
  pool->total_.resize(plan.classes.size());
  if (total == 0) return pool;
  TC_ASSIGN_OR_RETURN(uint64_t base, store->Reserve(total));
  pool->reserved_ = total;
  // Largest classes first, so every slot stays aligned to its size's natural boundary where possible.
  uint64_t cursor = base;
  for (size_t i = plan.classes.size(); i > 0; --i) {
    const size_t k = i - 1;
    pool->free_[k].reserve(plan.classes[k].tensors);
    for (uint64_t s = 0; s < plan.slots[k]; ++s) {
      pool->free_[k].push_back(cursor);
      cursor += plan.classes[k].slot_bytes;
    }
    std::reverse(pool->free_[k].begin(), pool->free_[k].end());  // hand out low offsets first
    pool->total_[k] = plan.slots[k];
  }
  return pool;
}

int SizeClassPool::ClassOf(uint64_t tensor_bytes) const {
  const uint64_t want = SlotBytesFor(tensor_bytes);
  auto it = std::lower_bound(plan_.classes.begin(), plan_.classes.end(), want,
                             [](const SizeClass& c, uint64_t v) { return c.slot_bytes < v; });
  if (it == plan_.classes.end() || it->slot_bytes != want) return -1;
  return static_cast<int>(it - plan_.classes.begin());
}

std::optional<uint64_t> SizeClassPool::Allocate(int cls) {
  if (free_[cls].empty()) return std::nullopt;
  const uint64_t off = free_[cls].back();
  free_[cls].pop_back();
  return off;
}

void SizeClassPool::Free(int cls, uint64_t offset) { free_[cls].push_back(offset); }

StatusOr<uint64_t> SizeClassPool::Grow(int cls) {
  TC_ASSIGN_OR_RETURN(uint64_t off, store_->Reserve(plan_.classes[cls].slot_bytes));
  ++total_[cls];
  ++allocations_after_setup_;
  reserved_ += plan_.classes[cls].slot_bytes;
  return off;
}

}  // namespace tencache
