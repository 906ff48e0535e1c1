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

nlohmann::ordered_json PriceJson(const Candidate& c, int steps) {
  const double job_hours = steps * c.step.step_s / 3600.0;
  return {{"step_time_s", c.step.step_s},
          {"epoch_hours", c.epoch_hours},
          {"cost_per_epoch_usd", c.cost_per_epoch_usd},
          {"job_cost_usd", job_hours * c.price_per_node_hour * c.nodes}};
}

std::string Ratio(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

}  // namespace

nlohmann::ordered_json MeasuredRun::ToJson() const {
  nlohmann::ordered_json j = {{"steps", steps},
          {"warmup_steps", warmup},
          {"step_time_s", step_time_s},
          {"tokens_per_s", tokens_per_s},
          {"stall_s", stall_s},
          {"device_hit_rate", device_hit_rate},
          {"bytes_h2d", bytes_h2d},
          {"bytes_d2h", bytes_d2h},
          {"bytes_nvme_read", bytes_nvme_read},
          {"bytes_nvme_write", bytes_nvme_write},
          {"peak_bytes", {{"device", peak_device}, {"host", peak_host}, {"nvme", peak_nvme}}},
          {"loss_first", loss_first},
          {"loss_last", loss_last}};
  if (evaluations > 0) {
    j["evaluations"] = evaluations;
    j["eval_loss_first"] = eval_loss_first;
    j["eval_loss_last"] = eval_loss_last;
  }
  if (skipped_steps >= 0) j["skipped_steps"] = skipped_steps;
  if (has_lanes) {
    j["lane_busy_s"] = lanes.ToJson();
    j["bound_lane"] = StepLaneName(lanes.Largest());
    j["overlap_efficiency"] = overlap_efficiency;
  }
  return j;
}

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
    for (const char* k : {"step_time_s", "tokens_per_s", "stall_s", "device_hit_rate", "bytes_h2d", "bytes_d2h",
                          "bytes_nvme_read", "bytes_nvme_write"}) {
      v[k].push_back(NumberField(m, k));
    }
    if (m.contains("lane_busy_s") && m["lane_busy_s"].is_object()) {
      r.has_lanes = true;
      const LaneBusy b = LaneBusy::FromJson(m["lane_busy_s"]);
      for (int l = 0; l < kStepLanes; ++l) v[std::string("lane.") + StepLaneName(StepLane(l))].push_back(b.seconds[l]);
      v["overlap_efficiency"].push_back(NumberField(m, "overlap_efficiency"));
    }
  }
  if (r.has_lanes) {
    for (int l = 0; l < kStepLanes; ++l) r.lanes.seconds[l] = Median(v[std::string("lane.") + StepLaneName(StepLane(l))]);
    r.overlap_efficiency = Median(v["overlap_efficiency"]);
  }
  r.step_time_s = Median(v["step_time_s"]);
  r.tokens_per_s = Median(v["tokens_per_s"]);
  r.stall_s = Median(v["stall_s"]);
  r.device_hit_rate = Median(v["device_hit_rate"]);
  r.bytes_h2d = Median(v["bytes_h2d"]);
  r.bytes_d2h = Median(v["bytes_d2h"]);
  r.bytes_nvme_read = Median(v["bytes_nvme_read"]);
  r.bytes_nvme_write = Median(v["bytes_nvme_write"]);
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
  const double measured[kNumLinks] = {run.bytes_h2d / ranks, run.bytes_d2h / ranks, run.bytes_nvme_read / ranks,
                                      run.bytes_nvme_write / ranks};
  const double predicted[kNumLinks] = {p.step.bytes_h2d, p.step.bytes_d2h, p.step.bytes_nvme_read,
                                       p.step.bytes_nvme_write};
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

StatusOr<nlohmann::ordered_json> BuildReport(const ReportInputs& in) {
  const JobSpec& job = *in.job;
  TC_ASSIGN_OR_RETURN(MeasuredRun run, Summarise(in.metrics));
  const Candidate& p = *in.predicted;
  nlohmann::ordered_json r;
  r["job"] = job.name;
  r["status"] = in.status;
  r["target"] = TargetName(job.cluster.target);
  r["machine"] = in.machine;
  const bool hosts = job.cluster.target == Target::kHosts;
  r["run"] = {{"instance_type", hosts ? std::to_string(job.cluster.nodes) + " hosts" : p.instance->type},
              {"nodes", job.cluster.nodes},
              {"ranks", job.ranks()},
              {"steps", job.train.steps},
              {"micro_batch", job.train.micro_batch},
              {"dtype", DTypeName(job.dtype)},
              {"policy", CachePolicyName(job.cache.policy)},
              {"budgets", {{"device", job.cache.device_budget.value_or(0)},
                           {"host", job.cache.host_budget.value_or(0)},
                           {"nvme", job.cache.nvme_budget.value_or(0)}}}};
  if (hosts) {
    nlohmann::ordered_json list = nlohmann::json::array();
    for (const HostSlots& h : job.cluster.hosts.list) list.push_back({{"host", h.host}, {"ranks", h.slots}});
    r["run"]["hosts"] = list;
  }
  r["measured"] = run.ToJson();
  r["nodes"] = NodeFigures(in.metrics, in.rank_hosts, run.warmup);
  const double tokens_per_step = double(job.train.global_batch) * job.model.seq_len;
  r["predicted"] = {{"step_time_s", p.step.step_s},
                    {"tokens_per_s", tokens_per_step / p.step.step_s},
                    {"lanes_s", {{"compute", p.step.compute_s}, {"h2d", p.step.h2d_s}, {"d2h", p.step.d2h_s},
                                 {"nvme", p.step.nvme_s}, {"collectives", p.step.collective_s},
                                 {"optimizer", p.step.optimizer_s}}},
                    {"bytes_per_rank", {{"h2d", p.step.bytes_h2d}, {"d2h", p.step.bytes_d2h},
                                        {"nvme_read", p.step.bytes_nvme_read},
                                        {"nvme_write", p.step.bytes_nvme_write}}}};
  r["prediction_error"] = (p.step.step_s - run.step_time_s) / run.step_time_s;
  const MachineCalibration machine = CalibrateMachine(run, job, p);
  if (machine.steps > 0 && machine.candidate.feasible) {
    const double step = machine.candidate.step.step_s;
    r["predicted"]["calibrated"] = {{"step_time_s", step},
                                    {"tokens_per_s", tokens_per_step / step},
                                    {"factor", machine.factor},
                                    {"steps", {machine.first_step, machine.first_step + machine.steps - 1}}};
    r["prediction_error_calibrated"] = (step - run.step_time_s) / run.step_time_s;
  }

  const ModelAssumptions base;
  const Calibration cal = Calibrate(run, p, job.ranks(), base);
  const JobSpec pricing = PricingJob(job);
  TC_ASSIGN_OR_RETURN(PlanResult model_only, PlanJob(pricing, *in.catalog, base));
  TC_ASSIGN_OR_RETURN(PlanResult calibrated, PlanJob(pricing, *in.catalog, cal.assumptions));
  std::map<std::string, const Candidate*> cal_by_type;
  for (const Candidate& c : calibrated.candidates) cal_by_type[c.instance->type] = &c;
  nlohmann::ordered_json costs = nlohmann::ordered_json::array();
  const auto& wanted = job.cluster.instance_types;
  for (const Candidate& c : model_only.candidates) {
    nlohmann::ordered_json e = {{"instance_type", c.instance->type},
                                {"provider", c.instance->provider},
                                {"nodes", c.nodes},
                                {"feasible", c.feasible},
                                {"reason", c.reason},
                                {"candidate", wanted.empty() || std::count(wanted.begin(), wanted.end(), c.instance->type) > 0},
                                {"price_per_hour_usd", c.price_per_node_hour * c.nodes}};
    if (c.feasible) {
      const nlohmann::ordered_json price = PriceJson(c, job.train.steps);
      for (auto it = price.begin(); it != price.end(); ++it) e[it.key()] = it.value();
      const Candidate* k = cal_by_type[c.instance->type];
      if (k != nullptr && k->feasible) e["calibrated"] = PriceJson(*k, job.train.steps);
    }
    costs.push_back(e);
  }
  r["cost_per_epoch"] = costs;
  std::vector<std::string> carried = cal.carried;
  if (!machine.explanation.empty()) carried.insert(carried.begin(), machine.explanation);
  r["calibration"] = {{"carried", carried}, {"assumed", cal.assumed}};
  r["assumptions"] = in.assumptions;
  return r;
}

}  // namespace tencache
