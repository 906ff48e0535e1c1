#include "scheduler/profiler.h"

#include <gtest/gtest.h>

#include <vector>

namespace tencache {
namespace {

void Step(Profiler& p, const std::vector<TensorId>& order) {
  double t = 0;
  for (TensorId id : order) {
    AccessRecord a;
    a.id = id;
    a.name = "w" + std::to_string(id);
    a.bytes = 100;
    a.start_s = t;
    a.end_s = t += 0.5;
    p.RecordAccess(a);
  }
  CollectiveRecord c;
  c.bytes = 10;
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

}  // namespace
}  // namespace tencache
