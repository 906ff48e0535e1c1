// The spot cost model (launcher/preemption.h): its closed form against a
// simulation of the process it models, Young/Daly's interval against the
// model's own minimum, the preemption notice, and what it needs to know.
#include "launcher/preemption.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace tencache {
namespace {

InstanceSpec Spot(const std::string& provider, double monthly) {
  InstanceSpec s;
  s.provider = provider;
  s.type = "test.8x";
  s.gpu_count = 8;
  s.price_on_demand = 40;
  s.price_spot = 12;
  if (monthly > 0) s.spot_interruption = SpotInterruption{monthly, "", "test"};
  s.nvme.disks = 1;
  s.nvme.write_gbps_per_disk = 1;
  s.nvme.read_gbps_per_disk = 2;
  return s;
}

JobSpec SpotJob(int every) {
  JobSpec job;
  job.cluster.use_spot = true;
  job.train.checkpoint_every = every;
  job.train.checkpoint_on_stop = false;  // a preemption loses the work since the last checkpoint
  job.cluster.restart_backoff_s = 10;
  job.cluster.spot_restart_s = 290;
  return job;
}

// The process the model describes, run: segments of `tau` seconds of training
// and `c` of checkpoint; a preemption (exponential, mean `mtbp`) loses the
// segment's progress and costs `r` before it starts again.
double SimulatedEpochSeconds(double total, double tau, double c, double mtbp, double r, int trials) {
  std::mt19937_64 rng(20261207);
  std::exponential_distribution<double> next(1 / mtbp);
  double sum = 0;
  for (int t = 0; t < trials; ++t) {
    double clock = 0, done = 0;
    double until = next(rng);  // time to the next preemption, counted while running
    while (done < total) {
      const double work = std::min(tau, total - done) + (total - done > tau ? c : 0);
      if (until >= work) {
        clock += work;
        until -= work;
        done += std::min(tau, total - done);
      } else {
        clock += until + r;
        until = next(rng);
      }
    }
    sum += clock;
  }
  return sum / trials;
}

TEST(Preemption, TheExpectedEpochMatchesASimulationOfThePreemptions) {
  const InstanceSpec inst = Spot("gcp", 0.99);  // a harsh month: a preemption every 2.5 h on 64 nodes
  const int nodes = 64;
  const uint64_t per_rank = 8ull << 30;
  const CheckpointTiming ckpt = TimeCheckpoint(SpotJob(0), inst, 8, per_rank);
  EXPECT_NEAR(ckpt.write_s, 8 * per_rank / 1e9, 1e-9);  // 8 ranks' bytes at 1 GB/s
  EXPECT_NEAR(ckpt.read_s, ckpt.write_s / 2, 1e-9);
  const double step_s = 20, compute_hours = 10;
  for (int every : {20, 100, 450}) {  // whole segments: 90, 18, 4
    const SpotEstimate e = EstimateSpot(SpotJob(every), inst, nodes, ckpt, step_s, compute_hours);
    ASSERT_TRUE(e.known) << e.missing;
    const double node_rate = -std::log(0.01) / (730 * 3600.0);
    EXPECT_NEAR(e.mtbp_s, 1 / (nodes * node_rate), 1e-6 * e.mtbp_s);
    EXPECT_DOUBLE_EQ(e.restart_s, 10 + 290 + ckpt.read_s);
    const double simulated =
        SimulatedEpochSeconds(compute_hours * 3600, every * step_s, ckpt.write_s, e.mtbp_s, e.restart_s, 4000);
    // The time preemptions and checkpoints add, within 5 % (the simulation's
    // own error is about 1 %), not only the total it is a part of.
    const double added = simulated - compute_hours * 3600;
    EXPECT_NEAR(e.epoch_hours * 3600 - compute_hours * 3600, added, 0.05 * added) << "every " << every;
    EXPECT_GT(e.preemptions, 2);
    EXPECT_NEAR(e.cost_per_epoch_usd, e.epoch_hours * 12 * nodes, 1e-9);
    // The added time, split: checkpoints, work redone, restarts.
    EXPECT_NEAR(e.checkpoint_hours + e.lost_hours + e.restart_hours, e.epoch_hours - compute_hours, 1e-9);
    EXPECT_GT(e.lost_hours, 0);
  }
}

TEST(Preemption, YoungDalyIsWhereTheExpectedEpochIsLeast) {
  const InstanceSpec inst = Spot("gcp", 0.2);
  const CheckpointTiming ckpt = TimeCheckpoint(SpotJob(0), inst, 8, 4ull << 30);
  const double step_s = 5;
  const SpotEstimate automatic = EstimateSpot(SpotJob(kCheckpointEveryAuto), inst, 8, ckpt, step_s, 50);
  ASSERT_TRUE(automatic.known) << automatic.missing;
  EXPECT_EQ(automatic.checkpoint_every, YoungDalyEvery(ckpt.write_s, automatic.mtbp_s, step_s));
  EXPECT_EQ(automatic.checkpoint_every, std::llround(std::sqrt(2 * ckpt.write_s * automatic.mtbp_s) / step_s));
  EXPECT_NE(automatic.every_why.find("Young/Daly"), std::string::npos) << automatic.every_why;
  for (double factor : {0.25, 0.5, 2.0, 4.0}) {
    const int every = std::max(1, int(automatic.checkpoint_every * factor));
    const SpotEstimate other = EstimateSpot(SpotJob(every), inst, 8, ckpt, step_s, 50);
    EXPECT_GE(other.epoch_hours, automatic.epoch_hours) << "every " << every;
  }
  // Without periodic checkpoints a preemption loses everything since the start.
  const SpotEstimate none = EstimateSpot(SpotJob(0), inst, 8, ckpt, step_s, 50);
  ASSERT_TRUE(none.known) << none.missing;
  EXPECT_GT(none.epoch_hours, automatic.epoch_hours);
  EXPECT_EQ(YoungDalyEvery(60, 36000, 10), 208);  // sqrt(2 x 60 x 36000) = 2078 s
  EXPECT_EQ(YoungDalyEvery(1e-6, 1, 1000), 1);
}

// Where a stop's checkpoint fits in the provider's notice (AWS: 120 s) with
// the margin Kubernetes' grace period gives it (StopSeconds), a preemption
// loses no work: auto writes no periodic checkpoint, and each preemption costs
// half a step, one checkpoint and the restart.
TEST(Preemption, ACheckpointInTheNoticeLosesNoWork) {
  JobSpec job = SpotJob(kCheckpointEveryAuto);
  job.train.checkpoint_on_stop = true;
  const InstanceSpec aws = Spot("aws", 0.2);
  const CheckpointTiming ckpt = TimeCheckpoint(job, aws, 8, 2ull << 30);  // 17 s at 1 GB/s
  EXPECT_EQ(StopSeconds(10, ckpt.write_s), 85);                          // 2 x (10 + 17.2) + 30
  const SpotEstimate e = EstimateSpot(job, aws, 2, ckpt, 10, 24);
  ASSERT_TRUE(e.known) << e.missing;
  EXPECT_TRUE(e.notice_saves);
  EXPECT_EQ(e.notice_s, 120);
  EXPECT_EQ(e.checkpoint_every, 0);
  EXPECT_NE(e.every_why.find("120 s preemption notice"), std::string::npos) << e.every_why;
  const double per = e.restart_s + ckpt.write_s + 5;
  EXPECT_NEAR(e.epoch_hours, 24 / (1 - per / e.mtbp_s), 1e-9);
  EXPECT_NEAR(e.lost_hours, e.preemptions * 5 / 3600, 1e-12);
  // GCP's 30 s notice is too short for it: Young/Daly's periodic checkpoints.
  const SpotEstimate gcp = EstimateSpot(job, Spot("gcp", 0.2), 2, ckpt, 10, 24);
  ASSERT_TRUE(gcp.known);
  EXPECT_FALSE(gcp.notice_saves);
  EXPECT_GT(gcp.checkpoint_every, 0);
  EXPECT_GT(gcp.epoch_hours, e.epoch_hours);
  // 8 GiB a rank: step + write (79 s) is under 120 s, but not with the margin
  // the grace period takes (188 s): the plan does not count on the notice.
  const CheckpointTiming big = TimeCheckpoint(job, aws, 8, 8ull << 30);
  EXPECT_LT(10 + big.write_s, 120);
  EXPECT_FALSE(EstimateSpot(job, aws, 2, big, 10, 24).notice_saves);
}

TEST(Preemption, SaysWhatItLacksAndWhereTheRateComesFrom) {
  JobSpec job = SpotJob(100);
  InstanceSpec inst = Spot("azure", 0);
  const CheckpointTiming ckpt = TimeCheckpoint(job, inst, 8, 1ull << 30);
  SpotEstimate e = EstimateSpot(job, inst, 1, ckpt, 1, 1);
  EXPECT_FALSE(e.known);
  EXPECT_NE(e.missing.find("cluster.spot_interruption_rate"), std::string::npos) << e.missing;
  job.cluster.spot_interruption_rate = 0.1;  // the job's assumption where the catalog has none
  e = EstimateSpot(job, inst, 1, ckpt, 1, 1);
  ASSERT_TRUE(e.known);
  EXPECT_TRUE(e.rate_assumed);
  EXPECT_NE(e.rate_source.find("assumed 10 %"), std::string::npos) << e.rate_source;
  inst.spot_interruption = SpotInterruption{0.05, "<5%", "advisor"};  // the catalog's wins
  e = EstimateSpot(job, inst, 1, ckpt, 1, 1);
  EXPECT_FALSE(e.rate_assumed);
  EXPECT_DOUBLE_EQ(e.monthly_share, 0.05);
  EXPECT_NE(e.rate_source.find("<5% of nodes a month (advisor)"), std::string::npos) << e.rate_source;
  inst.price_spot.reset();
  EXPECT_EQ(EstimateSpot(job, inst, 1, ckpt, 1, 1).missing, "no spot price in the catalog");
  inst = Spot("aws", 0.1);
  inst.nvme = NvmeSpec();  // no disk bandwidth known
  e = EstimateSpot(job, inst, 1, TimeCheckpoint(job, inst, 8, 1ull << 30), 1, 1);
  EXPECT_FALSE(e.known);
  EXPECT_NE(e.missing.find("bandwidth is unknown"), std::string::npos) << e.missing;
  // An epoch far longer than the time between preemptions with no checkpoint never ends.
  inst = Spot("gcp", 0.9);
  e = EstimateSpot(SpotJob(0), inst, 64, TimeCheckpoint(job, inst, 8, 1ull << 30), 10, 1000);
  EXPECT_FALSE(e.known);
  EXPECT_NE(e.missing.find("train.checkpoint_every"), std::string::npos) << e.missing;
}

TEST(Preemption, AutoIsZeroOffSpotAndTheJobsNumberIsKept) {
  JobSpec job = SpotJob(kCheckpointEveryAuto);
  job.cluster.use_spot = false;
  std::string why;
  const InstanceSpec inst = Spot("gcp", 0.2);
  const SpotEstimate e = EstimateSpot(job, inst, 1, TimeCheckpoint(job, inst, 8, 1ull << 30), 1, 1);
  EXPECT_EQ(ResolveCheckpointEvery(job, e, &why), 0);
  EXPECT_NE(why.find("off spot nodes"), std::string::npos) << why;
  job.cluster.use_spot = true;
  EXPECT_EQ(ResolveCheckpointEvery(job, e, &why), e.checkpoint_every);
  EXPECT_GT(e.checkpoint_every, 0);
  job.train.checkpoint_every = 7;
  EXPECT_EQ(ResolveCheckpointEvery(job, e, &why), 7);
  EXPECT_TRUE(why.empty());
}

}  // namespace
}  // namespace tencache
