// Size-class slot pools. From the histogram of tensor sizes, a tier's budget is
// carved once into exact-size slots per size class (one Reserve on the tier), so
// nothing is allocated while training; a free list per class hands slots out.
//
// Slot counts come from a SlotPlanner: kProportional (10Cache's rule: each class
// its share of size*count) or kMaxResident (the most bytes that can stay
// resident, never fewer than kProportional's); both give every class at least
// min_slots. How: docs/cachemgr.md, "Slot planning".
//
// Growth: Grow() reserves one extra slot from the tier — an allocation after
// setup, counted by allocations_after_setup() — for when every slot of a class is
// held by live handles. With a well-sized plan it stays 0.
//
// Thread safety: SizeClassPool is not thread-safe; its owner (the TensorCache)
// serialises calls. The planning functions are pure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cachemgr/tier.h"
#include "common/status.h"

namespace tencache {

constexpr uint64_t kSlotAlignment = 4096;
inline uint64_t SlotBytesFor(uint64_t tensor_bytes) {
  const uint64_t b = tensor_bytes == 0 ? 1 : tensor_bytes;
  return (b + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
}

// The sum of SlotBytesFor over `tensor_bytes`: every tensor's slot (and NVMe
// extent) bytes.
uint64_t ExtentBytes(const std::vector<uint64_t>& tensor_bytes);

// One size class: slots of slot_bytes, and how many tensors need such a slot.
struct SizeClass {
  uint64_t slot_bytes = 0;
  uint64_t tensors = 0;
};

// Classes sorted by slot size, from the tensors' byte sizes.
std::vector<SizeClass> BuildHistogram(const std::vector<uint64_t>& tensor_bytes);

enum class SlotPlanner : uint8_t { kProportional, kMaxResident };
const char* SlotPlannerName(SlotPlanner planner);

struct SlotPlan {
  std::vector<SizeClass> classes;  // as given
  std::vector<uint64_t> slots;     // per class
  uint64_t total_bytes() const;    // sum of slots x slot_bytes: what is reserved
};

// The bytes the mandatory slots take: min(min_slots, tensors) slots of every
// size class of `tensor_bytes` (the least budget PlanSlots accepts for them).
uint64_t MinimumSlotBytes(const std::vector<uint64_t>& tensor_bytes, uint64_t min_slots);

// Plans slot counts within `budget`. Each class gets at least min(min_slots,
// tensors) slots and never more than `tensors`. ResourceExhausted, naming the
// need, when even the minimum does not fit.
StatusOr<SlotPlan> PlanSlots(SlotPlanner planner, const std::vector<SizeClass>& classes,
                             uint64_t budget, uint64_t min_slots);

class SizeClassPool {
 public:
  // Reserves plan.total_bytes() from `store` in one region and carves it.
  // REQUIRES: store outlives the pool.
  static StatusOr<std::unique_ptr<SizeClassPool>> Create(TierStore* store, const SlotPlan& plan);

  // The class whose slots hold exactly SlotBytesFor(bytes), or -1.
  int ClassOf(uint64_t tensor_bytes) const;
  size_t num_classes() const { return plan_.classes.size(); }
  uint64_t slot_bytes(int cls) const { return plan_.classes[cls].slot_bytes; }
  uint64_t total_slots(int cls) const { return total_[cls]; }
  uint64_t free_slots(int cls) const { return free_[cls].size(); }

  // A free slot's offset, or nullopt when the class is exhausted.
  std::optional<uint64_t> Allocate(int cls);
  // REQUIRES: offset came from Allocate(cls) or Grow(cls) and is not free.
  void Free(int cls, uint64_t offset);
  // Reserves one more slot for `cls` from the tier and returns it allocated.
  StatusOr<uint64_t> Grow(int cls);

  uint64_t reserved_bytes() const { return reserved_; }
  uint64_t allocations_after_setup() const { return allocations_after_setup_; }
  const SlotPlan& plan() const { return plan_; }

 private:
  SizeClassPool(TierStore* store, SlotPlan plan) : store_(store), plan_(std::move(plan)) {}

  TierStore* const store_;
  const SlotPlan plan_;
  std::vector<std::vector<uint64_t>> free_;
  std::vector<uint64_t> total_;
  uint64_t reserved_ = 0;
  uint64_t allocations_after_setup_ = 0;
};

}  // namespace tencache
