// Worker pod sizing: kube-reserved by GKE's formula, requests that fit the
// node's allocatable, a memory limit, and the grace period of the SIGTERM
// checkpoint with its spot-notice warning.
#include "launcher/k8s_pod_sizing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/byte_size.h"

namespace tencache {
namespace {

InstanceSpec P5() {
  InstanceSpec s;
  s.provider = "aws";
  s.type = "p5.48xlarge";
  s.gpu_count = 8;
  s.vcpus = 192;
  s.ram_gib = 2048;
  return s;
}

TEST(KubeReserved, FollowsGkesPublishedBands) {
  // CPU: 60m + 10m + 2 x 5m + 188 x 2.5m = 550m on 192 cores; 60m on one.
  EXPECT_EQ(KubeReserved(192, 0).milli_cpu, 550);
  EXPECT_EQ(KubeReserved(1, 0).milli_cpu, 60);
  EXPECT_EQ(KubeReserved(4, 0).milli_cpu, 80);
  // Memory: 150 GiB reserves 9.76 GiB + 100 MiB (the GKE calculator's 9.8577 GiB).
  const double gib = double(KubeReserved(1, 150 * kGiB).memory) / double(kGiB);
  EXPECT_NEAR(gib, 9.8577, 0.001);
  // 4 GiB: a quarter, plus the eviction threshold.
  EXPECT_EQ(KubeReserved(1, 4 * kGiB).memory, kGiB + (100ull << 20));
}

TEST(SizeWorker, RequestsWhatFitsBesideTheReserveAndDaemonSets) {
  const InstanceSpec p5 = P5();
  const WorkerResources w = SizeWorker(p5, 8, 36 * kGiB, 9 * kGiB);
  // 192 vCPUs less 550m kube-reserved and 1000m of DaemonSets, in tenths: 190.4, not "190" of a whole node.
  EXPECT_EQ(w.milli_cpu, 190400);
  EXPECT_LE(w.milli_cpu + 550 + kDaemonSetMilliCpu, 192000);
  const uint64_t capacity = uint64_t(2048 * kNodeMemoryCapacityFraction * double(kGiB));
  EXPECT_LE(w.memory_limit + KubeReserved(192, capacity).memory + kDaemonSetMemory, capacity);
  EXPECT_EQ(w.memory_wanted, 8 * (36 * kGiB + 2 * kGiB) + 9 * kGiB);
  EXPECT_EQ(w.memory_request, w.memory_wanted);
  EXPECT_TRUE(w.warning.empty()) << w.warning;
  EXPECT_NE(w.comment.find("GKE"), std::string::npos) << w.comment;
}

TEST(SizeWorker, CapsTheRequestAndWarnsWhenTheRanksNeedMoreThanTheNode) {
  const WorkerResources w = SizeWorker(P5(), 8, 300 * kGiB, 9 * kGiB);
  EXPECT_EQ(w.memory_request, w.memory_limit);
  EXPECT_GT(w.memory_wanted, w.memory_limit);
  EXPECT_NE(w.warning.find("cache.host_budget"), std::string::npos) << w.warning;
}

TEST(Quantity, RoundsUpForRequestsAndDownForLimits) {
  EXPECT_EQ(QuantityUp(kGiB + 1), "2Gi");
  EXPECT_EQ(QuantityDown(2 * kGiB - 1), "1Gi");
  EXPECT_EQ(QuantityUp(3 * kMiB), "3Mi");
}

struct Plan {
  InstanceSpec inst = P5();
  JobSpec job;
  Candidate c;
  Plan() {
    job.cluster.nodes = 4;
    job.cluster.ranks_per_node = 8;
    job.train.checkpoint_every = 50;
    c.instance = &inst;
    c.feasible = true;
    c.step.step_s = 10;
    c.states.bytes[kStateMaster] = 8 * kGiB;  // 12 GiB of masters and moments per rank
    c.states.bytes[kStateAdamM] = 2 * kGiB;
    c.states.bytes[kStateAdamV] = 2 * kGiB;
    c.states.bytes[kStateParam] = 100 * kGiB;  // not in a checkpoint
  }
};

TEST(TerminationGrace, CoversTheStepAndTheNodesCheckpointWithMargin) {
  Plan p;
  const GracePeriod g = TerminationGrace(p.job, p.c);
  EXPECT_EQ(g.checkpoint_bytes_per_node, 8 * 12 * kGiB);
  const double write_s = double(8 * 12 * kGiB) / 1e9;  // at the default 1 GB/s
  EXPECT_NEAR(g.write_s, write_s, 1e-6);
  EXPECT_EQ(g.seconds, int64_t(std::ceil(2 * (10 + write_s))) + 30);
  EXPECT_GT(g.seconds, 30);
  EXPECT_TRUE(g.warning.empty()) << "no spot, no warning: " << g.warning;
  // A faster checkpoint volume shortens it.
  p.job.cluster.k8s.checkpoint_write_gbps = 10;
  EXPECT_LT(TerminationGrace(p.job, p.c).seconds, g.seconds);
}

TEST(TerminationGrace, WithoutCheckpointsOnlyTheStepInFlight) {
  Plan p;
  p.job.train.checkpoint_on_stop = false;
  const GracePeriod g = TerminationGrace(p.job, p.c);
  EXPECT_EQ(g.seconds, 2 * 10 + 30);
  EXPECT_NE(g.comment.find("checkpoint_on_stop is false"), std::string::npos) << g.comment;
  // With no periodic checkpoints, the stop still writes one by default.
  p.job.train.checkpoint_on_stop = true;
  p.job.train.checkpoint_every = 0;
  EXPECT_GT(TerminationGrace(p.job, p.c).seconds, g.seconds);
}

TEST(TerminationGrace, WarnsWhereItOutlastsTheSpotNotice) {
  Plan p;
  p.job.cluster.use_spot = true;
  GracePeriod g = TerminationGrace(p.job, p.c);
  ASSERT_GT(g.seconds, 120);
  EXPECT_NE(g.warning.find("spot interruption notice (120 s"), std::string::npos) << g.warning;
  // Short enough for AWS's two minutes, too long for GCP's 30 s.
  p.job.train.checkpoint_on_stop = false;
  p.c.step.step_s = 1;
  EXPECT_TRUE(TerminationGrace(p.job, p.c).warning.empty());
  p.inst.provider = "gcp";
  EXPECT_NE(TerminationGrace(p.job, p.c).warning.find("(30 s"), std::string::npos);
  EXPECT_EQ(SpotNoticeSeconds("azure"), 30);
  EXPECT_EQ(SpotNoticeSeconds("local"), 0);
}

}  // namespace
}  // namespace tencache
