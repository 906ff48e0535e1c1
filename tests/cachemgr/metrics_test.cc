#include "cachemgr/metrics.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tencache {
namespace {

TEST(LinkTest, ACopyCrossesTheLinkBetweenItsTiers) {
  EXPECT_EQ(LinkBetween(Tier::kHost, Tier::kDevice), Link::kH2D);
  EXPECT_EQ(LinkBetween(Tier::kDevice, Tier::kHost), Link::kD2H);
  EXPECT_EQ(LinkBetween(Tier::kNvme, Tier::kHost), Link::kNvmeRead);
  EXPECT_EQ(LinkBetween(Tier::kHost, Tier::kNvme), Link::kNvmeWrite);
}

TEST(CacheMetricsTest, JsonHasEveryFieldByName) {
  CacheMetrics m;
  m.step = 3;
  m.tier(Tier::kDevice).hits = 7;
  m.tier(Tier::kHost).misses = 2;
  m.tier(Tier::kHost).late = 1;
  m.tier(Tier::kHost).reserved_bytes = 1000;
  m.tier(Tier::kHost).peak_used_bytes = 950;
  m.link(Link::kNvmeRead).bytes = 11;
  m.link(Link::kH2D).bytes = 12;
  m.link(Link::kD2H).bytes = 13;
  m.link(Link::kNvmeWrite).bytes = 14;
  m.stall_seconds = 0.5;
  m.link(Link::kNvmeWrite).busy_seconds = 0.25;
  m.allocations_after_setup = 1;
  auto j = nlohmann::json::parse(m.ToJson());
  EXPECT_EQ(j["step"], 3);
  EXPECT_EQ(j["device_hits"], 7);
  EXPECT_EQ(j["host_misses"], 2);
  EXPECT_EQ(j["host_late"], 1);
  EXPECT_EQ(j["nvme_hits"], 0);
  EXPECT_EQ(j["bytes_nvme_to_host"], 11);
  EXPECT_EQ(j["bytes_host_to_device"], 12);
  EXPECT_EQ(j["bytes_device_to_host"], 13);
  EXPECT_EQ(j["bytes_host_to_nvme"], 14);
  EXPECT_DOUBLE_EQ(j["stall_seconds"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["busy_seconds_host_to_nvme"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["busy_seconds_nvme_to_host"].get<double>(), 0.0);
  EXPECT_EQ(j["allocations_after_setup"], 1);
  EXPECT_DOUBLE_EQ(j["host_utilization"].get<double>(), 0.95);
  EXPECT_TRUE(j.contains("device_reserved_bytes"));
  EXPECT_TRUE(j.contains("nvme_used_bytes"));
}

// Two copies overlapping on one link: busy for the union of their intervals,
// not the sum; a copy still running counts up to now, and Restart starts over.
TEST(LinkClockTest, BusyIsTheUnionOfOverlappingCopies) {
  using std::chrono::milliseconds;
  const LinkClock::TimePoint t0{};
  LinkClock c;
  c.Begin(t0);
  c.Begin(t0 + milliseconds(10));                       // overlaps the first
  c.End(t0 + milliseconds(30));
  c.End(t0 + milliseconds(40));                         // busy 0..40
  EXPECT_NEAR(c.Busy(t0 + milliseconds(100)), 0.040, 1e-12);
  c.Begin(t0 + milliseconds(100));                      // idle 40..100 does not count
  EXPECT_NEAR(c.Busy(t0 + milliseconds(125)), 0.065, 1e-12);
  c.Restart(t0 + milliseconds(125));
  EXPECT_NEAR(c.Busy(t0 + milliseconds(125)), 0.0, 1e-12);
  c.End(t0 + milliseconds(150));
  EXPECT_NEAR(c.Busy(t0 + milliseconds(200)), 0.025, 1e-12);
}

TEST(CacheMetricsTest, UtilizationIsZeroWithNothingReserved) {
  EXPECT_EQ(CacheMetrics{}.host_utilization(), 0.0);
}

}  // namespace
}  // namespace tencache
