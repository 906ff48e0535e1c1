// LinkCalibrator: the link speeds and tier budgets a prefetch plan is built
// for, and what tencache-sim must be given to replay this rank's trace as its
// cache ran. Each link's speed is measured from the cache's copies in the
// profiled step (the scheduler's default where a link was idle); SimFlags
// gives the median over the steady steps that followed the profile.
// Training thread only.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "cachemgr/metrics.h"
#include "scheduler/plan.h"
#include "scheduler/profiler.h"
#include "scheduler/trace.h"

namespace tencache {

class LinkCalibrator {
 public:
  // Each cache link's bytes over its busy seconds in the profiled step (`c`):
  // the rate the link moves bytes while it has work, which is what the plan's
  // and the simulator's one-copy-at-a-time lanes model (copies in flight
  // together each take longer than their bytes need at that rate). The
  // collectives: bytes over the seconds of `profile`'s collectives. A link the
  // step did not use keeps its previous (at first the scheduler's default) speed.
  void CalibrateLinks(const CacheMetrics& c, const Trace& profile);
  // A steady step (one that followed the profile to its end): its link speeds.
  void AddSteadyStep(const CacheMetrics& cache);
  // The budgets the plan (and tencache-sim) assume for this rank's cache.
  void SetBudgets(const TierBudgets& budgets) { sim_budgets_ = budgets; }

  const LinkSpeeds& links() const { return links_; }
  const TierBudgets& budgets() const { return sim_budgets_; }
  // Names of the links measured (the rest are defaults), in the order first measured.
  const std::vector<std::string>& measured() const { return measured_links_; }
  // The tencache-sim flags that replay this rank's trace: budgets, and link
  // speeds — each the median over the latest steady steps (at most
  // Profiler::kTimedSteps, a step that did not use the link left out), the
  // profiled step's where none has run yet.
  std::string SimFlags() const;

 private:
  LinkSpeeds links_;
  std::vector<std::string> measured_links_;   // names of the links measured (the rest are defaults)
  // Per cache link (h2d, d2h, NVMe read, NVMe write): bytes over busy seconds
  // of the latest steps that followed the profile; ring of kTimedSteps.
  struct LinkWindow {
    std::array<double, Profiler::kTimedSteps> bps{};
    int added = 0;
    void Add(uint64_t bytes, double seconds);
    double Median(double otherwise) const;  // `otherwise` when empty
  };
  std::array<LinkWindow, kNumLinks> steady_links_;  // in Link order
  TierBudgets sim_budgets_;
};

}  // namespace tencache
