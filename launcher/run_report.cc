#include "launcher/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/byte_size.h"
#include "common/human_format.h"
#include "launcher/report_nodes.h"

namespace tencache {
namespace {

// The job as it would run on any catalog instance: nodes, ranks, micro-batch
// and budgets left to each instance's own plan.
JobSpec PricingJob(const JobSpec& job) {
  JobSpec p = job;
  p.cluster.instance_types.clear();
  p.cluster.nodes = p.cluster.ranks_per_node = 0;
  p.train.micro_batch = 0;
  p.cache.device_budget.reset();
  p.cache.host_budget.reset();
  p.cache.nvme_budget.reset();
  return p;
}

std::string Ratio(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

}  // namespace

StatusOr<MeasuredRun> Summarise(const std::vector<nlohmann::json>& metrics) {
  if (metrics.empty()) return Status::InvalidArgument("no step was measured (metrics.jsonl is empty)");
  MeasuredRun r;
  r.steps = int(metrics.size());
  r.warmup = r.steps >= 4 ? 2 : 0;
  std::map<std::string, std::vector<double>> v;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const nlohmann::json& m = metrics[i];
    r.peak_device = std::max(r.peak_device, NumberField(m, "device_used_bytes"));
    r.peak_host = std::max(r.peak_host, NumberField(m, "host_used_bytes"));
    r.peak_nvme = std::max(r.peak_nvme, NumberField(m, "nvme_used_bytes"));
    if (m.contains("eval_loss") && m["eval_loss"].is_number()) {
      r.eval_loss_last = m["eval_loss"].get<double>();
      if (r.evaluations++ == 0) r.eval_loss_first = r.eval_loss_last;
    }
    if (m.contains("skipped_steps") && m["skipped_steps"].is_number()) {
      r.skipped_steps = std::max<int64_t>(r.skipped_steps, m["skipped_steps"].get<int64_t>());
    }
    if (int(i) < r.warmup) continue;
    for (const char* k : {"step_time_s", "tokens_per_s", "stall_s", "device_hit_rate"}) {
      v[k].push_back(NumberField(m, k));
    }
    for (Link l : kLinks) {
      const std::string key = std::string("bytes_") + LinkName(l);
      v[key].push_back(NumberField(m, key.c_str()));
    }
    if (m.contains("lane_busy_s") && m["lane_busy_s"].is_object()) {
      r.has_lanes = true;
      const LaneBusy b = LaneBusy::FromJson(m["lane_busy_s"]);
      for (int l = 0; l < kStepLanes; ++l) v[std::string("lane.") + StepLaneName(StepLane(l))].push_back(b.seconds[l]);
      v["overlap_efficiency"].push_back(NumberField(m, "overlap_efficiency"));
    }
    if (m.contains("optimizer_wait_s") && m["optimizer_wait_s"].is_number()) {
      v["optimizer_wait_s"].push_back(m["optimizer_wait_s"].get<double>());
    }
  }
  if (!v["optimizer_wait_s"].empty()) r.optimizer_wait_s = Median(v["optimizer_wait_s"]);
  if (r.has_lanes) {
    for (int l = 0; l < kStepLanes; ++l) r.lanes.seconds[l] = Median(v[std::string("lane.") + StepLaneName(StepLane(l))]);
    r.overlap_efficiency = Median(v["overlap_efficiency"]);
  }
  r.step_time_s = Median(v["step_time_s"]);
  r.tokens_per_s = Median(v["tokens_per_s"]);
  r.stall_s = Median(v["stall_s"]);
  r.device_hit_rate = Median(v["device_hit_rate"]);
  for (Link l : kLinks) r.bytes[l] = Median(v[std::string("bytes_") + LinkName(l)]);
  std::vector<double> first;
  for (size_t i = size_t(r.warmup); i < metrics.size() && first.size() < size_t(kCalibrationSteps); ++i) {
    first.push_back(NumberField(metrics[i], "step_time_s"));
  }
  r.calibration_first = r.warmup;
  r.calibration_steps = int(first.size());
  r.calibration_step_time_s = first.empty() ? 0 : Median(first);
  r.loss_first = NumberField(metrics.front(), "loss");
  r.loss_last = NumberField(metrics.back(), "loss");
  return r;
}

Calibration Calibrate(const MeasuredRun& run, const Candidate& p, int ranks, const ModelAssumptions& base) {
  Calibration c;
  c.assumptions = base;
  double measured[kNumLinks], predicted[kNumLinks];
  for (Link l : kLinks) {
    measured[int(l)] = run.bytes[l] / ranks;
    predicted[int(l)] = p.step.bytes[l];
  }
  for (int i = 0; i < kNumLinks; ++i) {
    const char* name = NamesOf(Link(i)).path;
    if (predicted[i] > 0 && measured[i] > 0) {
      c.assumptions.transfer_bytes_factor[i] = measured[i] / predicted[i];
      c.carried.push_back(std::string(name) + " bytes per step: the cache moved " + FormatBytes(uint64_t(measured[i])) +
                          " per rank where the model predicted " + FormatBytes(uint64_t(predicted[i])) + " (x" +
                          Ratio(c.assumptions.transfer_bytes_factor[i]) + ")");
    } else {
      c.assumed.push_back(std::string(name) + " bytes per step: not measured (" +
                          (measured[i] > 0 ? "the model predicted none" : "no such traffic in this run") +
                          "); the model's count stands");
    }
  }
  // Transfer time at this machine's measured link speeds, against the stall the
  // run showed: the share not hidden behind compute.
  const double transfer_s =
      p.step.accum_steps * (p.step.h2d_s + p.step.d2h_s + p.step.nvme_s) + p.step.optimizer_io_s;
  const double stall = run.stall_s / ranks;
  if (transfer_s > 0) {
    c.assumptions.exposed_transfer_fraction = std::clamp(stall / transfer_s, 0.0, 1.0);
    c.carried.push_back("transfer hidden behind compute: " +
                        FormatPercent(1 - c.assumptions.exposed_transfer_fraction) + " (stall " +
                        FormatDuration(stall) + " per rank and step against " + FormatDuration(transfer_s) +
                        " of transfers)");
  } else {
    c.assumed.push_back("transfer hidden behind compute: not measured (no transfers in this run); the model "
                        "takes transfers as hidden up to the slowest lane");
  }
  c.assumed.push_back("compute speed: each GPU's catalog peak x compute_efficiency " +
                      FormatPercent(base.compute_efficiency) + " (this machine's speed does not carry)");
  c.assumed.push_back("collective, PCIe and NVMe bandwidths: the catalog's figures and efficiencies (this machine's "
                      "do not carry)");
  c.assumed.push_back("CPU AdamW: " + std::to_string(int64_t(base.cpu_adam_params_per_s_per_vcpu / 1e6)) +
                      "M parameters/s per vCPU (assumed; CPUs differ)");
  return c;
}

MachineCalibration CalibrateMachine(const MeasuredRun& run, const JobSpec& job, const Candidate& p) {
  MachineCalibration c;
  c.candidate = p;
  if (run.calibration_steps == 0 || run.calibration_step_time_s <= 0 || p.step.step_s <= 0) return c;
  c.factor = run.calibration_step_time_s / p.step.step_s;
  c.first_step = run.calibration_first;
  c.steps = run.calibration_steps;
  c.candidate = EvaluateCandidate(job, *p.instance, *p.gpu, p.nodes, p.evaluated_with.SlowedBy(c.factor));
  const std::string which = c.steps == 1 ? "step " + std::to_string(c.first_step)
                                         : "steps " + std::to_string(c.first_step) + "-" +
                                               std::to_string(c.first_step + c.steps - 1);
  const std::string whose = p.instance->type == "local" ? "this machine's" : p.instance->type + "'s";
  c.explanation = whose + " speed: " + which + " (the first past warm-up) took " +
                  FormatDuration(run.calibration_step_time_s) + " (median) where the prediction said " +
                  FormatDuration(p.step.step_s) + ": every speed of the prediction divided by " + Ratio(c.factor) +
                  " (compute, copies, collectives, NVMe, AdamW, per-step overhead), so the calibrated step is " +
                  FormatDuration(c.candidate.step.step_s) + "; it does not carry to other instance types";
  return c;
}

namespace {

// A feasible candidate's price: its step, epoch and this job's train.steps.
ReportPrice PriceOf(const Candidate& c, int steps) {
  const double job_hours = steps * c.step.step_s / 3600.0;
  return {c.step.step_s, c.epoch_hours, c.cost_per_epoch_usd, job_hours * c.price_per_node_hour * c.nodes};
}

ReportRunSection RunSection(const JobSpec& job, const Candidate& p) {
  ReportRunSection r;
  const bool hosts = job.cluster.target == Target::kHosts;
  r.instance_type = hosts ? std::to_string(job.cluster.nodes) + " hosts" : p.instance->type;
  r.nodes = job.cluster.nodes;
  r.ranks = job.ranks();
  r.steps = job.train.steps;
  r.micro_batch = job.train.micro_batch;
  r.dtype = DTypeName(job.dtype);
  r.policy = CachePolicyName(job.cache.policy);
  r.budgets[0] = double(job.cache.device_budget.value_or(0));
  r.budgets[1] = double(job.cache.host_budget.value_or(0));
  r.budgets[2] = double(job.cache.nvme_budget.value_or(0));
  if (hosts) {
    for (const HostSlots& h : job.cluster.hosts.list) r.hosts.push_back({h.host, h.slots});
  }
  return r;
}

ReportPredicted PredictedSection(const Candidate& p, double tokens_per_step) {
  ReportPredicted r;
  r.step_time_s = p.step.step_s;
  r.tokens_per_s = tokens_per_step / p.step.step_s;
  const double lanes[kReportPredictedLanes] = {p.step.compute_s, p.step.h2d_s, p.step.d2h_s,
                                               p.step.nvme_s, p.step.collective_s, p.step.optimizer_s};
  for (int l = 0; l < kReportPredictedLanes; ++l) r.lanes_s[l] = lanes[l];
  r.optimizer_exposed_s = p.step.optimizer_exposed_s;
  r.optimizer_hidden_s = p.step.optimizer_hidden_s;
  for (Link l : kLinks) r.bytes_per_rank[int(l)] = p.step.bytes[l];
  return r;
}

// cost_per_epoch: every catalog instance type, model-only and calibrated.
StatusOr<std::vector<ReportCostRow>> CostRows(const JobSpec& job, const Catalog& catalog, const Calibration& cal,
                                              const ModelAssumptions& base) {
  const JobSpec pricing = PricingJob(job);
  TC_ASSIGN_OR_RETURN(PlanResult model_only, PlanJob(pricing, catalog, base));
  TC_ASSIGN_OR_RETURN(PlanResult calibrated, PlanJob(pricing, catalog, cal.assumptions));
  std::map<std::string, const Candidate*> cal_by_type;
  for (const Candidate& c : calibrated.candidates) cal_by_type[c.instance->type] = &c;
  std::vector<ReportCostRow> rows;
  const auto& wanted = job.cluster.instance_types;
  for (const Candidate& c : model_only.candidates) {
    ReportCostRow e;
    e.instance_type = c.instance->type;
    e.provider = c.instance->provider;
    e.nodes = c.nodes;
    e.feasible = c.feasible;
    e.reason = c.reason;
    e.candidate = wanted.empty() || std::count(wanted.begin(), wanted.end(), c.instance->type) > 0;
    e.price_per_hour_usd = c.price_per_node_hour * c.nodes;
    if (c.feasible) {
      e.model = PriceOf(c, job.train.steps);
      const Candidate* k = cal_by_type[c.instance->type];
      if (k != nullptr && k->feasible) e.calibrated = PriceOf(*k, job.train.steps);
    }
    rows.push_back(std::move(e));
  }
  return rows;
}

}  // namespace

ReportMeasured MeasuredSection(const MeasuredRun& run) {
  ReportMeasured m;
  m.steps = run.steps;
  m.warmup_steps = run.warmup;
  m.step_time_s = run.step_time_s;
  m.tokens_per_s = run.tokens_per_s;
  m.stall_s = run.stall_s;
  m.device_hit_rate = run.device_hit_rate;
  for (Link l : kLinks) m.bytes[int(l)] = run.bytes[l];
  m.peak_bytes[0] = run.peak_device;
  m.peak_bytes[1] = run.peak_host;
  m.peak_bytes[2] = run.peak_nvme;
  m.loss_first = run.loss_first;
  m.loss_last = run.loss_last;
  if (run.evaluations > 0) {
    m.evaluations = run.evaluations;
    m.eval_loss_first = run.eval_loss_first;
    m.eval_loss_last = run.eval_loss_last;
  }
  if (run.skipped_steps >= 0) m.skipped_steps = double(run.skipped_steps);
  if (run.has_lanes) {
    for (int l = 0; l < kStepLanes; ++l) m.lane_busy_s[l] = run.lanes.seconds[l];
    m.bound_lane = StepLaneName(run.lanes.Largest());
    m.overlap_efficiency = run.overlap_efficiency;
  }
  if (run.optimizer_wait_s >= 0) m.optimizer_wait_s = run.optimizer_wait_s;
  return m;
}

StatusOr<RunReport> BuildReport(const ReportInputs& in) {
  const JobSpec& job = *in.job;
  TC_ASSIGN_OR_RETURN(MeasuredRun run, Summarise(in.metrics));
  const Candidate& p = *in.predicted;
  RunReport r;
  r.job = job.name;
  r.status = in.status;
  r.target = TargetName(job.cluster.target);
  r.machine = in.machine;
  r.run = RunSection(job, p);
  r.measured = MeasuredSection(run);
  r.nodes = NodeFigures(in.metrics, in.rank_hosts, run.warmup);
  const double tokens_per_step = double(job.train.global_batch) * job.model.seq_len;
  r.predicted = PredictedSection(p, tokens_per_step);
  r.prediction_error = (p.step.step_s - run.step_time_s) / run.step_time_s;
  const MachineCalibration machine = CalibrateMachine(run, job, p);
  if (machine.steps > 0 && machine.candidate.feasible) {
    const double step = machine.candidate.step.step_s;
    r.predicted.calibrated = ReportCalibratedStep{
        step, tokens_per_step / step, machine.factor, {machine.first_step, machine.first_step + machine.steps - 1}};
    r.prediction_error_calibrated = (step - run.step_time_s) / run.step_time_s;
  }
  const ModelAssumptions base;
  const Calibration cal = Calibrate(run, p, job.ranks(), base);
  TC_ASSIGN_OR_RETURN(r.cost_per_epoch, CostRows(job, *in.catalog, cal, base));
  r.carried = cal.carried;
  if (!machine.explanation.empty()) r.carried.insert(r.carried.begin(), machine.explanation);
  r.assumed = cal.assumed;
  r.assumptions = in.assumptions;
  return r;
}

}  // namespace tencache
