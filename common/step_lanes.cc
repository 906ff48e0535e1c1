#include "common/step_lanes.h"

namespace tencache {

const char* StepLaneName(StepLane lane) {
  switch (lane) {
    case StepLane::kCompute: return "compute";
    case StepLane::kH2D: return LinkName(Link::kH2D);
    case StepLane::kD2H: return LinkName(Link::kD2H);
    case StepLane::kNvmeRead: return LinkName(Link::kNvmeRead);
    case StepLane::kNvmeWrite: return LinkName(Link::kNvmeWrite);
    case StepLane::kCollectives: return "collectives";
    case StepLane::kOptimizer: return "optimizer";
  }
  return "?";
}

StepLane LaneBusy::Largest() const {
  int best = 0;
  for (int i = 1; i < kStepLanes; ++i) {
    if (seconds[i] > seconds[best]) best = i;
  }
  return StepLane(best);
}

double LaneBusy::OverlapEfficiency(double step_s) const {
  return step_s > 0 ? (*this)[Largest()] / step_s : 0.0;
}

nlohmann::ordered_json LaneBusy::ToJson() const {
  nlohmann::ordered_json j;
  for (int i = 0; i < kStepLanes; ++i) j[StepLaneName(StepLane(i))] = seconds[i];
  return j;
}

LaneBusy LaneBusy::FromJson(const nlohmann::json& j) {
  LaneBusy b;
  if (!j.is_object()) return b;
  for (int i = 0; i < kStepLanes; ++i) {
    auto it = j.find(StepLaneName(StepLane(i)));
    if (it != j.end() && it->is_number()) b.seconds[i] = it->get<double>();
  }
  return b;
}

}  // namespace tencache
