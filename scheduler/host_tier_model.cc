#include "scheduler/host_tier_model.h"

#include <algorithm>

#include "cachemgr/size_class_pool.h"
#include "common/byte_size.h"
#include "common/shard_bytes.h"
#include "scheduler/plan.h"

namespace tencache {

HostTierModel HostTierModel::Tensors(const Trace& trace) {
  HostTierModel m;
  const DType dtype = TraceDType(trace);
  const bool fp32 = StateElementBytes(dtype, kStateMaster) == 0;  // the parameter is its own master
  const uint64_t elem = StateElementBytes(dtype, kStateParam);
  const std::vector<uint64_t> params = trace.TensorBytes();
  const size_t n = params.size();
  // Elements per shard, and the limit StatePieces takes from the layer blocks.
  std::vector<int> block(n, 0);
  int last_block = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.kind != EventKind::kAccess) continue;
    block[e.id] = e.block;
    last_block = std::max(last_block, e.block);
  }
  std::vector<uint64_t> counts(n);
  uint64_t limit = 0;
  for (size_t id = 0; id < n; ++id) {
    counts[id] = (params[id] + elem - 1) / elem;
    if (block[id] >= 1 && block[id] < last_block) limit = std::max(limit, counts[id]);
  }
  m.pieces_ = StatePiecesWithin(counts, limit, dtype);
  // Backward accesses per tensor before its update: more than one, and the
  // gradient is stored between them (accumulation over micro-batches). One
  // after its update (the tied embedding's lookup, whose rows the worker holds
  // apart from the split update) stores nothing.
  std::vector<size_t> update_at(n, trace.events.size());
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == EventKind::kAccess && e.phase == Phase::kOptimizer) update_at[e.id] = std::min(update_at[e.id], i);
  }
  std::vector<int> backwards(n, 0);
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    backwards[e.id] += e.kind == EventKind::kAccess && e.phase == Phase::kBackward && i < update_at[e.id];
  }
  m.bytes_ = params;
  m.params_ = n;
  m.update_.assign(n, {});
  std::vector<std::vector<uint32_t>> grads(n);
  for (size_t id = 0; id < n; ++id) {
    std::vector<HostAcquire>& u = m.update_[id];
    const int k = m.pieces_[id];
    auto piece_bytes = [&](int i, int state_class) {
      return StatePieceElements(counts[id], k, i) * StateElementBytes(dtype, state_class);
    };
    for (int i = 0; i < k; ++i) {  // the gradient pieces: read and consumed first when stored
      grads[id].push_back(uint32_t(m.bytes_.size()));
      m.bytes_.push_back(piece_bytes(i, kStateGrad));
      if (backwards[id] > 1) u.push_back({grads[id].back(), HostUse::kRead, -1, /*consume=*/true});
    }
    if (fp32) u.push_back({uint32_t(id), HostUse::kWrite, 0});
    for (int i = 0; i < k; ++i) {
      for (int c : {kStateMaster, kStateAdamM, kStateAdamV}) {
        if (StateElementBytes(dtype, c) == 0) continue;  // fp32: no master
        u.push_back({uint32_t(m.bytes_.size()), HostUse::kWrite, i});
        m.bytes_.push_back(piece_bytes(i, c));
      }
      if (!fp32 && i == 0) u.push_back({uint32_t(id), HostUse::kOverwrite, 0});
    }
  }
  // A backward access that is not its tensor's last of the step stores its
  // gradient: the first overwrites the pieces, the next ones add into them.
  m.after_.assign(trace.events.size(), {});
  std::vector<int> seen(n, 0);
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind != EventKind::kAccess || e.phase != Phase::kBackward || i > update_at[e.id]) continue;
    const int k = seen[e.id]++;
    if (k + 1 == backwards[e.id]) continue;  // the last: its gradient goes to the update
    for (uint32_t g : grads[e.id]) m.after_[i].push_back({g, k == 0 ? HostUse::kOverwrite : HostUse::kWrite, 0});
  }
  return m;
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
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind != EventKind::kAccess) continue;
    if (e.is_device_access()) order.push_back(m.param(e.id));
    for (const HostAcquire& a : e.is_device_access() ? m.after_[i] : m.update_[e.id])
      if (e.is_device_access() || InPart(a, e)) order.push_back(a.tensor);
  }
  m.order_ = StepOrder(std::move(order), m.bytes_.size());
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
