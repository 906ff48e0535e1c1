#include "common/optimizer_lane_timeline.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

// The training thread goes on at an issue; it waits at a retire only for
// what is left of the update in flight, and not at all when none is.
TEST(OptimizerLaneTest, RetireWaitsOnlyForTheUpdateInFlight) {
  OptimizerLaneTimeline lane;
  EXPECT_FALSE(lane.in_flight());
  EXPECT_EQ(lane.Retire(1.0), 1.0);  // nothing in flight
  EXPECT_EQ(lane.Issue(1.0), 1.0);   // starts at its issue
  EXPECT_TRUE(lane.in_flight());
  lane.Finish(3.0);
  EXPECT_EQ(lane.Retire(2.5), 3.0);  // waits 0.5 s
  EXPECT_FALSE(lane.in_flight());
  EXPECT_EQ(lane.Retire(2.5), 2.5);  // retired once
  EXPECT_EQ(lane.Issue(4.0), 4.0);
  lane.Finish(4.5);
  EXPECT_EQ(lane.Retire(5.0), 5.0);  // finished before: no wait
}

}  // namespace
}  // namespace tencache
