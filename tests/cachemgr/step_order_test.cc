#include "cachemgr/step_order.h"

#include <gtest/gtest.h>

#include <vector>

namespace tencache {
namespace {

using Order = StepOrder<AcquireIndex>;
constexpr AcquireIndex A(uint64_t k) { return AcquireIndex(k); }

// Each step uses: 0 1 2 1 0 (tensor 2 once, tensor 3 never).
Order Example() { return Order({0, 1, 2, 1, 0}, 4); }

TEST(StepOrderTest, NextUseIsStrictlyAfterAndWrapsIntoLaterSteps) {
  const Order s = Example();
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s.NextUse(1, A(1)), A(3));
  EXPECT_EQ(s.NextUse(1, A(3)), A(6));  // the next step's position 1
  EXPECT_EQ(s.NextUse(2, A(2)), A(7));
  EXPECT_EQ(s.NextUse(0, A(0)), A(4));
  EXPECT_EQ(s.NextUse(0, A(4)), A(5));
  EXPECT_EQ(s.NextUse(1, A(13)), A(16));  // from step 2 into step 3
}

TEST(StepOrderTest, PrevUseIsStrictlyBeforeAndNeverBeforeTheFirstStep) {
  const Order s = Example();
  EXPECT_EQ(s.PrevUse(2, A(2)), kNeverAcquired);
  EXPECT_EQ(s.PrevUse(2, A(7)), A(2));
  EXPECT_EQ(s.PrevUse(0, A(5)), A(4));
  EXPECT_EQ(s.PrevUse(1, A(3)), A(1));
  EXPECT_EQ(s.tensor(A(7)), 2u);
}

TEST(StepOrderTest, UnusedAndUnknownTensorsAreNeverUsed) {
  const Order s = Example();
  EXPECT_FALSE(s.used(3));
  EXPECT_EQ(s.NextUse(3, A(0)), kNeverAcquired);
  EXPECT_EQ(s.PrevUse(3, A(9)), kNeverAcquired);
  EXPECT_FALSE(s.used(99));
  EXPECT_EQ(s.NextUse(99, A(0)), kNeverAcquired);
  EXPECT_EQ(Order().NextUse(0, A(0)), kNeverAcquired);
}

TEST(StepOrderTest, OverAcquiresIsTheCachesNextUseOracle) {
  const Order s = Example();
  const NextUseOracle& oracle = s;
  for (AcquireIndex g; g < A(12); ++g)
    for (TensorId id = 0; id < 4; ++id) EXPECT_EQ(oracle.NextUse(id, g), s.NextUse(id, g)) << id << " " << g;
}

// Walking a step in its order, the use after a tensor's uses so far is its
// next use from the current position; past its last, the next step's first.
TEST(StepOrderTest, UseAfterTheUsesSoFarIsTheNextUseInOrder) {
  const Order s = Example();
  const NextUseOracle& oracle = s;
  std::vector<uint64_t> done(4, 0);
  for (AcquireIndex g; g < A(s.size()); ++g) {
    ++done[s.tensor(g)];
    for (TensorId id = 0; id < 4; ++id) EXPECT_EQ(oracle.UseAfter(id, done[id]), s.NextUse(id, g)) << id << " " << g;
  }
  EXPECT_EQ(s.UseAfter(3, 0), kNeverAcquired);
  EXPECT_EQ(s.UseAfter(99, 0), kNeverAcquired);
  EXPECT_EQ(s.UseAfter(0, 7), s.UseAfter(0, 2)) << "uses past the step's count as all of them";
}

}  // namespace
}  // namespace tencache
