// The run report's numbers: medians after warm-up, calibration from measured
// bytes and stall, and job cost = steps x step time x price x nodes.
#include "launcher/run_report.h"

#include <gtest/gtest.h>

#include "launcher/local_machine.h"
#include "launcher/resolved_job.h"

namespace tencache {
namespace {

// report.json's measured section for `run`, as written.
nlohmann::ordered_json MeasuredJson(const MeasuredRun& run) {
  RunReport r;
  r.measured = MeasuredSection(run);
  return r.ToJson()["measured"];
}

nlohmann::json Step(int step, double time, double loss, double h2d = 0, double stall = 0) {
  return {{"step", step}, {"loss", loss}, {"step_time_s", time}, {"tokens_per_s", 1000 / time},
          {"stall_s", stall}, {"device_hit_rate", 1.0}, {"bytes_h2d", h2d}, {"bytes_d2h", 0},
          {"bytes_nvme_read", 0}, {"bytes_nvme_write", 0}, {"device_used_bytes", 10.0 * step},
          {"host_used_bytes", 5}, {"nvme_used_bytes", 0}};
}

TEST(RunReport, MediansLeaveOutTwoWarmupSteps) {
  std::vector<nlohmann::json> m = {Step(0, 9, 5.5), Step(1, 7, 5.0), Step(2, 1, 4.0), Step(3, 3, 3.5),
                                   Step(4, 2, 3.0)};
  StatusOr<MeasuredRun> r = Summarise(m);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->warmup, 2);
  EXPECT_DOUBLE_EQ(r->step_time_s, 2.0);  // median of 1, 3, 2
  EXPECT_DOUBLE_EQ(r->loss_first, 5.5);
  EXPECT_DOUBLE_EQ(r->loss_last, 3.0);
  EXPECT_DOUBLE_EQ(r->peak_device, 40.0);
  EXPECT_FALSE(Summarise({}).ok());
  StatusOr<MeasuredRun> short_run = Summarise({Step(0, 4, 5), Step(1, 2, 4)});
  EXPECT_EQ(short_run->warmup, 0);
  EXPECT_DOUBLE_EQ(short_run->step_time_s, 3.0);
}

// Lanes: the median of each lane over the steady steps, and of each step's
// overlap efficiency; absent from the summary when the metrics have none.
TEST(RunReport, LanesAreMediansAfterWarmup) {
  std::vector<nlohmann::json> m;
  for (int s = 0; s < 5; ++s) {
    nlohmann::json j = Step(s, 1.0, 5.0 - s);
    j["lane_busy_s"] = {{"compute", s < 2 ? 9.0 : 0.5 + 0.1 * s}, {"nvme_read", 0.25}};
    j["overlap_efficiency"] = s < 2 ? 0.1 : 0.5 + 0.1 * s;
    m.push_back(j);
  }
  StatusOr<MeasuredRun> r = Summarise(m);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_lanes);
  EXPECT_DOUBLE_EQ(r->lanes[StepLane::kCompute], 0.8);  // median of 0.7, 0.8, 0.9
  EXPECT_DOUBLE_EQ(r->lanes[StepLane::kNvmeRead], 0.25);
  EXPECT_DOUBLE_EQ(r->lanes[StepLane::kOptimizer], 0.0);
  EXPECT_DOUBLE_EQ(r->overlap_efficiency, 0.8);
  EXPECT_EQ(r->optimizer_wait_s, -1) << "the metrics carry no optimizer_wait_s";
  const nlohmann::ordered_json j = MeasuredJson(*r);
  EXPECT_EQ(j["bound_lane"], "compute");
  EXPECT_DOUBLE_EQ(j["lane_busy_s"]["compute"].get<double>(), 0.8);
  StatusOr<MeasuredRun> without = Summarise({Step(0, 1, 5), Step(1, 1, 4)});
  EXPECT_FALSE(without->has_lanes);
  EXPECT_FALSE(MeasuredJson(*without).contains("overlap_efficiency"));
  EXPECT_FALSE(MeasuredJson(*without).contains("optimizer_wait_s"));
}

// The training thread's seconds in the updates: the median after warm-up.
TEST(RunReport, OptimizerWaitIsTheMedianAfterWarmup) {
  std::vector<nlohmann::json> m;
  for (int s = 0; s < 5; ++s) {
    nlohmann::json j = Step(s, 1.0, 5.0 - s);
    j["optimizer_wait_s"] = s < 2 ? 7.0 : 0.1 * s;
    m.push_back(j);
  }
  StatusOr<MeasuredRun> r = Summarise(m);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->optimizer_wait_s, 0.3);  // median of 0.2, 0.3, 0.4
  EXPECT_DOUBLE_EQ(MeasuredJson(*r)["optimizer_wait_s"].get<double>(), 0.3);
}

TEST(RunReport, CalibrationCarriesBytesAndStallOnly) {
  Candidate predicted;
  predicted.step.bytes[Link::kH2D] = 1000;  // per rank
  predicted.step.h2d_s = 0.5;
  predicted.step.accum_steps = 1;
  MeasuredRun run;
  run.bytes[Link::kH2D] = 3000;  // two ranks: 1500 each
  run.stall_s = 0.2;     // 0.1 per rank
  const Calibration c = Calibrate(run, predicted, 2, ModelAssumptions());
  EXPECT_DOUBLE_EQ(c.assumptions.transfer_bytes_factor[0], 1.5);
  EXPECT_DOUBLE_EQ(c.assumptions.transfer_bytes_factor[1], 1.0);  // no d2h: the model's count stands
  EXPECT_DOUBLE_EQ(c.assumptions.exposed_transfer_fraction, 0.2);
  EXPECT_DOUBLE_EQ(c.assumptions.compute_efficiency, ModelAssumptions().compute_efficiency);
  EXPECT_FALSE(c.carried.empty());
  bool compute_assumed = false;
  for (const std::string& a : c.assumed) compute_assumed |= a.rfind("compute speed", 0) == 0;
  EXPECT_TRUE(compute_assumed);
}

TEST(RunReport, CalibratedTransfersCostMoreTime) {
  StatusOr<JobSpec> job = ParseJobText(
      "model: {preset: opt-6.7b}\ntrain: {tokens_per_epoch: 1000000000, micro_batch: 1, global_batch: 8}\n"
      "cache: {device_budget: 8GiB}\n", "j.yaml");
  ASSERT_TRUE(job.ok()) << job.status().message();
  StatusOr<Catalog> catalog = Catalog::Load(DefaultCatalogPath());
  ASSERT_TRUE(catalog.ok());
  const InstanceSpec* g5 = *catalog->FindInstance("g6.2xlarge");
  ModelAssumptions base, slow;
  slow.transfer_bytes_factor = {2, 2, 2, 2};
  slow.exposed_transfer_fraction = 0.5;
  Candidate a = EvaluateCandidate(*job, *g5, *catalog->FindGpu(g5->gpu), 1, base);
  Candidate b = EvaluateCandidate(*job, *g5, *catalog->FindGpu(g5->gpu), 1, slow);
  ASSERT_TRUE(a.feasible) << a.reason;
  EXPECT_GT(b.step.step_s, a.step.step_s);
  EXPECT_DOUBLE_EQ(b.step.bytes[Link::kH2D], a.step.bytes[Link::kH2D]);  // the model's byte count is not the calibration's
}

// A probe taken while other work loaded this machine's cores predicts steps
// three times slower than the run takes: the report's calibrated prediction,
// from the first steps past warm-up, corrects it, beside the model-only one.
LocalProbes TwoRankProbes(double layer_s) {
  LocalProbes p;
  p.disk = {2, 1, 0, "x"};
  p.compute.dtype = "fp32";
  p.compute.threads = 1;
  p.compute.embed_s = p.compute.head_s = 0.001;
  p.compute.layer_s = layer_s;
  p.compute.adamw_params_per_s = 1e9;
  p.compute.copy_gbps = 10;
  p.compute.checksum_gbps = 10;
  p.compute.allgather_gbps = p.compute.reduce_scatter_gbps = 1;
  p.compute.collective_latency_s = 1e-5;
  return p;
}

TEST(RunReport, CalibrationCorrectsAWrongProbe) {
  StatusOr<JobSpec> job = ParseJobText("name: q\nmodel: {preset: tiny, dtype: fp32}\n"
                                       "train: {tokens_per_epoch: 100000, micro_batch: 4, global_batch: 8, steps: 20}\n",
                                       "j.yaml");
  ASSERT_TRUE(job.ok()) << job.status().message();
  MachineFacts facts;
  facts.cores = 4;
  facts.memory.mem_total = {true, 16ull << 30, "/proc/meminfo MemTotal"};
  facts.nvme_free_bytes = 10ull << 30;
  facts.nvme_path = "/tmp";
  const LocalCandidate right = MakeLocalCandidate(*job, facts, TwoRankProbes(0.010), 2);
  const LocalCandidate busy = MakeLocalCandidate(*job, facts, TwoRankProbes(0.030), 2);  // probed at 3x the load
  const Candidate wrong = EvaluateWithMicroBatch(*job, busy.instance, busy.gpu, 1, busy.assumptions);
  ASSERT_TRUE(wrong.feasible) << wrong.reason;
  StatusOr<ResolvedJob> resolved = ResolveJob(*job, wrong);
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  const Candidate predicted = EvaluateCandidate(resolved->job, busy.instance, busy.gpu, 1, busy.assumptions);
  const Candidate truth = EvaluateCandidate(resolved->job, right.instance, right.gpu, 1, right.assumptions);
  ASSERT_TRUE(truth.feasible) << truth.reason;
  // The run takes the time the right probe predicts, a little slower after step
  // 6, and one step past warm-up is slowed by other work.
  std::vector<nlohmann::json> metrics;
  for (int s = 0; s < 20; ++s) {
    metrics.push_back(Step(s, truth.step.step_s * (s < 2 || s == 3 ? 3 : s <= 6 ? 1 : 1.02), 5));
  }
  StatusOr<Catalog> catalog = Catalog::Load(DefaultCatalogPath());
  ASSERT_TRUE(catalog.ok());
  ReportInputs in;
  in.job = &resolved->job;
  in.catalog = &*catalog;
  in.predicted = &predicted;
  in.metrics = metrics;
  in.status = "finished";
  StatusOr<RunReport> built = BuildReport(in);
  ASSERT_TRUE(built.ok()) << built.status().message();
  const nlohmann::ordered_json json = built->ToJson();
  const nlohmann::ordered_json* r = &json;
  const double measured = (*r)["measured"]["step_time_s"].get<double>();
  EXPECT_GT((*r)["prediction_error"].get<double>(), 1.0);  // model-only: the busy probe's +200 %
  const nlohmann::json& cal = (*r)["predicted"]["calibrated"];
  EXPECT_NEAR(cal["factor"].get<double>(), 1.0 / 3, 0.05);
  EXPECT_EQ(cal["steps"], nlohmann::json({2, 6}));
  EXPECT_NEAR(cal["step_time_s"].get<double>(), truth.step.step_s, 0.02 * truth.step.step_s);
  EXPECT_LT(std::abs((*r)["prediction_error_calibrated"].get<double>()), 0.05);  // against the median of all 18
  EXPECT_NEAR((*r)["predicted"]["step_time_s"].get<double>(), predicted.step.step_s, 1e-12);  // model-only stands
  const std::string first = (*r)["calibration"]["carried"][0].get<std::string>();
  EXPECT_EQ(first.rfind("this machine's speed: steps 2-6", 0), 0u) << first;
  (void)measured;

  // What the writer wrote, the reader gives back whole.
  StatusOr<RunReport> back = RunReport::FromJson(nlohmann::ordered_json::parse(json.dump(2)), "report.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), json);
  ASSERT_EQ(back->cost_per_epoch.size(), built->cost_per_epoch.size());
  EXPECT_EQ(back->carried, built->carried);
  EXPECT_EQ(back->predicted.calibrated->steps, (std::vector<int64_t>{2, 6}));
}

// A probe that was right stays (the factor is 1).
TEST(RunReport, CalibrationKeepsARightProbe) {
  Candidate p;
  MeasuredRun run;
  run.calibration_steps = 3;
  run.calibration_first = 2;
  run.calibration_step_time_s = 0.5;
  p.step.step_s = 0.5;
  StatusOr<Catalog> catalog = Catalog::Load(DefaultCatalogPath());
  const InstanceSpec* g6e = *catalog->FindInstance("g6e.48xlarge");
  p.instance = g6e;
  p.gpu = catalog->FindGpu(g6e->gpu);
  p.nodes = 1;
  StatusOr<JobSpec> job = ParseJobText("model: {preset: gpt2}\ntrain: {tokens_per_epoch: 1000, micro_batch: 1, "
                                       "global_batch: 8}\n", "j.yaml");
  const MachineCalibration c = CalibrateMachine(run, *job, p);
  EXPECT_DOUBLE_EQ(c.factor, 1.0);
  const ModelAssumptions slowed = ModelAssumptions().SlowedBy(2);
  EXPECT_DOUBLE_EQ(slowed.compute_efficiency, ModelAssumptions().compute_efficiency / 2);
  EXPECT_DOUBLE_EQ(slowed.step_overhead_s, 0);
}

}  // namespace
}  // namespace tencache
