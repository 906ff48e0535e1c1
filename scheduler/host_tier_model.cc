#include "scheduler/host_tier_model.h"

#include <algorithm>

#include "cachemgr/size_class_pool.h"
#include "common/byte_size.h"
#include "common/shard_bytes.h"
#include "scheduler/plan.h"

namespace tencache {

HostTierModel HostTierModel::Tensors(const Trace& trace) {
  HostTierModel m;
  m.shape_ = StepShapeOf(trace);
  const DType dtype = TraceDType(trace);
  const size_t n = m.shape_.pieces.size();
  m.bytes_ = trace.TensorBytes();
  m.params_ = n;
  // Per tensor: its gradient pieces, then per piece [master,] adam_m, adam_v.
  std::vector<uint32_t> grads(n), states(n);
  const int per_piece = m.shape_.mixed ? 3 : 2;
  for (size_t id = 0; id < n; ++id) {
    const int k = m.shape_.pieces[id];
    auto piece_bytes = [&](int i, int state_class) {
      return StatePieceElements(m.shape_.counts[id], k, i) * StateElementBytes(dtype, state_class);
    };
    grads[id] = uint32_t(m.bytes_.size());
    for (int i = 0; i < k; ++i) m.bytes_.push_back(piece_bytes(i, kStateGrad));
    states[id] = uint32_t(m.bytes_.size());
    for (int i = 0; i < k; ++i) {
      for (int c : {kStateMaster, kStateAdamM, kStateAdamV}) {
        if (c != kStateMaster || m.shape_.mixed) m.bytes_.push_back(piece_bytes(i, c));
      }
    }
  }
  auto tensor = [&](const StepEvent& e) -> uint32_t {
    switch (e.state) {
      case kStateParam: return m.param(TensorId(e.block));
      case kStateGrad: return grads[e.block] + uint32_t(e.piece);
      default: {
        const int slot = e.state == kStateMaster ? 0 : e.state - kStateAdamM + (m.shape_.mixed ? 1 : 0);
        return states[e.block] + uint32_t(e.piece * per_piece + slot);
      }
    }
  };
  const StepStream stream = DeriveStepEvents(trace, m.shape_);
  m.stream_.reserve(stream.events.size());
  for (const StepEvent& e : stream.events) {
    m.stream_.push_back({e, e.kind == StepEventKind::kAccessEnd ? 0u : tensor(e)});
  }
  m.begin_ = stream.begin;
  return m;
}

std::vector<HostStepEvent> HostTierModel::update(TensorId id) const {
  std::vector<HostStepEvent> out;
  for (size_t i = 0; i + 1 < begin_.size(); ++i) {  // each trace event's group: the acquires before its AccessEnd
    std::vector<HostStepEvent> before;
    for (size_t k = begin_[i]; k < begin_[i + 1]; ++k) {
      const StepEvent& e = stream_[k].event;
      if (e.kind == StepEventKind::kAccessEnd) {
        if (e.block == int(id) && e.phase == Phase::kOptimizer) out.insert(out.end(), before.begin(), before.end());
        break;
      }
      if (e.kind == StepEventKind::kAcquire) before.push_back(stream_[k]);
    }
  }
  return out;
}

uint64_t HostTierModel::LeastBudget(const Trace& trace) {
  return LeastHostBudget(Tensors(trace).bytes_);
}

StatusOr<HostTierModel> HostTierModel::Create(const Trace& trace, uint64_t host_budget) {
  HostTierModel m = Tensors(trace);
  const std::vector<SizeClass> classes = BuildHistogram(m.bytes_);
  StatusOr<SlotPlan> plan = PlanSlots(SlotPlanner::kMaxResident, classes, host_budget, kWorkerHostSlotsPerClass);
  if (!plan.ok()) return plan.status().WithContext("the host tier as the worker's cache plans it");
  m.slots_ = plan->slots;
  m.slot_bytes_ = plan->total_bytes();
  m.members_.assign(classes.size(), {});
  m.class_.assign(m.bytes_.size(), 0);
  for (size_t t = 0; t < m.bytes_.size(); ++t) {
    const uint64_t slot = SlotBytesFor(m.bytes_[t]);
    const auto it = std::lower_bound(classes.begin(), classes.end(), slot,
                                     [](const SizeClass& c, uint64_t b) { return c.slot_bytes < b; });
    m.class_[t] = int(it - classes.begin());
    m.members_[m.class_[t]].push_back(uint32_t(t));
  }
  // The step's acquire order.
  std::vector<TensorId> order;
  for (const HostStepEvent& h : m.stream_) {
    if (h.event.kind == StepEventKind::kAcquire) order.push_back(h.tensor);
  }
  m.order_ = StepOrder<AcquireIndex>(std::move(order), m.bytes_.size());
  return m;
}

std::string HostTierModel::Describe() const {
  uint64_t slots = 0;
  for (uint64_t s : slots_) slots += s;
  return "host tier as the worker's cache plans it: " + std::to_string(bytes_.size()) + " tensors in " +
         std::to_string(slots_.size()) + " size classes, " + std::to_string(slots) + " slots (" +
         FormatBytes(slot_bytes_) + ")";
}

}  // namespace tencache
