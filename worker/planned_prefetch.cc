#include "worker/planned_prefetch.h"

#include <algorithm>
#include <sstream>

#include "cachemgr/step_order.h"
#include "scheduler/profiler.h"
#include "worker/link_calibrator.h"

namespace tencache {

PlannedPrefetch::PlannedPrefetch(PrefetchDriverContext context) : context_(std::move(context)) {}

bool PlannedPrefetch::Issuing() const {
  return plan_ != nullptr && context_.job->cache.prefetch && context_.profiler->following();
}

Status PlannedPrefetch::BeforeAccess(DeviceAccessIndex k) {
  if (!Issuing()) return Status::Ok();
  if (k == issued_for_) return Status::Ok();  // once per access
  issued_for_ = k;
  ShardStore* store = context_.store;
  for (const PlannedFetch* f : plan_->FetchesBefore(k)) {
    // The plan's victims leave first, so the device holds what the plan (and
    // tencache-sim) assumes. A victim still pinned or being copied stays; the
    // cache then picks one by next use when the fetch needs the room.
    for (TensorId victim : f->evict) {
      TC_RETURN_IF_ERROR(EvictParamsFromDevice(store, int(victim),
                                               "for the planned fetch of block " + std::to_string(f->tensor))
                             .status());
    }
    store->Prefetch(int(f->tensor), ShardKind::kParam, 0, Tier::kDevice);
    ++prefetches_;
  }
  // The NVMe reads of the parameters the device fetches kHostTierLead
  // accesses later will copy start now, off those fetches' critical path.
  TensorCache* cache = store->cache();
  for (const PlannedFetch* f : plan_->FetchesBefore(k + kHostTierLead)) {  // none past the step's end
    const TensorId id = ShardTensorId(int(f->tensor), ShardKind::kParam);
    if (!cache->IsResident(id, Tier::kDevice) && !cache->IsResident(id, Tier::kHost)) {
      store->Prefetch(int(f->tensor), ShardKind::kParam, 0, Tier::kHost);
    }
  }
  // Then each update's states, needed later than the device fetches above.
  // (Issuing them kHostTierLead accesses earlier as well was measured: 0.5 GiB
  // more NVMe reads a step on the train bench's NVMe-scale job, and slower.)
  IssueStateFetches(k);
  return Status::Ok();
}

// Each update's shards (master, moments, a stored gradient) are fetched to the
// host with the fetches planned for the access the update follows
// (PrefetchPlan::StateFetchesBefore). The cache gives each fetch the victim a
// demand miss at the update would take — with the host full, the previous
// update's shards, whose next use is a step away — and parks the fetch until
// that update has released them (docs/cachemgr.md), so the read overlaps the
// rest of that access and moves no byte the demand fetches would not.
void PlannedPrefetch::IssueStateFetches(DeviceAccessIndex k) {
  ShardStore* store = context_.store;
  const ShardLayout& layout = *context_.layout;
  for (const PlannedStateFetch& f : plan_->StateFetchesBefore(k)) {
    const int b = f.block;
    // In the order they are used: a stored gradient's pieces (added in
    // before the update), then each piece's master and moments (in mixed
    // precision the bf16 parameter is overwritten by the update: only the
    // master is read). The cache parks each until its victim's last use
    // before the update.
    if (f.pieces_begin == 0 && context_.reads_stored_gradient[size_t(b)]) {
      for (int i = 0; i < layout.Pieces(b, ShardKind::kGrad); ++i) store->Prefetch(b, ShardKind::kGrad, i, Tier::kHost);
    }
    const int last = f.pieces_end > 0 ? f.pieces_end : layout.Pieces(b, ShardKind::kAdamM);
    for (int i = f.pieces_begin; i < last; ++i) {
      for (ShardKind kind : {layout.MasterKind(), ShardKind::kAdamM, ShardKind::kAdamV}) {
        if (i < layout.Pieces(b, kind)) store->Prefetch(b, kind, i, Tier::kHost);
      }
    }
    ++prefetches_;
  }
}

bool PlannedPrefetch::KeepsOnDeviceAfterUpdate(int block, DeviceAccessIndex k) const {
  return Issuing() && plan_->KeptUntilNextUse(TensorId(block), k);
}

Status PlannedPrefetch::OnNewProfile(const ProfiledStep& step) {
  LinkCalibrator& calibrator = *context_.calibrator;
  calibrator.CalibrateLinks(step.cache, step.profile);
  // Gradients go from the reduce-scatter straight to the host, so the whole
  // device pool caches parameters: it is the plan's (and tencache-sim's) device budget.
  TierBudgets budgets;
  budgets.device = context_.store->cache()->pool(Tier::kDevice).reserved_bytes();
  budgets.host = context_.job->cache.host_budget.value_or(context_.state_bytes);
  calibrator.SetBudgets(budgets);
  const LinkSpeeds& links = calibrator.links();
  StatusOr<PrefetchPlan> plan = PrefetchPlan::Build(step.profile, links, budgets);
  if (!plan.ok()) return plan.status().WithContext("building the prefetch plan from the profiled step");
  plan_ = std::make_unique<PrefetchPlan>(std::move(plan).value());
  oracle_ = std::make_unique<StepOrder<AcquireIndex>>(step.acquire_order, context_.store->cache()->size());
  context_.store->cache()->SetNextUseOracle(oracle_.get());
  std::ostringstream line;
  line << "plan: " << plan_->fetches().size() << " fetches per step over " << plan_->sequence().size()
       << " device accesses, predicted device hit rate " << plan_->device_hit_rate() << ", predicted stall "
       << plan_->predicted_stall_s() << " s; device capacity " << plan_->layout().device_capacity
       << " bytes, " << plan_->scheduled_capacity() << " of them scheduled; links GB/s: h2d " << links.h2d_bps / 1e9 << ", d2h " << links.d2h_bps / 1e9 << ", nvme read "
       << links.nvme_read_bps / 1e9 << ", nvme write " << links.nvme_write_bps / 1e9 << ", net "
       << links.collective_bps / 1e9 << " (measured:";
  for (const std::string& name : calibrator.measured()) line << " " << name;
  line << "; the rest scheduler defaults)";
  context_.log(line.str());
  return Status::Ok();
}

int PlannedPrefetch::TakeFetchesIssued() {
  const int n = prefetches_;
  prefetches_ = 0;
  return n;
}

}  // namespace tencache
