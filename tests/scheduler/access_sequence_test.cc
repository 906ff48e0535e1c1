#include "scheduler/access_sequence.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

constexpr DeviceAccessIndex D(uint64_t k) { return DeviceAccessIndex(k); }

Trace Make(std::vector<TensorId> order, std::vector<uint64_t> bytes) {
  Trace t;
  double clock = 0;
  for (TensorId id : order) {
    TraceEvent e;
    e.id = id;
    e.name = "t" + std::to_string(id);
    e.bytes = bytes[id];
    e.start_s = clock;
    e.end_s = clock += 1;
    t.events.push_back(e);
  }
  return t;
}

// The lookup itself is StepOrder's (tests/cachemgr/step_order_test.cc): the
// sequence feeds it the device accesses, in order.
TEST(AccessSequenceTest, NextAndPrevUseFollowTheDeviceAccesses) {
  // step: 0 1 2 1 0   (tensor 2 used once)
  AccessSequence s = *AccessSequence::FromTrace(Make({0, 1, 2, 1, 0}, {10, 20, 30}));
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s.NextUse(1, D(1)), D(3));
  EXPECT_EQ(s.NextUse(1, D(3)), D(6));   // next step, position 1
  EXPECT_EQ(s.NextUse(2, D(2)), D(7));
  EXPECT_EQ(s.PrevUse(2, D(2)), kNeverAccessed);
  EXPECT_EQ(s.PrevUse(0, D(5)), D(4));
  EXPECT_EQ(s.tensor(D(7)), 2u);
}

TEST(AccessSequenceTest, BytesBetweenIsExclusive) {
  AccessSequence s = *AccessSequence::FromTrace(Make({0, 1, 2, 1, 0}, {10, 20, 30}));
  EXPECT_EQ(s.BytesBetween(D(0), D(1)), 0u);
  EXPECT_EQ(s.BytesBetween(D(0), D(4)), 20u + 30 + 20);
  EXPECT_EQ(s.BytesBetween(D(3), D(6)), 10u + 10);  // access 4 (t0) and 5 (t0 of next step)
}

TEST(AccessSequenceTest, OptimizerOnlyTensorsAreNeverUsed) {
  Trace t = Make({0}, {10, 20});
  TraceEvent e;
  e.id = 1;
  e.name = "t1";
  e.bytes = 20;
  e.phase = Phase::kOptimizer;
  t.events.push_back(e);
  AccessSequence s = *AccessSequence::FromTrace(t);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_FALSE(s.used(1));
  EXPECT_EQ(s.NextUse(1, D(0)), kNeverAccessed);
}

}  // namespace
}  // namespace tencache
