// RunReport: report.json written by ToJson and read back by FromJson gives
// back every field; a report with only the required keys reads with the rest
// unset; a field of the wrong type is named.
#include "launcher/report_json.h"

#include <gtest/gtest.h>

#include <string>

namespace tencache {
namespace {

using json = nlohmann::ordered_json;

// Every field set, each to a value of its own.
RunReport Full() {
  RunReport r;
  r.job = "quickstart";
  r.status = "interrupted";
  r.target = "hosts";
  r.machine = {{"facts", {{"hostname", "box"}, {"cores", 2}}}, {"ranks", 2}};
  r.run.instance_type = "2 hosts";
  r.run.dtype = "bf16";
  r.run.policy = "zero_infinity";
  r.run.nodes = 2;
  r.run.ranks = 4;
  r.run.steps = 200;
  r.run.micro_batch = 3;
  for (int t = 0; t < kReportTiers; ++t) r.run.budgets[t] = double(1 << (20 + t));
  r.run.hosts = {{"a", 2}, {"b", 2}};
  ReportMeasured& m = r.measured;
  m.steps = 20;
  m.warmup_steps = 2;
  m.step_time_s = 0.25;
  m.tokens_per_s = 4096.5;
  m.stall_s = 0.125;
  m.device_hit_rate = 0.75;
  for (int l = 0; l < kReportLinks; ++l) m.bytes[l] = 1000.0 * (l + 1);
  for (int t = 0; t < kReportTiers; ++t) m.peak_bytes[t] = 5000.0 * (t + 1);
  m.loss_first = 10.5;
  m.loss_last = 4.25;
  m.evaluations = 3;
  m.eval_loss_first = 9.5;
  m.eval_loss_last = 5.5;
  m.skipped_steps = 1;
  for (int l = 0; l < kStepLanes; ++l) m.lane_busy_s[l] = 0.01 * (l + 1);
  m.bound_lane = "compute";
  m.overlap_efficiency = 0.625;
  m.optimizer_wait_s = 0.0125;
  r.nodes = json::array({{{"host", "a"}, {"ranks", 2}}});
  ReportPredicted& p = r.predicted;
  p.step_time_s = 0.3;
  p.tokens_per_s = 3000.5;
  p.stall_s = 0.1;
  for (int l = 0; l < kReportPredictedLanes; ++l) p.lanes_s[l] = 0.02 * (l + 1);
  p.optimizer_exposed_s = 0.015;
  p.optimizer_hidden_s = 0.0375;
  for (int l = 0; l < kReportLinks; ++l) p.bytes[l] = 900.0 * (l + 1);
  for (int l = 0; l < kReportLinks; ++l) p.bytes_per_rank[l] = 225.0 * (l + 1);
  p.calibrated = ReportCalibratedStep{0.26, 3900.5, 0.9, {2, 6}};
  r.prediction_error = 0.2;
  r.prediction_error_calibrated = 0.04;
  ReportCostRow feasible;
  feasible.instance_type = "g5.xlarge";
  feasible.provider = "aws";
  feasible.reason = "";
  feasible.nodes = 2;
  feasible.price_per_hour_usd = 2.012;
  feasible.feasible = true;
  feasible.candidate = false;
  feasible.model = {0.5, 1.25, 2.5, 0.75};
  feasible.calibrated = ReportPrice{0.55, 1.5, 3.0, 0.8};
  ReportCostRow infeasible;
  infeasible.instance_type = "p4d.24xlarge";
  infeasible.provider = "aws";
  infeasible.reason = "needs 1.10 TiB NVMe per node, has 0";
  infeasible.nodes = 1;
  infeasible.price_per_hour_usd = 32.77;
  r.cost_per_epoch = {feasible, infeasible};
  r.carried = {"bytes per link"};
  r.assumed = {"compute speed"};
  r.assumptions = {"this machine's probes"};
  return r;
}

StatusOr<RunReport> WrittenAndRead(const RunReport& r) {
  return RunReport::FromJson(json::parse(r.ToJson().dump(2)), "report.json");
}

TEST(RunReport, WritingThenReadingGivesBackEveryField) {
  const RunReport r = Full();
  StatusOr<RunReport> back = WrittenAndRead(r);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), r.ToJson());
  EXPECT_EQ(back->job, r.job);
  EXPECT_EQ(back->status, r.status);
  EXPECT_EQ(back->target, r.target);
  EXPECT_EQ(back->machine, r.machine);
  EXPECT_EQ(back->run.instance_type, r.run.instance_type);
  EXPECT_EQ(back->run.dtype, r.run.dtype);
  EXPECT_EQ(back->run.policy, r.run.policy);
  EXPECT_EQ(back->run.nodes, r.run.nodes);
  EXPECT_EQ(back->run.ranks, r.run.ranks);
  EXPECT_EQ(back->run.steps, r.run.steps);
  EXPECT_EQ(back->run.micro_batch, r.run.micro_batch);
  for (int t = 0; t < kReportTiers; ++t) EXPECT_EQ(back->run.budgets[t], r.run.budgets[t]) << t;
  ASSERT_EQ(back->run.hosts.size(), 2u);
  EXPECT_EQ(back->run.hosts[1].host, "b");
  EXPECT_EQ(back->run.hosts[1].ranks, 2);
  const ReportMeasured &m = back->measured, &want = r.measured;
  for (auto f : {&ReportMeasured::steps, &ReportMeasured::warmup_steps, &ReportMeasured::step_time_s,
                 &ReportMeasured::tokens_per_s, &ReportMeasured::stall_s, &ReportMeasured::device_hit_rate,
                 &ReportMeasured::loss_first, &ReportMeasured::loss_last, &ReportMeasured::evaluations,
                 &ReportMeasured::eval_loss_first, &ReportMeasured::eval_loss_last, &ReportMeasured::skipped_steps,
                 &ReportMeasured::overlap_efficiency, &ReportMeasured::optimizer_wait_s}) {
    ASSERT_TRUE((m.*f).has_value());
    EXPECT_EQ(m.*f, want.*f);
  }
  for (int l = 0; l < kReportLinks; ++l) EXPECT_EQ(m.bytes[l], want.bytes[l]) << l;
  for (int t = 0; t < kReportTiers; ++t) EXPECT_EQ(m.peak_bytes[t], want.peak_bytes[t]) << t;
  for (int l = 0; l < kStepLanes; ++l) EXPECT_EQ(m.lane_busy_s[l], want.lane_busy_s[l]) << l;
  EXPECT_EQ(m.bound_lane, want.bound_lane);
  EXPECT_EQ(back->nodes, r.nodes);
  const ReportPredicted& p = back->predicted;
  EXPECT_EQ(p.step_time_s, r.predicted.step_time_s);
  EXPECT_EQ(p.tokens_per_s, r.predicted.tokens_per_s);
  EXPECT_EQ(p.stall_s, r.predicted.stall_s);
  for (int l = 0; l < kReportPredictedLanes; ++l) EXPECT_EQ(p.lanes_s[l], r.predicted.lanes_s[l]) << l;
  ASSERT_TRUE(p.optimizer_exposed_s.has_value());
  EXPECT_EQ(p.optimizer_exposed_s, r.predicted.optimizer_exposed_s);
  EXPECT_EQ(p.optimizer_hidden_s, r.predicted.optimizer_hidden_s);
  for (int l = 0; l < kReportLinks; ++l) {
    EXPECT_EQ(p.bytes[l], r.predicted.bytes[l]) << l;
    EXPECT_EQ(p.bytes_per_rank[l], r.predicted.bytes_per_rank[l]) << l;
  }
  ASSERT_TRUE(p.calibrated.has_value());
  EXPECT_EQ(p.calibrated->step_time_s, 0.26);
  EXPECT_EQ(p.calibrated->tokens_per_s, 3900.5);
  EXPECT_EQ(p.calibrated->factor, 0.9);
  EXPECT_EQ(p.calibrated->steps, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(back->prediction_error, r.prediction_error);
  EXPECT_EQ(back->prediction_error_calibrated, r.prediction_error_calibrated);
  ASSERT_EQ(back->cost_per_epoch.size(), 2u);
  const ReportCostRow& c = back->cost_per_epoch[0];
  EXPECT_EQ(c.instance_type, "g5.xlarge");
  EXPECT_EQ(c.provider, "aws");
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.price_per_hour_usd, 2.012);
  EXPECT_TRUE(c.feasible);
  EXPECT_FALSE(c.candidate);
  EXPECT_EQ(c.model.step_time_s, 0.5);
  EXPECT_EQ(c.model.epoch_hours, 1.25);
  EXPECT_EQ(c.model.cost_per_epoch_usd, 2.5);
  EXPECT_EQ(c.model.job_cost_usd, 0.75);
  ASSERT_TRUE(c.calibrated.has_value());
  EXPECT_EQ(c.calibrated->cost_per_epoch_usd, 3.0);
  EXPECT_EQ(c.calibrated->job_cost_usd, 0.8);
  const ReportCostRow& no = back->cost_per_epoch[1];
  EXPECT_FALSE(no.feasible);
  EXPECT_EQ(no.reason, r.cost_per_epoch[1].reason);
  EXPECT_FALSE(no.model.cost_per_epoch_usd.has_value());
  EXPECT_FALSE(no.calibrated.has_value());
  EXPECT_EQ(back->carried, r.carried);
  EXPECT_EQ(back->assumed, r.assumed);
  EXPECT_EQ(back->assumptions, r.assumptions);
}

TEST(RunReport, OnlyTheRequiredKeysReadWithTheRestUnset) {
  StatusOr<RunReport> r = RunReport::FromJson(
      json::parse(R"({"job": "x", "measured": {}, "predicted": {"bytes_per_rank": {"h2d": 10}}, "cost_per_epoch": []})"),
      "report.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->job, "x");
  EXPECT_FALSE(r->measured.step_time_s.has_value());
  EXPECT_FALSE(r->predicted.calibrated.has_value());
  EXPECT_TRUE(r->machine.is_null());
  EXPECT_TRUE(r->nodes.is_null());
  // Predicted bytes over all ranks: per rank times the ranks, where both are known.
  EXPECT_FALSE(r->predicted.BytesAllRanks(0, std::nullopt).has_value());
  EXPECT_EQ(r->predicted.BytesAllRanks(0, 4.0), 40.0);
}

TEST(RunReport, AFieldOfTheWrongTypeIsNamed) {
  struct Case { const char* text; const char* needle; };
  const Case cases[] = {
      {R"({"job": "x", "measured": {"peak_bytes": {"host": "big"}}, "predicted": {}, "cost_per_epoch": []})",
       "report.json: key 'measured.peak_bytes.host': expected a number"},
      {R"({"job": "x", "measured": {}, "predicted": {"calibrated": {"steps": "2-6"}}, "cost_per_epoch": []})",
       "report.json: key 'predicted.calibrated.steps': expected [first, last]"},
      {R"({"job": "x", "run": {"hosts": [{"host": "a"}]}, "measured": {}, "predicted": {}, "cost_per_epoch": []})",
       "report.json: key 'run.hosts': expected an array of {host, ranks}"},
      {R"({"job": "x", "measured": {}, "predicted": {}, "cost_per_epoch": [{"instance_type": "g5", "calibrated": 1}]})",
       "report.json: key 'cost_per_epoch[0].calibrated': expected an object"},
  };
  for (const Case& c : cases) {
    StatusOr<RunReport> r = RunReport::FromJson(json::parse(c.text), "report.json");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(r.status().message(), c.needle);
  }
}

}  // namespace
}  // namespace tencache
