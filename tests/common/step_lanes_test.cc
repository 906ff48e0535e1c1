// The step's lanes: the busiest one and the overlap efficiency it bounds, and
// the JSON the worker writes and the report reads.
#include "common/step_lanes.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

TEST(StepLanes, TheBusiestLaneBoundsTheStep) {
  LaneBusy b;
  b[StepLane::kCompute] = 0.5;
  b[StepLane::kNvmeRead] = 0.8;
  b[StepLane::kOptimizer] = 0.3;
  EXPECT_EQ(b.Largest(), StepLane::kNvmeRead);
  EXPECT_DOUBLE_EQ(b.OverlapEfficiency(1.0), 0.8);   // the step takes 0.2 s more than NVMe needs
  EXPECT_DOUBLE_EQ(b.OverlapEfficiency(0.8), 1.0);   // as short as NVMe allows
  EXPECT_EQ(b.OverlapEfficiency(0.0), 0.0);
  EXPECT_EQ(LaneBusy{}.Largest(), StepLane::kCompute);  // all idle: the first
}

TEST(StepLanes, EachCopyLinkHasTheLaneOfItsName) {
  const char* expected[kNumLinks] = {"h2d", "d2h", "nvme_read", "nvme_write"};
  for (Link l : kLinks) {
    EXPECT_STREQ(LinkName(l), expected[int(l)]);
    EXPECT_STREQ(StepLaneName(LaneOf(l)), LinkName(l));
  }
}

TEST(StepLanes, JsonNamesEveryLaneAndReadsBack) {
  LaneBusy b;
  for (int i = 0; i < kStepLanes; ++i) b.seconds[i] = 0.125 * (i + 1);
  const nlohmann::ordered_json j = b.ToJson();
  ASSERT_EQ(j.size(), size_t(kStepLanes));
  EXPECT_EQ(j["compute"], 0.125);
  EXPECT_EQ(j["nvme_write"], 0.625);
  EXPECT_EQ(j["optimizer"], 0.875);
  const LaneBusy back = LaneBusy::FromJson(j);
  for (int i = 0; i < kStepLanes; ++i) EXPECT_EQ(back.seconds[i], b.seconds[i]) << StepLaneName(StepLane(i));
  const LaneBusy partial = LaneBusy::FromJson(nlohmann::json{{"h2d", 2.0}, {"d2h", "x"}});
  EXPECT_EQ(partial[StepLane::kH2D], 2.0);
  EXPECT_EQ(partial[StepLane::kD2H], 0.0);
  EXPECT_EQ(LaneBusy::FromJson(nlohmann::json(3)).seconds[0], 0.0);
}

}  // namespace
}  // namespace tencache
