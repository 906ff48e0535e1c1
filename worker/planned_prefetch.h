// PlannedPrefetch: the tencache policy's PrefetchDriver. From the profiled
// step it builds the PrefetchPlan (links and budgets from the LinkCalibrator)
// and gives the cache the profiled acquire order as its next-use oracle; from
// then on, while a step follows the profile, it issues before each device
// access the plan's device fetches (its victims discarded first), the NVMe
// reads of the parameters those kHostTierLead accesses later will copy, and
// each following update's states to the host. With cache.prefetch off it
// still builds the plan and the oracle (eviction by next use) but issues
// nothing. Training thread only.
#pragma once

#include <memory>

#include "scheduler/plan.h"
#include "worker/prefetch_driver.h"

namespace tencache {

class PlannedPrefetch : public PrefetchDriver {
 public:
  // REQUIRES: context.store->cache() != nullptr; context's pointers outlive this.
  explicit PlannedPrefetch(PrefetchDriverContext context);

  const char* name() const override { return "plan-driven"; }
  void BeginStep() override { issued_for_ = kNeverAccessed; }
  Status BeforeAccess(DeviceAccessIndex k) override;
  bool KeepsOnDeviceAfterUpdate(int block, DeviceAccessIndex k) const override;
  Status OnNewProfile(const ProfiledStep& step) override;
  int TakeFetchesIssued() override;

  // The plan in use; nullptr before the first profile.
  const PrefetchPlan* plan() const { return plan_.get(); }

 private:
  // Whether the plan's fetches are issued now: there is a plan, cache.prefetch
  // is on, and the step so far follows the profile.
  bool Issuing() const;
  void IssueStateFetches(DeviceAccessIndex k);

  const PrefetchDriverContext context_;
  std::unique_ptr<PrefetchPlan> plan_;
  std::unique_ptr<NextUseOracle> oracle_;
  int prefetches_ = 0;       // planned fetches issued since TakeFetchesIssued
  DeviceAccessIndex issued_for_ = kNeverAccessed;  // the access whose planned fetches were issued last
};

}  // namespace tencache
