#include "scheduler/profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>

namespace tencache {
namespace {

// One step: the accesses in `order`, each computing `compute[i]` seconds (0.5
// when not given) after a gap of 0.25, then a collective at the end.
void Step(Profiler& p, const std::vector<TensorId>& order, const std::vector<double>& compute = {}) {
  double t = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    AccessRecord a;
    a.id = order[i];
    a.name = "w" + std::to_string(order[i]);
    a.bytes = 100;
    a.start_s = t += 0.25;
    a.end_s = t += i < compute.size() ? compute[i] : 0.5;
    p.RecordAccess(a);
  }
  CollectiveRecord c;
  c.bytes = 10;
  c.start_s = t;
  c.end_s = t + 1;
  p.RecordCollective(c);
}

TEST(ProfilerTest, FirstStepBecomesTheProfile) {
  std::vector<std::string> log;
  Profiler p(TraceHeader{}, [&](const std::string& m) { log.push_back(m); });
  EXPECT_FALSE(p.following());
  Step(p, {0, 1, 2, 1, 0});
  ASSERT_TRUE(p.EndStep().ok());
  ASSERT_TRUE(p.has_profile());
  EXPECT_EQ(p.profile_version(), 1);
  EXPECT_EQ(p.profile().events.size(), 6u);
  EXPECT_EQ(p.profile().events.back().kind, EventKind::kCollective);
  Step(p, {0, 1, 2, 1, 0});
  EXPECT_TRUE(p.following());
  ASSERT_TRUE(p.EndStep().ok());
  EXPECT_EQ(p.profile_version(), 1);
  EXPECT_TRUE(log.empty());
}

TEST(ProfilerTest, DivergenceReprofilesAndLogsOnce) {
  std::vector<std::string> log;
  Profiler p(TraceHeader{}, [&](const std::string& m) { log.push_back(m); });
  Step(p, {0, 1, 2, 1, 0});
  ASSERT_TRUE(p.EndStep().ok());
  Step(p, {0, 2, 1, 2, 0});  // differs from access 1 onwards
  EXPECT_FALSE(p.following());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("re-profiling: order changed at access 1"), std::string::npos) << log[0];
  ASSERT_TRUE(p.EndStep().ok());
  EXPECT_EQ(p.profile_version(), 2);
  EXPECT_EQ(p.reprofile_count(), 1);
  EXPECT_EQ(p.profile().events[1].id, 2u);
  Step(p, {0, 2, 1, 2, 0});  // the new order is followed
  EXPECT_TRUE(p.following());
  EXPECT_EQ(log.size(), 1u);
}

TEST(ProfilerTest, ShorterStepIsADivergence) {
  std::vector<std::string> log;
  Profiler p(TraceHeader{}, [&](const std::string& m) { log.push_back(m); });
  Step(p, {0, 1, 2});
  ASSERT_TRUE(p.EndStep().ok());
  Step(p, {0, 1});
  ASSERT_TRUE(p.EndStep().ok());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("at access 2"), std::string::npos);
  EXPECT_EQ(p.profile_version(), 2);
}

TEST(ProfilerTest, InvalidStepIsRejectedAndOldProfileKept) {
  Profiler p(TraceHeader{}, nullptr);
  AccessRecord a;
  a.id = 0;
  a.bytes = 0;  // invalid
  p.RecordAccess(a);
  Status s = p.EndStep();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(p.has_profile());
}

// The worker's first step warms up; on a device that computes synchronously the
// steps after it give the compute times the trace carries: each access's median
// over the timed steps, later events moved by the difference.
TEST(ProfilerTest, TimedProfileTakesEachAccesssMedianComputeOverTheFollowedSteps) {
  Profiler p(TraceHeader{}, nullptr);
  p.set_followed_steps_timed(true);
  Step(p, {0, 1, 2}, {0.9, 0.9, 0.9});  // the profiled step, slow
  ASSERT_TRUE(p.EndStep().ok());
  EXPECT_EQ(p.timed_steps(), 0);
  EXPECT_NEAR(p.timed_profile().events[0].duration_s(), 0.9, 1e-12);  // nothing timed yet: the profile's
  Step(p, {0, 1, 2}, {0.1, 0.4, 0.2});
  ASSERT_TRUE(p.EndStep().ok());
  Step(p, {0, 1, 2}, {0.3, 0.5, 0.2});
  ASSERT_TRUE(p.EndStep().ok());
  Step(p, {0, 1, 2}, {0.2, 0.6, 0.1});  // the medians add up to the median step's 0.9: no scaling
  ASSERT_TRUE(p.EndStep().ok());
  EXPECT_EQ(p.timed_steps(), 3);
  const Trace t = p.timed_profile();
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_NEAR(t.events[0].duration_s(), 0.2, 1e-12);
  EXPECT_NEAR(t.events[1].duration_s(), 0.5, 1e-12);
  EXPECT_NEAR(t.events[2].duration_s(), 0.2, 1e-12);
  // Gaps stay 0.25: starts at 0.25, 0.25 + 0.2 + 0.25, ...; the collective follows.
  EXPECT_NEAR(t.events[1].start_s, 0.7, 1e-12);
  EXPECT_NEAR(t.events[2].start_s, 1.45, 1e-12);
  EXPECT_NEAR(t.events[3].start_s, 1.65, 1e-12);
  EXPECT_NEAR(t.events[3].duration_s(), 1.0, 1e-12);
  EXPECT_TRUE(ValidateTrace(t, "timed").ok());
  EXPECT_NEAR(p.profile().events[0].duration_s(), 0.9, 1e-12);  // the profile itself is unchanged

  // Only the latest kTimedSteps count.
  for (int s = 0; s < Profiler::kTimedSteps; ++s) {
    Step(p, {0, 1, 2}, {0.05, 0.05, 0.05});
    ASSERT_TRUE(p.EndStep().ok());
  }
  EXPECT_NEAR(p.timed_profile().events[1].duration_s(), 0.05, 1e-12);
  EXPECT_EQ(p.timed_steps(), Profiler::kTimedSteps);

  // A step that takes another path becomes the profile, and its times start over.
  Step(p, {0, 2, 1}, {0.7, 0.7, 0.7});
  ASSERT_TRUE(p.EndStep().ok());
  EXPECT_EQ(p.profile_version(), 2);
  EXPECT_EQ(p.timed_steps(), 0);
  EXPECT_NEAR(p.timed_profile().events[1].duration_s(), 0.7, 1e-12);
}

// On a GPU followed steps do not wait for their kernels, so their times are not
// compute times: by default the profile's own stay.
TEST(ProfilerTest, UntimedFollowedStepsLeaveTheProfilesComputeTimes) {
  Profiler p(TraceHeader{}, nullptr);
  Step(p, {0, 1}, {0.9, 0.8});
  ASSERT_TRUE(p.EndStep().ok());
  Step(p, {0, 1}, {0.01, 0.01});
  ASSERT_TRUE(p.EndStep().ok());
  EXPECT_EQ(p.timed_steps(), 0);
  EXPECT_NEAR(p.timed_profile().events[0].duration_s(), 0.9, 1e-12);
  EXPECT_NEAR(p.timed_profile().events[1].duration_s(), 0.8, 1e-12);
}

// One step of three accesses in which the training thread asks for access i
// `lead[i]` seconds after the previous event ended, of which `waited[i]` in
// acquires, then waits 0.1 s and computes 0.2 s; a collective of 0.3 s comes
// between the second and the third.
void LeadStep(Profiler& p, const std::vector<double>& lead, const std::vector<double>& waited) {
  double t = 0;
  for (size_t i = 0; i < 3; ++i) {
    if (i == 2) {
      CollectiveRecord c;
      c.bytes = 10;
      c.start_s = t;
      c.end_s = t += 0.3;
      p.RecordCollective(c);
    }
    AccessRecord a;
    a.id = TensorId(i);
    a.name = "w" + std::to_string(i);
    a.bytes = 100;
    a.asked_s = t += lead[i] + waited[i];
    a.waited_s = waited[i];
    a.start_s = t += 0.1;
    a.end_s = t += 0.2;
    p.RecordAccess(a);
  }
}

// The trace carries the training thread's own time before each access (its
// lead): from the end of the previous event (an access or a collective) to its
// request, less the time it waited in acquires; medians over the timed steps.
TEST(ProfilerTest, AnAccesssLeadIsTheThreadsOwnTimeSinceThePreviousEvent) {
  Profiler p(TraceHeader{}, nullptr);
  p.set_followed_steps_timed(true);
  LeadStep(p, {0.5, 0.25, 0.125}, {0, 1, 0});
  ASSERT_TRUE(p.EndStep().ok());
  const Trace& profiled = p.profile();
  ASSERT_EQ(profiled.events.size(), 4u);
  EXPECT_NEAR(profiled.events[0].lead_s, 0.5, 1e-12);  // since the step began
  EXPECT_NEAR(profiled.events[1].lead_s, 0.25, 1e-12);  // the 1 s in acquires left out
  EXPECT_EQ(profiled.events[2].kind, EventKind::kCollective);
  EXPECT_NEAR(profiled.events[3].lead_s, 0.125, 1e-12);  // since the collective ended
  // Its waits: in acquires before it asked, and for its tensor after.
  EXPECT_NEAR(profiled.events[0].wait_s, 0.1, 1e-12);
  EXPECT_NEAR(profiled.events[1].wait_s, 1.1, 1e-12);
  EXPECT_NEAR(profiled.events[3].wait_s, 0.1, 1e-12);
  LeadStep(p, {0.1, 0.2, 0.3}, {0, 0, 0});
  ASSERT_TRUE(p.EndStep().ok());
  LeadStep(p, {0.3, 0.2, 0.1}, {0, 0, 0});
  ASSERT_TRUE(p.EndStep().ok());
  LeadStep(p, {0.2, 0.4, 0.2}, {0, 0.5, 0});
  ASSERT_TRUE(p.EndStep().ok());
  const Trace t = p.timed_profile();
  EXPECT_NEAR(t.events[0].lead_s, 0.2, 1e-12);
  EXPECT_NEAR(t.events[1].lead_s, 0.2, 1e-12);
  EXPECT_NEAR(t.events[3].lead_s, 0.2, 1e-12);
  EXPECT_NEAR(t.events[1].wait_s, 0.1, 1e-12);  // the median of 0.1, 0.1 and 0.6
  // Round trip through the trace file format.
  std::stringstream file;
  WriteTrace(t, file);
  StatusOr<Trace> back = ParseTrace(file, "lead.trace");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_NEAR(back->events[1].lead_s, 0.2, 1e-12);
  EXPECT_NEAR(back->events[1].wait_s, 0.1, 1e-12);
  EXPECT_EQ(back->events[2].lead_s, 0.0);
  EXPECT_EQ(back->events[2].wait_s, 0.0);
}

// A backward access (0.1 s of lead, 0.1 s of wait, 0.2 s of compute), its
// update issued 0.05 s after it ends and run on the optimizer lane for
// `update_s` (0.05 s in acquires first) beside the next access, whose lead is
// 0.3 s from the first's end: recorded, as the worker does, when the next
// access retires it, before the next access itself.
void LaneStep(Profiler& p, double update_s) {
  AccessRecord first;
  first.id = 0;
  first.name = "w0";
  first.phase = Phase::kBackward;
  first.bytes = 100;
  first.asked_s = 0.1;
  first.start_s = 0.2;
  first.end_s = 0.4;
  AccessRecord update = first;
  update.phase = Phase::kOptimizer;
  update.optimizer_lane = true;
  update.issued_s = update.asked_s = 0.45;
  update.waited_s = 0.05;
  update.start_s = 0.5;
  update.end_s = 0.5 + update_s;
  AccessRecord next = first;
  next.id = 1;
  next.name = "w1";
  next.asked_s = 0.7;
  next.start_s = 0.8;
  next.end_s = std::max(1.0, update.end_s);  // retired before it ends
  p.RecordAccess(first);
  p.RecordAccess(update);
  p.RecordAccess(next);
}

// An update on the optimizer lane is marked so in the trace, its lead and wait
// are measured from its issue, and it moves neither the next access's lead
// (measured from the training thread's previous event) nor, in the timed
// profile, the events after it.
TEST(ProfilerTest, AnOptimizerLaneUpdateIsNoEventOfTheTrainingThread) {
  Profiler p(TraceHeader{}, nullptr);
  p.set_followed_steps_timed(true);
  LaneStep(p, 0.4);
  ASSERT_TRUE(p.EndStep().ok());
  const Trace& profiled = p.profile();
  ASSERT_EQ(profiled.events.size(), 3u);
  EXPECT_FALSE(profiled.events[0].optimizer_lane);
  EXPECT_TRUE(profiled.events[1].optimizer_lane);
  EXPECT_FALSE(profiled.events[2].optimizer_lane);
  EXPECT_NEAR(profiled.events[1].lead_s, 0.0, 1e-12);  // it asked at its issue
  EXPECT_NEAR(profiled.events[1].wait_s, 0.05, 1e-12);
  EXPECT_NEAR(profiled.events[2].lead_s, 0.3, 1e-12);  // from the first access's end, not the update's
  EXPECT_NEAR(profiled.events[2].wait_s, 0.1, 1e-12);
  for (double update_s : {0.1, 0.2, 0.3}) {
    LaneStep(p, update_s);
    ASSERT_TRUE(p.EndStep().ok());
  }
  const Trace t = p.timed_profile();
  ASSERT_EQ(p.timed_steps(), 3);
  EXPECT_TRUE(t.events[1].optimizer_lane);
  EXPECT_GT(t.events[1].duration_s(), 0.0);
  EXPECT_LT(t.events[1].duration_s(), 0.4);  // its medians, not the profiled step's
  // The next access starts where it did: the update's shorter time is the lane's, not the thread's.
  EXPECT_NEAR(t.events[2].start_s, profiled.events[2].start_s, 1e-12);
  EXPECT_NEAR(t.events[2].lead_s, 0.3, 1e-9);
  EXPECT_TRUE(ValidateTrace(t, "timed").ok());
  // An update not recorded from its issue carries no lead or wait.
  Profiler q(TraceHeader{}, nullptr);
  AccessRecord a;
  a.name = "w";
  a.bytes = 1;
  a.asked_s = 1;
  a.start_s = 2;
  a.end_s = 3;
  q.RecordAccess(a);
  a.phase = Phase::kOptimizer;
  a.optimizer_lane = true;
  q.RecordAccess(a);
  ASSERT_TRUE(q.EndStep().ok());
  EXPECT_EQ(q.profile().events[1].lead_s, 0.0);
  EXPECT_EQ(q.profile().events[1].wait_s, 0.0);
}

// A noisy CPU slows a stretch of each step, a different access each time:
// every access's median is then an undisturbed time, and their sum would fall
// short of every step. The trace's times are scaled to the median step's sum;
// leads by their own factor.
TEST(ProfilerTest, TimedProfileAddsUpToTheMedianStep) {
  Profiler p(TraceHeader{}, nullptr);
  p.set_followed_steps_timed(true);
  LeadStep(p, {0.1, 0.1, 0.1}, {0, 0, 0});  // the profiled step
  ASSERT_TRUE(p.EndStep().ok());
  LeadStep(p, {0.5, 0.1, 0.1}, {0, 0, 0});
  ASSERT_TRUE(p.EndStep().ok());
  LeadStep(p, {0.1, 0.5, 0.1}, {0, 0, 0});
  ASSERT_TRUE(p.EndStep().ok());
  LeadStep(p, {0.1, 0.1, 0.3}, {0, 0, 0});
  ASSERT_TRUE(p.EndStep().ok());
  const Trace t = p.timed_profile();
  double leads = 0, durations = 0;
  for (const TraceEvent& e : t.events) {
    if (e.kind != EventKind::kAccess) continue;
    leads += e.lead_s;
    durations += e.duration_s();
    EXPECT_NEAR(e.lead_s, 0.1 * 0.7 / 0.3, 1e-12);  // medians 0.1, steps 0.7, 0.7 and 0.5
  }
  EXPECT_NEAR(leads, 0.7, 1e-12);
  EXPECT_NEAR(durations, 0.6, 1e-12);  // every step computes 3 x 0.2: unscaled
  EXPECT_TRUE(ValidateTrace(t, "scaled").ok());
}

}  // namespace
}  // namespace tencache
