// The lanes of a training step: the resources that work on it side by side —
// the device computing, the host->device and device->host links, NVMe reads
// and writes, the collectives' network, and the CPU running the optimizer. A
// step can be no shorter than its busiest lane; overlap efficiency says how
// close it comes (1.0: as short as the slowest resource allows). The worker
// measures the lanes, tencache-sim predicts them, the report shows both, all
// under the names below. Plain values: thread-compatible.
#pragma once

#include <nlohmann/json.hpp>

#include "common/link.h"

namespace tencache {

enum class StepLane : int { kCompute, kH2D, kD2H, kNvmeRead, kNvmeWrite, kCollectives, kOptimizer };
constexpr int kStepLanes = 7;
// "compute", then each link's LinkName, then "collectives", "optimizer".
const char* StepLaneName(StepLane lane);
// The lane of a copy link: the links' lanes follow kCompute in Link order.
constexpr StepLane LaneOf(Link link) { return StepLane(1 + static_cast<int>(link)); }
static_assert(LaneOf(Link::kH2D) == StepLane::kH2D && LaneOf(Link::kNvmeWrite) == StepLane::kNvmeWrite,
              "the link lanes follow kCompute in Link order");

// Busy seconds of each lane over one step: the union of the intervals the lane
// worked, never more than the step's time.
struct LaneBusy {
  double seconds[kStepLanes] = {};

  double& operator[](StepLane l) { return seconds[int(l)]; }
  double operator[](StepLane l) const { return seconds[int(l)]; }
  // The busiest lane (the first of equals).
  StepLane Largest() const;
  // The busiest lane's seconds / `step_s`; 0 when step_s <= 0.
  double OverlapEfficiency(double step_s) const;
  // {"compute": s, "h2d": s, ...}, every lane.
  nlohmann::ordered_json ToJson() const;
  // Lanes named in `j` (others 0); a non-number value counts as 0.
  static LaneBusy FromJson(const nlohmann::json& j);
};

}  // namespace tencache
