// BuildReport: what a run measured against what the plan predicted, and what
// it would cost on every catalog instance type, model-only and calibrated on
// the run, as the RunReport that OUT/report.json holds (launcher/report_json.h;
// its fields are listed in docs/launcher.md); launcher/report_render.h turns it
// into report.md and pictures.
//
// Calibration: what a run measures that carries to other machines — the bytes
// the cache moved per link over the bytes the model predicted for this run,
// and the share of transfer time the run did not hide behind compute — replaces
// the model's assumptions when every catalog instance is re-predicted; what
// does not carry (this machine's compute, memory and collective speeds) stays
// an assumption, and the report labels each. This machine's own prediction is
// corrected by the run's first steps past warm-up (CalibrateMachine), so that
// a probe taken under another load does not stand uncorrected. Pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/step_lanes.h"
#include "launcher/catalog.h"
#include "launcher/planner.h"
#include "launcher/report_json.h"
#include "launcher/resource_model.h"

namespace tencache {

// The medians of a run's per-step metrics after warm-up (steps 0 and 1 — the
// profiled step and the first planned one — are left out when at least four
// steps ran). Bytes are per step, summed over ranks.
struct MeasuredRun {
  int steps = 0;
  int warmup = 0;
  double step_time_s = 0, tokens_per_s = 0, stall_s = 0, device_hit_rate = 0;
  LinkBytes bytes;
  double peak_device = 0, peak_host = 0, peak_nvme = 0;  // max over steps (each the max over ranks)
  double loss_first = 0, loss_last = 0;
  // The median step time of the first kCalibrationSteps steps past warm-up
  // (steps calibration_first .. calibration_first + calibration_steps - 1):
  // what CalibrateMachine corrects this machine's prediction by.
  double calibration_step_time_s = 0;
  int calibration_first = 0, calibration_steps = 0;
  // train.eval_every: the validation losses (steps with "eval_loss"), first and last.
  int evaluations = 0;
  double eval_loss_first = 0, eval_loss_last = 0;
  // fp16: steps whose gradient overflowed and that applied nothing; -1 when the
  // metrics have no loss scaling.
  int64_t skipped_steps = -1;
  // Each lane's busy seconds per step (median per lane) and the overlap
  // efficiency (median of each step's busiest lane over its time): only when
  // the metrics carry "lane_busy_s".
  bool has_lanes = false;
  LaneBusy lanes;
  double overlap_efficiency = 0;
  // The training thread's seconds a step in the updates (median of the metrics'
  // "optimizer_wait_s": the whole update, or with the optimizer lane issuing
  // and retiring its updates); -1 when the metrics have none.
  double optimizer_wait_s = -1;
};
// InvalidArgument when no step has been measured.
StatusOr<MeasuredRun> Summarise(const std::vector<nlohmann::json>& metrics);

// report.json's measured section of `run` (lanes, evaluations and skipped
// steps only where the metrics had them).
ReportMeasured MeasuredSection(const MeasuredRun& run);

// Calibrated assumptions from `run` (measured) on `predicted` (the model's step
// for the same job and budgets on this machine); `carried` / `assumed` say
// what was taken from the run and what was not.
struct Calibration {
  ModelAssumptions assumptions;
  std::vector<std::string> carried, assumed;
};
Calibration Calibrate(const MeasuredRun& run, const Candidate& predicted, int ranks, const ModelAssumptions& base);

// This machine's prediction corrected by the run. The probes that predicted it
// may be wrong (taken while other work loaded the cores, or before the machine
// changed): the run's first steps past warm-up over the predicted step is how
// much slower this machine ran, and every speed of the prediction's
// assumptions is divided by it — compute, copies, collectives, NVMe, AdamW,
// the per-step overhead — so that the re-predicted step (`candidate`) matches
// those steps; the rest of the run then checks it. `factor` 1 and
// `steps` 0 when no step past warm-up was measured.
constexpr int kCalibrationSteps = 5;  // a median of five outlasts a step or two slowed by other work
struct MachineCalibration {
  double factor = 1;       // measured / predicted over the calibration steps
  int first_step = 0, steps = 0;
  Candidate candidate;     // `predicted` re-evaluated with every speed divided by `factor`
  std::string explanation; // for report.json's calibration.carried
};
// REQUIRES: predicted.feasible; `job` is the job `predicted` was evaluated for.
MachineCalibration CalibrateMachine(const MeasuredRun& run, const JobSpec& job, const Candidate& predicted);

struct ReportInputs {
  const JobSpec* job = nullptr;          // the resolved job
  const Catalog* catalog = nullptr;
  const Candidate* predicted = nullptr;  // the run's candidate (this machine), as planned
  std::vector<nlohmann::json> metrics;   // rank 0's lines
  std::string status;                    // finished | interrupted | failed
  nlohmann::ordered_json machine;        // facts and probes
  std::vector<std::string> assumptions;
  std::map<int, std::string> rank_hosts;  // each rank's host (RankHosts), for the per-node figures
};
// InvalidArgument when no step was measured; the planner's errors.
StatusOr<RunReport> BuildReport(const ReportInputs& in);

}  // namespace tencache
