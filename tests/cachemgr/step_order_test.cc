#include "cachemgr/step_order.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

// Each step uses: 0 1 2 1 0 (tensor 2 once, tensor 3 never).
StepOrder Example() { return StepOrder({0, 1, 2, 1, 0}, 4); }

TEST(StepOrderTest, NextUseIsStrictlyAfterAndWrapsIntoLaterSteps) {
  const StepOrder s = Example();
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s.NextUse(1, 1), 3u);
  EXPECT_EQ(s.NextUse(1, 3), 6u);  // the next step's position 1
  EXPECT_EQ(s.NextUse(2, 2), 7u);
  EXPECT_EQ(s.NextUse(0, 0), 4u);
  EXPECT_EQ(s.NextUse(0, 4), 5u);
  EXPECT_EQ(s.NextUse(1, 13), 16u);  // from step 2 into step 3
}

TEST(StepOrderTest, PrevUseIsStrictlyBeforeAndNeverBeforeTheFirstStep) {
  const StepOrder s = Example();
  EXPECT_EQ(s.PrevUse(2, 2), kNeverUsed);
  EXPECT_EQ(s.PrevUse(2, 7), 2u);
  EXPECT_EQ(s.PrevUse(0, 5), 4u);
  EXPECT_EQ(s.PrevUse(1, 3), 1u);
  EXPECT_EQ(s.tensor(7), 2u);
}

TEST(StepOrderTest, UnusedAndUnknownTensorsAreNeverUsed) {
  const StepOrder s = Example();
  EXPECT_FALSE(s.used(3));
  EXPECT_EQ(s.NextUse(3, 0), kNeverUsed);
  EXPECT_EQ(s.PrevUse(3, 9), kNeverUsed);
  EXPECT_FALSE(s.used(99));
  EXPECT_EQ(s.NextUse(99, 0), kNeverUsed);
  EXPECT_EQ(StepOrder().NextUse(0, 0), kNeverUsed);
}

TEST(StepOrderTest, IsTheCachesNextUseOracle) {
  const StepOrder s = Example();
  const NextUseOracle& oracle = s;
  for (AccessIndex g = 0; g < 12; ++g)
    for (TensorId id = 0; id < 4; ++id) EXPECT_EQ(oracle.NextUse(id, g), s.NextUse(id, g)) << id << " " << g;
}

}  // namespace
}  // namespace tencache
